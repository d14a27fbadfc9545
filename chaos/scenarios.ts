// chaos/scenarios.ts -- the fault schedules. Each scenario draws every
// choice (what, whom, when, for how long) from one seeded PRNG, logs every
// fault and heal with its time since the run began
// (`+12.345s fault: SIGKILL node-b agent pid 1234`), tells the checker, and
// is bounded: it injects nothing after its deadline, and healAll() undoes
// whatever is still undone (SIGCONT the stopped, restart the killed, heal
// the partitions) before the convergence phase.
//
//   kill-agents   SIGKILL random agents (at most 2 down), restart 2-4 s later
//   kill-leader   SIGKILL (restart 1-3 s later) or SIGSTOP/SIGCONT (1.5-4 s) the leader
//   crash-units   kill -9 random unit pids, `iterations` times (the seed's exercise)
//   partition     isolate the leader / split agents from the majority, heal 2-4 s later
//   soak          all of the above at random while the workload is heavy

import type { SeededRandom } from '../shared/random.ts';
import type { ApiClient } from './api-client.ts';
import type { FaultObservation, InvariantChecker } from './checker.ts';
import type { Partitioner, PartitionHandle } from './partition.ts';
import type { Poller } from './poller.ts';
import type { ChaosTarget, ProcKind } from './target.ts';
import type { WorkloadLevel } from './workload.ts';
import { identityAlive } from './proc.ts';

export const SCENARIOS = ['kill-agents', 'kill-leader', 'crash-units', 'partition', 'soak'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export const WORKLOAD_OF: Record<ScenarioName, WorkloadLevel> = {
  'kill-agents': 'light',
  'kill-leader': 'light',
  'crash-units': 'none',
  partition: 'light',
  soak: 'heavy',
};

/** Most agents down (killed or stopped) at once. */
export const MAX_AGENTS_DOWN = 2;
/** How long after a node's agent dies the cluster may take to notice and
 *  replace its units (NotReady after 1 s of silence, then one pass). */
export const AGENT_LOSS_ALLOWANCE_MS = 2500;
/** Settle time after a heal: re-registration, election, one pass. */
export const SETTLE_MS = 3000;
/** Most heals waiting at once. */
export const MAX_PENDING_HEALS = 16;

export interface ScenarioContext {
  target: ChaosTarget;
  rng: SeededRandom;
  core: InvariantChecker;
  api: ApiClient;
  poller: Poller;
  partitioner: Partitioner;
  now: () => number;
  /** ms since the run began; no fault is injected at or after it. */
  deadline: number;
  iterations: number;
  replicas: number;
  print: (line: string) => void;
}

interface PendingHeal {
  due: number;
  what: string; // 'agent:node-b', 'replica:cp-1'
  run: () => Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));
const at = (t: number) => `+${(t / 1000).toFixed(3)}s`;

export class FaultInjector {
  private nextId = 1;
  private readonly pending: PendingHeal[] = [];
  private readonly notes = new Set<string>();
  /** Processes killed for good (no restart possible): they count as down to the end. */
  private readonly gone = new Set<string>();

  constructor(readonly ctx: ScenarioContext) {}

  get faultCount(): number {
    return this.nextId - 1;
  }

  /** Log a line once (e.g. "restarts impossible: skipped"). */
  noteOnce(line: string): void {
    if (this.notes.has(line)) return;
    this.notes.add(line);
    this.ctx.print(`${at(this.ctx.now())} note: ${line}`);
  }

  fault(kind: string, target: string, detail: string, o: { disruptive: boolean; settleMs?: number; calmAfterMs?: number }): number {
    const id = this.nextId++;
    const t = this.ctx.now();
    const f: FaultObservation = {
      type: 'fault',
      t,
      id,
      kind,
      target,
      detail,
      disruptive: o.disruptive,
      settleMs: o.settleMs ?? 0,
      ...(o.calmAfterMs !== undefined ? { calmAfterMs: o.calmAfterMs } : {}),
    };
    this.ctx.core.observe(f);
    this.ctx.print(`${at(t)} fault: ${detail}`);
    return id;
  }

  heal(id: number, kind: string, detail: string): void {
    const t = this.ctx.now();
    this.ctx.core.observe({ type: 'heal', t, id, kind, detail });
    this.ctx.print(`${at(t)} heal: ${detail}`);
  }

  private schedule(due: number, what: string, run: () => Promise<void>): void {
    if (this.pending.length >= MAX_PENDING_HEALS) {
      void run(); // never let heals pile up unbounded: do it now
      return;
    }
    this.pending.push({ due, what, run });
  }

  replicaDown(): boolean {
    return this.pending.some((p) => p.what.startsWith('replica:')) || [...this.gone].some((g) => g.startsWith('replica:'));
  }

  isDown(what: string): boolean {
    return this.gone.has(what) || this.pending.some((p) => p.what === what);
  }

