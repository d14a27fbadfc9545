// node-agent/runtime/supervisor.ts -- the unit runtime: starts each unit as
// a real child process, watches it, stops it, and reports every state
// change the moment it happens (no polling: 'spawn' and 'exit' events from
// the kernel via libuv drive everything). The agent's shell (main.ts) turns
// the reports into unit-status frames.
//
// Lifecycle of one unit (phases from shared/model.ts):
//   Pending      spawn() returned a pid; the program is being exec'd
//   Running      'spawn' fired: the program runs (report carries the pid)
//   Terminating  stop() was asked, or a startup/liveness probe failed for
//                good: SIGTERM went to the unit's process group, SIGKILL
//                follows after the grace period
//   Succeeded    exit code 0, or it ended because we asked it to stop
//   Failed       exit code != 0, killed by a signal nobody here sent, killed
//                for a failed probe, or the program could not be started
// The final report stays until forget(); a name is started at most once.
//
// Reasons and messages, as Kubernetes names them (report.reason/.message;
// "after Xs" is how long it ran, startedAt to finishedAt):
//   Succeeded Completed            exit code 0 after 1.2s
//   Failed    Error                exit code 1 after 0.02s | signal SIGKILL after 12.0s
//   Failed    StartError           spawn sleeeep ENOENT (it never ran)
//   Succeeded Terminated           stopped within grace period 2000ms: signal SIGTERM after 3.1s
//                                  | killed after grace period 400ms: signal SIGKILL after 3.1s
//   Failed    LivenessProbeFailed  liveness probe failed 3 times: HTTP GET :8080/healthz: 500
//                                  | startup probe failed 5 times: exec test -f ready: exit code 1
//
// Readiness (report.ready/.readySince): false while Pending, Terminating and
// once finished; with probes as prober.ts/probe-logic.ts decide, else true
// from Running on. Every change of `ready` is a report. While Running and
// not ready because a readiness probe failed, message says why.
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
//   exists" and "process is guarded". Through the spawn server (below) it
//   is handed over at 'spawn', when the server says P's pid: until then P
//   is covered by its parent-death signal towards the server, and the
//   server by its own towards the agent and by the guard.
// * When a unit's main process exits, whatever is left of its group is
//   SIGKILLed too (like a container whose init exits), then the group is
//   dropped from the guard so a recycled id is never hit.
// * With cgroups (runtime/cgroups.ts: root, or a delegated v2 subtree) each
//   unit runs in a cgroup of its own with its limits, which it joins before
//   its program runs: the argv becomes `setpriv --pdeathsig KILL -- /bin/sh
//   -c <join> <cgroup.procs files> -- <argv>`; the shell writes its own pid
//   into each file and execs the program, so status.pid is still the
//   program's pid (exec keeps it) and pdeathsig survives both execs. When the
//   unit ends, whatever is left in its cgroup is SIGKILLed, which also
//   reaches a grandchild that left the group with setsid(), and the cgroup
//   is removed. A unit the OOM killer ended is Failed `OOMKilled`.
// * With namespaces (runtime/namespaces.ts: root on Linux, util-linux
//   unshare) the chain goes on through `unshare` into the unit's own UTS,
//   IPC and mount namespaces (hostname = unit name, a private /tmp) and,
//   unless the template says hostPID, a PID namespace whose PID 1 is a tiny
//   signal-forwarding init; status.pid is then the HOST pid of the command
//   (PID 3 inside), found under the spawned process right after the spawn,
//   and the unit is Running once it is known. The spawned process stays
//   the group leader that stop() and the orphan guard signal.
// * Where mo-init makes the namespaces, a cold start is not a spawn of the
//   agent's: one `mo-init --serve` (spawn-server.ts) forks each unit's P
//   and relays its output, fd 3 and exit, so that a unit costs the agent's
//   loop one write instead of a fork of the whole agent.
// Without cgroups such a grandchild is out of reach, and a unit's limits are
// not enforced: its status message says so while it runs.

import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import type { UnitPortStatus, UnitReport, UnitSpec } from '../../shared/model.ts';
import { joinArgv, type UnitCgroups } from './cgroups.ts';
import { enterArgv, exitSignal, findMainPid, initArgv, MAIN_INNER_PID, MAIN_INNER_PID_MO_INIT, namespaceArgv, type Namespaces } from './namespaces.ts';
import { SandboxPool, type WarmSandbox } from './sandbox-pool.ts';
import { ExecutableCache, findExecutable, signalGroup } from './exec-util.ts';
import { OrphanGuard } from './orphan-guard.ts';
import { ServedProcess, SpawnServer } from './spawn-server.ts';
import { UnitProber } from './prober.ts';
import { readStat } from '../../shared/proc.ts';
import { MAX_UNIT_LOG_BYTES, UnitLog } from './unit-log.ts';

export { findExecutable };

