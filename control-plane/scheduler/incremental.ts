// control-plane/scheduler/incremental.ts -- the default plugins' decision
// kept up to date between placements instead of recomputed over every node.
// Pure, deterministic, and exactly the decision of the fused pass (fused.ts)
// and of the plugin-by-plugin path: test/unit/scheduler.test.ts compares
// them decision by decision, with the naive reference scheduler beside.
//
// Why: the leader places units one at a time on one snapshot (a 1,000-unit
// apply is 1,000 schedule() calls with the same request), and each
// placement changes one or two nodes (assume, forget). A full pass reads
// every node each time: O(nodes) per unit, ~200 us at 5,000 nodes on this
// machine. Here each request shape (deployment, resources, tolerations,
// weights) keeps, on the snapshot it was built for:
//   * whether each node passes the filters (a byte per node) and how many
//     fail, so the decision's counts and its first rejected nodes in
//     snapshot order come from the bitmap;
//   * a candidate set S of at most MAX_CANDIDATES feasible nodes and a
//     boundary key B such that every feasible node outside S ranks at or
//     below B and every node in S ranks above it. The best nodes of the
//     cluster are then the best of S, as long as S holds at least as many
//     as a decision shows.
// Before answering, it re-evaluates only the nodes the snapshot changed
// since (ClusterSnapshot's change log): one that now ranks above B joins S,
// one that does not leaves it. It rebuilds from every node (one full pass)
// when S ran short, when the deployment's most units on one node changed
// (every spread score moves), when nodes came or went, when the weights
// changed, or when more changes happened than the log holds. A shape seen
// for the first time on a snapshot is a full pass too, so a decision never
// costs much more than before; repeated ones cost O(changed nodes).
//
// The rank is the fused pass's: higher total, then the smaller load (cpu +
// memory fraction after placing), then the smaller name rank: a strict
// total order, so "the best k" is the same set whatever order nodes are
// looked at in. A NaN total or load (infinite capacities or requests) has
// no place in such an order; a shape that meets one is not kept and that
// decision is the fused pass's.

import { balanced, fraction } from './plugins/balanced-allocation.ts';
import { toleratesCordon } from './plugins/node-unschedulable.ts';
import { preferScore, scoreForUntolerated } from './plugins/prefer-no-schedule.ts';
import { fits } from './plugins/resources-fit.ts';
import { spreadScore } from './plugins/spread.ts';
import { toleratesAll } from './plugins/taint-toleration.ts';
import { FusedDefaultPass } from './fused.ts';
import { NODE_CORDONED, NODE_NOT_READY, NODE_TAINTED, type ClusterSnapshot } from './snapshot.ts';
import type { NodeDecision, UnitRequest } from './types.ts';

/** Candidates kept per shape; a full rebuild is needed once fewer remain than a decision shows. */
export const MAX_CANDIDATES = 64;
/** Request shapes remembered per snapshot (least recently used dropped first). */
export const MAX_SHAPES = 64;
/**
 * Below this many nodes a full pass costs about what keeping a shape does
 * (between two uses of a shape a busy leader changes a good share of a small
 * cluster): the scheduler runs plain full passes there (scheduler.ts).
 */
export const INCREMENTAL_MIN_NODES = 256;
/** Explanations remembered per shape (memo); more and the memo starts over. */
const MAX_MEMO_ENTRIES = 256;

/**
 * What the scheduler derived for one node slot and one shape (the reasons
 * of a rejected node, the description of a shown one): valid until the node
 * changes, which drops the entry, or the shape is rebuilt.
 */
export interface SlotMemo {
  reasons?: string[];
  described?: NodeDecision;
}

const HARD_FLAGS = NODE_NOT_READY | NODE_CORDONED | NODE_TAINTED;
/** PreferNoSchedule scores by untolerated count come from a table up to this many (as in fused.ts). */
const MAX_PREFER_TABLE_TAINTS = 15;

interface Shape {
  key: string;
  req: UnitRequest;
  cordonTolerated: boolean;
  /** Snapshot layout and change version this shape is true for. */
  layout: number;
  version: number;
  max: number;
  wb: number;
  ws: number;
  wp: number;
  /** feasible[i] = 1 when node slot i passes every filter. */
  feasible: Uint8Array;
  rejectedCount: number;
  /** Candidate slots S and their keys; pos[i] = index of slot i in S, or -1. */
  size: number;
  slot: Int32Array;
  total: Float64Array;
  load: Float64Array;
  rank: Int32Array;
  pos: Int32Array;
  memo: Map<number, SlotMemo>;
  /** The boundary: every feasible node outside S ranks at or below it; `all`: S holds every feasible node. */
  all: boolean;
  bTotal: number;
  bLoad: number;
  bRank: number;
}