  /** Run the heals that are due. */
  async tick(): Promise<void> {
    const now = this.ctx.now();
    const due = this.pending.filter((p) => p.due <= now);
    for (const p of due) {
      this.pending.splice(this.pending.indexOf(p), 1);
      await p.run();
    }
  }

  async healAll(): Promise<void> {
    while (this.pending.length) {
      const p = this.pending.shift()!;
      await p.run();
    }
  }

  /** Sleep until `ms` passed or the deadline, running due heals meanwhile. */
  async wait(ms: number): Promise<void> {
    const end = Math.min(this.ctx.now() + ms, this.ctx.deadline);
    while (this.ctx.now() < end) {
      await this.tick();
      await sleep(Math.min(50, end - this.ctx.now()));
    }
    await this.tick();
  }

  /** Wait for every pending heal (used by scenarios with one fault at a time). */
  async waitHealed(): Promise<void> {
    while (this.pending.length) {
      await this.tick();
      await sleep(50);
    }
  }

  // ------------------------------------------------ the leader

  /** The current leader per GET /v1/cluster, with its pid. */
  async leader(): Promise<{ id: string; pid: number | null } | null> {
    const c = await this.ctx.api.read('/v1/cluster', 1500);
    const id = c?.json?.leader;
    if (typeof id !== 'string' || !id) return null;
    const r = (c!.json?.replicas ?? []).find((x) => x.id === id);
    return { id, pid: typeof r?.pid === 'number' ? r.pid : null };
  }

  // ------------------------------------------------ faults

  async killAgent(): Promise<boolean> {
    const { target, rng } = this.ctx;
    if (!target.canSignal) return this.cannot('process faults need local pids or --compose');
    const down = target.agentNames().filter((n) => this.isDown(`agent:${n}`)).length;
    if (down >= MAX_AGENTS_DOWN) return false;
    const candidates = target.agentNames().filter((n) => !this.isDown(`agent:${n}`));
    if (!candidates.length) return false;
    const name = rng.pick(candidates);
    const pid = await target.signal('agent', name, 'SIGKILL');
    if (pid === null) return false;
    const id = this.fault('SIGKILL agent', name, `SIGKILL ${name} agent${pid ? ` pid ${pid}` : ''}`, { disruptive: true, settleMs: SETTLE_MS, calmAfterMs: AGENT_LOSS_ALLOWANCE_MS });
    this.scheduleRestart(id, 'agent', name, 2000 + rng.int(2000));
    return true;
  }

  private scheduleRestart(id: number, kind: ProcKind, name: string, afterMs: number): void {
    const { target } = this.ctx;
    if (!target.canRestart) {
      this.noteOnce(`restarts are impossible on an attached cluster without --compose: ${kind}s killed stay down (restart them by hand)`);
      this.gone.add(`${kind}:${name}`);
      return;
    }
    this.schedule(this.ctx.now() + afterMs, `${kind}:${name}`, async () => {
      const pid = await target.restart(kind, name);
      this.heal(id, `restart ${kind}`, pid === null ? `could not restart ${name} ${kind}` : `restarted ${name} ${kind}${pid ? ` pid ${pid}` : ''}`);
    });
  }

  /** SIGKILL (then restart) or SIGSTOP (then SIGCONT) the current leader. */
  async leaderFault(): Promise<boolean> {
    const { target, rng } = this.ctx;
    if (!target.canSignal) return this.cannot('process faults need local pids or --compose');
    const l = await this.leader();
    if (!l) {
      this.noteOnce('no leader known at a fault time: the fault waits');
      return false;
    }
    if (this.replicaDown()) return false; // a minority only: one replica down at a time
    const kill = target.canRestart && rng.chance(0.5);
    const sig = kill ? 'SIGKILL' : 'SIGSTOP';
    const pid = await target.signal('replica', l.id, sig);
    if (pid === null) return false;
    const failover = this.ctx.replicas >= 3;
    if (kill) {
      const id = this.fault('SIGKILL leader', l.id, `SIGKILL leader ${l.id}${pid ? ` pid ${pid}` : ''}`, {
        disruptive: true,
        settleMs: SETTLE_MS,
        ...(failover ? { calmAfterMs: SETTLE_MS } : {}),
      });
      this.scheduleRestart(id, 'replica', l.id, 1000 + rng.int(2000));
    } else {
      const id = this.fault('SIGSTOP leader', l.id, `SIGSTOP leader ${l.id}${pid ? ` pid ${pid}` : ''}`, { disruptive: true, settleMs: SETTLE_MS });
      this.schedule(this.ctx.now() + 1500 + rng.int(2500), `replica:${l.id}`, async () => {
        await target.signal('replica', l.id, 'SIGCONT');
        this.heal(id, 'SIGCONT leader', `SIGCONT ${l.id}${pid ? ` pid ${pid}` : ''}`);
      });
    }
    return true;
  }

