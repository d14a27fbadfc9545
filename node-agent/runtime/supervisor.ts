// node-agent/runtime/supervisor.ts -- the unit runtime: starts each unit as
// a real child process, watches it, stops it, and reports every state
// change the moment it happens (no polling: 'spawn' and 'exit' events from
// the kernel via libuv drive everything). The agent's shell (main.ts) turns
// the reports into unit-status frames.
//
// Lifecycle of one unit (phases from shared/model.ts):
//   Pending      spawn() returned a pid; the program is being exec'd
//   Running      'spawn' fired: the program runs (report carries the pid)
//   Terminating  stop() was asked: SIGTERM went to the unit's process group
//   Succeeded    exit code 0, or it ended because we asked it to stop
//   Failed       exit code != 0, killed by a signal nobody here sent, or the
//                program could not be started (reason `SpawnFailed: ...`)
// The final report stays until forget(); a name is started at most once.
//
// Process layout and "no orphans" (architecture invariant 7):
// * Each unit is spawned `detached`: it leads its own session and process
//   group (pgid == pid), so stop() signals the whole group and reaches the
//   unit's own children too, and a Ctrl-C aimed at the agent's terminal
//   group does not hit units directly (the agent stops them with grace).
// * On Linux the argv is wrapped as `setpriv --pdeathsig KILL -- <argv>`
//   when util-linux setpriv exists: prctl(PR_SET_PDEATHSIG) survives exec,
//   and setpriv execs the program, so the pid we see is the unit's pid and
//   the kernel SIGKILLs the unit the instant the agent dies. (Caveat: the
//   death signal fires when the *thread* that forked exits; libuv forks
//   from the main thread, whose exit is the process's.)
// * pdeathsig covers only the direct child, so an OrphanGuard (see
//   orphan-guard.ts) also holds every unit's pgid and SIGKILLs the groups
//   when the agent's pipe to it closes, which covers grandchildren, the
//   tiny window between fork and prctl, and systems without setpriv.
// * The pgid is handed to the guard synchronously right after spawn()
//   returns, before any await, so no crash can fall between "process
//   exists" and "process is guarded".
// * When a unit's main process exits, whatever is left of its group is
//   SIGKILLed too (like a container whose init exits), then the group is
//   dropped from the guard so a recycled id is never hit.
// Out of reach without root/cgroups: a grandchild that calls setsid() to
// leave the group; cgroup v2 is the planned fix.

import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { UnitReport, UnitSpec } from '../../shared/model.ts';
import { OrphanGuard } from './orphan-guard.ts';
import { MAX_UNIT_LOG_BYTES, UnitLog } from './unit-log.ts';

/** Grace period between SIGTERM and SIGKILL when the command names none (the lesson's "terminate, wait 2 s, kill"). */
export const DEFAULT_GRACE_PERIOD_MS = 2000;
/** Most units alive (not yet finished) at once on one agent. */
export const MAX_LIVE_UNITS = 1024;
/** Most finished units whose final report is kept until forget(); the oldest is dropped beyond. */
export const MAX_FINISHED_UNITS = 512;
/** Longest grace period a command may ask for. */
export const MAX_GRACE_PERIOD_MS = 10 * 60 * 1000;

/** Unit names become file names: DNS-label-like, no slashes, no leading dot. */
const UNIT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

export interface StartRequest {
  name: string;
  deployment: string;
  spec: UnitSpec;
  /** Term of the command that asked for it (fencing audit, copied into reports). */
  term: number;
}

export type StartResult =
  | { ok: true; created: boolean; report: UnitReport }
  | { ok: false; error: string };

export type ForgetResult = 'forgotten' | 'unknown' | 'still-running';

export interface UnitSupervisorOptions {
  /** Agent state directory; unit logs go to `<stateDir>/units/`. */
  stateDir: string;
  nodeName: string;
  /** Called synchronously on every state transition, with a fresh copy. */
  onChange: (report: UnitReport) => void;
  maxLogBytes?: number;
  defaultGracePeriodMs?: number;
  /** 'auto' wraps units in setpriv --pdeathsig when available; 'off' never does. */
  pdeathsig?: 'auto' | 'off';
  /** Where PATH, HOME and LANG for units come from (default process.env). */
  baseEnv?: NodeJS.ProcessEnv;
  /** Told when the orphan guard had to be restarted. */
  onGuardProblem?: (reason: string) => void;
  now?: () => number;
}

