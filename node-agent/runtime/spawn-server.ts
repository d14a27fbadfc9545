// node-agent/runtime/spawn-server.ts -- a unit's cold start through one
// mo-init that stays (`mo-init --serve`, mo-init.c), instead of a
// child_process.spawn of mo-init per unit.
//
// Why: Node's spawn forks the whole agent (its heap's page tables and
// threads) and blocks the event loop until the child has exec'd; on a busy
// 2-core VM that was ~10 ms of the agent's loop per unit, most of a
// 1,000-unit apply's time. The server is a small C process: it forks P (the
// unit's outermost process, which then makes the namespaces and the init
// exactly as `mo-init --pid` does) without an exec of its own, and the agent
// only writes a request.
//
// What holds as before:
// * P leads its own session and process group (pgid = its pid, as a
//   `detached` spawn), joins the unit's cgroups before it forks, and takes
//   SIGKILL when its parent dies. Its parent is the server now, and the
//   server takes SIGKILL when the agent dies (and exits when its stdin
//   ends), so units still die with their agent. The server and every P are
//   held by the orphan guard as well.
// * The unit's stdout, stderr and fd 3 (the init's `s<pid>` and
//   `x<status>`) reach the agent as the same bytes, relayed by the server
//   in frames (mo-init.c says the format); P's exit status too.
// * A ServedProcess looks like the ChildProcess it replaces (pid, stdout,
//   stderr, stdio[3], 'spawn', 'exit', 'close', 'error', kill), except that
//   its pid is known at 'spawn', a moment after spawn() returns, not at
//   once.
//
// A server that dies takes its units with it: each is told 'exit' by
// SIGKILL, and the next spawn starts a new server. After MAX_FAILURES deaths
// in a row with no unit started in between, the supervisor stops using it
// (cold starts go back to spawning mo-init) and says why.

import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as os from 'node:os';
import { PassThrough } from 'node:stream';
import { OPTIONAL_LIMIT_FILES } from './cgroups.ts';

/**
 * Units being started at once (sent to the server, their command not yet
 * forked). Unbounded, a 1,000-unit burst had ~1,000 P making namespaces and
 * joining cgroups at the same time: the kernel's cgroup locks queued them
 * all (load average above 100 on 2 cores), the agents' heartbeats and the
 * replicas starved, nodes went NotReady and their units were replaced. A
 * child_process.spawn had bounded it to one per agent, by blocking.
 */
export const MAX_STARTING = 4;

