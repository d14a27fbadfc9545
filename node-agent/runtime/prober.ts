// node-agent/runtime/prober.ts -- runs one unit's startup, readiness and
// liveness probes (the shell around probe-logic.ts, which decides what is
// due and what results mean). One timer per unit, set to the earliest due
// probe; at most one probe of each kind in flight; stop() clears the timer
// and kills every probe still running.
//
// Handlers, as in the Pod spec:
// * exec: the argv, spawned directly (no shell) with the unit's env and
//   cwd, in its own process group; exit 0 is success. At timeoutSeconds the
//   group is SIGKILLed and the probe fails; once the probe's main process
//   exits, whatever is left of its group is SIGKILLed as well; stop() kills
//   the groups in flight. Its output is not read (stdio ignored).
//   Against agent death: on Linux with setpriv it runs as
//   `setpriv --pdeathsig KILL -- <argv>` like a unit, so the kernel kills it
//   with the agent. Without setpriv its group goes to the orphan guard
//   instead (the supervisor passes trackGroup only then): the guard is a
//   /bin/sh loop whose bookkeeping costs ~0.2-0.7 ms of CPU per line, which
//   at 100 units with 1 s exec probes was ~5% of a core on its own. Not
//   covered with setpriv: a grandchild a probe forks, and the ~1 ms between
//   fork and prctl, if the agent is SIGKILLed at that moment.
// * httpGet: GET http://127.0.0.1:<port><path>, a fresh connection each
//   time; a status 200-399 is success; an error or timeout is failure.
// * tcpSocket: a connection to 127.0.0.1:<port> is success.

import { spawn, type ChildProcess } from 'node:child_process';
import * as http from 'node:http';
import * as net from 'node:net';
import type { Probe, UnitProbes } from '../../shared/model.ts';
import { resolveExecutable, signalGroup } from './exec-util.ts';
import { ProbeLogic, type ProbeKind } from './probe-logic.ts';

/** How one probe came out: ok, and a one-line detail ('HTTP GET :8080/healthz: 500'). */
export interface ProbeOutcome {
  ok: boolean;
  detail: string;
}

/** Cancels a running probe; its callback is then never called. */
export type CancelProbe = () => void;

export interface ExecContext {
  /**
   * Where a probe's port is reached: a declared containerPort maps to the
   * host port (and node address) the agent gave it; undefined: 127.0.0.1
   * and the port as written.
   */
  portMap?: (containerPort: number) => { host: string; port: number } | undefined;
  cwd: string;
  env: Record<string, string>;
  /** setpriv's path when probes get a parent-death signal, else null. */
  setprivPath: string | null;
  /**
   * Programs already resolved on PATH (program -> path), so a probe every
   * second does not stat every PATH entry each time; an entry is dropped
   * when its probe fails, in case the program moved.
   */
  resolved?: Map<string, string>;
  /** Prefix that runs an exec probe inside the unit's namespaces (nsenter ...), or null when it has none yet. */
  enter?: () => string[] | null;
  /** Hand a probe's process group to the orphan guard, and take it back (when there is no pdeathsig). */
  trackGroup?: (pgid: number) => void;
  untrackGroup?: (pgid: number) => void;
}

export interface UnitProberOptions {
  probes: UnitProbes | undefined;
  /** When the unit turned Running (the `now` clock). */
  runningAt: number;
  exec: ExecContext;
  now: () => number;
  /** ready, readySince or message of the logic changed. */
  onChange: () => void;
  /** A startup or liveness probe failed for good: kill the unit. Probing has stopped. */
  onKill: (message: string) => void;
  /** Every probe's outcome, for the agent's figures (/metrics). */
  onResult?: (kind: ProbeKind, ok: boolean) => void;
}

export class UnitProber {
  readonly logic: ProbeLogic;
  private readonly opts: UnitProberOptions;
  private timer: NodeJS.Timeout | null = null;
  private readonly running = new Map<ProbeKind, CancelProbe>();
  private stopped = false;

  constructor(opts: UnitProberOptions) {
    this.opts = { ...opts, exec: { ...opts.exec, resolved: opts.exec.resolved ?? new Map() } };
    this.logic = new ProbeLogic(opts.probes, opts.runningAt);
    this.schedule();
  }

