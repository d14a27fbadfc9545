// control-plane/controller/controller.ts -- the thin driver of the reconcile
// loop, active only while this replica is leader. It gathers desired state
// (the store) and observed state (the registry), asks the pure reconciler
// for a plan, asks the pure scheduler for nodes, COMMITS each binding
// through the store and only then sends the spawn, so a new leader knows
// everything the old one decided and never double-spawns. Every command
// carries the leader's term (fencing).
//
// Triggers: any change (apply, scale, delete, unit exit, node loss, node
// return) runs a pass at once; a periodic resync runs one anyway. Passes
// never overlap; a change during a pass runs another right after it.
// Timers and ids come from the injected `clock` and `random` (defaults: the
// system clock and nanoid), so the simulation of the production host
// (control-plane/sim/) runs this very loop on a manual clock.

import { nanoid } from 'nanoid';
import type { Clock, ClockTimer } from '../../shared/clock.ts';
import { randomId, type Random } from '../../shared/random.ts';
import { systemClock } from '../../shared/system-clock.ts';
import type { Mutation } from '../mutations.ts';
import type { Command } from '../../shared/protocol/messages.ts';
import type { AgentServer } from '../agent-server.ts';
import { deploymentOfUnitName, type EventLog } from '../events.ts';
import { DEFAULT_PROGRESS_DEADLINE_SECONDS } from '../../shared/manifest.ts';
import {
  formatDiff,
  isQuiet,
  isQuietDiff,
  NO_DEPLOYMENT,
  reconcile,
  resolveStrategy,
  type Action,
  type Binding,
  type DeploymentCounts,
  type DesiredDeployment,
  type Plan,
} from '../reconcile/index.ts';
import { rolloutStatus, statusChanged } from '../reconcile/rollout-status.ts';
import type { NodeRegistry, RegistryChange } from '../registry/node-registry.ts';
import { ClusterSnapshot, Scheduler, type NodeState, type SchedulingDecision, type UnitRequest } from '../scheduler/index.ts';
import {
  MAX_RECORDED_NODES,
  type BackoffRecord,
  type ChangeKind,
  type DeploymentStatusRecord,
  type SchedulingRecord,
  type StoreCommand,
  type UnitRecord,
} from '../store/desired-state.ts';
import type { ReplicatedStore } from '../store/store.ts';

export interface ControllerOptions {
  maxActionsPerPass: number; // ReplicaSet controller's burstReplicas
  /** Most units a pass reconciles, each deployment counting one more (whole deployments; one bigger deployment still goes in one pass). Default MAX_BINDINGS_PER_PASS. */
  maxBindingsPerPass?: number;
  resyncIntervalMs: number;
  spawnTimeoutMs: number;
  terminateGracePeriodMs: number;
}

/** Status changes are committed together at most this often (one log entry for many deployments). */
export const STATUS_FLUSH_MS = 50;

/**
 * Longest a pass runs before it lets the event loop turn (Raft ticks,
 * heartbeats, agents' frames): a pass of 500 creates, or the spawns sent as
 * 500 bindings commit, would otherwise hold the loop for the whole batch.
 */
export const PASS_SLICE_MS = 8;

/**
 * Most units one pass reconciles. A pass over every binding is O(units):
 * with 30,000 units on a busy 2-core machine a single call took 0.8-1.9 s
 * (CPU profiles of the fleet bench), longer than an election timeout. A
 * change names its deployment; a resync or a node change asks for a sweep
 * of every deployment; either way the deployments to look at are queued
 * and taken a few at a time, each pass complete for the deployments it
 * takes (reconcile()'s `scope`). At 4,000, planning one pass still held the
 * leader 92-123 ms while the fleet bench placed 50,000 units (ad-hoc timing
 * of its replicas): half the election timeout; at 2,000 half that.
 */
export const MAX_BINDINGS_PER_PASS = 2000;

/** Under a stream of changes, passes start at most this often. */
export const MIN_PASS_SPACING_MS = 10;

/**
 * Under a stream of changes, a pass also waits this many times the time
 * its predecessor spent planning (reconcile() is O(units in scope)), so
 * that planning takes at most about a quarter of the loop however big a
 * deployment is. A 1,000-unit deployment coming up sent one report after
 * another, each asking for a pass of ~10 ms: 240 passes and 2.4-3 s of the
 * replica's CPU in a 5 s apply, all but a few of them deciding nothing.
 * After a quiet moment a pass still starts at once.
 */
export const PASS_COST_SPACING = 4;

/**
 * Under a stream of changes that can only move statuses, passes start at
 * most this often. A deployment whose last pass found nothing to do (see
 * `calm`) gets a report of one of its units that did not end (Pending,
 * Running, ready): that pass can decide no start and no stop, only the
 * deployment's counts (its READY column). A 1,000-unit apply sent ~1,000
 * such reports in 8-13 s, and their passes, one every 4x their cost, took
 * 1.4-1.8 s of the replica's CPU (CPU profiles of the apply), on a machine
 * whose two cores the units' own starts kept busy. Statuses lag by at most
 * this much more; a unit that ended, a node lost, a rollout under way or a
 * change of the record still gets its pass at once.
 */
export const LAZY_PASS_SPACING_MS = 100;

/**
 * Resync ticks in a row an idle loop skips at least (a pass then would
 * change nothing: see resyncTick); the next one runs a pass anyway, as a
 * safety net. With the default 1 s resync: a small idle cluster is swept
 * every 10 s.
 */
export const IDLE_RESYNCS_SKIPPED = 9;

/**
 * The share of the leader's time the safety-net sweeps of an idle loop may
 * take: after an idle sweep that planned for T ms, the loop skips ticks
 * until T / IDLE_SWEEP_SHARE ms have passed (never fewer than
 * IDLE_RESYNCS_SKIPPED, never longer than IDLE_SWEEP_MAX_GAP_MS). A sweep
 * of 50,000 units planned for 0.45-0.9 s, and every 10 s that was 4.5% of
 * the fleet bench's idle leader (its profile of the steady state).
 */
export const IDLE_SWEEP_SHARE = 0.01;
/** The longest an idle loop goes without a safety-net sweep, however costly one is. */
export const IDLE_SWEEP_MAX_GAP_MS = 60_000;

