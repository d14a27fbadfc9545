// launcher/supervisor.ts -- starts the cluster's processes, reports their
// deaths (with the command line that starts them again), restarts them when
// asked to, and stops them all on shutdown. Every signal goes to a pid the
// supervisor itself spawned; nothing is found by name.
//
// Process layout, and why:
// * Each child runs in its own session (spawn `detached`), so the terminal's
//   Ctrl-C reaches only the launcher, which then stops the children in order
//   (replicas first so that no command is sent to an agent that is already
//   stopping its units; then the agents, which stop their units on SIGTERM).
// * Each child is wrapped in `setpriv --pdeathsig TERM` when util-linux's
//   setpriv is there: setpriv sets the parent-death signal and execs node, so
//   the pid we hold is the real process, and if the launcher itself is
//   SIGKILLed the kernel sends every child SIGTERM -- nothing lingers.
//   Without setpriv, children also get MO_PARENT_PID and a stdin pipe that
//   closes when the launcher dies, for them to watch if they want.
// * A pid is only ever signalled before its 'exit' event; after 'exit' Node
//   has reaped it, and the pid may belong to someone else.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import type { ChildSpec } from './command-lines.ts';
import { shellQuote } from './command-lines.ts';
import type { LogStream } from './stream.ts';

/** How long a dead child's last output may take to arrive before its death is printed. */
export const STREAM_DRAIN_MS = 200;
/** Shutdown: the whole SIGTERM phase, then SIGKILL for whoever is left. */
export const STOP_GRACE_MS = 5000;
/** Shutdown: agents get SIGTERM when every replica is gone, or after this long. */
export const REPLICAS_FIRST_MAX_MS = 2000;
/** After SIGKILL: how long to wait for the kernel before reporting a process we cannot reap. */
export const KILL_REAP_MAX_MS = 5000;

export const PDEATHSIG_WRAPPER: readonly string[] = ['setpriv', '--pdeathsig', 'TERM', '--'];

/** True when `setpriv --pdeathsig` works here (util-linux, Linux only). */
export function pdeathsigWrapperWorks(): boolean {
  if (process.platform !== 'linux') return false;
  const probe = spawnSync(PDEATHSIG_WRAPPER[0], [...PDEATHSIG_WRAPPER.slice(1), 'true'], { stdio: 'ignore', timeout: 5000 });
  return probe.status === 0;
}

export interface SupervisorOptions {
  /** Children run here: the repo root, so printed command lines run from there. */
  cwd: string;
  env: NodeJS.ProcessEnv;
  log: LogStream;
  /** Restart a dead child after this long; undefined = report only. */
  restartAfterMs?: number;
  /** Prepended to every argv (PDEATHSIG_WRAPPER or nothing); not part of the printed command. */
  wrapper: readonly string[];
}

/** One process of the cluster across its restarts. */
interface Managed {
  spec: ChildSpec;
  pid?: number;
  child?: ChildProcess;
  alive: boolean;
  /** Resolves when the current instance has exited and been reaped. */
  exited: Promise<void>;
  restarts: number;
  restartTimer?: NodeJS.Timeout;
}