interface UnitRecord {
  report: UnitReport;
  child: ChildProcess | null;
  pgid: number | null;
  log: UnitLog | null;
  stopRequested: boolean;
  gracePeriodMs: number;
  killedAfterGrace: boolean;
  graceTimer: NodeJS.Timeout | null;
  finished: Promise<UnitReport>;
  resolveFinished: (report: UnitReport) => void;
}

export class UnitSupervisor {
  readonly unitsDir: string;
  /** Absolute path of setpriv when units get a parent-death signal, else null. */
  readonly setprivPath: string | null;
  private readonly nodeName: string;
  private readonly onChange: (report: UnitReport) => void;
  private readonly maxLogBytes: number;
  private readonly defaultGracePeriodMs: number;
  private readonly baseEnv: NodeJS.ProcessEnv;
  private readonly now: () => number;
  private readonly guard: OrphanGuard;
  private readonly units = new Map<string, UnitRecord>();
  /** Finished unit names, oldest first (for the MAX_FINISHED_UNITS bound). */
  private readonly finishedOrder: string[] = [];

  constructor(options: UnitSupervisorOptions) {
    this.unitsDir = path.join(options.stateDir, 'units');
    fs.mkdirSync(this.unitsDir, { recursive: true });
    this.nodeName = options.nodeName;
    this.onChange = options.onChange;
    this.maxLogBytes = options.maxLogBytes ?? MAX_UNIT_LOG_BYTES;
    this.defaultGracePeriodMs = options.defaultGracePeriodMs ?? DEFAULT_GRACE_PERIOD_MS;
    this.baseEnv = options.baseEnv ?? process.env;
    this.now = options.now ?? Date.now;
    this.setprivPath =
      options.pdeathsig === 'off' || process.platform !== 'linux'
        ? null
        : findExecutable('setpriv', `${process.env.PATH ?? ''}:/usr/bin:/bin:/usr/sbin:/sbin`, '/');
    this.guard = new OrphanGuard({ onRestart: options.onGuardProblem });
  }

  /** Pid of the orphan guard process (diagnostics, tests). */
  get guardPid(): number | undefined {
    return this.guard.pid;
  }

  logPath(name: string): string {
    return path.join(this.unitsDir, `${name}.log`);
  }

  get(name: string): UnitReport | undefined {
    const rec = this.units.get(name);
    return rec ? { ...rec.report } : undefined;
  }

  list(): UnitReport[] {
    return [...this.units.values()].map((r) => ({ ...r.report }));
  }

  /** Units not yet finished. */
  liveCount(): number {
    let n = 0;
    for (const r of this.units.values()) if (!isFinal(r.report.phase)) n++;
    return n;
  }