/** Grace period between SIGTERM and SIGKILL when the command names none (lesson 2's "terminate, wait 2 s, kill", docs/lessons.md step 5). */
export const DEFAULT_GRACE_PERIOD_MS = 2000;
/** Most units alive (not yet finished) at once on one agent. */
export const MAX_LIVE_UNITS = 1024;
/** Most finished units whose final report is kept until forget(); the oldest is dropped beyond. */
export const MAX_FINISHED_UNITS = 512;
/** Longest grace period a command may ask for. */
export const MAX_GRACE_PERIOD_MS = 10 * 60 * 1000;

/** How long a unit with a PID namespace may take to show its main process before it is reported Running with the outer pid. */
export const MAIN_PID_TIMEOUT_MS = 5000;

/** Unit names become file names: DNS-label-like, no slashes, no leading dot. */
const UNIT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

export interface StartRequest {
  name: string;
  deployment: string;
  spec: UnitSpec;
  /** Term of the command that asked for it (fencing audit, copied into reports). */
  term: number;
  /** The spec's identity and the deployment revision (MO_REVISION), copied into reports. */
  specHash: string;
  revision: number;
  /** Host ports the agent gave the unit's declared ports (PORT, PORT_<NAME>, HOST_IP; status.ports). */
  ports?: UnitPortStatus[];
}

/** What a report tells: a phase change (or the first report), or a change of readiness only. */
export type UnitChange = 'phase' | 'readiness';

export type StartResult = { ok: true; created: boolean; report: UnitReport } | { ok: false; error: string };

export type ForgetResult = 'forgotten' | 'unknown' | 'still-running';

export interface UnitSupervisorOptions {
  /** Agent state directory; unit logs go to `<stateDir>/units/`. */
  stateDir: string;
  nodeName: string;
  /** Called synchronously on every state transition and readiness change, with a fresh copy. */
  onChange: (report: UnitReport, change: UnitChange) => void;
  /** Every probe's outcome (the agent counts them for /metrics). */
  onProbeResult?: (kind: 'startup' | 'readiness' | 'liveness', ok: boolean) => void;
  maxLogBytes?: number;
  defaultGracePeriodMs?: number;
  /** 'auto' wraps units in setpriv --pdeathsig when available; 'off' never does. */
  pdeathsig?: 'auto' | 'off';
  /** Where PATH, HOME and LANG for units come from (default process.env). */
  baseEnv?: NodeJS.ProcessEnv;
  /** Told when the orphan guard had to be restarted. */
  onGuardProblem?: (reason: string) => void;
  /** The orphan guard, when the caller started it first (to hand it the cgroup parents before they exist); else one of its own. */
  guard?: OrphanGuard;
  /** Per-unit cgroups (limits); absent: none, and units with limits are marked unenforced. */
  cgroups?: UnitCgroups;
  /** Per-unit namespaces (namespaces.ts); absent or disabled: units share the agent's. */
  namespaces?: Namespaces;
  /** Cold starts through one `mo-init --serve` (spawn-server.ts) where mo-init makes the namespaces; default true. */
  spawnServer?: boolean;
  /** The spawn server died (units lost with it); `disabled`: cold starts spawn mo-init from now on. */
  onSpawnServerProblem?: (message: string, disabled: boolean) => void;
  /** Warm sandboxes to keep with namespaces (sandbox-pool.ts); default 0 (every unit starts cold). */
  warmSandboxes?: number;
  /** Told when the warm sandbox pool had a problem (a sandbox died unused, or it gave up). */
  onSandboxProblem?: (reason: string) => void;
  now?: () => number;
}

interface UnitRecord {
  report: UnitReport;
  spec: UnitSpec;
  env: Record<string, string>;
  child: ChildProcess | ServedProcess | null;
  pgid: number | null;
  log: UnitLog | null;
  prober: UnitProber | null;
  /** When spawn() was called (for "after Xs" when it never got to Running). */
  spawnedAt: number;
  stopRequested: boolean;
  /** Why it is being stopped: the control plane asked, or a probe failed (its message). */
  stopCause: { kind: 'terminate' } | { kind: 'probe'; message: string } | null;
  gracePeriodMs: number;
  /** The unit runs in a cgroup of its own (to read for OOM kills and remove when it ends). */
  cgroup: boolean;
  /** The unit has namespaces of its own; pidNs: a PID namespace too (its pid is found after the spawn). */
  namespaced: boolean;
  pidNs: boolean;
  /** Its end was handled (the init's word on fd 3, or the exit of the spawned process, whichever came first). */
  exited: boolean;
  /** Started in a warm sandbox (sandbox-pool.ts). */
  warm: boolean;
  /** With a PID namespace: the command's pid inside it (3, or 2 under mo-init). */
  mainInnerPid: number;
  /** Shown as the message while running when nothing else is: 'limits not enforced on this node: ...'. */
  note?: string;
  killedAfterGrace: boolean;
  /** killAllNow() hit it: SIGKILL without grace. */
  killedNow: boolean;
  graceTimer: NodeJS.Timeout | null;
  finished: Promise<UnitReport>;
  resolveFinished: (report: UnitReport) => void;
}