/** a ranks strictly above b (higher total, then smaller load, then smaller name rank). */
function above(aTotal: number, aLoad: number, aRank: number, bTotal: number, bLoad: number, bRank: number): boolean {
  return aTotal > bTotal || (aTotal === bTotal && (aLoad < bLoad || (aLoad === bLoad && aRank < bRank)));
}

function shapeKey(req: UnitRequest, wb: number, ws: number, wp: number): string {
  const t = req.tolerations.length === 0 ? '' : JSON.stringify(req.tolerations);
  return `${req.deployment}\u0000${req.resources.cpu}\u0000${req.resources.memory}\u0000${wb}\u0000${ws}\u0000${wp}\u0000${t}`;
}

/**
 * Same results as FusedDefaultPass after run(): feasibleCount,
 * rejectedCount, rejected[0..rejectedListed), topSlot/topTotal[0..topCount).
 */
export class IncrementalDefaultPass {
  feasibleCount = 0;
  rejectedCount = 0;
  rejectedListed = 0;
  topCount = 0;
  readonly rejected: Int32Array;
  readonly topSlot: Int32Array;
  readonly topTotal: Float64Array;
  /** The answered shape's explanations by slot (null when the last answer kept no shape). */
  memo: Map<number, SlotMemo> | null = null;
  /** Calls answered from a kept shape, and full passes (tests and benchmarks look). */
  incremental = 0;
  rebuilds = 0;
  private readonly keep: number;
  private readonly fused: FusedDefaultPass;
  private snap: ClusterSnapshot | null = null;
  private readonly shapes = new Map<string, Shape>();
  // The node just evaluated.
  private evFeasible = false;
  private evTotal = 0;
  private evLoad = 0;

  constructor(maxShown: number, maxRejectedListed: number) {
    if (!(maxShown >= 1) || maxShown > MAX_CANDIDATES) throw new Error(`incremental pass: shows 1..${MAX_CANDIDATES} nodes, not ${maxShown}`);
    this.keep = maxShown;
    this.fused = new FusedDefaultPass(maxShown, maxRejectedListed);
    this.topSlot = new Int32Array(maxShown);
    this.topTotal = new Float64Array(maxShown);
    this.rejected = new Int32Array(Math.max(0, maxRejectedListed));
  }

  run(req: UnitRequest, snap: ClusterSnapshot, wb: number, ws: number, wp: number): void {
    if (snap !== this.snap) {
      this.shapes.clear();
      this.snap = snap;
    }
    const key = shapeKey(req, wb, ws, wp);
    let shape = this.shapes.get(key);
    if (shape !== undefined) {
      this.shapes.delete(key); // most recently used goes last
      if (!this.sync(shape, snap)) shape = undefined;
      else this.incremental++;
    }
    if (shape === undefined) {
      const built = this.build(key, req, snap, wb, ws, wp);
      if (built === null) {
        this.memo = null;
        this.copyFused(snap, req, wb, ws, wp);
        return;
      }
      shape = built;
    }
    this.shapes.set(key, shape);
    while (this.shapes.size > MAX_SHAPES) this.shapes.delete(this.shapes.keys().next().value as string);
    if (shape.memo.size > MAX_MEMO_ENTRIES) shape.memo.clear();
    this.memo = shape.memo;
    this.answer(shape, snap);
  }

  /** Evaluates node slot i for the shape's request: evFeasible, evTotal, evLoad (the fused pass's arithmetic). */
  private evaluate(s: Shape, snap: ClusterSnapshot, i: number, here: Int32Array | undefined): void {
    const { cpuCapacity, memCapacity, cpuAllocated, memAllocated, flags, preferNoScheduleTaints } = snap.columns();
    const req = s.req;
    const f = flags[i];
    const nodes = snap.nodes();
    if ((f & HARD_FLAGS) !== 0) {
      if (
        (f & NODE_NOT_READY) !== 0 ||
        ((f & NODE_CORDONED) !== 0 && !s.cordonTolerated) ||
        ((f & NODE_TAINTED) !== 0 && (req.tolerations.length === 0 || !toleratesAll(req, nodes[i])))
      ) {
        this.evFeasible = false;
        return;
      }
    }
    const cpu = req.resources.cpu;
    const memory = req.resources.memory;
    if (!fits(cpuCapacity[i], cpuAllocated[i], memCapacity[i], memAllocated[i], cpu, memory)) {
      this.evFeasible = false;
      return;
    }
    this.evFeasible = true;
    const cpuFraction = fraction(cpuAllocated[i], cpu, cpuCapacity[i]);
    const memFraction = fraction(memAllocated[i], memory, memCapacity[i]);
    let total = balanced(cpuFraction, memFraction) * s.wb;
    const h = here === undefined ? 0 : here[i];
    total += h === 0 ? 100 * s.ws : spreadScore(h, s.max) * s.ws;
    const k = preferNoScheduleTaints[i];
    const tableLimit = req.tolerations.length === 0 ? MAX_PREFER_TABLE_TAINTS : 0;
    total += k === 0 ? 100 * s.wp : k <= tableLimit ? scoreForUntolerated(k) * s.wp : preferScore(req, nodes[i]) * s.wp;
    this.evTotal = total;
    this.evLoad = cpuFraction + memFraction;
  }