  /**
   * Start a unit. Idempotent per name: a name that is known (running or
   * finished) is not started again; the current report comes back with
   * created=false. A program that cannot be started is not an error here:
   * it yields a Failed report with reason `SpawnFailed: ...`.
   */
  start(req: StartRequest): StartResult {
    const existing = this.units.get(req.name);
    if (existing) return { ok: true, created: false, report: { ...existing.report } };
    if (!UNIT_NAME_PATTERN.test(req.name)) {
      return { ok: false, error: `invalid unit name ${JSON.stringify(req.name)}: want letters, digits, '.', '_' or '-'` };
    }
    if (this.liveCount() >= MAX_LIVE_UNITS) {
      return { ok: false, error: `node already runs ${MAX_LIVE_UNITS} units (MAX_LIVE_UNITS)` };
    }

    let resolveFinished: (report: UnitReport) => void = () => {};
    const finished = new Promise<UnitReport>((resolve) => (resolveFinished = resolve));
    const rec: UnitRecord = {
      report: {
        name: req.name,
        deployment: req.deployment,
        phase: 'Pending',
        resources: { ...req.spec.resources },
        term: req.term,
      },
      child: null,
      pgid: null,
      log: null,
      stopRequested: false,
      gracePeriodMs: this.defaultGracePeriodMs,
      killedAfterGrace: false,
      graceTimer: null,
      finished,
      resolveFinished,
    };
    this.units.set(req.name, rec);

    const env = this.unitEnv(req);
    const command = req.spec.command;
    const program = command[0];
    const resolved = program === undefined || program === '' ? null : findExecutable(program, env.PATH ?? '', this.unitsDir);
    if (resolved === null) {
      const what = program === undefined || program === '' ? 'empty command' : `${program}: command not found or not executable`;
      this.finish(rec, { phase: 'Failed', reason: `SpawnFailed: ENOENT: ${what}` });
      return { ok: true, created: true, report: { ...rec.report } };
    }

    try {
      rec.log = new UnitLog(this.logPath(req.name), this.maxLogBytes);
    } catch (err) {
      this.finish(rec, { phase: 'Failed', reason: `SpawnFailed: cannot open log file: ${errorText(err)}` });
      return { ok: true, created: true, report: { ...rec.report } };
    }

    const argv = this.setprivPath ? [this.setprivPath, '--pdeathsig', 'KILL', '--', ...command] : [...command];
    let child: ChildProcess;
    try {
      child = spawn(argv[0], argv.slice(1), {
        cwd: this.unitsDir,
        env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (err) {
      // Synchronous refusals: NUL bytes in argv or env, and the like.
      this.finish(rec, { phase: 'Failed', reason: `SpawnFailed: ${errorText(err)}` });
      return { ok: true, created: true, report: { ...rec.report } };
    }
    rec.child = child;
    if (child.pid !== undefined) {
      // First thing once the process exists: guard its group.
      rec.pgid = child.pid;
      this.guard.add(child.pid);
      rec.report.pid = child.pid;
    }

    const log = rec.log;
    child.stdout?.on('data', (chunk: Buffer) => log.write(chunk));
    child.stderr?.on('data', (chunk: Buffer) => log.write(chunk));
    child.on('close', () => log.close());
    child.once('spawn', () => {
      if (isFinal(rec.report.phase) || rec.report.phase === 'Terminating') return;
      rec.report.phase = 'Running';
      rec.report.startedAt = this.now();
      this.emit(rec);
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      // After a successful spawn, 'error' only means a kill() failed; the
      // exit event still tells the outcome.
      if (child.pid !== undefined && rec.pgid !== null) return;
      this.finish(rec, { phase: 'Failed', reason: `SpawnFailed: ${errorText(err)}` });
      log.close();
    });
    child.once('exit', (code, signal) => this.onExit(rec, code, signal));

    this.emit(rec); // Pending, with the pid when known
    return { ok: true, created: true, report: { ...rec.report } };
  }

  /**
   * Stop a unit: SIGTERM to its process group, SIGKILL after the grace
   * period. Resolves with the final report once the process has exited;
   * undefined for an unknown name. Idempotent: a second call joins the first.
   */
  stop(name: string, gracePeriodMs?: number): Promise<UnitReport> | undefined {
    const rec = this.units.get(name);
    if (!rec) return undefined;
    if (isFinal(rec.report.phase) || rec.stopRequested) return rec.finished;
    rec.stopRequested = true;
    rec.gracePeriodMs = clampGrace(gracePeriodMs ?? this.defaultGracePeriodMs);
    rec.report.phase = 'Terminating';
    this.emit(rec);
    signalGroup(rec.pgid, 'SIGTERM');
    rec.graceTimer = setTimeout(() => {
      rec.graceTimer = null;
      if (isFinal(rec.report.phase)) return;
      rec.killedAfterGrace = true;
      signalGroup(rec.pgid, 'SIGKILL');
    }, rec.gracePeriodMs);
    return rec.finished;
  }

  /** Stop every live unit (each with grace) and wait for all of them. */
  async stopAll(gracePeriodMs?: number): Promise<void> {
    const waits: Promise<UnitReport>[] = [];
    for (const name of this.units.keys()) {
      const p = this.stop(name, gracePeriodMs);
      if (p) waits.push(p);
    }
    await Promise.all(waits);
  }

  /** SIGKILL every live unit's group at once (second Ctrl-C, fatal error). */
  killAllNow(): void {
    for (const rec of this.units.values()) {
      if (!isFinal(rec.report.phase)) {
        rec.stopRequested = true;
        signalGroup(rec.pgid, 'SIGKILL');
      }
    }
  }

  /** Drop a finished unit's record and its log files. */
  forget(name: string): ForgetResult {
    const rec = this.units.get(name);
    if (!rec) return 'unknown';
    if (!isFinal(rec.report.phase)) return 'still-running';
    this.drop(name, rec);
    return 'forgotten';
  }

  /** Release the orphan guard (it kills any group still registered). Call after stopAll(). */
  close(): void {
    this.guard.close();
  }

  private onExit(rec: UnitRecord, code: number | null, signal: NodeJS.Signals | null): void {
    if (rec.graceTimer) clearTimeout(rec.graceTimer);
    rec.graceTimer = null;
    if (rec.pgid !== null) {
      // The unit's main process is gone: so is the rest of its group.
      signalGroup(rec.pgid, 'SIGKILL');
      this.guard.remove(rec.pgid);
    }
    const observed: Partial<UnitReport> = {};
    if (code !== null) observed.exitCode = code;
    if (signal !== null) observed.signal = signal;
    if (rec.stopRequested) {
      const reason = rec.killedAfterGrace ? `Terminated: killed after grace period ${rec.gracePeriodMs}ms` : 'Terminated';
      this.finish(rec, { ...observed, phase: 'Succeeded', reason });
    } else if (signal !== null) {
      this.finish(rec, { ...observed, phase: 'Failed', reason: 'Killed' });
    } else if (code === 0) {
      this.finish(rec, { ...observed, phase: 'Succeeded', reason: 'Completed' });
    } else {
      this.finish(rec, { ...observed, phase: 'Failed', reason: 'Error' });
    }
  }

  private finish(rec: UnitRecord, outcome: Partial<UnitReport> & { phase: 'Succeeded' | 'Failed' }): void {
    if (isFinal(rec.report.phase)) return;
    Object.assign(rec.report, outcome);
    rec.report.finishedAt = this.now();
    this.finishedOrder.push(rec.report.name);
    this.emit(rec);
    rec.resolveFinished({ ...rec.report });
    while (this.finishedOrder.length > MAX_FINISHED_UNITS) {
      const oldest = this.finishedOrder[0];
      const old = this.units.get(oldest);
      if (old) this.drop(oldest, old);
      else this.finishedOrder.shift();
    }
  }

  private drop(name: string, rec: UnitRecord): void {
    this.units.delete(name);
    const i = this.finishedOrder.indexOf(name);
    if (i >= 0) this.finishedOrder.splice(i, 1);
    rec.child?.stdout?.destroy();
    rec.child?.stderr?.destroy();
    if (rec.log) rec.log.remove();
    else fs.rmSync(this.logPath(name), { force: true });
  }

  private emit(rec: UnitRecord): void {
    this.onChange({ ...rec.report, resources: { ...rec.report.resources } });
  }

  private unitEnv(req: StartRequest): Record<string, string> {
    const env: Record<string, string> = {
      PATH: this.baseEnv.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: this.baseEnv.HOME ?? '/',
      LANG: this.baseEnv.LANG ?? 'C.UTF-8',
    };
    for (const { name, value } of req.spec.env) env[name] = value;
    env.MO_UNIT_NAME = req.name;
    env.MO_NODE_NAME = this.nodeName;
    return env;
  }
}

function isFinal(phase: UnitReport['phase']): boolean {
  return phase === 'Succeeded' || phase === 'Failed';
}

function clampGrace(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0) return 0;
  return Math.min(Math.floor(ms), MAX_GRACE_PERIOD_MS);
}

/** Signal a whole process group; a group that is already gone is fine. */
function signalGroup(pgid: number | null, signal: NodeJS.Signals): void {
  if (pgid === null || pgid <= 1) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: nothing left in the group.
  }
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    const msg = err.message.split('\n')[0];
    return code && !msg.startsWith(code) ? `${code}: ${msg}` : msg;
  }
  return String(err);
}

/**
 * Resolve a program the way execvp would: a name with a slash is taken
 * relative to cwd, a bare name is looked up on PATH. Returns the path of an
 * executable regular file, or null. Checking first gives a clear
 * `SpawnFailed: ENOENT` even though setpriv (not the program) is exec'd.
 */
export function findExecutable(program: string, pathVar: string, cwd: string): string | null {
  const candidates = program.includes('/')
    ? [path.resolve(cwd, program)]
    : pathVar.split(':').map((dir) => path.resolve(cwd, dir === '' ? '.' : dir, program));
  for (const file of candidates) {
    try {
      const st = fs.statSync(file);
      // The mode check matters for root, whom access(X_OK) may not refuse.
      if (!st.isFile() || (st.mode & 0o111) === 0) continue;
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}
