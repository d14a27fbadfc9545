// node-agent/runtime/sandbox-pool.ts -- warm sandboxes: a unit's namespaces
// made before the unit exists, so that starting one (a crashed unit's
// replacement above all) costs a few file writes and one fork instead of
// setpriv + unshare + a PID namespace + mounting /proc and /tmp.
//
// A sandbox is the same chain of processes a cold start makes
// (namespaces.ts), stopped just before the unit's part. Where mo-init is
// built (mo-init.c, --warm) it is three mo-init processes:
//
//   mo-init --warm                                        (P: pid, pgid)
//     mo-init                                             (PID 1 inside)
//       mo-init (PID 2 inside: the unit's main process to be)
//
// P says `r<init> <main>` (host pids) on fd 3 once PID 2, which blocks
// reading the sandbox's stdin, is forked. Without mo-init, util-linux:
//
//   setpriv --pdeathsig KILL -- unshare --uts --ipc --mount ... --pid --fork
//       --kill-child --mount-proc --                      (P: pid, pgid)
//     sh -c WARM_INIT_SCRIPT mo-init                      (PID 1 inside)
//       sh (a subshell, PID 3 inside: the unit's main process to be)
//
// whose init mounts the private /tmp, forks PID 3 and says `r` (the pids
// are read from /proc). The supervisor's join hook then
// moves all three into a cgroup of their own (`warm@<pid>`), and only then
// is the sandbox ready. take() hands a ready one to the supervisor, which
// renames that cgroup to the unit's and writes its limits (so the command
// starts inside them) and sends the claim (hostname, environment, command:
// claimFor(), as claimFields() or claimScript() says them); the main
// process sets them and execs the command, as a cold start's does. Its
// host pid is known before the claim is sent, so the unit is Running at
// once.
//
// What holds as before: every sandbox is guarded from the moment it exists
// (OrphanGuard, the parent-death signal mo-init or setpriv sets, unshare
// --kill-child or mo-init's init dying with P), so an
// agent that dies takes its idle sandboxes with it; the unit's pid, process
// group, signals, stop and exit status are a cold start's. A sandbox runs
// with an empty environment and outside any unit cgroup until it is taken;
// it runs nothing of a user's.
//
// The pool is small (one per agent by default: what a crash needs) and is
// refilled one sandbox at a time once the unit that took one runs, so
// neither that unit nor a burst of spawns is slowed by sandboxes made for
// nobody; and not while units are being started (SandboxPoolOptions.busy).
// Making a sandbox is a child_process.spawn, which forks the whole agent
// and holds its event loop until the exec: in a burst, each sandbox made
// was taken by the next unit of the burst, and its take made the next one,
// so the agent forked itself all through the burst for starts its spawn
// server makes for one write each (a CPU profile of an agent in a 200-unit
// apply: 179 ms of its 888 ms busy in those spawns). A sandbox that dies
// unused is not replaced in a loop: after MAX_FAILURES in a row the pool
// gives up and says why (units then start the cold way).

import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { signalGroup } from './exec-util.ts';
import { claimFields, claimScript, findInitPid, findMainPid, warmInitArgv, warmSandboxArgv } from './namespaces.ts';

/** Warm sandboxes an agent keeps (each is three small mo-init processes, or an unshare and two sh: ~4 MB). */
export const DEFAULT_WARM_SANDBOXES = 1;
/** Most warm sandboxes a pool may be asked to keep. */
export const MAX_WARM_SANDBOXES = 16;
/** How long after a take the pool starts making the next sandbox. */
export const REFILL_DELAY_MS = 20;
/** Sandboxes in a row that die before being taken, after which the pool stops making them. */
export const MAX_FAILURES = 3;

export interface WarmSandbox {
  child: ChildProcess;
  /** P: the spawned pid, the unit's process group. */
  pid: number;
  /** Host pid of the namespace's init (PID 1 inside). */
  initPid: number;
  /** Host pid of PID 3 inside, which execs the unit's command once told: status.pid. */
  mainPid: number;
  /** fd 3 of the chain: `s` once the command is forked. */
  status: Readable;
  /** The cgroup its three processes were moved into while it waited (SandboxPoolOptions.join), or null. */
  cgroup: string | null;
}