export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal !== null ? `signal ${signal}` : `code ${code ?? 'unknown'}`;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class Supervisor {
  private readonly managed = new Map<string, Managed>();
  private stopping = false;
  /** Set by killAll(): the SIGTERM phase of stop() is over. */
  private forced = false;

  constructor(private readonly options: SupervisorOptions) {}

  /** The command a person runs from the repo root to start `spec` by hand. */
  static handCommand(spec: ChildSpec, env: NodeJS.ProcessEnv = {}): string {
    // The environment the launcher gave it (REPLICA_ENV), as the values it started with, before the command.
    const vars = Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${shellQuote([env[k] ?? v])} `);
    return vars.join('') + shellQuote(spec.argv);
  }

  /** Starts a process of the cluster; returns its pid, or undefined if it could not be spawned. */
  start(spec: ChildSpec): number | undefined {
    const existing = this.managed.get(spec.name);
    if (existing?.alive) throw new Error(`${spec.name} is already running (pid ${existing.pid})`);
    const entry: Managed = existing ?? { spec, alive: false, exited: Promise.resolve(), restarts: 0 };
    this.managed.set(spec.name, entry);
    this.spawnInstance(entry);
    return entry.pid;
  }

  /** Live processes, name -> pid. */
  pids(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [name, m] of this.managed) if (m.alive && m.pid !== undefined) out.set(name, m.pid);
    return out;
  }

  private spawnInstance(entry: Managed): void {
    const { spec } = entry;
    const { wrapper, cwd, env, log } = this.options;
    const argv = [...wrapper, ...spec.argv];
    let child: ChildProcess;
    try {
      child = spawn(argv[0], argv.slice(1), {
        cwd,
        env: { ...spec.env, ...env, MO_PARENT_PID: String(process.pid) },
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
      });
    } catch (err) {
      // spawn throws synchronously only for bad arguments; report like a death.
      this.onGone(entry, undefined, `could not start: ${(err as Error).message}`);
      return;
    }
    const restartNote = entry.restarts > 0 ? ` (restart #${entry.restarts})` : '';
    entry.child = child;
    entry.pid = child.pid;
    let resolveExited!: () => void;
    entry.exited = new Promise((resolve) => (resolveExited = resolve));
    // The stdin pipe is never written: it is the "launcher is gone" signal (EOF).
    child.stdin?.on('error', () => {});

    const streamsDone = Promise.all([child.stdout ? log.pipe(spec.name, child.stdout) : Promise.resolve(), child.stderr ? log.pipe(spec.name, child.stderr) : Promise.resolve()]);

    let settled = false;
    const settle = async (pid: number | undefined, how: string): Promise<void> => {
      if (settled) return;
      settled = true;
      entry.alive = false;
      // Let the child's last lines reach the stream before its death line; a
      // grandchild holding the pipe open must not delay the report, hence the cap.
      await Promise.race([streamsDone, delay(STREAM_DRAIN_MS)]);
      this.onGone(entry, pid, how);
      resolveExited();
    };

    if (child.pid === undefined) {
      child.once('error', (err) => void settle(undefined, `could not start: ${err.message}`));
      return;
    }
    entry.alive = true;
    log.launcher(`started ${spec.name} pid=${child.pid}${restartNote}`);
    const pid = child.pid;
    child.once('exit', (code, signal) => void settle(pid, `exited: ${describeExit(code, signal)}`));
    child.on('error', (err) => log.launcher(`${spec.name} (pid ${pid}): ${err.message}`));
  }

  private onGone(entry: Managed, pid: number | undefined, how: string): void {
    const { log, restartAfterMs } = this.options;
    const who = pid !== undefined ? `${entry.spec.name} (pid ${pid})` : entry.spec.name;
    if (this.stopping) {
      log.launcher(`${who} stopped: ${how.replace(/^exited: /, '')}`);
      return;
    }
    log.launcher(`${who} ${how} — restart it by hand with: ${Supervisor.handCommand(entry.spec, this.options.env)}`);
    if (restartAfterMs === undefined) return;
    log.launcher(`restarting ${entry.spec.name} in ${restartAfterMs / 1000} s (--restart-after)`);
    entry.restartTimer = setTimeout(() => {
      entry.restartTimer = undefined;
      if (this.stopping || entry.alive) return;
      entry.restarts++;
      this.spawnInstance(entry);
    }, restartAfterMs);
  }

  private signal(entry: Managed, sig: NodeJS.Signals): void {
    if (!entry.alive || entry.pid === undefined) return;
    try {
      process.kill(entry.pid, sig);
    } catch (err) {
      // ESRCH: it died between our check and the kill; its 'exit' is on its way.
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }

  private live(): Managed[] {
    return [...this.managed.values()].filter((m) => m.alive);
  }

  /**
   * Stops everything: SIGTERM to the replicas, then (once they are gone, or
   * after REPLICAS_FIRST_MAX_MS) to the agents; whoever still runs after
   * graceMs gets SIGKILL. Resolves once every child has exited and been reaped.
   */
  async stop(graceMs: number = STOP_GRACE_MS): Promise<void> {
    this.stopping = true;
    const { log } = this.options;
    for (const m of this.managed.values()) {
      if (m.restartTimer !== undefined) clearTimeout(m.restartTimer);
      m.restartTimer = undefined;
    }
    const deadline = Date.now() + graceMs;
    const waitAll = (ms: number, group: Managed[]): Promise<unknown> => Promise.race([Promise.all(group.map((m) => m.exited)), delay(Math.max(0, ms))]);

    const replicas = this.live().filter((m) => m.spec.kind === 'control-plane');
    if (replicas.length > 0) {
      log.launcher(`stopping: SIGTERM to ${replicas.map((m) => `${m.spec.name} (pid ${m.pid})`).join(', ')}`);
      for (const m of replicas) this.signal(m, 'SIGTERM');
      await waitAll(Math.min(REPLICAS_FIRST_MAX_MS, deadline - Date.now()), replicas);
    }
    const rest = this.live().filter((m) => !replicas.includes(m));
    if (rest.length > 0 && !this.forced) {
      log.launcher(`stopping: SIGTERM to ${rest.map((m) => `${m.spec.name} (pid ${m.pid})`).join(', ')}`);
      for (const m of rest) this.signal(m, 'SIGTERM');
    }
    await waitAll(deadline - Date.now(), this.live());

    const stragglers = this.live();
    if (stragglers.length > 0 && !this.forced) {
      log.launcher(`still running after ${graceMs / 1000} s: ${stragglers.map((m) => `${m.spec.name} (pid ${m.pid})`).join(', ')} — SIGKILL`);
      this.killAll();
    }
    await this.waitReaped();
  }

  /** A second Ctrl-C: SIGKILL every live child now (stop() then finishes at once). */
  killAll(): void {
    this.forced = true;
    for (const m of this.live()) this.signal(m, 'SIGKILL');
  }

  private async waitReaped(): Promise<void> {
    const left = this.live();
    await Promise.race([Promise.all(left.map((m) => m.exited)), delay(KILL_REAP_MAX_MS)]);
    for (const m of this.live()) {
      this.options.log.launcher(`${m.spec.name} (pid ${m.pid}) did not go away after SIGKILL (stuck in the kernel?)`);
    }
  }
}
