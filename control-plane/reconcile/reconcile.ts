// control-plane/reconcile/reconcile.ts -- one pass of the reconcile loop:
// compare DESIRED (deployments and committed bindings) with OBSERVED (agent
// reports on Ready nodes) and return the plan that closes the gap. Pure and
// level-based: it reads the current state and never replays events, so
// running it twice on the same input returns the same plan, and running it
// again after the plan took effect returns an empty one (lesson 1's
// idempotent iterations 2 and 7, docs/lessons.md). The leader's controller calls it on every
// change and on a periodic resync; a driver executes the plan.
//
// Per binding (the unit the scheduler committed):
//   node missing or NotReady     -> unbind 'lost' (no terminate: the node is
//                                   unreachable); the gap is refilled by create
//   observed Failed / Succeeded  -> unbind 'crashed' / 'completed'; refilled by
//                                   a NEW unit with a new name, like lesson 1
//   observed Pending / Running   -> live
//   observed Terminating, or a terminate of ours in flight -> not live, no
//                                   action (it is on its way out)
//   not observed                 -> live ("starting"); spawn is (re)sent when
//                                   no spawn is in flight or it timed out.
//                                   A missing report is answered with the SAME
//                                   unit again, never with a second unit.
//   nodeName null (no node fit)  -> not live, but counted toward desired so
//                                   the loop never piles up unplaced units;
//                                   `schedule` retries its placement.
// Per deployment: live + unscheduled < replicas -> that many `create`;
// more -> remove exactly the surplus: unplaced first, then Pending (or not
// yet reported), then Running; newest (highest index) first within each, so
// lesson 1's scale 5 -> 2 deletes pod-7, pod-6, pod-5 in that order.
// Per Ready node: a unit it reports that is not bound to it is terminated if
// still running, and forgotten (the agent drops its record) once finished.
// A finished unit is forgotten only on the pass AFTER its unbind, once the
// binding is gone: forgetting earlier would let a failed unbind commit make
// the next leader re-spawn the crashed unit under its old name.
//
// Rollouts (a deployment whose units run an older revision's spec hash):
//   RollingUpdate  new units are created while alive processes (stopping
//                  ones included) stay <= replicas + maxSurge; old units are
//                  removed, unavailable ones first, while available units
//                  stay >= replicas - maxUnavailable (Kubernetes' rolling
//                  updater: maxScaledDown = all - minAvailable - new
//                  unavailable). Available = Running, ready, and ready for
//                  minReadySeconds, as the agent reports it.
//   Recreate       every old unit is removed; no new one starts until the
//                  last old process is gone.
//   paused         no rollout step; replicas are kept with the running
//                  template.
// Crash-loop back-off: a bound unit that finished less than
// QUICK_FAILURE_MS after it started (and was not SIGKILLed from outside,
// see isQuickFailure) is not replaced at once. The first such
// failure (or one after the last round ended) starts a round (`backoff`
// action: the driver commits it, replicated) of BACKOFF_INITIAL_MS doubling
// to BACKOFF_MAX_MS; the failed unit stays bound and counted (so nothing
// else starts in its place) until the round ends, then it is replaced. A
// unit that ran longer is replaced at once (both lessons' path) and resets
// the back-off.
//
// Rate limit: maxActionsPerPass is a budget of OPERATIONS, not of actions:
// one create, one schedule, one removal of a bound unit (unbind + its
// terminate, never split: a removal is one "delete" in lesson 1's sense),
// one terminate of an unbound unit. Exempt, because they start nothing and
// lesson 1's self-healing promise depends on them: unbind of lost,
// crashed or completed units (bookkeeping; their replacements are creates
// and are budgeted), spawn resends (they re-deliver decisions already made
// and budgeted) and forget. The budget is shared round-robin across
// deployments in name order, starting at `pass mod n`, so one big gap
// cannot starve the others; `deferred` says how many operations were cut.
//
// Contract for the driver: record a spawn/terminate in InFlight as soon as
// it accepts the plan (before awaiting the binding commit), or do not start
// the next pass before the plan is executed; otherwise a pass that runs in
// between sees a bound unit with nothing in flight and sends again. Agents
// must treat a spawn for a name they already run as a no-op.