export interface SandboxPoolOptions {
  size: number;
  /** mo-init (mo-init.c): it makes the sandbox alone (`--warm`); null: the util-linux chain below. */
  initPath?: string | null;
  unsharePath: string;
  setprivPath: string | null;
  /** Working directory of the units (the sandbox's cwd). */
  cwd: string;
  /** Guard a sandbox's process group from the moment it exists; forget it once it is gone unused. */
  guard: { add(pgid: number): void; remove(pgid: number): void };
  /**
   * Called once a sandbox is made, before it can be taken: move its
   * processes into a cgroup of their own, off the path of the unit that
   * will take it (the supervisor renames that cgroup to the unit's at the
   * claim). Gives the cgroup's name, or null (the claim then moves them).
   */
  join?: (sandbox: WarmSandbox) => Promise<string | null>;
  /** Told of a joined cgroup whose sandbox ended without being taken. */
  release?: (cgroup: string) => void;
  /** Whether units are being started now: a refill waits until none is (checked every REFILL_DELAY_MS). */
  busy?: () => boolean;
  onProblem?: (reason: string) => void;
}

interface Pending {
  child: ChildProcess;
  pid: number;
  ready: WarmSandbox | null;
  output: string;
}

export class SandboxPool {
  private readonly size: number;
  private readonly pending = new Set<Pending>();
  private readonly ready: Pending[] = [];
  private failures = 0;
  private closed = false;
  private refillScheduled = false;
  /** Sandboxes joining their cgroup (SandboxPoolOptions.join) right now. */
  private readonly joins = new Set<Promise<void>>();
  /** Why the pool stopped making sandboxes (null while it makes them). */
  disabledReason: string | null = null;

  constructor(private readonly o: SandboxPoolOptions) {
    this.size = Math.max(0, Math.min(MAX_WARM_SANDBOXES, Math.floor(o.size)));
    this.refill();
  }

  /** Whether mo-init makes the sandboxes (their main process is PID 2 inside, and reads claimFields()). */
  get byMoInit(): boolean {
    return (this.o.initPath ?? null) !== null;
  }

  /** What a sandbox of this pool is told for a unit (null: the unit cannot be said so, and starts cold). */
  claimFor(unitName: string, env: Readonly<Record<string, string>>, command: readonly string[]): string | Buffer | null {
    return this.byMoInit ? claimFields(unitName, env, command) : claimScript(unitName, env, command);
  }

  /** Ready sandboxes right now. */
  get readyCount(): number {
    return this.ready.length;
  }

  /**
   * A ready sandbox, now the caller's (it must claim it or kill its group),
   * or null. The caller calls replenish() once its unit runs (or failed):
   * a sandbox made at once would compete with the unit it is starting.
   */
  take(): WarmSandbox | null {
    let got: WarmSandbox | null = null;
    while (!got && this.ready.length > 0) {
      const p = this.ready.shift()!;
      this.pending.delete(p);
      if (p.child.exitCode === null && p.child.signalCode === null) got = p.ready;
    }
    if (!got) this.scheduleRefill();
    return got;
  }

  /** Make up for a sandbox taken (one at a time, REFILL_DELAY_MS from now: the unit that took it execs meanwhile). */
  replenish(): void {
    if (this.closed) return;
    setTimeout(() => this.scheduleRefill(), REFILL_DELAY_MS).unref();
  }

  /**
   * Resolves once no sandbox is joining its cgroup. One that was joining
   * when the pool closed releases its cgroup as soon as it has joined, so an
   * agent that stops waits for this before it removes its cgroup parent
   * (else that cgroup, made after, kept the parent from being removed).
   */
  async settled(): Promise<void> {
    await Promise.all([...this.joins]);
  }

  /** Kill every sandbox not taken and make no more. */
  close(): void {
    this.closed = true;
    for (const p of this.pending) {
      signalGroup(p.pid, 'SIGKILL');
      if (p.ready?.cgroup) this.o.release?.(p.ready.cgroup);
      p.ready = null; // released once
    }
  }

  private scheduleRefill(): void {
    if (this.refillScheduled || this.closed) return;
    this.refillScheduled = true;
    // After the current burst of work (the spawn that took one goes first).
    setImmediate(() => {
      this.refillScheduled = false;
      this.refill();
    });
  }

  private refill(): void {
    if (this.closed || this.disabledReason !== null) return;
    // One at a time: a sandbox being made counts.
    if (this.pending.size >= this.size) return;
    if ([...this.pending].some((p) => p.ready === null)) return;
    if (this.o.busy?.()) {
      setTimeout(() => this.scheduleRefill(), REFILL_DELAY_MS).unref();
      return;
    }
    this.launch();
  }