  /** A full pass over every node; null when a NaN rank makes the shape unfit to keep. */
  private build(key: string, req: UnitRequest, snap: ClusterSnapshot, wb: number, ws: number, wp: number): Shape | null {
    this.rebuilds++;
    const n = snap.nodes().length;
    const s: Shape = {
      key,
      req: { deployment: req.deployment, resources: { cpu: req.resources.cpu, memory: req.resources.memory }, tolerations: req.tolerations.map((t) => ({ ...t })) },
      cordonTolerated: toleratesCordon(req),
      layout: snap.layoutVersion,
      version: snap.changeVersion,
      max: snap.maxOnOneNode(req.deployment),
      wb,
      ws,
      wp,
      feasible: new Uint8Array(n),
      rejectedCount: 0,
      size: 0,
      slot: new Int32Array(MAX_CANDIDATES + 1),
      total: new Float64Array(MAX_CANDIDATES + 1),
      load: new Float64Array(MAX_CANDIDATES + 1),
      rank: new Int32Array(MAX_CANDIDATES + 1),
      pos: new Int32Array(n).fill(-1),
      memo: new Map(),
      all: true,
      bTotal: 0,
      bLoad: 0,
      bRank: 0,
    };
    const here = snap.countsBySlot(req.deployment);
    const ranks = n > 0 ? snap.nameRanks() : new Int32Array(0);
    for (let i = 0; i < n; i++) {
      this.evaluate(s, snap, i, here);
      if (!this.evFeasible) {
        s.rejectedCount++;
        continue;
      }
      s.feasible[i] = 1;
      const total = this.evTotal;
      const load = this.evLoad;
      if (total !== total || load !== load) return null;
      const rank = ranks[i];
      // Keep the best MAX_CANDIDATES + 1 in order; the last one becomes the boundary.
      if (s.size === MAX_CANDIDATES + 1 && !above(total, load, rank, s.total[s.size - 1], s.load[s.size - 1], s.rank[s.size - 1])) continue;
      let at = s.size < MAX_CANDIDATES + 1 ? s.size : MAX_CANDIDATES;
      while (at > 0 && above(total, load, rank, s.total[at - 1], s.load[at - 1], s.rank[at - 1])) {
        s.slot[at] = s.slot[at - 1];
        s.total[at] = s.total[at - 1];
        s.load[at] = s.load[at - 1];
        s.rank[at] = s.rank[at - 1];
        at--;
      }
      s.slot[at] = i;
      s.total[at] = total;
      s.load[at] = load;
      s.rank[at] = rank;
      if (s.size < MAX_CANDIDATES + 1) s.size++;
    }
    if (s.size === MAX_CANDIDATES + 1) {
      // More feasible nodes than candidates: the (MAX_CANDIDATES+1)-th best is the boundary, outside S.
      s.size = MAX_CANDIDATES;
      s.all = false;
      s.bTotal = s.total[MAX_CANDIDATES];
      s.bLoad = s.load[MAX_CANDIDATES];
      s.bRank = s.rank[MAX_CANDIDATES];
    }
    for (let j = 0; j < s.size; j++) s.pos[s.slot[j]] = j;
    return s;
  }

