// control-plane/reconcile/types.ts -- the data the reconcile loop reads
// (desired deployments, committed unit bindings, observed node reports,
// the commands already in flight, the clock reading) and the plan it
// returns. Plain data only; the decision itself is in reconcile.ts.

import type { UnitReport, UnitSpec } from '../../shared/model.ts';

/** What the user declared for one deployment (replicated state). */
export interface DesiredDeployment {
  name: string;
  replicas: number;
  generation: number;
  /** The current revision: what new units run. */
  specHash: string;
  unitSpec: UnitSpec;
  revision?: number;
  /**
   * How a new revision replaces units, resolved to counts for `replicas`
   * (see resolveStrategy). Absent: RollingUpdate 25%/25%.
   */
  strategy?: ResolvedStrategy;
  /** A unit counts as available this long after it turned ready. */
  minReadyMs?: number;
  /** No rollout steps while paused; scaling still works. */
  paused?: boolean;
  /** The crash-loop back-off in force (replicated), if any. */
  backoff?: { failures: number; until: number } | null;
}

export interface ResolvedStrategy {
  type: 'RollingUpdate' | 'Recreate';
  maxSurge: number;
  maxUnavailable: number;
}

/**
 * One unit the scheduler committed (replicated state). The binding is
 * committed BEFORE its spawn is sent, so a new leader knows every unit the
 * old one decided on.
 */
export interface Binding {
  name: string; // `<deployment>-<index>`
  deployment: string;
  index: number; // the n of `<deployment>-<n>`, never reused
  /**
   * The node it is bound to, or null while no node fits (the unit exists
   * and stays Pending with a FailedScheduling event; see the `schedule`
   * action).
   */
  nodeName: string | null;
  specHash: string;
  boundAt: number; // ms, the leader clock when its node was chosen (the binding's decision)
  /** The unit's own grace period (terminationGracePeriodSeconds), if its template set one. */
  gracePeriodMs?: number;
}

/** One node as the replicas observe it: liveness plus its agent's reports. */
export interface ObservedNode {
  name: string;
  ready: boolean;
  units: ReadonlyMap<string, UnitReport>;
  /**
   * Since when (leader clock) this replica hears the node's current agent
   * process, whose reports list everything it runs. Undefined while no agent
   * has said hello yet (a freshly started replica's grace period). A unit
   * bound before this moment and not reported died with an earlier agent.
   */
  reportsSince?: number;
}

/**
 * Commands this leader has sent and not yet seen answered, by unit name,
 * with the leader-clock time they were sent. Remembering them is what keeps
 * a stale view from making the loop act twice (the ReplicaSet controller's
 * "expectations"). A new leader starts with both maps empty.
 */
export interface InFlight {
  spawns: ReadonlyMap<string, number>;
  terminates: ReadonlyMap<string, number>;
  /** Grace periods of the terminates above that did not use the default. */
  terminateGrace?: ReadonlyMap<string, number>;
}

export interface ReconcileInput {
  deployments: ReadonlyMap<string, DesiredDeployment>;
  bindings: ReadonlyMap<string, Binding>;
  nodes: ReadonlyMap<string, ObservedNode>;
  inFlight: InFlight;
  now: number; // ms, leader clock
  /**
   * Budget of rate-limited operations per pass (create, schedule, removal
   * of a bound unit, terminate of an unbound unit). Infinity: no limit.
   */
  maxActionsPerPass: number;
  /** A spawn not answered by a report within this long is sent again. */
  spawnTimeoutMs: number;
  /**
   * The grace period the agent gives a unit between SIGTERM and SIGKILL. A
   * terminate is sent again only after terminateGracePeriodMs +
   * spawnTimeoutMs (the same delivery allowance a spawn gets).
   */
  terminateGracePeriodMs: number;
  /**
   * Pass counter used only to rotate which deployment the round-robin
   * starts with, so a budget smaller than the number of deployments
   * starves none of them. Optional; 0 when absent.
   */
  pass?: number;
  /**
   * Reconcile only these deployments (a bounded pass over part of a big
   * cluster): `deployments` and `bindings` then hold theirs, and reports of
   * other deployments are left alone (the pass says nothing of them).
   * Reports that name no deployment count as NO_DEPLOYMENT's. Absent: all.
   */
  scope?: ReadonlySet<string>;
  /**
   * With `scope`: every (node name, report) naming a deployment ('' for
   * reports naming none), from an index (the registry's), so a pass reads
   * its scope's reports and not every report of every node. Each must be
   * the very report `nodes` holds. Absent: every Ready node's are walked.
   */
  reportsOf?: (deployment: string, visit: (node: { name: string }, report: UnitReport) => void) => void;
}