import type { DeploymentStrategy, UnitReport } from '../../shared/model.ts';
import { DEFAULT_MAX_SURGE, DEFAULT_MAX_UNAVAILABLE, resolveIntOrPercent } from '../../shared/manifest.ts';
import { isQuietDiff } from './format-diff.ts';
import {
  NO_DEPLOYMENT,
  type Action,
  type Binding,
  type DeploymentCounts,
  type DeploymentDiff,
  type DesiredDeployment,
  type ObservedNode,
  type Plan,
  type ReconcileInput,
  type ResolvedStrategy,
} from './types.ts';

/** A unit that ends sooner than this after it started is crash-looping. */
export const QUICK_FAILURE_MS = 10_000;
/** First crash-loop back-off; doubles each round. */
export const BACKOFF_INITIAL_MS = 1000;
/** Longest crash-loop back-off. */
export const BACKOFF_MAX_MS = 60_000;
/** A quick failure this long after the last round ended starts over at BACKOFF_INITIAL_MS. */
export const BACKOFF_RESET_MS = 2 * BACKOFF_MAX_MS;

const EMPTY_COUNTS: DeploymentCounts = Object.freeze({ replicas: 0, updated: 0, ready: 0, available: 0, oldAlive: 0, backoff: 0 });

/** The back-off of round n (1-based). */
export function backoffDelayMs(failures: number): number {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_INITIAL_MS * 2 ** Math.min(30, Math.max(0, failures - 1)));
}

/** How long a finished unit ran (0 if it never started). */
export function ranMs(r: UnitReport): number {
  return r.startedAt !== undefined && r.finishedAt !== undefined ? Math.max(0, r.finishedAt - r.startedAt) : 0;
}

/**
 * True for a finished unit that ended soon after it started (or never
 * started): its program crash-loops. A unit SIGKILLed from outside (`kill
 * -9`, a chaos script) did not fail by itself, however young it was: it is
 * replaced at once, as both lessons promise. The kernel's OOM kill is a
 * SIGKILL too, but the agent names it (OOMKilled), and it does loop.
 */
export function isQuickFailure(r: UnitReport): boolean {
  if (r.phase !== 'Failed' && r.phase !== 'Succeeded') return false;
  if (r.reason === 'Terminated') return false;
  if (r.signal === 'SIGKILL' && r.reason !== 'OOMKilled' && r.reason !== 'LivenessProbeFailed') return false;
  return ranMs(r) < QUICK_FAILURE_MS;
}

/** maxSurge/maxUnavailable as counts for `replicas` (both 0 would never progress: maxUnavailable becomes 1, as in Kubernetes). */
export function resolveStrategy(strategy: DeploymentStrategy | undefined, replicas: number): ResolvedStrategy {
  if (strategy?.type === 'Recreate') return { type: 'Recreate', maxSurge: 0, maxUnavailable: replicas };
  const maxSurge = resolveIntOrPercent(strategy?.rollingUpdate?.maxSurge ?? DEFAULT_MAX_SURGE, replicas, true);
  let maxUnavailable = resolveIntOrPercent(strategy?.rollingUpdate?.maxUnavailable ?? DEFAULT_MAX_UNAVAILABLE, replicas, false);
  if (maxSurge === 0 && maxUnavailable === 0) maxUnavailable = 1;
  return { type: 'RollingUpdate', maxSurge, maxUnavailable };
}

/** Ready as the agent says (a report from before readiness existed: Running is ready). */
function isReady(r: UnitReport): boolean {
  return r.phase === 'Running' && r.ready !== false;
}

/** Since when it is ready (agent clock). */
function readyAt(r: UnitReport): number {
  return r.readySince ?? r.startedAt ?? 0;
}

/** Terminate reasons (they reach the agent and the event stream). */
export const TERMINATE_REASON_SCALED_DOWN = 'scaled down';
export const TERMINATE_REASON_DEPLOYMENT_DELETED = 'deployment deleted';
export const TERMINATE_REASON_NOT_BOUND = 'not bound: replaced while its node was away';

/** One rate-limited operation: the actions it emits are never split. */
interface Operation {
  kind: 'create' | 'schedule' | 'remove' | 'unbound';
  unit: string | null;
  detail: string | null;
  actions: Action[];
}

/** Everything one deployment contributes to the plan. */
interface DeploymentWork {
  diff: DeploymentDiff;
  bookkeeping: Action[]; // unbind lost / crashed / completed (exempt)
  operations: Operation[]; // rate-limited, in priority order
  resends: Action[]; // spawn resends (exempt)
  forgets: Action[]; // (exempt)
}

