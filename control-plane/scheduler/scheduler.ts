// control-plane/scheduler/scheduler.ts -- the filter -> score pipeline for one
// unit at a time, as in lesson 2's step 3 (docs/lessons.md) and the Kubernetes scheduling
// framework:
//
//   every node --filter plugins--> feasible nodes --score plugins--> best total
//        \__ rejected, with reasons               (ties: least allocated, then name)
//
// Pure: data in (request + ClusterSnapshot), data out (SchedulingDecision).
// Each node is visited once per plugin: O(nodes) per unit. The caller binds
// the unit and calls snap.assume(chosen, req) before the next one, so each
// placement changes the next one's scores (real bin-packing).
//
// Hot path contract (the target: 20,000 placements/s at 5,000 nodes, see
// bench/scheduler.ts). With the default plugins (the very objects in
// defaults.ts, in that order) one fused loop (fused.ts) filters, scores and
// ranks every node in a single pass over the snapshot's columns, and a
// request shape seen again on the same snapshot re-reads only the nodes
// changed since (incremental.ts): O(changed nodes), not O(nodes). With any
// other plugin list the loops run plugin by plugin over an array of
// candidate node indexes, through each plugin's filterMany/addScores when it
// has one (a generic per-node plugin call costs more than the check itself).
// Both paths give the same decision for the default plugins (tested).
// Feasible nodes allocate nothing. Reasons are built afterwards, only for the
// rejected nodes a decision lists (their filters run once more, per node, to
// say why); per-plugin scores and explanations only for the few best nodes
// (their score() runs once more).

import { defaultFilters, defaultScores } from './defaults.ts';
import { placedMessage, unschedulableMessage } from './format.ts';
import { FusedDefaultPass } from './fused.ts';
import { INCREMENTAL_MIN_NODES, IncrementalDefaultPass } from './incremental.ts';
import { fraction } from './plugins/balanced-allocation.ts';
import { roundHalfUp } from './plugins/round.ts';
import type { ClusterSnapshot } from './snapshot.ts';
import type { FilterPlugin, NodeDecision, NodeState, ScorePlugin, SchedulingDecision, UnitRequest } from './types.ts';

/** Feasible nodes a decision describes in full (best first). */
export const MAX_SCORED_NODES_IN_DECISION = 3;
/** Rejected nodes a decision lists with reasons; the rest are only counted. */
export const MAX_REJECTED_NODES_IN_DECISION = 20;

export interface SchedulerOptions {
  filters?: readonly FilterPlugin[];
  scores?: readonly ScorePlugin[];
  /**
   * With the default plugins: keep each request shape's pass up to date
   * between calls on snapshots of INCREMENTAL_MIN_NODES nodes or more
   * (incremental.ts; the default, undefined), at any size (true: tests), or
   * run the full fused pass every time (false: the baseline
   * bench/scheduler.ts measures beside it). Decisions are the same either way.
   */
  incremental?: boolean;
}

/** Clamps a plugin's answer to an integer 0..100 (NaN counts as 0). */
function clampScore(s: number): number {
  if (!(s > 0)) return 0;
  if (s >= 100) return 100;
  return roundHalfUp(s);
}

function identity(candidates: Int32Array, count: number): void {
  for (let i = 0; i < count; i++) candidates[i] = i;
}

/** Same plugin objects in the same order (identity: a copy with another weight is another plugin). */
function samePlugins<T>(a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((p, i) => p === b[i]);
}

export class Scheduler {
  readonly filters: readonly FilterPlugin[];
  readonly scores: readonly ScorePlugin[];
  // Scratch reused across calls (sized to the largest cluster seen), so a
  // placement allocates O(1) objects, not O(nodes).
  private candidates = new Int32Array(0);
  private totals = new Float64Array(0);
  /** The one-pass loop, when the plugin lists are exactly the defaults; else null. */
  private readonly fused: FusedDefaultPass | null;
  /** The default plugins' pass kept up to date between calls (incremental.ts), unless `incremental: false`. */
  private readonly incremental: IncrementalDefaultPass | null;
  /** Snapshots smaller than this get the full pass. */
  private readonly incrementalMinNodes: number;

  /** Without options: defaultFilters and defaultScores. */
  constructor(opts: SchedulerOptions = {}) {
    this.filters = (opts.filters ?? defaultFilters).slice();
    this.scores = (opts.scores ?? defaultScores).slice();
    const seen = new Set<string>();
    for (const p of [...this.filters, ...this.scores]) {
      if (seen.has(p.name)) throw new Error(`scheduler: two plugins named ${JSON.stringify(p.name)}`);
      seen.add(p.name);
    }
    for (const s of this.scores) {
      if (!Number.isFinite(s.weight) || s.weight < 0) {
        throw new Error(`scheduler: score plugin ${s.name} has weight ${s.weight}; weights are finite and >= 0`);
      }
    }
    const defaults = samePlugins(this.filters, defaultFilters) && samePlugins(this.scores, defaultScores);
    this.fused = defaults ? new FusedDefaultPass(MAX_SCORED_NODES_IN_DECISION, MAX_REJECTED_NODES_IN_DECISION) : null;
    this.incremental = defaults && opts.incremental !== false ? new IncrementalDefaultPass(MAX_SCORED_NODES_IN_DECISION, MAX_REJECTED_NODES_IN_DECISION) : null;
    this.incrementalMinNodes = opts.incremental === true ? 0 : INCREMENTAL_MIN_NODES;
  }