/** Server deaths in a row, with no unit started in between, after which it is not used. */
export const MAX_FAILURES = 3;

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(Object.entries(os.constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

/** What a unit's P is told: mo-init --pid (or --host-pid) NAME PROCS -- COMMAND, in `cwd` with `env`. */
export interface ServedSpawn {
  name: string;
  hostPID: boolean;
  cwd: string;
  env: Readonly<Record<string, string>>;
  command: readonly string[];
  /** cgroup.procs files P joins before it forks (cgroups.ts). */
  procs: readonly string[];
  /** Cgroup directories P makes first, each with its limit files and values (UnitCgroups.prepare). */
  make?: ReadonlyArray<readonly [string, ReadonlyArray<readonly [string, string]>]>;
}

/** A unit's P, started by the server: what the supervisor reads of a ChildProcess. */
export class ServedProcess extends EventEmitter {
  pid: number | undefined = undefined;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  /** fd 3: the init's `s<pid>` and `x<status>`. */
  readonly status = new PassThrough();
  readonly stdio: [null, PassThrough, PassThrough, PassThrough] = [null, this.stdout, this.stderr, this.status];
  private open = 3;
  private exited = false;

  constructor() {
    super();
    for (const s of [this.stdout, this.stderr, this.status]) {
      s.once('end', () => {
        this.open--;
        this.maybeClose();
      });
      // Nothing is lost by flowing at once: the server's frames come in later turns, after the supervisor's listeners.
      s.resume();
    }
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    if (this.pid === undefined || this.exited) return false;
    try {
      process.kill(this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** @internal the server's frames */
  started(pid: number): void {
    this.pid = pid;
    this.emit('spawn');
  }

  /** @internal */
  failed(why: string): void {
    this.emit('error', new Error(why));
    this.end();
    this.exited = true;
    this.maybeClose();
  }

  /** @internal */
  reaped(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exited) return;
    this.exited = true;
    this.exitCode = code;
    this.signalCode = signal;
    this.emit('exit', code, signal);
    this.maybeClose();
  }

  /** @internal every stream ends (its EOF frame, or the server's end) */
  end(): void {
    for (const s of [this.stdout, this.stderr, this.status]) if (!s.writableEnded) s.end();
  }

  private maybeClose(): void {
    if (this.exited && this.open === 0) {
      this.open = -1;
      this.emit('close', this.exitCode, this.signalCode);
    }
  }
}

export interface SpawnServerOptions {
  /** mo-init, built with --serve (mo-init.c). */
  initPath: string;
  /** The server's pid and process group, once it exists: the agent's orphan guard holds it. */
  onStart?: (pid: number) => void;
  /** It is gone (the guard lets go of it). */
  onStop?: (pid: number) => void;
  /** The server went away with `lost` units still its own; `disabled`: it will not be used again. */
  onProblem?: (message: string, disabled: boolean) => void;
}

export class SpawnServer {
  private child: ChildProcess | null = null;
  private readonly units = new Map<number, ServedProcess>();
  private nextId = 1;
  /** Requests not yet sent: at most MAX_STARTING units are being started at once. */
  private queued: Array<{ id: number; request: Buffer }> = [];
  /** Units sent and not yet forked on: their P has not said `s` (or closed fd 3, or ended). */
  private readonly starting = new Set<number>();
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private failures = 0;
  private closed = false;

  constructor(private readonly opts: SpawnServerOptions) {}

  /** False once the server died MAX_FAILURES times in a row, or after close(). */
  get usable(): boolean {
    return !this.closed && this.failures < MAX_FAILURES;
  }

  /** Whether units are being started: requests queued, or sent and not yet forked on. */
  get busy(): boolean {
    return this.queued.length > 0 || this.starting.size > 0;
  }

  /** The server's pid while it runs (tests, diagnostics). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Start a unit's P. Throws (as spawn() does) for NUL bytes in its words. */
  spawn(s: ServedSpawn): ServedProcess {
    const fields = [s.hostPID ? 'host-pid' : 'pid', s.name, s.cwd, String(s.make?.length ?? 0)];
    for (const [dir, files] of s.make ?? []) {
      fields.push(dir, String(files.length));
      for (const [file, value] of files) fields.push(OPTIONAL_LIMIT_FILES.has(file) ? `?${file}` : file, value);
    }
    fields.push(String(s.procs.length), ...s.procs);
    const env = Object.entries(s.env).map(([k, v]) => `${k}=${v}`);
    fields.push(String(env.length), ...env, String(s.command.length), ...s.command);
    for (const f of fields) if (f.includes('\0')) throw new TypeError(`a NUL byte in ${JSON.stringify(f.slice(0, 40))}`);
    const id = this.nextId++;
    const body = Buffer.from(`${id}\0${fields.join('\0')}\0`);
    const proc = new ServedProcess();
    this.units.set(id, proc);
    // Its streams' last frames may follow its exit's: it is forgotten once all are in.
    proc.once('close', () => this.units.delete(id));
    this.queued.push({ id, request: Buffer.concat([Buffer.from(`${body.length}\0`), body]) });
    this.sendQueued();
    return proc;
  }

  private sendQueued(): void {
    while (this.queued.length > 0 && this.starting.size < MAX_STARTING) {
      const { id, request } = this.queued.shift()!;
      this.starting.add(id);
      this.ensure().stdin!.write(request);
    }
  }

  /** A unit is past its start (its command forked or exec'd, or it ended): the next request may go. */
  private started(id: number): void {
    if (this.starting.delete(id)) this.sendQueued();
  }

  /** Start the server now rather than at the first unit's start (which then pays for its spawn). */
  start(): void {
    if (this.usable) this.ensure();
  }

  /** End the server's stdin: it exits, and any P still its own dies with it. */
  close(): void {
    this.closed = true;
    this.child?.stdin?.end();
  }

  private ensure(): ChildProcess {
    if (this.child) return this.child;
    const child = spawn(this.opts.initPath, ['--serve'], { stdio: ['pipe', 'pipe', 'inherit'], detached: true });
    this.child = child;
    if (child.pid !== undefined) this.opts.onStart?.(child.pid);
    child.stdin!.on('error', () => {}); // EPIPE after it died: its exit says what happened
    child.stdout!.on('data', (b: Buffer) => this.read(b));
    let gone = false;
    const lost = (why: string): void => {
      if (gone) return;
      gone = true;
      if (child.pid !== undefined) this.opts.onStop?.(child.pid);
      if (this.child === child) this.child = null;
      this.pending = [];
      this.pendingBytes = 0;
      this.queued = [];
      this.starting.clear();
      const orphans = [...this.units.values()];
      this.units.clear();
      for (const p of orphans) {
        p.end();
        if (p.pid === undefined) p.failed(`the spawn server ${why}`);
        else p.reaped(null, 'SIGKILL');
      }
      if (this.closed) return;
      // A unit started since the last death reset the count ('p').
      this.failures++;
      this.opts.onProblem?.(`the spawn server (${this.opts.initPath} --serve) ${why}; ${orphans.length} unit(s) lost with it`, !this.usable);
    };
    child.on('error', (err) => lost(`could not start: ${err.message}`));
    child.on('exit', (code, signal) => lost(signal ? `was killed by ${signal}` : `exited with code ${code}`));
    return child;
  }

  /** Frames from the server. */
  private read(b: Buffer): void {
    this.pending.push(b);
    this.pendingBytes += b.length;
    if (this.pendingBytes < 9) return;
    const buf = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingBytes);
    let at = 0;
    while (buf.length - at >= 9) {
      const len = buf.readUInt32LE(at + 5);
      if (buf.length - at - 9 < len) break;
      const kind = String.fromCharCode(buf[at]);
      const id = buf.readUInt32LE(at + 1);
      const payload = buf.subarray(at + 9, at + 9 + len);
      at += 9 + len;
      const p = this.units.get(id);
      if (!p) continue;
      switch (kind) {
        case 'o':
          p.stdout.write(Buffer.from(payload)); // a copy: a view would keep the whole read alive in the log's queue
          break;
        case 'e':
          p.stderr.write(Buffer.from(payload));
          break;
        case '3':
          p.status.write(Buffer.from(payload));
          this.started(id);
          break;
        case 'O':
          p.stdout.end();
          break;
        case 'E':
          p.stderr.end();
          break;
        case '#':
          p.status.end();
          this.started(id);
          break;
        case 'p':
          this.failures = 0;
          p.started(Number(payload.toString()));
          break;
        case 'f':
          p.failed(payload.toString());
          this.started(id);
          break;
        case 'w': {
          this.started(id);
          const text = payload.toString();
          const n = Number(text.slice(1));
          if (text[0] === 'c') p.reaped(n, null);
          else p.reaped(null, SIGNAL_NAMES.get(n) ?? 'SIGKILL');
          break;
        }
      }
    }
    const rest = buf.subarray(at);
    this.pending = rest.length > 0 ? [Buffer.from(rest)] : [];
    this.pendingBytes = rest.length;
  }
}