/** Resync ticks an idle loop skips after an idle sweep that planned for `sweepMs` (IDLE_SWEEP_SHARE). */
export function idleResyncsSkipped(sweepMs: number, resyncIntervalMs: number): number {
  const gapMs = Math.min(IDLE_SWEEP_MAX_GAP_MS, sweepMs / IDLE_SWEEP_SHARE);
  return Math.max(IDLE_RESYNCS_SKIPPED, Math.ceil(gapMs / Math.max(1, resyncIntervalMs)) - 1);
}

export const DEFAULT_CONTROLLER_OPTIONS: ControllerOptions = {
  maxActionsPerPass: 500,
  resyncIntervalMs: 1000,
  spawnTimeoutMs: 3000,
  terminateGracePeriodMs: 2000,
};

/** What the loop tells /metrics (api/metrics.ts implements it); the pure reconciler and scheduler know nothing of it. */
export interface ControllerObserver {
  /**
   * One pass on the leader: seconds from planning until its writes were
   * answered, the actions it took, and what is left: operations the rate
   * limit deferred, spawns and terminates sent but not yet answered.
   */
  pass(seconds: number, actions: ReadonlyArray<{ type: string }>, backlog: { deferred: number; spawns: number; terminates: number }): void;
  /** One scheduling decision took `seconds`; placed: a feasible node was chosen. */
  scheduled(seconds: number, placed: boolean): void;
  /** A unit's binding to a node was committed. */
  placed(): void;
}

export interface ControllerDeps {
  store: ReplicatedStore;
  registry: NodeRegistry;
  agents: AgentServer;
  events: EventLog;
  scheduler: Scheduler;
  now: () => number;
  log: (line: string) => void;
  options: ControllerOptions;
  observer?: ControllerObserver;
  /** Timers and the time for pass latencies. Default: the system clock (`now` above stays the clock of records). */
  clock?: Clock;
  /** Command ids and unit uids. Default: nanoid. */
  random?: Random;
  /** A deliberate bug, for the simulation's self-test only (mutations.ts). */
  mutation?: Mutation;
}

export class Controller {
  private readonly spawns = new Map<string, number>();
  private readonly terminates = new Map<string, number>();
  private readonly terminateGrace = new Map<string, number>();
  /** Per deployment: what its rollout counts were and since when (progress deadline). */
  private readonly progress = new Map<string, { key: string; at: number }>();
  /** Status writes in flight, so a pass does not propose the same one twice. */
  private readonly statusWrites = new Set<string>();
  private readonly pendingStatus = new Map<string, DeploymentStatusRecord>();
  /** Deployments whose status was settled when last looked at, with what they looked like. */
  private readonly settled = new Map<string, DeploymentCounts & { status: DeploymentStatusRecord; generation: number; revision: number; paused: boolean }>();
  /** The reconciler's view of each deployment, rebuilt only when its record changes. */
  private readonly desiredCache = new Map<string, { rv: number; d: DesiredDeployment }>();
  private statusTimer: ClockTimer | null = null;
  private wakeTimer: ClockTimer | null = null;
  private wakeAt = Number.POSITIVE_INFINITY;
  private running = false;
  private scheduled = false;
  /** Triggers so far (resyncTick compares). */
  private changes = 0;
  /** Deployments the next passes reconcile (a change named them, or a sweep queued them all), oldest first. */
  private readonly pending = new Set<string>();
  /** A sweep was asked for (resync, node change, leadership, a wake-up): every deployment goes into `pending`. */
  private sweepAsked = true;
  /** The sweep being worked through: the triggers and agent starts it began with, whether each of its passes left the loop idle, and their planning time. */
  private sweep: { changes: number; agents: number; idle: boolean; planMs: number } | null = null;
  /** Set by a sweep that left the loop idle: the triggers and agent stamp it saw, and the resync ticks to skip (idleResyncsSkipped). */
  private idleAfter: { changes: number; agents: number; skips: number } | null = null;
  /** Resync ticks skipped in a row. */
  private idleSkips = 0;
  private passCount = 0;
  private lastPassAt = Number.NEGATIVE_INFINITY;
  /** How long the last pass spent in plan() (the clock's ms), for the spacing of the next. */
  private lastPlanMs = 0;
  private planMs = 0;
  private resync: ClockTimer | null = null;
  /** Last FailedScheduling message per unit: one event per new reason. */
  private readonly lastFailure = new Map<string, string>();
  private stopped = false;
  private readonly lastDiff = new Map<string, string>();
  /**
   * The deployments a pass hands to the reconciler: every one except those
   * a pass found quiet (reconcile/quiet.ts), each back as soon as its record
   * or one of its units changes (the store's change listener) or an agent
   * reports a unit of it. Per-pass work thus follows what moves, not how
   * many deployments are stored.
   */
  private readonly active = new Set<string>();
  /** Deployments the last pass saw bound or reported (quiet needs neither). */
  private bound = new Set<string>();
  private observedDeployments = new Set<string>();
  /** A deployment was deleted since the last pass: prune the per-deployment maps then. */
  private deletedSinceLastPass = false;
  /**
   * Deployments the last pass over them found calm: nothing to start, stop,
   * resend, schedule or defer, no unit lost or ended, no rollout step and no
   * back-off; with the generation and back-off record it saw. Until one of
   * those changes, or a unit of theirs ends, or a unit's binding changes,
   * a trigger for one of them is lazy (LAZY_PASS_SPACING_MS).
   */
  private readonly calm = new Map<string, { generation: number; backoff: BackoffRecord | null }>();
  /** A trigger that was not lazy came since the last pass took its scope. */
  private eager = true;

  private readonly clock: Clock;

