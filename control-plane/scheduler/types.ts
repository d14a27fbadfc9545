// control-plane/scheduler/types.ts -- the vocabulary of the pure scheduler:
// what a node looks like to it, what a unit asks for, the two plugin roles
// (filter, score) and the decision it hands back. Plain data and interfaces;
// no I/O, no clock. Units: cpu in millicores, memory in MiB.

import type { Resources, Taint, Toleration } from '../../shared/model.ts';
import type { ClusterSnapshot } from './snapshot.ts';

/** One node as the scheduler sees it (built by the caller from the registry). */
export interface NodeState {
  name: string;
  /** False when heartbeats stopped; the node-ready filter rejects it. */
  ready: boolean;
  /** Why it is not ready, shown in the rejection, e.g. 'no heartbeat for 1.3s'. */
  notReadyReason?: string;
  /** Cordoned by a user (`mo cordon`). */
  unschedulable: boolean;
  capacity: Resources;
  /** Sum of the requests of every unit bound to this node. */
  allocated: Resources;
  taints: Taint[];
  labels: Record<string, string>;
}

/** What one unit asks of a node. `deployment` groups replicas for spreading. */
export interface UnitRequest {
  deployment: string;
  resources: Resources; // requests
  tolerations: Toleration[];
}

/**
 * A filter's verdict on one node. A rejection is an expected outcome, not an
 * error: it carries one human reason per problem found (resources-fit may
 * report cpu and memory separately), in the words users see in events.
 */
export type FilterStatus = { ok: true } | { ok: false; reasons: string[] };

/** The one shared success value: filters return it so feasible nodes allocate nothing. */
export const FILTER_OK: FilterStatus = Object.freeze({ ok: true as const });

/** Looks at one node and says whether the unit may go there at all. */
export interface FilterPlugin {
  name: string;
  /**
   * When true and this filter rejects a node, the filters after it are not run
   * for that node: their answers would be meaningless (a node without
   * heartbeats has stale allocation numbers).
   */
  stopOnReject?: boolean;
  /** Pure. Return FILTER_OK when the unit fits; reasons are built only on rejection. */
  filter(req: UnitRequest, node: NodeState, snap: ClusterSnapshot): FilterStatus;
  /**
   * Optional fast path over many nodes (the scheduler's hot loop). `nodes` is
   * snap.nodes(). Keeps, in order, the entries of candidates[0..count) --
   * indexes into `nodes`, ascending -- that
   * filter() would accept, moved to the front; returns how many it kept. Must
   * agree exactly with filter(). It exists because one generic plugin call per
   * node costs more than the check itself; a loop inside the plugin calls its
   * own check directly, which V8 inlines.
   */
  filterMany?(req: UnitRequest, nodes: readonly NodeState[], candidates: Int32Array, count: number, snap: ClusterSnapshot): number;
}

/** Ranks one feasible node. Scores are integers 0..100, higher is better. */
export interface ScorePlugin {
  name: string;
  /** The node's total is the sum over plugins of weight * score. */
  weight: number;
  /**
   * Pure and allocation-free: called for feasible nodes. (Refines the
   * `{score, detail}` shape: the human detail lives in explain(), built only
   * for the few nodes a decision shows.)
   */
  score(req: UnitRequest, node: NodeState, snap: ClusterSnapshot): number;
  /**
   * Optional fast path: totals[j] += weight * score(req, nodes[candidates[j]],
   * snap) for j < count, with exactly score()'s integers (the scheduler does
   * not re-check them here). `nodes` is snap.nodes().
   */
  addScores?(req: UnitRequest, nodes: readonly NodeState[], candidates: Int32Array, count: number, snap: ClusterSnapshot, totals: Float64Array, weight: number): void;
  /** Why `score` gave what it gave, e.g. 'cpu%=37.5% mem%=36.9% imbalance=0.6%'. */
  explain?(req: UnitRequest, node: NodeState, snap: ClusterSnapshot): string;
}

/** What happened to one node in one scheduling decision. */
export interface NodeDecision {
  node: string;
  feasible: boolean;
  /** Rejection reasons (empty when feasible). */
  reasons: string[];
  /** Per score plugin (by name), unweighted 0..100. Only for scored nodes shown. */
  scores?: Record<string, number>;
  /** Weighted sum of `scores`. */
  total?: number;
  /** explain() of each score plugin, in plugin order ('' for one without explain). */
  detail?: string[];
}

/**
 * The outcome of placing one unit. `nodes` lists the rejected nodes in
 * snapshot order (at most MAX_REJECTED_NODES_IN_DECISION of them) and then the
 * best feasible nodes, best first (at most MAX_SCORED_NODES_IN_DECISION): a
 * 5,000-node cluster must not make every decision 5,000 objects long. The
 * counts say how many there were in all.
 */
export interface SchedulingDecision {
  deployment: string;
  /** The winning node, or null when no node passed every filter. */
  chosen: string | null;
  nodes: NodeDecision[];
  nodeCount: number;
  feasibleCount: number;
  rejectedCount: number;
  /** Each score plugin's weight by name, so a decision explains its totals alone. */
  weights: Record<string, number>;
  /**
   * One line. Placed: 'node-b (score 299: balanced=99 spread=100 ...) over
   * node-d (290)'. Unschedulable (Kubernetes style): '0/4 nodes are
   * available: node-a: cpu_free=800m < request=1000m; node-c: untolerated
   * taint gpu-only'.
   */
  message: string;
}