  /** kill -9 one or two random Running units (real pids from /proc). */
  async crashUnits(): Promise<boolean> {
    const { target, rng, poller } = this.ctx;
    if (!target.procChecks) return this.cannot('unit crashes need the unit pids on this machine');
    const snap = poller.lastSnapshot;
    if (!snap) return false;
    // Only the very process the poller saw (pid and start time): a recycled pid is never killed.
    const live = snap.units.filter((u) => u.phase === 'Running' && u.bound && u.pidAlive && u.pid && identityAlive(u.pidId));
    if (!live.length) return false;
    const n = Math.min(live.length, rng.chance(0.3) ? 2 : 1);
    let done = false;
    for (let i = 0; i < n; i++) {
      const u = live.splice(rng.int(live.length), 1)[0];
      try {
        process.kill(u.pid!, 'SIGKILL');
      } catch {
        continue;
      }
      this.fault('SIGKILL unit', u.name, `SIGKILL unit ${u.name} pid ${u.pid} on ${u.node}`, { disruptive: false });
      done = true;
    }
    return done;
  }

  /** Isolate the leader, or split 1-2 agents from the majority. */
  async partition(): Promise<boolean> {
    const { rng, partitioner, target } = this.ctx;
    if (!partitioner.available) return this.cannot(`partitions impossible: ${partitioner.describe}`);
    let handle: PartitionHandle | null = null;
    if (rng.chance(0.5)) {
      const l = await this.leader();
      if (!l || this.replicaDown()) return false;
      handle = await partitioner.isolate([{ kind: 'replica', name: l.id }]);
    } else {
      const up = target.agentNames().filter((n) => !this.isDown(`agent:${n}`));
      const room = MAX_AGENTS_DOWN - (target.agentNames().length - up.length);
      if (room <= 0 || !up.length) return false;
      const k = Math.min(room, up.length, 1 + rng.int(2));
      const chosen: string[] = [];
      for (let i = 0; i < k; i++) chosen.push(up.splice(rng.int(up.length), 1)[0]);
      handle = await partitioner.isolate(chosen.map((name) => ({ kind: 'agent' as const, name })));
    }
    if (!handle) return false;
    const h = handle;
    const id = this.fault(`partition ${h.members[0].kind === 'replica' ? 'leader' : 'agents'}`, h.members.map((m) => m.name).join('+'), `partition: ${h.detail}`, {
      disruptive: true,
      settleMs: SETTLE_MS,
    });
    for (const m of h.members.slice(1)) this.schedule(Infinity, `${m.kind}:${m.name}`, async () => undefined);
    this.schedule(this.ctx.now() + 2000 + rng.int(2000), `${h.members[0].kind}:${h.members[0].name}`, async () => {
      for (const m of h.members.slice(1)) {
        const i = this.pending.findIndex((p) => p.what === `${m.kind}:${m.name}` && p.due === Infinity);
        if (i >= 0) this.pending.splice(i, 1);
      }
      await partitioner.heal(h);
      this.heal(id, 'heal partition', `healed partition of ${h.members.map((m) => m.name).join(', ')}`);
    });
    return true;
  }

  private cannot(why: string): false {
    this.noteOnce(why);
    return false;
  }
}

// ---------------------------------------------------------------- schedules

export async function runScenario(name: ScenarioName, inj: FaultInjector): Promise<void> {
  const { rng, now, deadline } = inj.ctx;
  const left = () => deadline - now();
  switch (name) {
    case 'kill-agents':
      while (left() > 0) {
        await inj.wait(1500 + rng.int(2500));
        if (left() > 0) await inj.killAgent();
      }
      return;
    case 'kill-leader':
      while (left() > 0) {
        await inj.wait(2000 + rng.int(3000));
        if (left() > 0 && (await inj.leaderFault())) await inj.waitHealed();
      }
      return;
    case 'crash-units': {
      // The seed's exercise: `iterations` rounds of random losses spread over
      // the duration, each followed by (at least) one reconcile pass.
      const every = Math.max(150, Math.floor(left() / Math.max(1, inj.ctx.iterations)));
      for (let i = 0; i < inj.ctx.iterations && left() > 0; i++) {
        await inj.crashUnits();
        await inj.wait(every);
      }
      return;
    }
    case 'partition':
      while (left() > 0) {
        await inj.wait(2000 + rng.int(2500));
        if (left() > 0 && (await inj.partition())) await inj.waitHealed();
      }
      return;
    case 'soak':
      while (left() > 0) {
        await inj.wait(800 + rng.int(2000));
        if (left() <= 0) break;
        const r = rng.next();
        if (r < 0.35) await inj.crashUnits();
        else if (r < 0.6) await inj.killAgent();
        else if (r < 0.8) await inj.leaderFault();
        else await inj.partition();
      }
      return;
  }
}