  /** With the incremental path: decisions answered from a kept shape, and full passes (tests, benchmarks). */
  get passCounts(): { incremental: number; full: number } | null {
    return this.incremental !== null ? { incremental: this.incremental.incremental, full: this.incremental.rebuilds } : null;
  }

  /** True when schedule() takes the fused one-pass path (the default plugins, unchanged). */
  get usesFusedPath(): boolean {
    return this.fused !== null;
  }

  /** Picks a node for one unit. Does not change `snap`: assume() the result yourself. */
  schedule(req: UnitRequest, snap: ClusterSnapshot): SchedulingDecision {
    if (this.fused === null) return this.schedulePluginByPlugin(req, snap);
    const pass = this.incremental !== null && snap.nodes().length >= this.incrementalMinNodes ? this.incremental : this.fused;
    return this.scheduleFused(pass, req, snap);
  }

  /**
   * The default plugins: one pass (fused.ts) the first time a request shape
   * is seen on a snapshot, then only the nodes changed since (incremental.ts);
   * the decision is built as below.
   */
  private scheduleFused(pass: IncrementalDefaultPass | FusedDefaultPass, req: UnitRequest, snap: ClusterSnapshot): SchedulingDecision {
    const scores = this.scores; // balanced, spread, prefer-no-schedule: checked in the constructor
    pass.run(req, snap, scores[0].weight, scores[1].weight, scores[2].weight);
    const nodes = snap.nodes();
    // Reasons and descriptions of nodes that did not change since they were
    // last derived for this request shape are taken from the memo (copies:
    // decisions share nothing).
    const memo = pass instanceof IncrementalDefaultPass ? pass.memo : null;
    const rejected: NodeDecision[] = [];
    for (let k = 0; k < pass.rejectedListed; k++) {
      const slot = pass.rejected[k];
      const node = nodes[slot];
      let m = memo?.get(slot);
      if (m?.reasons === undefined) {
        const reasons = this.reasonsFor(req, node, snap);
        if (memo) memo.set(slot, (m = { ...m, reasons: reasons.slice() }));
        rejected.push({ node: node.name, feasible: false, reasons });
      } else rejected.push({ node: node.name, feasible: false, reasons: m.reasons.slice() });
    }
    const scored: NodeDecision[] = [];
    for (let k = 0; k < pass.topCount; k++) {
      const slot = pass.topSlot[k];
      const total = pass.topTotal[k];
      let m = memo?.get(slot);
      const d = m?.described;
      if (d !== undefined && d.total === total) {
        scored.push({ node: d.node, feasible: true, reasons: [], scores: { ...d.scores }, total, detail: d.detail!.slice() });
        continue;
      }
      const described = this.describe(req, nodes[slot], snap, total);
      if (memo) memo.set(slot, (m = { ...m, described: { ...described, scores: { ...described.scores }, detail: described.detail!.slice() } }));
      scored.push(described);
    }
    return this.decision(req, nodes.length, pass.feasibleCount, pass.rejectedCount, rejected, scored);
  }

