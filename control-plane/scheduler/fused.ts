// control-plane/scheduler/fused.ts -- the default plugin set (node-ready,
// node-unschedulable, resources-fit, taint-toleration; balanced, spread,
// prefer-no-schedule) compiled by hand into ONE pass over the node columns.
// Pure, O(nodes), allocation-free per node.
//
// Why: plugin by plugin, the hot path is eight passes over 5,000-entry arrays
// (four filterMany, three addScores, the ranking) plus the candidate
// bookkeeping between them; each pass costs ~5 ns a node, which alone spends
// the whole 40 ns/node budget of "5,000 placements/s at 5,000 nodes". One loop
// reads each node's columns once, rejects or scores it, and keeps the best few
// as it goes.
//
// Contract: for the default plugins in their default order, the pass finds
// exactly what the plugin-by-plugin path finds -- the same feasible set, the
// same totals (same functions, same float operations in the same order), the
// same best nodes with ties going to the smaller name, the same first
// rejected nodes in snapshot order. It calls the plugins' own rule functions
// (fits, fraction/balanced, spreadScore, preferScore, toleratesAll,
// toleratesCordon), so a change to a rule changes both paths. The scheduler
// uses it only when its plugin lists ARE the default plugin objects
// (identity, not names), reading their weights at each call.
// test/unit/scheduler.test.ts compares the two paths decision by decision.

import { balanced, fraction } from './plugins/balanced-allocation.ts';
import { toleratesCordon } from './plugins/node-unschedulable.ts';
import { preferScore, scoreForUntolerated } from './plugins/prefer-no-schedule.ts';
import { fits } from './plugins/resources-fit.ts';
import { spreadScore } from './plugins/spread.ts';
import { toleratesAll } from './plugins/taint-toleration.ts';
import { NODE_CORDONED, NODE_NOT_READY, NODE_TAINTED, type ClusterSnapshot } from './snapshot.ts';
import type { NodeState, UnitRequest } from './types.ts';

/** Flags a filter must look at; a node with none of them passes node-ready, node-unschedulable and taint-toleration. */
const HARD_FLAGS = NODE_NOT_READY | NODE_CORDONED | NODE_TAINTED;
/**
 * Spread scores come from a table indexed by the deployment's units on the
 * node (0..max), built per pass: O(max) work, so it is capped; a node holding
 * more units than this is scored by spreadScore() directly.
 */
const MAX_SPREAD_TABLE_UNITS = 1023;
/** PreferNoSchedule scores by number of untolerated taints, 0..this; more go through preferScore(). */
const MAX_PREFER_TABLE_TAINTS = 15;

const NO_RANKS = new Int32Array(0);

/** node-ready, node-unschedulable and taint-toleration for a node carrying one of HARD_FLAGS (the rare case). */
function passesFlagged(flags: number, req: UnitRequest, node: NodeState, cordonTolerated: boolean): boolean {
  if ((flags & NODE_NOT_READY) !== 0) return false;
  if ((flags & NODE_CORDONED) !== 0 && !cordonTolerated) return false;
  // Without tolerations every NoSchedule/NoExecute taint rejects: the flag says it all.
  if ((flags & NODE_TAINTED) !== 0 && (req.tolerations.length === 0 || !toleratesAll(req, node))) return false;
  return true;
}

/**
 * One reusable pass and its results. After run(): feasibleCount and
 * rejectedCount; rejected[0..rejectedListed) the first rejected slots in
 * snapshot order; topSlot/topTotal[0..topCount) the best feasible slots and
 * their weighted totals, best first.
 */
export class FusedDefaultPass {
  feasibleCount = 0;
  rejectedCount = 0;
  rejectedListed = 0;
  topCount = 0;
  readonly rejected: Int32Array;
  readonly topSlot: Int32Array;
  readonly topTotal: Float64Array;
  private readonly topRank: Int32Array;
  private readonly topLoad: Float64Array;
  /** Spread counts for a deployment with no units yet (never written). */
  private zeros = new Int32Array(0);
  /** spreadTable[h] = weighted spread score of a node holding h units (h <= the pass's cap). */
  private spreadTable = new Float64Array(16);
  /** preferTable[k] = weighted prefer-no-schedule score with k untolerated taints. */
  private readonly preferTable = new Float64Array(MAX_PREFER_TABLE_TAINTS + 1);

  /** `maxShown`: best nodes kept (>= 1); `maxRejectedListed`: rejected slots recorded. */
  constructor(maxShown: number, maxRejectedListed: number) {
    if (!(maxShown >= 1)) throw new Error(`fused pass: keeps at least 1 node, not ${maxShown}`);
    this.topSlot = new Int32Array(maxShown);
    this.topTotal = new Float64Array(maxShown);
    this.topRank = new Int32Array(maxShown);
    this.topLoad = new Float64Array(maxShown);
    this.rejected = new Int32Array(Math.max(0, maxRejectedListed));
  }