  /** Brings a kept shape up to date with the snapshot's changes; false when it must be rebuilt. */
  private sync(s: Shape, snap: ClusterSnapshot): boolean {
    if (s.layout !== snap.layoutVersion || s.max !== snap.maxOnOneNode(s.req.deployment)) return false;
    if (s.version === snap.changeVersion) return true;
    const changed = snap.changedSince(s.version);
    if (changed === null) return false;
    const here = snap.countsBySlot(s.req.deployment);
    const ranks = snap.nameRanks();
    for (let c = 0; c < changed.length; c++) {
      const i = changed[c];
      s.memo.delete(i);
      const was = s.feasible[i];
      this.evaluate(s, snap, i, here);
      const now = this.evFeasible ? 1 : 0;
      if (was !== now) {
        s.feasible[i] = now;
        s.rejectedCount += now === 1 ? -1 : 1;
      }
      const j = s.pos[i];
      if (now === 1) {
        const total = this.evTotal;
        const load = this.evLoad;
        if (total !== total || load !== load) return false;
        const rank = ranks[i];
        if (s.all || above(total, load, rank, s.bTotal, s.bLoad, s.bRank)) {
          if (j >= 0) {
            s.total[j] = total;
            s.load[j] = load;
          } else this.add(s, i, total, load, rank);
          continue;
        }
      }
      if (j >= 0) this.remove(s, j);
    }
    s.version = snap.changeVersion;
    return s.all || s.size >= this.keep;
  }

  private add(s: Shape, i: number, total: number, load: number, rank: number): void {
    if (s.size === MAX_CANDIDATES) {
      // Full: the worst member leaves and its key becomes the boundary (it
      // ranks at or below it; every other member ranks above it).
      let worst = 0;
      for (let j = 1; j < s.size; j++) if (above(s.total[worst], s.load[worst], s.rank[worst], s.total[j], s.load[j], s.rank[j])) worst = j;
      if (!above(total, load, rank, s.total[worst], s.load[worst], s.rank[worst])) {
        // The newcomer itself is the worst: it becomes the boundary.
        s.all = false;
        s.bTotal = total;
        s.bLoad = load;
        s.bRank = rank;
        return;
      }
      s.all = false;
      s.bTotal = s.total[worst];
      s.bLoad = s.load[worst];
      s.bRank = s.rank[worst];
      this.remove(s, worst);
    }
    const j = s.size++;
    s.slot[j] = i;
    s.total[j] = total;
    s.load[j] = load;
    s.rank[j] = rank;
    s.pos[i] = j;
  }

  private remove(s: Shape, j: number): void {
    const last = --s.size;
    s.pos[s.slot[j]] = -1;
    if (j !== last) {
      s.slot[j] = s.slot[last];
      s.total[j] = s.total[last];
      s.load[j] = s.load[last];
      s.rank[j] = s.rank[last];
      s.pos[s.slot[j]] = j;
    }
  }

  /** The decision's numbers from a shape that is up to date. */
  private answer(s: Shape, snap: ClusterSnapshot): void {
    const n = snap.nodes().length;
    this.rejectedCount = s.rejectedCount;
    this.feasibleCount = n - s.rejectedCount;
    // The first rejected nodes in snapshot order.
    const want = Math.min(this.rejected.length, s.rejectedCount);
    let listed = 0;
    const feasible = s.feasible;
    for (let i = 0; listed < want && i < n; i++) if (feasible[i] === 0) this.rejected[listed++] = i;
    this.rejectedListed = listed;
    // The best `keep` of S, best first (S is small: selection by repeated scans).
    const keep = Math.min(this.keep, s.size);
    const topSlot = this.topSlot;
    const topTotal = this.topTotal;
    let prevTotal = Infinity;
    let prevLoad = -Infinity;
    let prevRank = -1;
    for (let k = 0; k < keep; k++) {
      let best = -1;
      for (let j = 0; j < s.size; j++) {
        // Below the previous pick (strict order: each node is picked once).
        if (k > 0 && !above(prevTotal, prevLoad, prevRank, s.total[j], s.load[j], s.rank[j])) continue;
        if (best < 0 || above(s.total[j], s.load[j], s.rank[j], s.total[best], s.load[best], s.rank[best])) best = j;
      }
      topSlot[k] = s.slot[best];
      topTotal[k] = s.total[best];
      prevTotal = s.total[best];
      prevLoad = s.load[best];
      prevRank = s.rank[best];
    }
    this.topCount = keep;
  }

  private copyFused(snap: ClusterSnapshot, req: UnitRequest, wb: number, ws: number, wp: number): void {
    const f = this.fused;
    f.run(req, snap, wb, ws, wp);
    this.feasibleCount = f.feasibleCount;
    this.rejectedCount = f.rejectedCount;
    this.rejectedListed = f.rejectedListed;
    this.rejected.set(f.rejected.subarray(0, f.rejectedListed));
    this.topCount = f.topCount;
    this.topSlot.set(f.topSlot.subarray(0, f.topCount));
    this.topTotal.set(f.topTotal.subarray(0, f.topCount));
  }
}