  /** Any plugin lists: each filter and score plugin in turn over the candidates. */
  private schedulePluginByPlugin(req: UnitRequest, snap: ClusterSnapshot): SchedulingDecision {
    const nodes = snap.nodes();
    const nodeCount = nodes.length;
    this.reserve(nodeCount);
    const candidates = this.candidates;
    const filters = this.filters;
    const scores = this.scores;

    // ---- filter: candidates[0..count) shrinks, staying in snapshot order.
    identity(candidates, nodeCount);
    let count = nodeCount;
    for (let f = 0; f < filters.length && count > 0; f++) {
      const plugin = filters[f];
      const kept = plugin.filterMany ? plugin.filterMany(req, nodes, candidates, count, snap) : filterOneByOne(plugin, req, nodes, candidates, count, snap);
      if (!(kept >= 0 && kept <= count)) {
        throw new Error(`scheduler: filter ${plugin.name} kept ${kept} of ${count} nodes`);
      }
      count = kept;
    }
    const feasibleCount = count;
    const rejectedCount = nodeCount - count;

    // ---- why: the first rejected nodes, in snapshot order, with reasons.
    const rejected: NodeDecision[] = [];
    for (let i = 0, j = 0; i < nodeCount && rejected.length < MAX_REJECTED_NODES_IN_DECISION; i++) {
      if (j < count && candidates[j] === i) {
        j++;
        continue;
      }
      rejected.push({ node: nodes[i].name, feasible: false, reasons: this.reasonsFor(req, nodes[i], snap) });
    }

    // ---- score: weighted sum of 0..100 integers per feasible node.
    const totals = this.totals;
    totals.fill(0, 0, count);
    for (let p = 0; p < scores.length && count > 0; p++) {
      const plugin = scores[p];
      if (plugin.addScores) {
        plugin.addScores(req, nodes, candidates, count, snap, totals, plugin.weight);
      } else {
        for (let j = 0; j < count; j++) totals[j] += clampScore(plugin.score(req, nodes[candidates[j]], snap)) * plugin.weight;
      }
    }

    // ---- rank: keep the best few, best first. Higher total wins; equal
    // totals go to the least allocated node once the unit is placed (cpu
    // plus memory fraction), then to the smaller name, so units do not pile
    // on one node by name and every control-plane replica agrees.
    const keep = MAX_SCORED_NODES_IN_DECISION;
    const nameRank = count > 0 ? snap.nameRanks() : null;
    const load = (j: number): number => {
      const n = nodes[candidates[j]];
      return fraction(n.allocated.cpu, req.resources.cpu, n.capacity.cpu) + fraction(n.allocated.memory, req.resources.memory, n.capacity.memory);
    };
    const top: number[] = []; // positions j into candidates/totals, best first
    let worst = -Infinity; // totals[top[keep - 1]] once top is full
    for (let j = 0; j < count; j++) {
      const total = totals[j];
      if (total < worst) continue; // the common case: one comparison per node
      let at = top.length;
      while (at > 0) {
        const k = top[at - 1];
        const other = totals[k];
        const better = total > other || (total === other && (load(j) < load(k) || (load(j) === load(k) && nameRank![candidates[j]] < nameRank![candidates[k]])));
        if (better) at--;
        else break;
      }
      if (at >= keep) continue;
      top.splice(at, 0, j);
      if (top.length > keep) top.pop();
      if (top.length === keep) worst = totals[top[keep - 1]];
    }

    // ---- describe: only the nodes shown get score tables and explanations.
    const scored: NodeDecision[] = top.map((j) => this.describe(req, nodes[candidates[j]], snap, totals[j]));
    return this.decision(req, nodeCount, feasibleCount, rejectedCount, rejected, scored);
  }

  /** A shown feasible node: each score plugin's score and explanation (score() runs once more). */
  private describe(req: UnitRequest, node: NodeState, snap: ClusterSnapshot, total: number): NodeDecision {
    const scores = this.scores;
    const byPlugin: Record<string, number> = {};
    const detail: string[] = [];
    for (let p = 0; p < scores.length; p++) {
      const plugin = scores[p];
      byPlugin[plugin.name] = clampScore(plugin.score(req, node, snap));
      detail.push(plugin.explain ? plugin.explain(req, node, snap) : '');
    }
    return { node: node.name, feasible: true, reasons: [], scores: byPlugin, total, detail };
  }

  /** The decision and its message; `scored` is best first. */
  private decision(req: UnitRequest, nodeCount: number, feasibleCount: number, rejectedCount: number, rejected: NodeDecision[], scored: NodeDecision[]): SchedulingDecision {
    const decision: SchedulingDecision = {
      deployment: req.deployment,
      chosen: scored.length > 0 ? scored[0].node : null,
      nodes: [...rejected, ...scored],
      nodeCount,
      feasibleCount,
      rejectedCount,
      weights: Object.fromEntries(this.scores.map((s) => [s.name, s.weight])),
      message: '',
    };
    decision.message = decision.chosen === null ? unschedulableMessage(decision) : placedMessage(decision);
    return decision;
  }

  /** Every filter's reasons for one node, stopping after a stopOnReject filter rejects. */
  private reasonsFor(req: UnitRequest, node: NodeState, snap: ClusterSnapshot): string[] {
    const reasons: string[] = [];
    for (const f of this.filters) {
      const status = f.filter(req, node, snap);
      if (status.ok) continue;
      reasons.push(...status.reasons);
      if (f.stopOnReject) break;
    }
    // Only a filterMany that disagrees with its own filter() gets here empty.
    if (reasons.length === 0) reasons.push('rejected by a filter that gave no reason');
    return reasons;
  }

  private reserve(nodeCount: number): void {
    if (this.candidates.length >= nodeCount) return;
    const size = Math.max(nodeCount, this.candidates.length * 2, 64);
    this.candidates = new Int32Array(size);
    this.totals = new Float64Array(size);
  }
}

/** The generic path for a filter without filterMany: one call per candidate. */
function filterOneByOne(plugin: FilterPlugin, req: UnitRequest, nodes: readonly NodeState[], candidates: Int32Array, count: number, snap: ClusterSnapshot): number {
  let kept = 0;
  for (let j = 0; j < count; j++) {
    const i = candidates[j];
    if (plugin.filter(req, nodes[i], snap).ok) candidates[kept++] = i;
  }
  return kept;
}