export class UnitSupervisor {
  readonly unitsDir: string;
  /** Absolute path of setpriv when units get a parent-death signal, else null. */
  readonly setprivPath: string | null;
  private readonly nodeName: string;
  private readonly onChange: (report: UnitReport, change: UnitChange) => void;
  private readonly onProbeResult: UnitSupervisorOptions['onProbeResult'];
  private readonly maxLogBytes: number;
  private readonly defaultGracePeriodMs: number;
  private readonly baseEnv: NodeJS.ProcessEnv;
  private readonly now: () => number;
  private readonly guard: OrphanGuard;
  private readonly cgroups: UnitCgroups | null;
  private readonly namespaces: Namespaces | null;
  /** Cold starts with mo-init go through it while it is usable (spawn-server.ts). */
  private readonly server: SpawnServer | null;
  private readonly pool: SandboxPool | null;
  private readonly sandboxProblem: ((reason: string) => void) | undefined;
  /** Cgroup removals under way (shutdown waits for them). */
  private readonly removals = new Set<Promise<boolean>>();
  private readonly units = new Map<string, UnitRecord>();
  /** Programs found on PATH lately (a burst of starts of the same program looks it up once a second). */
  private readonly executables = new ExecutableCache();
  /** Finished unit names, oldest first (for the MAX_FINISHED_UNITS bound). */
  private readonly finishedOrder: string[] = [];

  constructor(options: UnitSupervisorOptions) {
    this.unitsDir = path.join(options.stateDir, 'units');
    fs.mkdirSync(this.unitsDir, { recursive: true });
    this.nodeName = options.nodeName;
    this.onChange = options.onChange;
    this.onProbeResult = options.onProbeResult;
    this.maxLogBytes = options.maxLogBytes ?? MAX_UNIT_LOG_BYTES;
    this.defaultGracePeriodMs = options.defaultGracePeriodMs ?? DEFAULT_GRACE_PERIOD_MS;
    this.baseEnv = options.baseEnv ?? process.env;
    this.now = options.now ?? Date.now;
    this.setprivPath = options.pdeathsig === 'off' || process.platform !== 'linux' ? null : findExecutable('setpriv', `${process.env.PATH ?? ''}:/usr/bin:/bin:/usr/sbin:/sbin`, '/');
    this.guard = options.guard ?? new OrphanGuard({ onRestart: options.onGuardProblem });
    this.cgroups = options.cgroups ?? null;
    this.sandboxProblem = options.onSandboxProblem;
    this.namespaces = options.namespaces?.enabled && options.namespaces.unsharePath ? options.namespaces : null;
    const initPath = this.namespaces?.initPath ?? null;
    this.server =
      initPath !== null && options.spawnServer !== false
        ? new SpawnServer({
            initPath,
            onStart: (pid) => this.guard.add(pid),
            onStop: (pid) => this.guard.remove(pid),
            ...(options.onSpawnServerProblem ? { onProblem: options.onSpawnServerProblem } : {}),
          })
        : null;
    // If the agent dies, the guard also empties and removes its unit cgroups.
    for (const dir of this.cgroups?.parentDirs() ?? []) this.guard.addCgroupParent(dir);
    this.pool =
      this.namespaces && (options.warmSandboxes ?? 0) > 0
        ? new SandboxPool({
            size: options.warmSandboxes ?? 0,
            initPath: this.namespaces.initPath ?? null,
            unsharePath: this.namespaces.unsharePath!,
            setprivPath: this.setprivPath,
            cwd: this.unitsDir,
            guard: this.guard,
            // Units the spawn server is starting (a burst): it starts them for less than a sandbox costs.
            busy: () => this.server?.busy === true,
            ...(this.cgroups?.enabled ? { join: (sb: WarmSandbox) => this.joinWarm(sb), release: (cg: string) => this.removeCgroup(cg) } : {}),
            ...(options.onSandboxProblem ? { onProblem: options.onSandboxProblem } : {}),
          })
        : null;
  }

  /** Warm sandboxes ready right now (tests, diagnostics). */
  get warmSandboxesReady(): number {
    return this.pool?.readyCount ?? 0;
  }

  /**
   * Start the spawn server now (the agent does, at its start): else the first
   * cold start spawns it, a ~20 ms fork of the agent inside an apply.
   */
  startSpawnServer(): void {
    this.server?.start();
  }