  constructor(private readonly deps: ControllerDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  private newId(size = 21): string {
    return this.deps.random ? randomId(this.deps.random, size) : nanoid(size);
  }

  start(): void {
    const state = this.deps.store.state;
    state.onChange((kind, name) => {
      if (kind === 'all') {
        for (const gone of this.active) if (!state.deployments.has(gone)) this.active.delete(gone);
        this.activateAll();
      } else if (kind === 'deployment') {
        if (state.deployments.has(name)) this.active.add(name);
        else {
          this.active.delete(name);
          this.deletedSinceLastPass = true;
        }
      } else if (kind === 'unit') {
        const u = state.units.get(name);
        if (u && state.deployments.has(u.deployment)) this.active.add(u.deployment);
      }
    });
    this.activateAll();
    this.resync = this.clock.interval(() => this.resyncTick(), this.deps.options.resyncIntervalMs);
    this.resync.unref();
    this.trigger();
  }

  stop(): void {
    this.stopped = true;
    this.clock.cancel(this.resync);
    this.clock.cancel(this.wakeTimer);
    this.clock.cancel(this.statusTimer);
  }

  /** A new leader starts with no memory of in-flight commands, and times progress from now. */
  resetInFlight(): void {
    this.calm.clear();
    this.spawns.clear();
    this.terminates.clear();
    this.terminateGrace.clear();
    this.progress.clear();
    // `settled` stays: each entry is checked against the record's current
    // status object, generation, revision and counts before it is trusted,
    // so one made in an earlier term is as good as a fresh one, and a
    // returning leader does not pay a status computation per deployment.
    this.activateAll();
  }

  /** Every stored deployment goes to the next pass (start, and a new term of leadership). */
  private activateAll(): void {
    for (const name of this.deps.store.state.deployments.keys()) this.active.add(name);
    this.deletedSinceLastPass = true;
  }

  /** After a pass's statuses were decided: leave its quiet deployments out of the next passes. */
  private settleQuiet(plan: Plan): void {
    const { state } = this.deps.store;
    for (const name of plan.counts.keys()) {
      const d = state.deployments.get(name);
      if (!d) continue;
      const last = this.settled.get(name);
      const quiet = isQuiet({
        replicas: d.replicas,
        hasBackoff: d.backoff !== null,
        bound: this.bound.has(name),
        observed: this.observedDeployments.has(name),
        statusPending: this.statusWrites.has(name) || this.pendingStatus.has(name),
        statusSettled:
          last !== undefined && last.status === d.status && last.generation === d.generation && last.revision === d.revision && last.paused === (d.manifest.spec.paused ?? false),
      });
      if (quiet) this.active.delete(name);
    }
  }

  /** Forget what was kept per deployment for deployments that are gone (only after a delete: O(deployments)). */
  private pruneDeleted(): void {
    if (!this.deletedSinceLastPass) return;
    this.deletedSinceLastPass = false;
    const { deployments } = this.deps.store.state;
    for (const name of this.desiredCache.keys()) if (!deployments.has(name)) this.desiredCache.delete(name);
    for (const name of this.progress.keys()) if (!deployments.has(name)) this.progress.delete(name);
    for (const name of this.settled.keys()) if (!deployments.has(name)) this.settled.delete(name);
  }

  /**
   * Stop a unit the user deleted, with the grace period they asked for
   * (`mo delete unit X --grace-period S`), once its unbinding is committed.
   * The reconcile loop would stop it too, with the template's grace.
   */
  terminateUnit(unit: string, node: string, gracePeriodMs: number | undefined, reason: string): void {
    this.sendTerminate(unit, node, reason, gracePeriodMs);
  }

  /** Run a pass at `at` (leader clock): a back-off ends, a unit becomes available. */
  private wakeUpAt(at: number | null): void {
    if (at === null || at >= this.wakeAt) return;
    this.clock.cancel(this.wakeTimer);
    this.wakeAt = at;
    this.wakeTimer = this.clock.timeout(
      () => {
        this.wakeTimer = null;
        this.wakeAt = Number.POSITIVE_INFINITY;
        this.trigger();
      },
      Math.max(0, at - this.deps.now()) + 1,
    );
    this.wakeTimer.unref();
  }

  /**
   * The periodic resync. It finds what no trigger tells of: the passing of
   * time. When the last pass left nothing that time can move (no action, no
   * deferred work, no spawn or terminate awaiting its answer, every
   * deployment's status settled and written) and nothing triggered since,
   * nor did an agent process restart (which changes no report, only when
   * reports count from), the tick is skipped: a pass would find the same.
   * Times that do matter (a back-off's end, minReadySeconds, a progress
   * deadline) have their own wake-up (wakeUpAt). A pass over 20,000 units
   * costs 0.2-0.4 s of the leader, which every second was a third of a core
   * with nothing to do.
   *
   * How many ticks are skipped grows with what the last idle sweep cost
   * (IDLE_SWEEP_SHARE): nine at least, so a small cluster is swept every
   * 10 s, and 50,000 units every 45-60 s.
   *
   * A tick while a sweep is under way (or asked for) is skipped too: that
   * sweep visits every deployment anyway. A sweep is several passes, each
   * spaced by its cost (PASS_COST_SPACING); at 50,000 units one took ~3 s,
   * so every tick during it had asked for the next, the loop was never found
   * idle, and the leader swept without pause (a fifth of a core, the fleet
   * bench's profile of its steady state).
   */
  private resyncTick(): void {
    if (this.sweep !== null || this.sweepAsked) return;
    const idle = this.idleAfter;
    if (idle !== null && idle.changes === this.changes && idle.agents === this.deps.registry.agentStarts && this.idleSkips < idle.skips) {
      this.idleSkips++;
      return;
    }
    this.idleSkips = 0;
    this.trigger();
  }

  /** A change of the store: its deployment's units to the next pass (a sweep for nodes and the rest). */
  storeChanged(kind: ChangeKind, name: string): void {
    if (kind === 'all') {
      this.calm.clear();
      return this.trigger();
    }
    if (kind === 'deployment') {
      // A status write of its own (or any write that leaves the spec and the back-off) keeps a calm deployment calm.
      const d = this.deps.store.state.deployments.get(name);
      const was = this.calm.get(name);
      const lazy = d !== undefined && was !== undefined && was.generation === d.generation && was.backoff === d.backoff;
      if (!lazy) this.calm.delete(name);
      return this.trigger(name, false, lazy);
    }
    if (kind === 'unit') {
      const deployment = this.deps.store.state.units.get(name)?.deployment ?? deploymentOfUnitName(name) ?? NO_DEPLOYMENT;
      this.calm.delete(deployment);
      return this.trigger(deployment);
    }
    this.trigger();
  }

  /**
   * A change the registry saw: a unit's deployment to the next pass, a sweep
   * for a node's. A unit that ended and a node that is NotReady are urgent:
   * their replacements are what self-healing promises.
   */
  registryChanged(c: RegistryChange): void {
    if (c.type === 'unit') {
      const ended = c.unit.phase === 'Failed' || c.unit.phase === 'Succeeded';
      const bound = this.deps.store.state.units.get(c.unit.name);
      const deployment = c.unit.deployment || bound?.deployment || NO_DEPLOYMENT;
      // A unit of a calm deployment, running where it is bound, that did not end: only its counts can move.
      const lazy = !ended && bound?.nodeName === c.node && this.calm.has(deployment);
      return this.trigger(deployment, ended && c.previous?.phase !== c.unit.phase, lazy);
    }
    if (c.type === 'unit-gone') return this.trigger(this.deps.store.state.units.get(c.name)?.deployment ?? deploymentOfUnitName(c.name) ?? NO_DEPLOYMENT);
    this.trigger(undefined, c.type === 'node-not-ready');
  }

  /**
   * Something changed: `deployment`'s units (or, without one, every
   * deployment: a sweep) go to the next passes. Every trigger of a tick
   * shares one pass. `urgent`: the pass does not wait out
   * MIN_PASS_SPACING_MS (only the spacing its cost asks for). `lazy`: it can
   * only move statuses, so its pass may wait for LAZY_PASS_SPACING_MS.
   */
  trigger(deployment?: string, urgent = false, lazy = false): void {
    this.changes++;
    if (!lazy) this.eager = true;
    if (deployment === undefined) this.sweepAsked = true;
    else this.pending.add(deployment);
    this.schedulePass(urgent, lazy);
  }

  /** The timer of a pass that waits out its spacing (null: none, or it starts at once). */
  private passTimer: ClockTimer | null = null;
  private passDueAt = 0;
  /** An urgent change arrived while a pass ran: the next one is urgent too. */
  private urgentNext = false;

  private schedulePass(urgent = false, lazy = false): void {
    if (this.stopped) return;
    if (this.running) {
      // runPass schedules the next one: what arrived waits in pending / sweepAsked
      if (urgent) this.urgentNext = true;
      return;
    }
    // At once when the loop has been quiet (a crash is answered in one
    // hop); under a stream of changes, at most one pass per
    // MIN_PASS_SPACING_MS, each reading everything that changed meanwhile
    // (level-based, so nothing is lost by waiting). A unit that ended does
    // not wait for that: a status write's pass 5 ms earlier held a crashed
    // unit's replacement back by the rest of the 10 ms.
    const spacing = PASS_COST_SPACING * this.lastPlanMs;
    const least = urgent ? spacing : Math.max(lazy ? LAZY_PASS_SPACING_MS : MIN_PASS_SPACING_MS, spacing);
    const wait = this.lastPassAt + least - this.deps.now();
    if (this.scheduled) {
      // Already due; a change that may not wait as long brings a waiting pass forward.
      if (this.passTimer === null || this.passDueAt <= this.deps.now() + Math.max(0, wait)) return;
      this.clock.cancel(this.passTimer);
    }
    this.scheduled = true;
    const go = () => {
      this.scheduled = false;
      this.passTimer = null;
      void this.runPass();
    };
    if (wait <= 0) {
      this.passTimer = null;
      // An urgent pass runs right after the task that asked for it (the
      // frames of one socket read share it), not behind what else waits for
      // the next turn of the loop: a watch's re-rendering (0.3 ms for a few
      // units) held a crash's pass back.
      if (urgent) queueMicrotask(go);
      else this.clock.immediate(go);
    } else {
      this.passDueAt = this.deps.now() + wait;
      this.passTimer = this.clock.timeout(go, wait);
    }
  }

  private async runPass(): Promise<void> {
    if (this.running || this.stopped) return;
    this.running = true;
    this.lastPassAt = this.deps.now();
    this.planMs = 0;
    this.idleAfter = null;
    try {
      if (this.deps.store.isLeader()) {
        const t0 = this.clock.now();
        const scope = this.takeScope();
        if (this.pending.size === 0 && !this.sweepAsked) this.eager = false;
        const plan = await this.pass(scope);
        this.noteCalm(scope, plan);
        this.deps.observer?.pass((this.clock.now() - t0) / 1000, plan?.actions ?? [], { deferred: plan?.deferred ?? 0, spawns: this.spawns.size, terminates: this.terminates.size });
        const sweep = this.sweep;
        if (sweep !== null) {
          if (plan === null || !this.leftIdle(plan)) sweep.idle = false;
          sweep.planMs += this.planMs;
          if (this.pending.size === 0) {
            // The sweep is done: idle if every one of its passes left nothing time can move.
            if (sweep.idle) this.idleAfter = { changes: sweep.changes, agents: sweep.agents, skips: idleResyncsSkipped(sweep.planMs, this.deps.options.resyncIntervalMs) };
            this.sweep = null;
          }
        }
      } else {
        // A follower reconciles nothing; leadership asks for a sweep when it begins.
        this.pending.clear();
        this.sweepAsked = false;
        this.sweep = null;
        this.eager = false;
      }
    } catch (err) {
      this.deps.log(`reconcile: pass failed: ${(err as Error).message}`);
    } finally {
      this.running = false;
      this.lastPlanMs = this.planMs;
      const urgent = this.urgentNext;
      this.urgentNext = false;
      if (this.pending.size > 0 || this.sweepAsked) this.schedulePass(urgent, !this.eager);
    }
  }

  /**
   * The deployments this pass reconciles: from `pending`, oldest first,
   * whole deployments up to maxBindingsPerPass units (at least one), each
   * deployment counting as one unit more than it has: a deployment costs a
   * pass its record even with no units (a sweep of 10,000 empty ones had
   * been one pass, ~95 ms of reconcile() alone in the leader's profile). A
   * sweep first queues every deployment the loop follows (active ones,
   * those with units, those agents report) and NO_DEPLOYMENT.
   */
  private takeScope(): Set<string> {
    const { state } = this.deps.store;
    if (this.sweepAsked) {
      this.sweepAsked = false;
      this.sweep = { changes: this.changes, agents: this.deps.registry.agentStarts, idle: true, planMs: 0 };
      for (const name of this.active) this.pending.add(name);
      for (const name of state.deploymentsWithUnits()) this.pending.add(name);
      for (const name of this.observedDeployments) this.pending.add(name);
      this.pending.add(NO_DEPLOYMENT);
    }
    const budget = this.deps.options.maxBindingsPerPass ?? MAX_BINDINGS_PER_PASS;
    const scope = new Set<string>();
    let units = 0;
    for (const name of this.pending) {
      const n = (state.unitsOf(name)?.size ?? 0) + 1;
      if (scope.size > 0 && units + n > budget) break;
      scope.add(name);
      units += n;
    }
    for (const name of scope) this.pending.delete(name);
    return scope;
  }

  /** Which deployments of the pass's scope its plan found calm (`calm`); none when it did not act. */
  private noteCalm(scope: ReadonlySet<string>, plan: Plan | null): void {
    const { deployments } = this.deps.store.state;
    const diffs = new Map(plan?.diffs.map((d) => [d.deployment, d]));
    for (const name of scope) {
      const d = deployments.get(name);
      const diff = diffs.get(name);
      const calm = plan !== null && d !== undefined && plan.counts.has(name) && (diff === undefined || (isQuietDiff(diff) && diff.rollout === null && diff.backoff.length === 0));
      if (calm) this.calm.set(name, { generation: d.generation, backoff: d.backoff });
      else this.calm.delete(name);
    }
  }

  /** Did this pass leave nothing that the passing of time could move (resyncTick)? */
  private leftIdle(plan: Plan): boolean {
    if (plan.actions.length > 0 || plan.deferred > 0) return false;
    if (this.spawns.size > 0 || this.terminates.size > 0 || this.pendingStatus.size > 0 || this.statusWrites.size > 0) return false;
    for (const name of plan.counts.keys()) if (!this.settled.has(name)) return false;
    return true;
  }

  /** Desired + observed -> plan (pure reconcile), as of now; its time counts toward the spacing of the next pass. */
  private plan(scope: ReadonlySet<string>): Plan {
    const t0 = this.clock.now();
    try {
      return this.planNow(scope);
    } finally {
      this.planMs += this.clock.now() - t0;
    }
  }

  private planNow(scope: ReadonlySet<string>): Plan {
    const { store, registry } = this.deps;
    const state = store.state;
    const now = this.deps.now();
    // Forget in-flight marks the observed state has answered.
    for (const [unit] of this.spawns) {
      const seen = registry.findUnit(unit);
      if (seen || !state.units.has(unit)) this.spawns.delete(unit);
    }
    for (const [unit] of this.terminates) {
      const seen = registry.findUnit(unit);
      if (!seen || seen.report.phase === 'Failed' || seen.report.phase === 'Succeeded') {
        this.terminates.delete(unit);
        this.terminateGrace.delete(unit);
      }
    }

    // The bindings of the deployments in scope, each with its deployment
    // when it is stored (a binding whose deployment the reconciler did not
    // get reads as one of a deleted deployment, which is what it then is).
    // Deployments bound or reported are never quiet: they stay active.
    const bindings = new Map<string, Binding>();
    const bound = new Set<string>();
    for (const name of scope) {
      const units = state.unitsOf(name);
      if (!units) continue;
      bound.add(name);
      for (const u of units.values()) {
        // Bound when its node was chosen (the decision's record, in the create or the bind),
        // not when it was made: a unit made Pending before its node's agent restarted and
        // bound after is no unit of the earlier agent's (reconcile's restarted-agent check).
        const boundAt = u.scheduling?.at ?? u.creationTimestamp;
        const b: Binding = { name: u.name, deployment: u.deployment, index: u.index, nodeName: u.nodeName, specHash: u.specHash, boundAt };
        if (u.spec.gracePeriodMs !== undefined) b.gracePeriodMs = u.spec.gracePeriodMs;
        bindings.set(u.name, b);
      }
    }
    const observedDeployments = new Set(registry.reportedDeployments());
    for (const name of bound) if (state.deployments.has(name)) this.active.add(name);
    for (const name of observedDeployments) if (state.deployments.has(name) && scope.has(name)) this.active.add(name);
    this.bound = bound;
    this.observedDeployments = observedDeployments;

    const deployments = new Map<string, DesiredDeployment>();
    for (const name of scope) {
      const d = state.deployments.get(name);
      if (!d) {
        this.active.delete(name);
        continue;
      }
      const cached = this.desiredCache.get(d.name);
      if (cached && cached.rv === d.resourceVersion) {
        deployments.set(d.name, cached.d);
        continue;
      }
      const desired: DesiredDeployment = {
        name: d.name,
        replicas: d.replicas,
        generation: d.generation,
        specHash: d.specHash,
        unitSpec: d.unitSpec,
        revision: d.revision,
        strategy: resolveStrategy(d.manifest.spec.strategy, d.replicas),
        minReadyMs: (d.manifest.spec.minReadySeconds ?? 0) * 1000,
        paused: d.manifest.spec.paused ?? false,
        backoff: d.backoff,
      };
      this.desiredCache.set(d.name, { rv: d.resourceVersion, d: desired });
      deployments.set(d.name, desired);
    }
    return reconcile({
      deployments,
      bindings,
      // The registry's own records are ObservedNodes (name, ready, units, reportsSince): read as they
      // are, not copied per pass (5,000 objects a pass at 5,000 agents). reconcile() is synchronous.
      nodes: registry.nodes,
      inFlight: { spawns: this.spawns, terminates: this.terminates, terminateGrace: this.terminateGrace },
      now,
      maxActionsPerPass: this.deps.options.maxActionsPerPass,
      spawnTimeoutMs: this.deps.options.spawnTimeoutMs,
      terminateGracePeriodMs: this.deps.options.terminateGracePeriodMs,
      pass: this.passCount++,
      scope,
      reportsOf: (deployment, visit) => registry.reportsOf(deployment, visit),
    });
  }

  /** The last term in which a pass found this leader caught up (store.caughtUp()). */
  private caughtUpInTerm = -1;

  /** One pass; the plan it acted on (null: it did not act, having lost the read barrier). */
  private async pass(scope: ReadonlySet<string>): Promise<Plan | null> {
    const { store } = this.deps;
    const state = store.state;
    // A new leader, not yet caught up once in its term (nothing of its term
    // committed and applied), cannot act on a plan without the read barrier
    // below, and would plan again after it: it waits for the barrier first
    // and plans once. Planning before it held the new leader of a
    // 5,000-agent fleet for ~130 ms (a CPU profile of npm run bench --
    // --only fleet) while its first commit and the clients' first writes
    // waited. Later in the term, a leader whose applies trail its commits
    // for a moment plans first as before: a plan without actions needs no
    // barrier.
    let confirmed = false;
    if (store.caughtUp()) this.caughtUpInTerm = store.term();
    else if (this.caughtUpInTerm !== store.term()) {
      try {
        await store.readBarrier();
      } catch {
        return null;
      }
      if (!store.isLeader()) return null;
      if (store.caughtUp()) this.caughtUpInTerm = store.term();
      confirmed = true;
    }
    // A pass is a new task: its first slice starts now (else its first action waited a loop turn).
    this.sliceStart = this.clock.now();
    this.pruneDeleted();
    const first = this.plan(scope);
    this.wakeUpAt(first.wakeAt);
    if (first.actions.length === 0) {
      this.updateStatuses(first);
      this.settleQuiet(first);
      return first;
    }
    // Nothing is started or stopped without a quorum. A plan of Raft writes
    // alone, whose starts and stops wait for those writes' commits (a
    // crashed unit's unbind and its replacement's create), has its quorum
    // in the commits: on a replica that leads with everything committed
    // applied, it acts at once. Anything else (a resent spawn, a stray's
    // terminate, a forget) first confirms this replica still leads (read
    // index: one heartbeat round), then plans again from what is true after
    // the wait.
    let plan = first;
    if (!confirmed && !(commitGated(first.actions) && store.caughtUp())) {
      try {
        await store.readBarrier();
      } catch {
        return null;
      }
      plan = this.plan(scope);
      this.wakeUpAt(plan.wakeAt);
    }
    const now = this.deps.now();
    this.updateStatuses(plan);
    this.settleQuiet(plan);
    if (plan.actions.length === 0) return plan;
    // Memory of what was last said, only for what still exists.
    for (const name of this.lastDiff.keys()) if (!state.deployments.has(name) && !plan.diffs.some((d) => d.deployment === name)) this.lastDiff.delete(name);
    for (const name of this.lastFailure.keys()) if (!state.units.has(name)) this.lastFailure.delete(name);
    // Lesson 1's printed diff (docs/lessons.md); a no-op pass is told once, not every pass.
    // It is logged once the pass's first writes are on their way to the disk (a microtask
    // queued after the store's, below): a crash's fsync starts before anything else this
    // pass does (when stdout was written line by line, it had waited for the line). The
    // scheduler's lines, after the commits, still follow it.
    const diffLines: string[] = [];
    for (const d of plan.diffs) {
      const line = formatDiff(d);
      if (line && this.lastDiff.get(d.deployment) !== line) diffLines.push(`reconcile ${line}`);
      this.lastDiff.set(d.deployment, line);
    }
    let told = diffLines.length === 0;
    let queued = false;
    const tell = (): void => {
      if (told) return;
      told = true;
      for (const line of diffLines) this.deps.log(line);
    };

    const snap = this.snapshot();
    const writes: Array<Promise<void>> = [];
    // A unit that loses its binding this pass is stopped only once the
    // unbinding is committed, so a new leader never finds a binding for a
    // unit the old one already stopped (it would respawn it).
    const unbinding = new Map<string, Promise<void>>();
    // A long pass yields between its actions (PASS_SLICE_MS), so the replica keeps serving heartbeats
    // and sockets. What lands meanwhile cannot change what an action was decided on: a create names
    // the spec it was scheduled for (create() below), the rest re-read their records.
    for (const a of plan.actions) {
      const pause = this.slice();
      if (pause) await pause;
      switch (a.type) {
        case 'unbind': {
          const u = state.units.get(a.unit);
          if (u && a.node) {
            // Release its resources in this pass's view before placing replacements.
            snap.forget(a.node, this.request(u));
          }
          const w = this.write({ type: 'unit.delete', at: now, name: a.unit, reason: a.reason }).then(() => {
            // The pass knows why a unit is lost: its node is NotReady, or its restarted agent does not run it.
            const lostWhy = plan.diffs.find((d) => d.deployment === a.deployment)?.detail[a.unit];
            const why =
              a.reason === 'lost'
                ? lostWhy
                  ? `lost ${lostWhy}`
                  : `node ${a.node} is not ready`
                : a.reason === 'rollout'
                  ? `replaced by revision ${state.deployments.get(a.deployment)?.revision ?? '?'}`
                  : a.reason;
            const normal = a.reason === 'surplus' || a.reason === 'deployment deleted' || a.reason === 'rollout';
            this.deps.events.record(
              normal ? 'Normal' : 'Warning',
              a.reason === 'lost' ? 'UnitLost' : a.reason === 'crashed' ? 'UnitCrashed' : 'Unbound',
              'Unit',
              a.unit,
              `unbound from ${a.node ?? '(no node)'}: ${why}`,
            );
          });
          unbinding.set(a.unit, w);
          writes.push(w);
          break;
        }
        case 'terminate': {
          const first = unbinding.get(a.unit);
          if (first) writes.push(first.then(() => this.sendTerminate(a.unit, a.node, a.reason, a.gracePeriodMs)));
          else this.sendTerminate(a.unit, a.node, a.reason, a.gracePeriodMs);
          break;
        }
        case 'backoff': {
          if (this.statusWrites.has(`backoff:${a.deployment}`)) break;
          this.statusWrites.add(`backoff:${a.deployment}`);
          const delay = a.until - now;
          const backoff = { failures: a.failures, until: a.until, at: now, lastFailure: a.detail };
          writes.push(
            this.write({ type: 'deployment.backoff', at: now, name: a.deployment, backoff })
              .then((r) => {
                if (!r) return;
                const at = new Date(a.until).toISOString().slice(11, 19);
                const msg = `Back-off ${(delay / 1000).toFixed(0)}s restarting failed unit ${a.unit} of ${a.deployment} (${a.detail}); next try at ${at}`;
                this.deps.events.record('Warning', 'BackOff', 'Unit', a.unit, msg);
                this.deps.log(`reconcile ${a.deployment}: CrashLoopBackOff: ${msg}`);
              })
              .finally(() => this.statusWrites.delete(`backoff:${a.deployment}`)),
          );
          break;
        }
        case 'backoff-reset':
          writes.push(this.write({ type: 'deployment.backoff', at: now, name: a.deployment, backoff: null }).then(() => undefined));
          break;
        case 'forget':
          this.send(a.node, { v: 1, type: 'forget', commandId: this.newId(10), term: store.term(), leaderId: store.id, name: a.unit });
          break;
        case 'spawn': {
          const u = state.units.get(a.unit);
          if (u) this.sendSpawn(u, a.node);
          break;
        }
        case 'create':
          writes.push(this.create(a.deployment, snap, now, a.specHash));
          break;
        case 'schedule': {
          const u = state.units.get(a.unit);
          if (u) writes.push(this.scheduleExisting(u, snap, now));
          break;
        }
      }
      if (!queued) {
        queued = true;
        queueMicrotask(tell);
      }
    }
    await Promise.all(writes);
    return plan;
  }

  private request(u: { deployment: string; spec: { resources: { cpu: number; memory: number }; tolerations: UnitRecord['spec']['tolerations'] } }): UnitRequest {
    return { deployment: u.deployment, resources: u.spec.resources, tolerations: u.spec.tolerations };
  }

  /** The scheduler's view: registered nodes (desired), their liveness
   *  (observed), and the requests bound to each (the store's index). O(nodes)
   *  once per pass; a deployment's spread counts are read from its own units
   *  when a placement first asks for them; each placement is O(nodes). */
  private snapshot(): ClusterSnapshot {
    const { state } = this.deps.store;
    const now = this.deps.now();
    const nodes: NodeState[] = [];
    for (const rec of state.nodes.values()) {
      const obs = this.deps.registry.nodes.get(rec.info.name);
      const ready = obs?.ready ?? false;
      nodes.push({
        name: rec.info.name,
        ready,
        notReadyReason: ready ? undefined : obs ? `no heartbeat for ${((now - obs.lastHeartbeatMs) / 1000).toFixed(1)}s` : 'agent never connected to this replica',
        unschedulable: rec.unschedulable,
        capacity: rec.info.capacity,
        allocated: state.requestsOn(rec.info.name),
        taints: rec.info.taints,
        labels: rec.info.labels,
      });
    }
    nodes.sort((a, b) => (a.name < b.name ? -1 : 1));
    return new ClusterSnapshot(nodes, function* (deployment) {
      for (const u of state.unitsOf(deployment)?.values() ?? []) if (u.nodeName) yield u.nodeName;
    });
  }

  private record(d: SchedulingDecision, now: number): SchedulingRecord {
    return {
      message: d.message,
      nodes: JSON.stringify(d.nodes.slice(0, MAX_RECORDED_NODES).map((n) => ({ node: n.node, feasible: n.feasible, reasons: n.reasons, scores: n.scores, total: n.total }))),
      at: now,
    };
  }

  private async create(deployment: string, snap: ClusterSnapshot, now: number, specHash?: string): Promise<void> {
    const d = this.deps.store.state.deployments.get(deployment);
    if (!d) return;
    // The unit is made from the spec it was scheduled for: the command names it by hash, so an
    // apply that lands first in the log (proposed earlier, not yet applied when this pass planned)
    // cannot give it resources the scheduler never checked.
    const rev = (specHash !== undefined ? d.revisions.find((r) => r.specHash === specHash) : undefined) ?? { unitSpec: d.unitSpec, specHash: d.specHash };
    const spec = rev.unitSpec;
    const req: UnitRequest = { deployment, resources: spec.resources, tolerations: spec.tolerations };
    const decision = this.schedule(req, snap);
    if (decision.chosen) snap.assume(decision.chosen, req);
    const cmd: StoreCommand = { type: 'unit.create', at: now, uid: this.newId(), deployment, nodeName: decision.chosen, scheduling: this.record(decision, now) };
    cmd.specHash = rev.specHash;
    if (this.deps.mutation === 'spawn-before-bind' && decision.chosen) {
      // The deliberate bug: spawn under the name the binding will get, before it is committed.
      const n = Math.max(this.guessed.get(deployment) ?? 0, this.deps.store.state.counters.get(deployment) ?? 0) + 1;
      this.guessed.set(deployment, n);
      const unit = { name: `${deployment}-${n}`, deployment, spec, revision: d.revision, specHash: d.specHash };
      this.send(decision.chosen, { v: 1, type: 'spawn', commandId: this.newId(10), term: this.deps.store.term(), leaderId: this.deps.store.id, unit });
    }
    const r = await this.write(cmd);
    if (!r || !r.name) return;
    await this.slice();
    this.afterDecision(r.name, decision);
  }

  /** mutation 'spawn-before-bind': the last unit number guessed per deployment. */
  private readonly guessed = new Map<string, number>();

  private async scheduleExisting(u: UnitRecord, snap: ClusterSnapshot, now: number): Promise<void> {
    const req = this.request(u);
    const decision = this.schedule(req, snap);
    if (!decision.chosen) {
      this.afterDecision(u.name, decision);
      return;
    }
    snap.assume(decision.chosen, req);
    const r = await this.write({ type: 'unit.bind', at: now, name: u.name, nodeName: decision.chosen, scheduling: this.record(decision, now) });
    if (!r) return;
    await this.slice();
    this.afterDecision(u.name, decision);
  }

  /**
   * Yield to the event loop once the current slice has run PASS_SLICE_MS:
   * continuations that find the budget spent wait for the next turn of the
   * loop (setImmediate queued during the check phase runs in the next one),
   * so timers and sockets are served between slices. What a slice acts on is
   * re-read at that moment (records, leadership), as across any await.
   * Both the time and the yield come from the injected clock, so under the
   * simulation's manual clock a pass never yields at a moment that depends
   * on the machine (a replayed seed takes the same steps).
   */
  private sliceStart = 0;
  private slice(): Promise<void> | null {
    // null, not a resolved promise, while the slice lasts: awaiting one would
    // still end the task, and the store starts a Ready (an fsync) there
    // (RaftStore.kick), so a pass's unbind and its replacement's create
    // took two fsyncs, one after the other, instead of sharing one.
    if (this.clock.now() - this.sliceStart < PASS_SLICE_MS) return null;
    return new Promise<void>((resolve) =>
      this.clock.immediate(() => {
        this.sliceStart = this.clock.now();
        resolve();
      }),
    );
  }

  /** The pure scheduler's decision, timed for /metrics. */
  private schedule(req: UnitRequest, snap: ClusterSnapshot): SchedulingDecision {
    const obs = this.deps.observer;
    if (!obs) return this.deps.scheduler.schedule(req, snap);
    const t0 = this.clock.now();
    const decision = this.deps.scheduler.schedule(req, snap);
    obs.scheduled((this.clock.now() - t0) / 1000, decision.chosen !== null);
    return decision;
  }

  /** After the binding is committed: event + spawn (or FailedScheduling). */
  private afterDecision(name: string, decision: SchedulingDecision): void {
    if (!decision.chosen) {
      if (this.lastFailure.get(name) !== decision.message) {
        this.lastFailure.set(name, decision.message);
        this.deps.events.record('Warning', 'FailedScheduling', 'Unit', name, decision.message);
        this.deps.log(`scheduler: ${name} stays Pending: ${decision.message}`);
      }
      return;
    }
    this.lastFailure.delete(name);
    // The spawn first: the agent starts the unit while this replica records and logs the decision.
    const u = this.deps.store.state.units.get(name);
    if (u && u.nodeName) this.sendSpawn(u, u.nodeName);
    this.deps.observer?.placed();
    this.deps.events.record('Normal', 'Scheduled', 'Unit', name, `assigned ${name} to ${decision.chosen}: ${decision.message}`);
    this.deps.log(`scheduler: ${name} -> ${decision.message}`);
  }

  private sendSpawn(u: UnitRecord, node: string): void {
    const { store } = this.deps;
    if (!store.isLeader()) return;
    const ok = this.send(node, {
      v: 1,
      type: 'spawn',
      commandId: this.newId(10),
      term: store.term(),
      leaderId: store.id,
      unit: { name: u.name, deployment: u.deployment, spec: u.spec, revision: u.revision, specHash: u.specHash },
    });
    if (ok) this.spawns.set(u.name, this.deps.now());
  }

  private sendTerminate(unit: string, node: string, reason: string, gracePeriodMs?: number): void {
    const { store } = this.deps;
    const grace = gracePeriodMs ?? this.deps.options.terminateGracePeriodMs;
    const ok = this.send(node, {
      v: 1,
      type: 'terminate',
      commandId: this.newId(10),
      term: store.term(),
      leaderId: store.id,
      name: unit,
      gracePeriodMs: grace,
      reason,
    });
    if (ok) {
      this.terminates.set(unit, this.deps.now());
      if (gracePeriodMs !== undefined) this.terminateGrace.set(unit, gracePeriodMs);
      this.deps.events.record('Normal', 'Killing', 'Unit', unit, `stopping ${unit} on ${node} (grace ${grace / 1000}s): ${reason}`);
    }
  }

  /**
   * The leader's conclusions about each deployment's rollout (observed
   * generation, Available and Progressing), committed when one changes.
   * Progress is any change of the rollout's counts; the deadline runs from
   * the last one (a new leader starts the clock anew).
   */
  private updateStatuses(plan: Plan): void {
    const { store } = this.deps;
    if (!store.isLeader()) return;
    const now = this.deps.now();
    for (const [name, counts] of plan.counts) {
      const d = store.state.deployments.get(name);
      if (!d) continue;
      // Nothing moved for a deployment whose status is settled: skip it
      // without building anything (a pass must stay cheap per deployment).
      const last = this.settled.get(name);
      const paused = d.manifest.spec.paused ?? false;
      if (
        last !== undefined &&
        last.status === d.status &&
        last.generation === d.generation &&
        last.revision === d.revision &&
        last.paused === paused &&
        last.updated === counts.updated &&
        last.available === counts.available &&
        last.replicas === counts.replicas &&
        last.oldAlive === counts.oldAlive
      ) {
        continue;
      }
      const key = `${d.revision}|${counts.updated}|${counts.available}|${counts.replicas}|${counts.oldAlive}|${paused}`;
      let p = this.progress.get(name);
      if (!p || p.key !== key) {
        p = { key, at: now };
        this.progress.set(name, p);
      }
      const next = rolloutStatus(
        {
          name,
          generation: d.generation,
          revision: d.revision,
          replicas: d.replicas,
          strategy: resolveStrategy(d.manifest.spec.strategy, d.replicas),
          paused: d.manifest.spec.paused ?? false,
          progressDeadlineMs: (d.manifest.spec.progressDeadlineSeconds ?? DEFAULT_PROGRESS_DEADLINE_SECONDS) * 1000,
          counts,
          lastProgressAt: p.at,
          now,
        },
        d.status,
      );
      const settled = next.conditions.some((c) => c.reason === 'NewReplicaSetAvailable' || c.reason === 'ProgressDeadlineExceeded' || c.reason === 'DeploymentPaused');
      if (!settled) this.wakeUpAt(p.at + (d.manifest.spec.progressDeadlineSeconds ?? DEFAULT_PROGRESS_DEADLINE_SECONDS) * 1000 + 1);
      const changed = statusChanged(d.status, next);
      if (settled && !changed) this.settled.set(name, { status: d.status, generation: d.generation, revision: d.revision, paused, ...counts });
      else this.settled.delete(name);
      if (!changed || this.statusWrites.has(name)) continue;
      const progressing = next.conditions.find((c) => c.type === 'Progressing');
      const was = d.status.conditions.find((c) => c.type === 'Progressing');
      if (progressing && progressing.reason !== was?.reason) {
        if (progressing.reason === 'ProgressDeadlineExceeded') {
          this.deps.events.record('Warning', 'ProgressDeadlineExceeded', 'Deployment', name, progressing.message);
          this.deps.log(`reconcile ${name}: rollout failed: ${progressing.message}`);
        } else if (progressing.reason === 'NewReplicaSetAvailable' && was !== undefined) {
          this.deps.log(`reconcile ${name}: rollout to revision ${d.revision} complete`);
        }
      }
      this.statusWrites.add(name);
      this.pendingStatus.set(name, next);
      this.statusTimer ??= this.clock.timeout(() => this.flushStatuses(), STATUS_FLUSH_MS);
    }
  }

  /** Commit the statuses decided since the last flush, in one entry. */
  private flushStatuses(): void {
    this.statusTimer = null;
    const items = [...this.pendingStatus].map(([name, status]) => ({ name, status }));
    this.pendingStatus.clear();
    if (items.length === 0) return;
    void this.write({ type: 'deployment.status', at: this.deps.now(), items }).finally(() => {
      for (const { name } of items) this.statusWrites.delete(name);
    });
  }

  private send(node: string, cmd: Command): boolean {
    if (!this.deps.store.isLeader()) return false; // only the leader acts
    return this.deps.agents.send(node, cmd);
  }

  private async write(cmd: StoreCommand): Promise<{ name?: string } | null> {
    try {
      const r = await this.deps.store.propose(cmd);
      if (!r.ok) {
        this.deps.log(`reconcile: ${cmd.type} refused: ${r.error}`);
        return null;
      }
      return r;
    } catch (err) {
      this.deps.log(`reconcile: ${cmd.type} failed: ${(err as Error).message}`);
      return null;
    }
  }
}

/**
 * Every action of `actions` is a Raft write, or a stop that waits for the
 * commit of its unit's unbind earlier in the same plan (the order the pass
 * acts in): nothing of it reaches an agent before a quorum has it.
 */
export function commitGated(actions: readonly Action[]): boolean {
  const unbound = new Set<string>();
  for (const a of actions) {
    switch (a.type) {
      case 'unbind':
        unbound.add(a.unit);
        break;
      case 'create':
      case 'schedule':
      case 'backoff':
      case 'backoff-reset':
        break;
      case 'terminate':
        if (!unbound.has(a.unit)) return false;
        break;
      case 'spawn':
      case 'forget':
        return false;
    }
  }
  return true;
}