  /** Probes in flight (tests, diagnostics). */
  get inFlight(): number {
    return this.running.size;
  }

  /** Stop probing: no more timers, every running probe is killed. Idempotent. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.logic.stop();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const cancel of this.running.values()) cancel();
    this.running.clear();
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const at = this.logic.nextDueAt();
    if (at === null) return;
    this.timer = setTimeout(() => this.fire(), Math.max(0, at - this.opts.now()));
    // The unit's own process keeps the agent's loop alive; a probe timer need not.
    this.timer.unref();
  }

  private fire(): void {
    this.timer = null;
    if (this.stopped) return;
    for (const kind of this.logic.due(this.opts.now())) this.run(kind);
    this.schedule();
  }

  private run(kind: ProbeKind): void {
    const probe = this.opts.probes?.[kind];
    if (!probe) return;
    const cancel = runProbe(probe, this.opts.exec, (outcome) => {
      this.running.delete(kind);
      if (this.stopped) return;
      this.opts.onResult?.(kind, outcome.ok);
      const verdict = this.logic.result(kind, outcome.ok, outcome.detail, this.opts.now());
      if (verdict.type === 'kill') {
        this.stop();
        this.opts.onKill(verdict.message);
        return;
      }
      if (verdict.type === 'changed') this.opts.onChange();
      this.schedule();
    });
    // Every handler answers asynchronously, so this runs before the callback.
    this.running.set(kind, cancel);
  }
}

/** Run one probe; `done` is called exactly once, never synchronously, unless cancelled. */
export function runProbe(probe: Probe, exec: ExecContext, done: (outcome: ProbeOutcome) => void): CancelProbe {
  const timeoutMs = probe.timeoutSeconds * 1000;
  if (probe.exec) return runExecProbe(probe.exec.command, timeoutMs, exec, done);
  if (probe.httpGet) {
    const at = exec.portMap?.(probe.httpGet.port);
    return runHttpProbe(at?.port ?? probe.httpGet.port, probe.httpGet.path, timeoutMs, done, at?.host);
  }
  if (probe.tcpSocket) {
    const at = exec.portMap?.(probe.tcpSocket.port);
    return runTcpProbe(at?.port ?? probe.tcpSocket.port, timeoutMs, done, at?.host);
  }
  return failSoon({ ok: false, detail: 'probe has no handler' }, done);
}

/** An outcome known at once, delivered asynchronously like every other. */
function failSoon(outcome: ProbeOutcome, done: (outcome: ProbeOutcome) => void): CancelProbe {
  const t = setImmediate(() => done(outcome));
  return () => clearImmediate(t);
}

const seconds = (ms: number): string => `${ms / 1000}s`;

/**
 * One network probe's ending, said once: its outcome (or a time-out after
 * `timeoutMs`), or a cancel that says nothing; both release the connection.
 */
function settleOnce(
  what: string,
  timeoutMs: number,
  release: () => void,
  done: (outcome: ProbeOutcome) => void,
): { finish: (ok: boolean, detail: string) => void; cancel: CancelProbe } {
  let finished = false;
  const end = (): boolean => {
    if (finished) return false;
    finished = true;
    clearTimeout(timer);
    release();
    return true;
  };
  const finish = (ok: boolean, detail: string): void => {
    if (end()) done({ ok, detail: `${what}: ${detail}` });
  };
  const timer = setTimeout(() => finish(false, `timed out after ${seconds(timeoutMs)}`), timeoutMs);
  return { finish, cancel: () => void end() };
}

/** exec: spawn the argv directly; exit 0 is success. */
export function runExecProbe(argv: string[], timeoutMs: number, ctx: ExecContext, done: (outcome: ProbeOutcome) => void): CancelProbe {
  const what = `exec ${argv.join(' ')}`;
  let finished = false;
  const finish = (ok: boolean, detail: string): void => {
    if (finished) return;
    finished = true;
    done({ ok, detail: `${what}: ${detail}` });
  };
  const program = argv[0] ?? '';
  const cached = ctx.resolved?.get(program);
  const resolved = cached !== undefined ? { ok: true as const, path: cached } : resolveExecutable(program, ctx.env.PATH ?? '', ctx.cwd);
  if (resolved.ok) ctx.resolved?.set(program, resolved.path);
  else return failSoon({ ok: false, detail: `${what}: spawn ${program} ${resolved.errno}` }, done);
  // setpriv execvp's the program with the same PATH and cwd, so the program sees its argv as given.
  // With namespaces, nsenter goes first and execvp's it inside them.
  const prefix = ctx.enter?.() ?? [];
  const full = [...prefix, ...argv];
  const file = ctx.setprivPath ?? (prefix.length > 0 ? prefix[0] : resolved.path);
  const args = ctx.setprivPath ? ['--pdeathsig', 'KILL', '--', ...full] : full.slice(1);
  let child: ChildProcess;
  try {
    child = spawn(file, args, { cwd: ctx.cwd, env: ctx.env, detached: true, stdio: 'ignore', argv0: ctx.setprivPath || prefix.length > 0 ? undefined : program });
  } catch (err) {
    // Synchronous refusals: NUL bytes in argv or env, and the like.
    return failSoon({ ok: false, detail: `${what}: spawn ${program}: ${(err as Error).message}` }, done);
  }
  const pgid = child.pid;
  if (pgid !== undefined) ctx.trackGroup?.(pgid);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    signalGroup(pgid, 'SIGKILL');
  }, timeoutMs);
  child.on('error', (err: NodeJS.ErrnoException) => {
    // Without a pid it never started; with one, only a kill() failed and 'exit' still comes.
    if (pgid !== undefined) return;
    clearTimeout(timer);
    finish(false, `spawn ${program} ${err.code ?? err.message}`);
  });
  child.once('exit', (code, signal) => {
    clearTimeout(timer);
    if (pgid !== undefined) {
      signalGroup(pgid, 'SIGKILL'); // whatever the probe left behind in its group
      ctx.untrackGroup?.(pgid);
    }
    if (code !== 0) ctx.resolved?.delete(program);
    if (timedOut) finish(false, `timed out after ${seconds(timeoutMs)}`);
    else if (code === 0) finish(true, 'exit code 0');
    else finish(false, signal ? `signal ${signal}` : `exit code ${code}`);
  });
  return () => {
    finished = true;
    clearTimeout(timer);
    signalGroup(pgid, 'SIGKILL'); // 'exit' still comes and releases the group from the guard
  };
}