  private launch(): void {
    const initPath = this.o.initPath ?? null;
    const chain = initPath !== null ? warmInitArgv(initPath) : warmSandboxArgv(this.o.unsharePath);
    // mo-init sets its own parent-death signal.
    const argv = this.o.setprivPath && initPath === null ? [this.o.setprivPath, '--pdeathsig', 'KILL', '--', ...chain] : chain;
    let child: ChildProcess;
    try {
      child = spawn(argv[0], argv.slice(1), { cwd: this.o.cwd, env: {}, detached: true, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
    } catch (err) {
      this.fail(`cannot start a warm sandbox: ${(err as Error).message}`);
      return;
    }
    if (child.pid === undefined) {
      child.on('error', (err) => this.fail(`cannot start a warm sandbox: ${err.message}`));
      return;
    }
    const pid = child.pid;
    try {
      this.o.guard.add(pid);
    } catch {
      // The guard is full: a sandbox nobody guards is not kept.
      signalGroup(pid, 'SIGKILL');
      return;
    }
    const p: Pending = { child, pid, ready: null, output: '' };
    this.pending.add(p);
    child.stdin?.on('error', () => {});
    const keep = (b: Buffer) => {
      if (p.output.length < 512) p.output += b.toString();
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const status = child.stdio[3] as Readable;
    let said = '';
    const onStatus = (b: Buffer) => {
      said += b.toString();
      if (!said.includes('r')) return;
      // mo-init says both host pids: `r<init> <main>`; the util-linux chain says `r`, and they are read from /proc.
      const told = /r(?:(\d+) (\d+))?\n/.exec(said);
      if (initPath !== null && told === null) {
        if (said.length < 64) return; // the rest of the line is on its way
        signalGroup(pid, 'SIGKILL');
        return;
      }
      status.off('data', onStatus);
      // `r` alone from mo-init: it could not read the main process's host pid, and the sandbox is killed below.
      const [initPid, mainPid] = initPath !== null ? [told![1], told![2]].map((n) => (n === undefined ? null : Number(n))) : [findInitPid(pid), findMainPid(pid)];
      if (initPid === null || mainPid === null || this.closed) {
        signalGroup(pid, 'SIGKILL');
        return;
      }
      const sandbox: WarmSandbox = { child, pid, initPid, mainPid, status, cgroup: null };
      // Until taken the pool owns its output; then the unit's log does.
      child.stdout?.off('data', keep);
      child.stderr?.off('data', keep);
      const offer = (cgroup: string | null): void => {
        sandbox.cgroup = cgroup;
        if (!this.pending.has(p) || this.closed) {
          // It ended, or the pool closed, while it joined.
          if (cgroup !== null) this.o.release?.(cgroup);
          return;
        }
        p.ready = sandbox;
        this.failures = 0;
        this.ready.push(p);
        this.refill();
      };
      if (this.o.join) {
        const joined = this.o.join(sandbox).then(offer, () => offer(null));
        this.joins.add(joined);
        void joined.finally(() => this.joins.delete(joined));
      } else offer(null);
    };
    status.on('data', onStatus);
    child.on('error', () => {});
    child.once('exit', (code, signal) => {
      const taken = !this.pending.has(p);
      if (taken) return; // the supervisor's unit now: its exit is the unit's
      this.pending.delete(p);
      const i = this.ready.indexOf(p);
      if (i >= 0) this.ready.splice(i, 1);
      signalGroup(pid, 'SIGKILL');
      this.o.guard.remove(pid);
      if (p.ready?.cgroup) this.o.release?.(p.ready.cgroup);
      if (this.closed) return;
      this.fail(`warm sandbox pid ${pid} exited unused (${signal ?? `code ${code}`})${p.output.trim() ? `: ${p.output.trim().split('\n')[0]}` : ''}`);
    });
  }

  private fail(reason: string): void {
    this.failures++;
    if (this.failures >= MAX_FAILURES) {
      this.disabledReason = `${reason}; ${MAX_FAILURES} in a row, no more warm sandboxes (units start cold)`;
      this.o.onProblem?.(this.disabledReason);
      return;
    }
    this.o.onProblem?.(reason);
    this.scheduleRefill();
  }
}