  /** Weights are those of balanced, spread and prefer-no-schedule, in that order. */
  run(req: UnitRequest, snap: ClusterSnapshot, balancedWeight: number, spreadWeight: number, preferWeight: number): void {
    const nodes = snap.nodes();
    const n = nodes.length;
    const { cpuCapacity, memCapacity, cpuAllocated, memAllocated, flags, preferNoScheduleTaints } = snap.columns();
    const ranks = n > 0 ? snap.nameRanks() : NO_RANKS;
    const max = snap.maxOnOneNode(req.deployment);
    let here = snap.countsBySlot(req.deployment);
    if (here === undefined) {
      if (this.zeros.length < n) this.zeros = new Int32Array(n);
      here = this.zeros; // every node scores spread 100
    }
    // The same products the per-node expressions would give: score * weight.
    const spreadMax = max < MAX_SPREAD_TABLE_UNITS ? max : MAX_SPREAD_TABLE_UNITS;
    if (this.spreadTable.length <= spreadMax) this.spreadTable = new Float64Array(spreadMax + 1);
    const spreadTable = this.spreadTable;
    spreadTable[0] = 100 * spreadWeight; // most nodes hold none of the deployment's units
    for (let h = 1; h <= spreadMax; h++) spreadTable[h] = spreadScore(h, max) * spreadWeight;
    const preferTable = this.preferTable;
    preferTable[0] = 100 * preferWeight;
    for (let k = 1; k <= MAX_PREFER_TABLE_TAINTS; k++) preferTable[k] = scoreForUntolerated(k) * preferWeight;
    // A unit without tolerations tolerates no PreferNoSchedule taint: the
    // count is the untolerated count. With tolerations only untainted nodes
    // (count 0) use the table.
    const preferTableLimit = req.tolerations.length === 0 ? MAX_PREFER_TABLE_TAINTS : 0;
    const cpu = req.resources.cpu;
    const memory = req.resources.memory;
    const cordonTolerated = toleratesCordon(req);
    const topSlot = this.topSlot;
    const topTotal = this.topTotal;
    const topRank = this.topRank;
    const topLoad = this.topLoad;
    const keep = topSlot.length;
    const rejected = this.rejected;
    const rejectedMax = rejected.length;

    let rejectedCount = 0;
    let listed = 0;
    let top = 0;
    // The entry a newcomer must beat once top === keep.
    let worstTotal = 0;
    let worstRank = 0;
    let worstLoad = 0;
    for (let i = 0; i < n; i++) {
      // ---- filters (all must pass; which one fails matters only for reasons, built later)
      const f = flags[i];
      if (((f & HARD_FLAGS) !== 0 && !passesFlagged(f, req, nodes[i], cordonTolerated)) || !fits(cpuCapacity[i], cpuAllocated[i], memCapacity[i], memAllocated[i], cpu, memory)) {
        rejectedCount++;
        if (listed < rejectedMax) rejected[listed++] = i;
        continue;
      }
      // ---- scores: 0 + balanced*w, then + spread*w, then + prefer*w, as the
      // plugin-by-plugin path adds them to its zeroed totals.
      const cpuFraction = fraction(cpuAllocated[i], cpu, cpuCapacity[i]);
      const memFraction = fraction(memAllocated[i], memory, memCapacity[i]);
      let total = balanced(cpuFraction, memFraction) * balancedWeight;
      // Ties go to the least allocated node (after placing the unit), then the smaller name.
      const load = cpuFraction + memFraction;
      const h = here[i];
      total += h <= spreadMax ? spreadTable[h] : spreadScore(h, max) * spreadWeight;
      const k = preferNoScheduleTaints[i];
      total += k <= preferTableLimit ? preferTable[k] : preferScore(req, nodes[i]) * preferWeight;
      // ---- rank: higher total wins; equal totals go to the least
      // allocated node, then the smaller name. The common case is one
      // comparison: not better than the worst kept.
      if (top === keep && !(total > worstTotal || (total === worstTotal && (load < worstLoad || (load === worstLoad && ranks[i] < worstRank))))) continue;
      const rank = ranks[i];
      let at = top < keep ? top : keep - 1; // when full, the worst entry is dropped
      while (at > 0) {
        const other = topTotal[at - 1];
        const otherLoad = topLoad[at - 1];
        if (!(total > other || (total === other && (load < otherLoad || (load === otherLoad && rank < topRank[at - 1]))))) break;
        topSlot[at] = topSlot[at - 1];
        topTotal[at] = other;
        topRank[at] = topRank[at - 1];
        topLoad[at] = otherLoad;
        at--;
      }
      topSlot[at] = i;
      topTotal[at] = total;
      topRank[at] = rank;
      topLoad[at] = load;
      if (top < keep) top++;
      if (top === keep) {
        worstTotal = topTotal[keep - 1];
        worstRank = topRank[keep - 1];
        worstLoad = topLoad[keep - 1];
      }
    }
    this.feasibleCount = n - rejectedCount;
    this.rejectedCount = rejectedCount;
    this.rejectedListed = listed;
    this.topCount = top;
  }
}