/** httpGet: a status 200-399 from http://127.0.0.1:<port><path> is success. */
export function runHttpProbe(port: number, urlPath: string, timeoutMs: number, done: (outcome: ProbeOutcome) => void, host = '127.0.0.1'): CancelProbe {
  const what = `HTTP GET ${host === '127.0.0.1' ? '' : host}:${port}${urlPath}`;
  let req: http.ClientRequest;
  try {
    req = http.request({
      host,
      port,
      path: urlPath,
      method: 'GET',
      agent: false,
      headers: { 'User-Agent': 'mo-probe/1', Accept: '*/*', Connection: 'close' },
    });
  } catch (err) {
    // A path Node refuses to send (a space, a control character): a failure, never a crash.
    return failSoon({ ok: false, detail: `${what}: ${(err as Error).message}` }, done);
  }
  const { finish, cancel } = settleOnce(what, timeoutMs, () => req.destroy(), done);
  req.on('response', (res) => {
    const status = res.statusCode ?? 0;
    res.resume();
    finish(status >= 200 && status < 400, String(status));
  });
  req.on('error', (err) => finish(false, err.message.split('\n')[0]));
  req.end();
  return cancel;
}

/** tcpSocket: a connection to 127.0.0.1:<port> is success. */
export function runTcpProbe(port: number, timeoutMs: number, done: (outcome: ProbeOutcome) => void, host = '127.0.0.1'): CancelProbe {
  const what = `TCP ${host === '127.0.0.1' ? '' : host}:${port}`;
  let socket: net.Socket;
  try {
    socket = net.connect({ host, port });
  } catch (err) {
    return failSoon({ ok: false, detail: `${what}: ${(err as Error).message}` }, done);
  }
  const { finish, cancel } = settleOnce(what, timeoutMs, () => socket.destroy(), done);
  socket.once('connect', () => finish(true, 'connected'));
  socket.on('error', (err) => finish(false, err.message.split('\n')[0]));
  return cancel;
}