  /** Pid of the spawn server while it runs (diagnostics, tests). */
  get spawnServerPid(): number | undefined {
    return this.server?.pid;
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
   * it yields a Failed report with reason `StartError`.
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
        ready: false,
        specHash: req.specHash,
        revision: req.revision,
        ...(req.ports && req.ports.length > 0 ? { ports: req.ports.map((p) => ({ ...p })) } : {}),
      },
      spec: req.spec,
      env: this.unitEnv(req),
      child: null,
      pgid: null,
      log: null,
      prober: null,
      spawnedAt: this.now(),
      stopRequested: false,
      stopCause: null,
      gracePeriodMs: this.defaultGracePeriodMs,
      cgroup: false,
      namespaced: false,
      pidNs: false,
      exited: false,
      warm: false,
      mainInnerPid: MAIN_INNER_PID,
      killedAfterGrace: false,
      killedNow: false,
      graceTimer: null,
      finished,
      resolveFinished,
    };
    this.units.set(req.name, rec);

    const env = rec.env;
    const command = req.spec.command;
    const program = command[0] ?? '';
    if (program === '') {
      this.finish(rec, { phase: 'Failed', reason: 'StartError', message: 'spawn ENOENT: empty command' });
      return { ok: true, created: true, report: { ...rec.report } };
    }
    const resolved = this.executables.resolve(program, env.PATH ?? '', this.unitsDir);
    if (!resolved.ok) {
      this.finish(rec, { phase: 'Failed', reason: 'StartError', message: `spawn ${program} ${resolved.errno}` });
      return { ok: true, created: true, report: { ...rec.report } };
    }

    try {
      rec.log = new UnitLog(this.logPath(req.name), this.maxLogBytes);
    } catch (err) {
      this.finish(rec, { phase: 'Failed', reason: 'StartError', message: `spawn ${program}: cannot keep its log: ${errorText(err)}` });
      return { ok: true, created: true, report: { ...rec.report } };
    }

    if (this.namespaces) {
      rec.namespaced = true;
      rec.pidNs = req.spec.hostPID !== true;
    }
    // A warm sandbox when one is ready and its claim can say the unit (claimFields, claimScript).
    const claim = rec.pidNs && this.pool && this.pool.readyCount > 0 ? this.pool.claimFor(req.name, env, command) : null;
    let warm = claim !== null ? this.pool!.take() : null;
    let procs: string[] = [];
    // A sandbox whose processes already sit in a cgroup of their own: that cgroup becomes the unit's.
    let adopted = false;
    if (warm?.cgroup && this.cgroups?.enabled) {
      const a = this.cgroups.adopt(warm.cgroup, req.name, req.spec);
      if (a.ok) {
        adopted = true;
        rec.cgroup = true;
        procs = a.procs;
      } else {
        // Start cold instead; nothing of that sandbox is kept.
        signalGroup(warm.pid, 'SIGKILL');
        this.removeCgroup(warm.cgroup);
        this.cgroups.removeNow(req.name);
        this.pool!.replenish();
        this.sandboxProblem?.(a.error);
        warm = null;
      }
    }
    // The cgroup directories P makes itself, through the spawn server (mo-init.c make_cgroups).
    let make: Array<[string, Array<[string, string]>]> | undefined;
    if (adopted) {
      // its cgroup is set up
    } else if (this.cgroups?.enabled && !warm && this.server?.usable) {
      const ready = this.cgroups.prepare(req.name, req.spec);
      if (!ready.ok) {
        this.finish(rec, { phase: 'Failed', reason: 'StartError', message: ready.error });
        rec.log.close();
        return { ok: true, created: true, report: { ...rec.report } };
      }
      rec.cgroup = true;
      make = ready.plan;
      procs = make.map(([dir]) => path.join(dir, 'cgroup.procs'));
    } else if (this.cgroups?.enabled) {
      const cg = this.cgroups.create(req.name, req.spec);
      if (!cg.ok) {
        if (warm) {
          signalGroup(warm.pid, 'SIGKILL');
          this.pool!.replenish();
        }
        this.finish(rec, { phase: 'Failed', reason: 'StartError', message: cg.error });
        rec.log.close();
        return { ok: true, created: true, report: { ...rec.report } };
      }
      rec.cgroup = true;
      procs = cg.procs;
    } else if (req.spec.limits) {
      rec.note = `limits not enforced on this node: ${this.cgroups?.disabledReason ?? 'no cgroups'}`;
      rec.report.message = rec.note;
    }
    let child: ChildProcess | ServedProcess;
    if (warm) {
      const refused = this.claim(warm, adopted ? [] : procs, claim!);
      if (refused !== null) {
        signalGroup(warm.pid, 'SIGKILL');
        this.pool!.replenish();
        this.finish(rec, { phase: 'Failed', reason: 'StartError', message: refused });
        rec.log.close();
        if (rec.cgroup) this.removeCgroup(req.name);
        return { ok: true, created: true, report: { ...rec.report } };
      }
      child = warm.child;
      rec.warm = true;
      rec.mainInnerPid = this.pool!.byMoInit ? MAIN_INNER_PID_MO_INIT : MAIN_INNER_PID;
      rec.report.pid = warm.mainPid;
    } else {
      let programArgv: string[] = [...command];
      // With namespaces the unit's init joins its cgroups itself (namespaces.ts); else a join shell execs the program.
      const initPath = this.namespaces?.initPath ?? null;
      rec.mainInnerPid = initPath !== null ? MAIN_INNER_PID_MO_INIT : MAIN_INNER_PID;
      try {
        if (initPath !== null && this.server?.usable) {
          // The spawn server forks the unit's P (spawn-server.ts): what `initArgv` says, without a spawn of our own.
          child = this.server.spawn({ name: req.name, hostPID: !rec.pidNs, cwd: this.unitsDir, env, command, procs, ...(make ? { make } : {}) });
        } else {
          if (initPath !== null) programArgv = initArgv(initPath, req.name, !rec.pidNs, command, procs);
          else if (this.namespaces) programArgv = namespaceArgv(this.namespaces.unsharePath!, req.name, !rec.pidNs, command, procs);
          else if (rec.cgroup) programArgv = joinArgv(procs, programArgv);
          // mo-init sets its own parent-death signal (setpriv's --pdeathsig KILL).
          const argv = this.setprivPath && initPath === null ? [this.setprivPath, '--pdeathsig', 'KILL', '--', ...programArgv] : programArgv;
          child = spawn(argv[0], argv.slice(1), {
            cwd: this.unitsDir,
            env,
            detached: true,
            // fd 3: a PID namespace's init says when the command is forked (namespaces.ts).
            stdio: rec.pidNs ? ['ignore', 'pipe', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe'],
          });
        }
      } catch (err) {
        // Synchronous refusals: NUL bytes in argv or env, and the like.
        this.finish(rec, { phase: 'Failed', reason: 'StartError', message: `spawn ${program}: ${errorText(err)}` });
        if (rec.cgroup) this.removeCgroup(req.name);
        return { ok: true, created: true, report: { ...rec.report } };
      }
    }
    rec.child = child;
    // First thing once the process exists: guard its group (a warm sandbox is guarded since it was made).
    // A spawn's pid is known now; the spawn server's at 'spawn', before anything else of the unit is heard.
    const adopt = (pid: number): void => {
      rec.pgid = pid;
      if (!warm) this.guard.add(pid);
      if (!rec.pidNs) rec.report.pid = pid;
      // util-linux's unshare process P waits outside the namespace: into the unit's cgroups with the rest (best effort: it
      // runs nothing of the unit's). mo-init's P joins them itself before it forks anything.
      if (!warm && rec.pidNs && rec.mainInnerPid !== MAIN_INNER_PID_MO_INIT) for (const f of procs) writeQuietly(f, String(pid));
      // A stop asked for before the pid was known: its signal now.
      if (rec.stopRequested) signalGroup(pid, rec.killedAfterGrace || rec.killedNow ? 'SIGKILL' : 'SIGTERM');
    };
    if (child.pid !== undefined) adopt(child.pid);
    else if (child instanceof ServedProcess) child.once('spawn', () => adopt(child.pid!));

    const log = rec.log;
    child.stdout?.on('data', (chunk: Buffer) => log.write(chunk));
    child.stderr?.on('data', (chunk: Buffer) => log.write(chunk, 'stderr'));
    child.on('close', () => log.close());
    const running = (): void => {
      if (warm) this.pool!.replenish();
      if (isFinal(rec.report.phase) || rec.report.phase === 'Terminating') return;
      const now = this.now();
      rec.report.phase = 'Running';
      rec.report.startedAt = now;
      this.startProbes(rec, now);
      this.emit(rec);
    };
    // With a PID namespace the command's host pid is known once the init
    // has forked it (`s` on fd 3; mo-init says the pid with it, `s<pid>`):
    // else read from /proc then (retried each ms for a moment, should /proc
    // lag). Without that word within MAIN_PID_TIMEOUT_MS of the spawn, the
    // unit is Running with the outer pid, as before.
    const findMain = (patienceMs: number): void => {
      if (child.pid === undefined) return;
      const spawnedPid = child.pid;
      const deadline = Date.now() + patienceMs;
      const look = (): void => {
        if (rec.report.pid !== undefined || isFinal(rec.report.phase) || rec.report.phase === 'Terminating') return;
        const main = findMainPid(spawnedPid, rec.mainInnerPid);
        if (main === null && Date.now() < deadline) {
          setTimeout(look, 1);
          return;
        }
        rec.report.pid = main ?? spawnedPid;
        running();
      };
      look();
    };
    if (rec.pidNs) {
      const status = (warm ? warm.status : child.stdio[3]) as Readable | null;
      // null: not armed yet; undefined: the init's `s` came.
      let fallback: NodeJS.Timeout | null | undefined = null;
      let said = '';
      status?.on('data', (b: Buffer) => {
        said = (said + b.toString()).slice(-64);
        if (said.includes('s') && fallback !== undefined) {
          const told = /s(\d+)\n/.exec(said);
          if (told === null && /s\d*$/.test(said)) return; // `s<pid>` in two reads: wait for the rest
          if (fallback) clearTimeout(fallback);
          fallback = undefined;
          if (told !== null && rec.report.pid === undefined && !isFinal(rec.report.phase) && rec.report.phase !== 'Terminating') {
            rec.report.pid = Number(told[1]);
            running();
          } else findMain(MAIN_PID_TIMEOUT_MS);
        }
        // The command exited: its status as the init gives it (128+N for signal N).
        const x = /x(\d+)\n/.exec(said);
        if (x) this.onExit(rec, Number(x[1]), null);
      });
      status?.on('error', () => {});
      const late = (): void => {
        if (fallback === undefined) return;
        fallback = setTimeout(() => findMain(0), MAIN_PID_TIMEOUT_MS);
        fallback.unref();
      };
      if (!warm) child.once('spawn', late);
      child.once('exit', () => {
        if (fallback) clearTimeout(fallback);
      });
    } else {
      child.once('spawn', running);
    }
    child.on('error', (err: NodeJS.ErrnoException) => {
      // After a successful spawn, 'error' only means a kill() failed; the
      // exit event still tells the outcome.
      if (child.pid !== undefined && rec.pgid !== null) return;
      this.finish(rec, { phase: 'Failed', reason: 'StartError', message: `spawn ${program} ${err.code ?? errorText(err)}` });
      log.close();
    });
    child.once('exit', (code, signal) => this.onExit(rec, code, signal));

    // A warm sandbox's main process exists and has its line: it runs now (one report, Running, not
    // Pending and then Running in the same task). A cold start is Pending, with the pid when known.
    if (warm) running();
    else this.emit(rec);
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
    this.terminate(rec, { kind: 'terminate' }, gracePeriodMs ?? this.defaultGracePeriodMs);
    return rec.finished;
  }

  /** SIGTERM to the group, Terminating, SIGKILL after the grace period. */
  private terminate(rec: UnitRecord, cause: NonNullable<UnitRecord['stopCause']>, gracePeriodMs: number): void {
    rec.stopRequested = true;
    rec.stopCause = cause;
    rec.prober?.stop();
    rec.gracePeriodMs = clampGrace(gracePeriodMs);
    rec.report.phase = 'Terminating';
    rec.report.ready = false;
    if (cause.kind === 'probe') {
      rec.report.reason = 'LivenessProbeFailed';
      rec.report.message = cause.message;
    } else {
      delete rec.report.message;
    }
    this.emit(rec);
    signalGroup(rec.pgid, 'SIGTERM');
    rec.graceTimer = setTimeout(() => {
      rec.graceTimer = null;
      if (isFinal(rec.report.phase)) return;
      // Node runs due timers before it reads its pipes and reaps its children: when the agent's loop
      // was held past the grace period (a busy machine), a unit that ended on SIGTERM meanwhile is
      // a zombie whose exit is heard later in this same turn. It stopped within its grace; killing
      // its group now would report it as killed after grace, by SIGKILL. The spawn server reaps its
      // units' P itself: there it is gone, and its exit waits in the server's pipe.
      if (rec.child?.pid !== undefined && ended(rec.child)) return;
      rec.killedAfterGrace = true;
      signalGroup(rec.pgid, 'SIGKILL');
    }, rec.gracePeriodMs);
  }

  /** From Running on: the unit's probes, or ready at once when it has none. */
  private startProbes(rec: UnitRecord, now: number): void {
    const probes = rec.spec.probes;
    if (!probes || (!probes.startup && !probes.readiness && !probes.liveness)) {
      rec.report.ready = true;
      rec.report.readySince = now;
      return;
    }
    const prober = new UnitProber({
      probes,
      runningAt: now,
      now: this.now,
      exec: {
        cwd: this.unitsDir,
        env: rec.env,
        setprivPath: this.setprivPath,
        // Exec probes run inside the unit's namespaces, as Kubernetes runs them in the container.
        ...(rec.namespaced && this.namespaces?.nsenterPath
          ? { enter: () => (rec.report.pid !== undefined ? enterArgv(this.namespaces!.nsenterPath!, rec.report.pid, rec.pidNs) : null) }
          : {}),
        portMap: (containerPort) => {
          const p = rec.report.ports?.find((x) => x.containerPort === containerPort);
          return p ? { host: p.hostIP, port: p.hostPort } : undefined;
        },
        // With setpriv the kernel kills a probe with the agent; the guard only
        // where there is none (its per-line cost adds up at 100 probes a second).
        ...(this.setprivPath
          ? {}
          : {
              trackGroup: (pgid: number) => {
                try {
                  this.guard.add(pgid);
                } catch {
                  // The guard is full; the probe is killed at its timeout or when the unit ends.
                }
              },
              untrackGroup: (pgid: number) => this.guard.remove(pgid),
            }),
      },
      onChange: () => {
        if (rec.report.phase !== 'Running' || rec.prober !== prober) return;
        this.copyReadiness(rec, prober);
        this.emit(rec, 'readiness');
      },
      ...(this.onProbeResult ? { onResult: this.onProbeResult } : {}),
      onKill: (message) => {
        if (isFinal(rec.report.phase) || rec.stopRequested) return;
        this.terminate(rec, { kind: 'probe', message }, rec.spec.gracePeriodMs ?? this.defaultGracePeriodMs);
      },
    });
    rec.prober = prober;
    this.copyReadiness(rec, prober);
  }

  private copyReadiness(rec: UnitRecord, prober: UnitProber): void {
    const { ready, readySince, message } = prober.logic;
    rec.report.ready = ready;
    if (readySince !== undefined) rec.report.readySince = readySince;
    if (message !== undefined) rec.report.message = message;
    else if (rec.note !== undefined) rec.report.message = rec.note;
    else delete rec.report.message;
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
        rec.prober?.stop();
        rec.stopRequested = true;
        rec.stopCause ??= { kind: 'terminate' };
        rec.killedNow = true;
        signalGroup(rec.pgid, 'SIGKILL');
      }
    }
  }

  /** Drop a finished unit's record (its log files stay until log retention removes them). */
  forget(name: string): ForgetResult {
    const rec = this.units.get(name);
    if (!rec) return 'unknown';
    if (!isFinal(rec.report.phase)) return 'still-running';
    this.drop(name, rec);
    return 'forgotten';
  }

  private removeCgroup(name: string): void {
    if (!this.cgroups) return;
    const p = this.cgroups.remove(name);
    this.removals.add(p);
    void p.then(() => this.removals.delete(p));
  }

  /** Resolves once every finished unit's cgroup is removed (or gave up), a closed pool's sandbox that was still joining its cgroup included. */
  async cgroupsRemoved(): Promise<void> {
    await this.pool?.settled();
    await Promise.all([...this.removals]);
  }

  /**
   * Stop every probe, kill the warm sandboxes and release the orphan guard
   * (it kills any group still registered). Call after stopAll().
   * `keepGuard`: release the guard later (releaseGuard()), once the agent's
   * own clean-up is done: if the agent is killed before that, the guard,
   * still holding its pipe, empties and removes what is left.
   */
  close(options: { keepGuard?: boolean } = {}): void {
    for (const rec of this.units.values()) rec.prober?.stop();
    this.pool?.close();
    this.server?.close();
    if (!options.keepGuard) this.guard.close();
  }

  /** Release the orphan guard (after close({ keepGuard: true }) and the agent's own clean-up). */
  releaseGuard(): void {
    this.guard.close();
  }

  /**
   * Make a warm sandbox this unit's: its three processes into the unit's
   * cgroups (before the command is exec'd), then the claim line. Gives why
   * not (a StartError), or null.
   */
  /**
   * While a made sandbox waits: its three processes into a cgroup of their
   * own (no limits yet; `@` keeps the name apart from every unit name), with
   * asynchronous writes, as a move into a cgroup can wait for an RCU grace
   * period. null when any write fails (the claim moves them instead).
   */
  private async joinWarm(sb: WarmSandbox): Promise<string | null> {
    const cgroups = this.cgroups;
    if (!cgroups?.enabled) return null;
    const name = `warm@${sb.pid}`;
    const made = cgroups.create(name, { resources: { cpu: 0, memory: 0 } });
    if (!made.ok) return null;
    try {
      for (const f of made.procs) for (const pid of [sb.pid, sb.initPid, sb.mainPid]) await fs.promises.writeFile(f, String(pid));
      return name;
    } catch {
      this.removeCgroup(name);
      return null;
    }
  }

  private claim(warm: WarmSandbox, procs: readonly string[], script: string | Buffer): string | null {
    for (const f of procs) {
      for (const pid of [warm.pid, warm.initPid, warm.mainPid]) {
        try {
          fs.writeFileSync(f, String(pid));
        } catch (err) {
          return `mini-orchestrator: cannot join cgroup ${f}: ${errorText(err)}`;
        }
      }
    }
    warm.child.stdin?.end(script);
    return null;
  }

  private onExit(rec: UnitRecord, code: number | null, signal: NodeJS.Signals | null): void {
    if (rec.exited) return;
    rec.exited = true;
    // A unit that took a warm sandbox and ended before it ran: make up for it now.
    if (rec.warm && rec.report.phase === 'Pending') this.pool?.replenish();
    rec.prober?.stop();
    if (rec.graceTimer) clearTimeout(rec.graceTimer);
    rec.graceTimer = null;
    // Read before the cgroup goes (below, once the end is reported).
    const oomKills = rec.cgroup && this.cgroups ? this.cgroups.oomKills(rec.report.name) : 0;
    // With a PID namespace the init passes the command's status on as a shell gives it: 128+N for signal N.
    const translated = rec.pidNs ? exitSignal(code) : null;
    if (translated !== null) {
      signal = translated;
      code = null;
    }
    const observed: Partial<UnitReport> = {};
    if (code !== null) observed.exitCode = code;
    if (signal !== null) observed.signal = signal;
    const finishedAt = this.now();
    const ran = `${signal !== null ? `signal ${signal}` : `exit code ${code}`} after ${formatSeconds(finishedAt - (rec.report.startedAt ?? rec.spawnedAt))}`;
    const cause = rec.stopCause;
    if (cause?.kind === 'probe') {
      const how = rec.killedNow ? '; killed without grace' : rec.killedAfterGrace ? `; killed after grace period ${rec.gracePeriodMs}ms` : '';
      this.finish(rec, { ...observed, phase: 'Failed', reason: 'LivenessProbeFailed', message: cause.message + how }, finishedAt);
    } else if (rec.stopRequested) {
      const how = rec.killedNow
        ? 'killed without grace'
        : rec.killedAfterGrace
          ? `killed after grace period ${rec.gracePeriodMs}ms`
          : `stopped within grace period ${rec.gracePeriodMs}ms`;
      this.finish(rec, { ...observed, phase: 'Succeeded', reason: 'Terminated', message: `${how}: ${ran}` }, finishedAt);
    } else if (signal === null && code === 0) {
      this.finish(rec, { ...observed, phase: 'Succeeded', reason: 'Completed', message: ran }, finishedAt);
    } else if (oomKills > 0) {
      const limit = rec.spec.limits?.memory !== undefined ? `memory limit ${rec.spec.limits.memory}Mi` : 'memory limit';
      this.finish(rec, { ...observed, phase: 'Failed', reason: 'OOMKilled', message: `killed by the OOM killer (${limit} reached): ${ran}` }, finishedAt);
    } else {
      this.finish(rec, { ...observed, phase: 'Failed', reason: 'Error', message: ran }, finishedAt);
    }
    // The end is reported (the control plane can start a replacement meanwhile); now the cleanup,
    // in the same task: the rest of the unit's group, then what is left in its cgroup and the
    // cgroup itself (0.5-1 ms of file operations that used to delay the report).
    if (rec.pgid !== null) {
      // The unit's main process is gone: so is the rest of its group.
      signalGroup(rec.pgid, 'SIGKILL');
      this.guard.remove(rec.pgid);
    }
    if (rec.cgroup) this.removeCgroup(rec.report.name);
  }

  private finish(rec: UnitRecord, outcome: Partial<UnitReport> & { phase: 'Succeeded' | 'Failed' }, finishedAt = this.now()): void {
    if (isFinal(rec.report.phase)) return;
    rec.prober?.stop();
    Object.assign(rec.report, outcome);
    rec.report.ready = false;
    rec.report.finishedAt = finishedAt;
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
    // The log stays readable (mo logs of a crashed or forgotten unit): the
    // node's log retention (unit-log.ts) decides when it goes.
    rec.log?.close();
  }

  private emit(rec: UnitRecord, change: UnitChange = 'phase'): void {
    this.onChange({ ...rec.report, resources: { ...rec.report.resources } }, change);
  }

  private unitEnv(req: StartRequest): Record<string, string> {
    const env: Record<string, string> = {
      PATH: this.baseEnv.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: this.baseEnv.HOME ?? '/',
      LANG: this.baseEnv.LANG ?? 'C.UTF-8',
    };
    for (const { name, value } of req.spec.env) env[name] = value;
    // The downward API: who and where the unit is, and which revision it runs.
    env.MO_UNIT_NAME = req.name;
    env.MO_NODE_NAME = this.nodeName;
    env.MO_DEPLOYMENT = req.deployment;
    env.MO_REVISION = String(req.revision);
    // Units share their node's network: each declared port has a host port
    // of its own, the first as PORT (Heroku's and Cloud Run's name), each
    // named one as PORT_<NAME>, and the node's address as HOST_IP.
    if (req.ports && req.ports.length > 0) {
      env.PORT = String(req.ports[0].hostPort);
      env.HOST_IP = req.ports[0].hostIP;
      for (const p of req.ports) if (p.name) env[`PORT_${p.name.toUpperCase().replace(/-/g, '_')}`] = String(p.hostPort);
    }
    return env;
  }
}

function writeQuietly(file: string, text: string): void {
  try {
    fs.writeFileSync(file, text);
  } catch {
    // gone already, or the init's own join says why
  }
}

function isFinal(phase: UnitReport['phase']): boolean {
  return phase === 'Succeeded' || phase === 'Failed';
}

function clampGrace(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0) return 0;
  return Math.min(Math.floor(ms), MAX_GRACE_PERIOD_MS);
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    const msg = err.message.split('\n')[0];
    return code && !msg.startsWith(code) ? `${code}: ${msg}` : msg;
  }
  return String(err);
}

/** How long something ran, as in 'after 0.02s', 'after 1.2s', 'after 12.0s'. */
export function formatSeconds(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  return `${s < 1 ? s.toFixed(2) : s.toFixed(1)}s`;
}

/** Has the unit's outermost process ended, though its exit may not be heard yet? */
function ended(child: ChildProcess | ServedProcess): boolean {
  const st = readStat(child.pid!);
  // The spawn server reaps its units' P itself: gone from /proc is ended.
  return st?.state === 'Z' || (child instanceof ServedProcess && st === null);
}