/** A binding that counts toward desired, with its rank for surplus removal. */
interface Candidate {
  binding: Binding;
  /** 0: no node yet or failed in back-off, 1: Pending or not yet reported, 2: Running. Lower goes first. */
  rank: number;
  observed: boolean;
  /** Finished, kept bound while the crash-loop back-off runs (nothing to stop). */
  held: boolean;
  ready: boolean;
  available: boolean;
  /** Runs the current revision. */
  isNew: boolean;
}

function isFinished(phase: UnitReport['phase']): boolean {
  return phase === 'Succeeded' || phase === 'Failed';
}

/** Orders `web-2` before `web-10`: numeric on a shared `<prefix>-<n>`, else by code units. */
export function compareUnitNames(a: string, b: string): number {
  const ma = /^(.*)-(\d+)$/.exec(a);
  const mb = /^(.*)-(\d+)$/.exec(b);
  if (ma && mb && ma[1] === mb[1]) return Number(ma[2]) - Number(mb[2]);
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Why a unit finished, short: 'exit code 1 after 0.02s', 'StartError: spawn sleeeep ENOENT', 'signal SIGKILL'. */
function finishDetail(r: UnitReport): string {
  if (r.message) return r.reason === 'Error' || r.reason === 'Completed' || !r.reason ? r.message : `${r.reason}: ${r.message}`;
  const parts: string[] = [];
  if (r.signal) parts.push(`signal ${r.signal}`);
  else if (r.exitCode !== undefined) parts.push(`exit ${r.exitCode}`);
  if (r.reason && r.reason !== 'Completed' && r.reason !== 'Error' && r.reason !== 'Killed') parts.push(r.reason);
  return parts.length > 0 ? parts.join(' ') : r.phase === 'Failed' ? 'failed' : 'completed';
}

function checkInput(input: ReconcileInput): void {
  const fields: Array<[string, number]> = [
    ['now', input.now],
    ['spawnTimeoutMs', input.spawnTimeoutMs],
    ['terminateGracePeriodMs', input.terminateGracePeriodMs],
  ];
  for (const [field, value] of fields) {
    if (!Number.isFinite(value) || (field !== 'now' && value < 0)) {
      throw new RangeError(`reconcile: ${field} must be a finite number${field === 'now' ? '' : ' >= 0'}, got ${value}`);
    }
  }
  if (!(input.maxActionsPerPass >= 0)) {
    throw new RangeError(`reconcile: maxActionsPerPass must be >= 0 (Infinity for no limit), got ${input.maxActionsPerPass}`);
  }
  for (const d of input.deployments.values()) {
    if (!Number.isInteger(d.replicas) || d.replicas < 0) {
      throw new RangeError(`reconcile: deployment ${d.name}: replicas must be an integer >= 0, got ${d.replicas}`);
    }
  }
}

function emptyDiff(deployment: string, desired: number, deleted: boolean): DeploymentDiff {
  return {
    deployment,
    desired,
    deleted,
    live: 0,
    unscheduled: 0,
    create: 0,
    schedule: [],
    remove: [],
    unbound: [],
    lost: [],
    crashed: [],
    completed: [],
    resend: [],
    deferred: 0,
    detail: {},
    backoff: [],
    rollout: null,
  };
}

/**
 * Every Ready node's reports a pass reads, gathered once for its steps: in a
 * scoped pass with an index (input.reportsOf), only its scope's and those
 * naming no deployment (which any binding may explain); else all of them.
 */
function readyReports(input: ReconcileInput): Array<{ node: ObservedNode; report: UnitReport }> {
  const { nodes, scope, reportsOf } = input;
  const out: Array<{ node: ObservedNode; report: UnitReport }> = [];
  if (scope === undefined || reportsOf === undefined) {
    for (const node of nodes.values()) {
      if (!node.ready) continue;
      for (const report of node.units.values()) out.push({ node, report });
    }
    return out;
  }
  const visit = (seen: { name: string }, report: UnitReport): void => {
    const node = nodes.get(seen.name);
    // The very record `nodes` holds (the controller passes the registry's own) read it from its map already.
    if (node?.ready && (node === seen || node.units.get(report.name) === report)) out.push({ node, report });
  };
  for (const d of scope) if (d !== '') reportsOf(d, visit);
  reportsOf('', visit);
  return out;
}

/** One pass: the plan that moves observed toward desired. Deterministic for the same input. */

export function reconcile(input: ReconcileInput): Plan {
  checkInput(input);
  const { deployments, bindings, nodes, inFlight, now } = input;
  const terminateResendAfterMs = (unit: string): number => (inFlight.terminateGrace?.get(unit) ?? input.terminateGracePeriodMs) + input.spawnTimeoutMs;
  const spawnFresh = (unit: string): boolean => {
    const sentAt = inFlight.spawns.get(unit);
    return sentAt !== undefined && now - sentAt < input.spawnTimeoutMs;
  };
  const terminateFresh = (unit: string): boolean => {
    const sentAt = inFlight.terminates.get(unit);
    return sentAt !== undefined && now - sentAt < terminateResendAfterMs(unit);
  };

  const work = new Map<string, DeploymentWork>();
  const workFor = (deployment: string): DeploymentWork => {
    let w = work.get(deployment);
    if (!w) {
      const desired = deployments.get(deployment);
      w = {
        diff: emptyDiff(deployment, desired?.replicas ?? 0, desired === undefined),
        bookkeeping: [],
        operations: [],
        resends: [],
        forgets: [],
      };
      work.set(deployment, w);
    }
    return w;
  };
  // A deployment gets its work (and its diff) when something is found for
  // it: one that wants nothing and has nothing (step 2) costs a lookup, so
  // a cluster holding thousands of empty deployments pays almost nothing
  // for them per pass.

  const readyNode = (name: string | null): ObservedNode | undefined => {
    if (name === null) return undefined;
    const node = nodes.get(name);
    return node && node.ready ? node : undefined;
  };

  let wakeAt: number | null = null;
  const wake = (at: number): void => {
    if (at > now && (wakeAt === null || at < wakeAt)) wakeAt = at;
  };
  const minReadyMs = (deployment: string): number => deployments.get(deployment)?.minReadyMs ?? 0;
  const backoffRounds = new Map<string, Action>();
  const backoffResets = new Set<string>();
  /** Per deployment: spec hashes of its processes that are alive but stopping (or about to). */
  const stopping = new Map<string, Array<string | undefined>>();
  const addStopping = (deployment: string, specHash: string | undefined): void => {
    const list = stopping.get(deployment) ?? [];
    list.push(specHash);
    stopping.set(deployment, list);
  };
  const scope = input.scope;
  const seenReports = readyReports(input);
  // Units a Ready node runs that no binding wants here: stopping processes.
  for (const { node, report } of seenReports) {
    if (scope !== undefined && !scope.has(report.deployment)) continue;
    const b = bindings.get(report.name);
    if (b && b.nodeName === node.name) continue;
    if (isFinished(report.phase)) continue;
    addStopping(report.deployment, report.specHash);
  }

  // ---- 1. every binding: classify ------------------------------------------
  const sortedBindings = [...bindings.values()].sort((a, b) => compareStrings(a.deployment, b.deployment) || a.index - b.index || compareStrings(a.name, b.name));
  const candidates = new Map<string, Candidate[]>(); // by deployment, still desired
  const orphaned = new Map<string, Binding[]>(); // by deployment, no longer desired

  for (const b of sortedBindings) {
    const w = workFor(b.deployment);
    if (!deployments.has(b.deployment)) {
      const list = orphaned.get(b.deployment) ?? [];
      list.push(b);
      orphaned.set(b.deployment, list);
      continue;
    }
    const node = readyNode(b.nodeName);
    const report = node?.units.get(b.name);

    const isNew = b.specHash === deployments.get(b.deployment)!.specHash;
    if (b.nodeName === null) {
      w.diff.unscheduled++;
      pushCandidate(candidates, { binding: b, rank: 0, observed: false, held: false, ready: false, available: false, isNew });
      continue;
    }
    if (!node) {
      const known = nodes.get(b.nodeName);
      w.diff.lost.push(b.name);
      w.diff.detail[b.name] = known ? `on ${b.nodeName} NotReady` : `on ${b.nodeName}, not registered`;
      w.bookkeeping.push({ type: 'unbind', unit: b.name, node: b.nodeName, deployment: b.deployment, reason: 'lost' });
      continue;
    }
    if (report) {
      if (report.phase === 'Failed' || report.phase === 'Succeeded') {
        const crashed = report.phase === 'Failed';
        const desired = deployments.get(b.deployment)!;
        const bo = desired.backoff ?? null;
        if (isQuickFailure(report)) {
          const finishedAt = report.finishedAt ?? 0;
          const waited = bo !== null && now >= bo.until && finishedAt <= bo.until;
          if (!waited) {
            // Held: counted toward replicas, replaced when the round ends.
            w.diff.backoff.push(b.name);
            w.diff.detail[b.name] = finishDetail(report);
            if (bo === null || now >= bo.until) {
              if (!backoffRounds.has(b.deployment)) {
                const failures = bo !== null && finishedAt - bo.until < BACKOFF_RESET_MS ? bo.failures + 1 : 1;
                backoffRounds.set(b.deployment, {
                  type: 'backoff',
                  deployment: b.deployment,
                  failures,
                  until: now + backoffDelayMs(failures),
                  unit: b.name,
                  detail: finishDetail(report),
                });
              }
            } else {
              wake(bo.until);
            }
            pushCandidate(candidates, { binding: b, rank: 0, observed: true, held: true, ready: false, available: false, isNew: b.specHash === desired.specHash });
            continue;
          }
        } else if (bo !== null) {
          backoffResets.add(b.deployment);
        }
        (crashed ? w.diff.crashed : w.diff.completed).push(b.name);
        w.diff.detail[b.name] = finishDetail(report);
        w.bookkeeping.push({
          type: 'unbind',
          unit: b.name,
          node: b.nodeName,
          deployment: b.deployment,
          reason: crashed ? 'crashed' : 'completed',
        });
        continue;
      }
      // Terminating, or ours to stop: on its way out, neither live nor acted
      // on, but still a process (a rollout's ceiling counts it).
      if (report.phase === 'Terminating' || terminateFresh(b.name)) {
        addStopping(b.deployment, report.specHash ?? b.specHash);
        continue;
      }
      w.diff.live++;
      const ready = isReady(report);
      const available = ready && readyAt(report) + minReadyMs(b.deployment) <= now;
      if (ready && !available) wake(readyAt(report) + minReadyMs(b.deployment));
      pushCandidate(candidates, {
        binding: b,
        rank: report.phase === 'Running' ? 2 : 1,
        observed: true,
        held: false,
        ready,
        available,
        isNew: b.specHash === deployments.get(b.deployment)!.specHash,
      });
      continue;
    }
    if (terminateFresh(b.name)) {
      addStopping(b.deployment, b.specHash);
      continue;
    }
    // Bound before the node's current agent started, and that agent does not
    // run it: it died with the earlier agent (a dead machine runs nothing).
    // Lost like a dead node's unit, and replaced under a new name; a resend
    // would bring back an old name for a new process.
    if (node.reportsSince !== undefined && b.boundAt < node.reportsSince && !spawnFresh(b.name)) {
      w.diff.lost.push(b.name);
      w.diff.detail[b.name] = `on ${b.nodeName}, not run by its restarted agent`;
      w.bookkeeping.push({ type: 'unbind', unit: b.name, node: b.nodeName, deployment: b.deployment, reason: 'lost' });
      continue;
    }
    w.diff.live++;
    pushCandidate(candidates, { binding: b, rank: 1, observed: false, held: false, ready: false, available: false, isNew });
  }

  // ---- 2. each desired deployment: surplus or gap, rollout steps -------------
  const counts = new Map<string, DeploymentCounts>();
  for (const [name, desired] of deployments) {
    if (desired.replicas === 0 && !candidates.has(name) && !stopping.has(name) && !work.has(name)) {
      // Nothing wanted, nothing there, nothing noticed: nothing to decide, no diff.
      counts.set(name, EMPTY_COUNTS);
    }
  }
  for (const [name, desired] of [...deployments.entries()].filter(([n]) => counts.get(n) !== EMPTY_COUNTS).sort((a, b) => compareStrings(a[0], b[0]))) {
    const w = workFor(name);
    const list = candidates.get(name) ?? [];
    const stoppingHashes = stopping.get(name) ?? [];
    // Nothing wanted, nothing there (its diff tells what was noticed, e.g. a lost unit).
    if (desired.replicas === 0 && list.length === 0 && stoppingHashes.length === 0) {
      counts.set(name, EMPTY_COUNTS);
      continue;
    }
    const removed = new Set<string>();
    const remove = (c: Candidate, reason: 'surplus' | 'rollout', why: string): void => {
      removed.add(c.binding.name);
      const mustStop = !c.held && readyNode(c.binding.nodeName) !== undefined;
      w.operations.push(removalOperation(c.binding, reason, why, mustStop));
    };
    const oldAlive = list.filter((c) => !c.isNew && !c.held).length + stoppingHashes.filter((h) => h !== undefined && h !== desired.specHash).length;
    const oldUnits = list.filter((c) => !c.isNew).length;
    counts.set(name, {
      replicas: list.length,
      updated: list.filter((c) => c.isNew).length,
      ready: list.filter((c) => c.ready).length,
      available: list.filter((c) => c.available).length,
      oldAlive,
      backoff: list.filter((c) => c.held).length,
    });
    const R = desired.replicas;
    const strategy = desired.strategy ?? resolveStrategy(undefined, R);
    const rolling = (oldAlive > 0 || oldUnits > 0) && !desired.paused;
    let creates = 0;
    let createHash: string | undefined;

    if (!rolling) {
      // Steady state (or paused): keep `replicas` units, whatever their revision.
      const surplus = list.length - R;
      if (surplus > 0) for (const c of removalOrder(list).slice(0, surplus)) remove(c, 'surplus', TERMINATE_REASON_SCALED_DOWN);
      creates = Math.max(0, -surplus);
      if (desired.paused && oldUnits > 0) createHash = mostCommonOldHash(list, desired.specHash);
    } else {
      const newUnits = removalOrder(list.filter((c) => c.isNew));
      const old = list.filter((c) => !c.isNew);
      const alive = list.length + stoppingHashes.length;
      const minAvailable = Math.max(0, R - strategy.maxUnavailable);
      const maxAlive = R + strategy.maxSurge;
      // More of the new revision than wanted (scaled down mid-rollout).
      const newSurplus = Math.max(0, newUnits.length - R);
      for (const c of newUnits.slice(0, newSurplus)) remove(c, 'surplus', TERMINATE_REASON_SCALED_DOWN);
      const keptNew = newUnits.length - newSurplus;
      if (strategy.type === 'Recreate') {
        // Every old unit goes; the new ones start once no old process is left.
        for (const c of removalOrder(old)) remove(c, 'rollout', rolloutReason(desired));
        creates = oldAlive === 0 ? Math.max(0, R - keptNew) : 0;
      } else {
        creates = Math.max(0, Math.min(R - keptNew, maxAlive - alive));
        const available = list.filter((c) => c.available).length;
        const newUnavailable = newUnits.filter((c) => !c.available && !removed.has(c.binding.name)).length;
        let maxScaledDown = list.length - removed.size - minAvailable - newUnavailable;
        // Old units that are not available go first: removing them costs no availability.
        for (const c of removalOrder(old.filter((c) => !c.available))) {
          if (maxScaledDown <= 0) break;
          remove(c, 'rollout', rolloutReason(desired));
          maxScaledDown--;
        }
        let canLose = available - minAvailable;
        for (const c of removalOrder(old.filter((c) => c.available))) {
          if (maxScaledDown <= 0 || canLose <= 0) break;
          remove(c, 'rollout', rolloutReason(desired));
          maxScaledDown--;
          canLose--;
        }
      }
      w.diff.rollout = {
        revision: desired.revision ?? 0,
        strategy: strategy.type,
        paused: false,
        updated: newUnits.length,
        available: list.filter((c) => c.available).length,
        minAvailable,
        maxAlive,
        alive,
        starting: 0,
        stopping: [],
      };
    }
    for (const c of list) {
      if (removed.has(c.binding.name) || c.held) continue;
      const b = c.binding;
      if (b.nodeName === null) {
        w.operations.push({
          kind: 'schedule',
          unit: b.name,
          detail: null,
          actions: [{ type: 'schedule', unit: b.name, deployment: name }],
        });
      } else if (!c.observed && !spawnFresh(b.name)) {
        w.diff.resend.push(b.name);
        w.resends.push({ type: 'spawn', unit: b.name, node: b.nodeName, deployment: name });
      }
    }
    for (let i = 0; i < creates; i++) {
      const action: Action = createHash === undefined ? { type: 'create', deployment: name } : { type: 'create', deployment: name, specHash: createHash };
      w.operations.push({ kind: 'create', unit: null, detail: null, actions: [action] });
    }
    const round = backoffRounds.get(name);
    if (round) w.bookkeeping.push(round);
    else if (backoffResets.has(name)) w.bookkeeping.push({ type: 'backoff-reset', deployment: name });
  }

  // ---- 3. bindings of deployments no longer desired -------------------------
  for (const [name, list] of [...orphaned.entries()].sort((a, b) => compareStrings(a[0], b[0]))) {
    const w = workFor(name);
    // All of them go; newest first, so a rate-limited deletion unwinds in the
    // reverse order of creation.
    for (const b of [...list].sort((x, y) => y.index - x.index || compareStrings(y.name, x.name))) {
      const node = readyNode(b.nodeName);
      const report = node?.units.get(b.name);
      const mustStop = node !== undefined && (report === undefined || !isFinished(report.phase)) && !terminateFresh(b.name);
      w.operations.push(removalOperation(b, 'deployment deleted', TERMINATE_REASON_DEPLOYMENT_DELETED, mustStop));
    }
  }

  // ---- 4. every Ready node: units it runs that are not bound to it ----------
  // They go first in their deployment's queue: a returning node's leftovers
  // are surplus, and stopping them comes before any other change.
  const strays = new Map<string, Operation[]>();
  // Bound here: handled in step 1. Only the rest are collected and sorted (usually none), and only the
  // nodes that have some, not every unit of every node every pass. In a scoped pass, other deployments'
  // reports are not looked at (their bindings are not in `bindings`).
  const strayNodes = new Map<string, { node: ObservedNode; unbound: UnitReport[] }>();
  for (const { node, report } of seenReports) {
    if (scope !== undefined && report.deployment && !scope.has(report.deployment)) continue;
    if (bindings.get(report.name)?.nodeName === node.name) continue;
    const on = strayNodes.get(node.name);
    if (on) on.unbound.push(report);
    else strayNodes.set(node.name, { node, unbound: [report] });
  }
  const withStrays = [...strayNodes.values()];
  for (const { node, unbound } of withStrays.sort((a, b) => compareStrings(a.node.name, b.node.name))) {
    for (const report of unbound.sort((a, b) => compareUnitNames(a.name, b.name))) {
      const b = bindings.get(report.name);
      const deployment = report.deployment || b?.deployment || NO_DEPLOYMENT;
      if (scope !== undefined && !scope.has(deployment)) continue;
      const w = workFor(deployment);
      if (isFinished(report.phase)) {
        w.forgets.push({ type: 'forget', unit: report.name, node: node.name });
        continue;
      }
      if (terminateFresh(report.name)) continue;
      const reason = b ? `bound to ${b.nodeName ?? 'no node'}, not ${node.name}` : deployments.has(deployment) ? TERMINATE_REASON_NOT_BOUND : TERMINATE_REASON_DEPLOYMENT_DELETED;
      const list = strays.get(deployment) ?? [];
      list.push({
        kind: 'unbound',
        unit: report.name,
        detail: reason,
        actions: [withGrace({ type: 'terminate', unit: report.name, node: node.name, reason }, deployments.get(deployment)?.unitSpec.gracePeriodMs)],
      });
      strays.set(deployment, list);
    }
  }
  for (const [deployment, ops] of strays) workFor(deployment).operations.unshift(...ops);

  // ---- 5. the rate limit: round-robin over deployments ----------------------
  // The arrays below are built with push and walked by index, and none is
  // empty: with .map(), for-of and .filter() over them, V8 threw this
  // function's optimized code away when an array of another elements kind
  // came (an empty one, or one the builtin .map made rather than the inlined
  // one), and compiling it again costs ~220 ms of TurboFan: 3 compiles in a
  // fresh replica's 1,000-unit apply, now 1 (--trace-opt --trace-deopt-verbose).
  if (work.size === 0) return { actions: [], diffs: [], deferred: 0, counts, wakeAt };
  const order = [...work.keys()].sort(compareStrings);
  const start = (((input.pass ?? 0) % order.length) + order.length) % order.length;
  const queues: Array<{ w: DeploymentWork; next: number }> = [];
  for (let i = 0; i < order.length; i++) queues.push({ w: work.get(order[(start + i) % order.length])!, next: 0 });
  const budgeted: Action[] = [];
  let budget = input.maxActionsPerPass;
  let progress = true;
  while (budget > 0 && progress) {
    progress = false;
    for (let i = 0; i < queues.length; i++) {
      const q = queues[i];
      if (budget <= 0) break;
      const ops = q.w.operations;
      if (q.next >= ops.length) continue;
      const op = ops[q.next];
      q.next++;
      budget--;
      progress = true;
      budgeted.push(...op.actions);
      recordTaken(q.w.diff, op);
    }
  }
  let deferred = 0;
  for (const q of queues) {
    q.w.diff.deferred = q.w.operations.length - q.next;
    deferred += q.w.diff.deferred;
  }

  // ---- 6. assemble, deterministically ----------------------------------------
  const actions: Action[] = [];
  for (const name of order) actions.push(...work.get(name)!.bookkeeping);
  actions.push(...budgeted);
  for (const name of order) actions.push(...work.get(name)!.resends);
  for (const name of order) actions.push(...work.get(name)!.forgets);

  for (const name of order) {
    const d = work.get(name)!.diff;
    if (d.rollout) {
      d.rollout.starting = d.create;
      d.rollout.stopping = d.remove;
    }
  }
  // A deleted deployment with nothing left to do has no diff.
  const diffs: DeploymentDiff[] = [];
  for (const name of order) {
    const d = work.get(name)!.diff;
    if (!d.deleted || !isQuietDiff(d)) diffs.push(d);
  }
  return { actions, diffs, deferred, counts, wakeAt };
}

function pushCandidate(map: Map<string, Candidate[]>, c: Candidate): void {
  const list = map.get(c.binding.deployment) ?? [];
  list.push(c);
  map.set(c.binding.deployment, list);
}

/** Removal preference: unplaced, then Pending/unreported, then Running; newest first. */
function removalOrder(list: readonly Candidate[]): Candidate[] {
  return [...list].sort((a, b) => a.rank - b.rank || b.binding.index - a.binding.index || compareStrings(b.binding.name, a.binding.name));
}

function removalOperation(b: Binding, reason: 'surplus' | 'deployment deleted' | 'rollout', terminateReason: string, terminate: boolean): Operation {
  const actions: Action[] = [{ type: 'unbind', unit: b.name, node: b.nodeName, deployment: b.deployment, reason }];
  if (terminate && b.nodeName !== null) actions.push(withGrace({ type: 'terminate', unit: b.name, node: b.nodeName, reason: terminateReason }, b.gracePeriodMs));
  return { kind: 'remove', unit: b.name, detail: terminateReason, actions };
}

function withGrace(a: Extract<Action, { type: 'terminate' }>, gracePeriodMs: number | undefined): Action {
  return gracePeriodMs === undefined ? a : { ...a, gracePeriodMs };
}

function rolloutReason(d: DesiredDeployment): string {
  return `replaced by revision ${d.revision ?? 0}`;
}

/** The spec hash most units of older revisions run (ties: the newest unit's). */
function mostCommonOldHash(list: readonly Candidate[], current: string): string | undefined {
  const tally = new Map<string, { n: number; newest: number }>();
  for (const c of list) {
    if (c.isNew) continue;
    const t = tally.get(c.binding.specHash) ?? { n: 0, newest: 0 };
    t.n++;
    t.newest = Math.max(t.newest, c.binding.index);
    tally.set(c.binding.specHash, t);
  }
  let best: string | undefined;
  let bestT = { n: 0, newest: -1 };
  for (const [hash, t] of tally) {
    if (hash === current) continue;
    if (t.n > bestT.n || (t.n === bestT.n && t.newest > bestT.newest)) {
      best = hash;
      bestT = t;
    }
  }
  return best;
}

function recordTaken(diff: DeploymentDiff, op: Operation): void {
  switch (op.kind) {
    case 'create':
      diff.create++;
      return;
    case 'schedule':
      diff.schedule.push(op.unit!);
      return;
    case 'remove':
      diff.remove.push(op.unit!);
      diff.detail[op.unit!] = op.detail!;
      return;
    case 'unbound':
      diff.unbound.push(op.unit!);
      diff.detail[op.unit!] = op.detail!;
      return;
  }
}