/** The scope name of a unit report that names no deployment and has no binding. */
export const NO_DEPLOYMENT = '(no deployment)';

export type UnbindReason = 'lost' | 'crashed' | 'completed' | 'surplus' | 'deployment deleted' | 'rollout';

export type Action =
  /**
   * Schedule + bind one new unit (the driver allocates `<deployment>-<n>`),
   * of the current revision, or of `specHash`'s (a paused rollout scales
   * the template that runs).
   */
  | { type: 'create'; deployment: string; specHash?: string }
  /**
   * Start a crash-loop back-off round: failed units of this deployment are
   * replaced no sooner than `until`. `unit` and `detail` name the failure.
   */
  | { type: 'backoff'; deployment: string; failures: number; until: number; unit: string; detail: string }
  /** A unit ran long enough before it failed: the back-off is over. */
  | { type: 'backoff-reset'; deployment: string }
  /** Retry placement of an existing unit that no node fitted yet. */
  | { type: 'schedule'; unit: string; deployment: string }
  /** Bound, not observed on its Ready node, no spawn in flight (or it timed out): (re)send. Never a second unit. */
  | { type: 'spawn'; unit: string; node: string; deployment: string }
  /** Commit removal of the binding. `node` is null for a unit that was never placed. */
  | { type: 'unbind'; unit: string; node: string | null; deployment: string; reason: UnbindReason }
  /** The node is Ready and runs a unit that must stop; gracePeriodMs: its own, if its template set one. */
  | { type: 'terminate'; unit: string; node: string; reason: string; gracePeriodMs?: number }
  /** The agent holds a finished, unbound unit: tell it to drop the record. */
  | { type: 'forget'; unit: string; node: string };

/** What one pass decided for one deployment: lesson 1's printed line, as data. */
export interface DeploymentDiff {
  deployment: string;
  desired: number; // 0 once the deployment is deleted
  deleted: boolean; // bindings or units remain of a deployment no longer desired
  /** Units counted as running or starting, before this pass acts (0 for a deleted deployment: none count). */
  live: number;
  /** Units that exist but no node fits yet (counted toward desired, not live). */
  unscheduled: number;
  /** `create` actions planned this pass (after the rate limit). */
  create: number;
  /** `schedule` retries planned this pass. */
  schedule: string[];
  /** Bound units removed this pass (surplus or deployment deleted), in removal order. */
  remove: string[];
  /** Running units without a binding, terminated this pass. */
  unbound: string[];
  lost: string[];
  crashed: string[];
  completed: string[];
  /** Bound units whose spawn is (re)sent this pass. */
  resend: string[];
  /** Rate-limited operations of this deployment cut from this pass. */
  deferred: number;
  /** Why, per unit named above: 'on node-a NotReady', 'exit 1', 'signal SIGKILL', a terminate reason. */
  detail: Record<string, string>;
  /** Failed units kept (not yet replaced) while the crash-loop back-off runs. */
  backoff: string[];
  /** Set while units of an older revision are alive (a rollout is under way). */
  rollout: RolloutProgress | null;
}

/** Where a rollout stands, counted before this pass acts. */
export interface RolloutProgress {
  revision: number;
  strategy: 'RollingUpdate' | 'Recreate';
  paused: boolean;
  /** Units of the current revision (not stopping). */
  updated: number;
  /** Units Running, ready, and ready for minReadySeconds (not stopping). */
  available: number;
  /** replicas - maxUnavailable: the floor of `available` the rollout keeps. */
  minAvailable: number;
  /** replicas + maxSurge: the ceiling of processes alive, stopping ones included. */
  maxAlive: number;
  /** Processes alive now, stopping ones included. */
  alive: number;
  /** Units started / stopped by this pass for the rollout. */
  starting: number;
  stopping: string[];
}

/** Counts a deployment's status reports, from the same inputs as a pass. */
export interface DeploymentCounts {
  /** Units that count toward replicas (not stopping, not finished). */
  replicas: number;
  updated: number;
  ready: number;
  available: number;
  /** Processes of older revisions still alive (stopping ones included). */
  oldAlive: number;
  /** Failed units waiting out a crash-loop back-off. */
  backoff: number;
}

export interface Plan {
  actions: Action[];
  diffs: DeploymentDiff[]; // sorted by deployment name
  deferred: number; // rate-limited operations cut by maxActionsPerPass
  /** Per desired deployment, its counts before this pass acts (for status). */
  counts: Map<string, DeploymentCounts>;
  /**
   * The earliest later time at which the same input plans differently
   * (a back-off ends, a unit has been ready for minReadySeconds); null if
   * none. The driver runs a pass then.
   */
  wakeAt: number | null;
}
