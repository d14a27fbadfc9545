// control-plane/scheduler/snapshot.ts -- ClusterSnapshot: the scheduler's
// in-memory view of the cluster (nodes, their allocation, and how many units
// of each deployment sit on each node). Pure and mutable: the caller places a
// unit with schedule() and then assume()s it, so the next unit sees it.
// Every placement update is O(1); nothing here ever walks all units.
//
// Besides the NodeState objects, the snapshot keeps the numbers the hot loops
// read in columns (typed arrays by node position): at 5,000 nodes, walking
// five flat arrays stays in cache where chasing 5,000 objects does not.
// Every update writes both, so the two views always agree.

import type { NodeState, UnitRequest } from './types.ts';

/** Per-deployment placement counts, kept so spreading is O(1) per node. */
interface DeploymentCounts {
  perNode: Map<string, number>;
  total: number;
  /** Highest count on any one node. */
  max: number;
  /**
   * nodesWithCount[c] = how many nodes hold exactly c units (c >= 1). Lets
   * forget() lower `max` in O(1): when the last node at `max` drops to
   * max-1, that node itself now sits at max-1.
   */
  nodesWithCount: number[];
  /**
   * The same counts by node position (bySlot[i] = units on nodes()[i]), for
   * the spread plugin's hot loop: an array read instead of a hash lookup.
   * Built on first use; dropped when node positions change (removeNode).
   */
  bySlot: Int32Array | null;
}

/** Bits of NodeColumns.flags. */
export const NODE_NOT_READY = 1;
export const NODE_CORDONED = 2;
/** Has a NoSchedule or NoExecute taint (the taint filter must look closer). */
export const NODE_TAINTED = 4;
/** Has a PreferNoSchedule taint (the prefer-no-schedule score must look closer). */
export const NODE_PREFER_NO_SCHEDULE = 8;

/**
 * Hot per-node numbers by node position (index i describes nodes()[i]). A
 * live, read-only view: valid until the next setNode/removeNode, which may
 * replace the arrays.
 */
export interface NodeColumns {
  cpuCapacity: Float64Array;
  memCapacity: Float64Array;
  cpuAllocated: Float64Array;
  memAllocated: Float64Array;
  /** NODE_NOT_READY | NODE_CORDONED | NODE_TAINTED | NODE_PREFER_NO_SCHEDULE. */
  flags: Uint8Array;
  /**
   * How many PreferNoSchedule taints the node carries: a unit without
   * tolerations tolerates none of them, so its prefer-no-schedule score is a
   * table lookup (fused.ts).
   */
  preferNoScheduleTaints: Int32Array;
}

/** Column slots allocated before the first growth. */
const INITIAL_COLUMN_SLOTS = 16;
/** Node changes remembered for changedSince() (incremental.ts); older news means a full pass. */
export const CHANGE_LOG_SIZE = 4096;

function copyNode(n: NodeState): NodeState {
  const copy: NodeState = {
    name: n.name,
    ready: n.ready,
    unschedulable: n.unschedulable,
    capacity: { cpu: n.capacity.cpu, memory: n.capacity.memory },
    allocated: { cpu: n.allocated.cpu, memory: n.allocated.memory },
    taints: n.taints.map((t) => ({ ...t })),
    labels: { ...n.labels },
  };
  if (n.notReadyReason !== undefined) copy.notReadyReason = n.notReadyReason;
  return copy;
}

function emptyColumns(slots: number): NodeColumns {
  return {
    cpuCapacity: new Float64Array(slots),
    memCapacity: new Float64Array(slots),
    cpuAllocated: new Float64Array(slots),
    memAllocated: new Float64Array(slots),
    flags: new Uint8Array(slots),
    preferNoScheduleTaints: new Int32Array(slots),
  };
}

export class ClusterSnapshot {
  private readonly list: NodeState[] = [];
  private readonly slotOf = new Map<string, number>();
  private cols: NodeColumns = emptyColumns(INITIAL_COLUMN_SLOTS);
  /** flagged[b] = nodes with flag bit b set, so a filter can skip a pass nobody fails. */
  private readonly flagged = [0, 0, 0, 0];
  /** ranks[slot] = place of that node's name in sorted order; null after nodes come or go. */
  private ranks: Int32Array | null = null;
  private readonly deployments = new Map<string, DeploymentCounts>();
  // One-entry cache: a schedule() asks about one deployment many times.
  private cachedDeployment: string | undefined;
  private cachedCounts: DeploymentCounts | undefined;
  /** Bumped when nodes come or go (positions may move). */
  private layout = 0;
  /** Node changes so far; changeLog[v % CHANGE_LOG_SIZE] = the slot of change v. */
  private changes = 0;
  private readonly changeLog = new Int32Array(CHANGE_LOG_SIZE);

  /** Gives a deployment's units' nodes when the snapshot first needs its counts (the lazy form of the constructor's seed). */
  private readonly nodesOf: ((deployment: string) => Iterable<string>) | null = null;
  /** Deployments whose counts were seeded from nodesOf. */
  private readonly seeded = new Set<string>();

  /**
   * `nodes` are copied (the snapshot changes `allocated`, never the caller's
   * objects). `units` only seeds the spread counts: the nodes' `allocated`
   * must already include those units' requests. Either every unit as
   * (deployment, node) pairs, or a function giving the nodes of one
   * deployment's units, asked the first time that deployment's counts are
   * read or changed: a pass places units of a few deployments, and seeding
   * all of them walked every unit of the cluster (50,000 at the fleet bench)
   * at every pass.
   */
  constructor(nodes: readonly NodeState[], units: ReadonlyArray<{ deployment: string; node: string }> | ((deployment: string) => Iterable<string>) = []) {
    for (const n of nodes) this.setNode(n);
    if (typeof units === 'function') this.nodesOf = units;
    else for (const u of units) this.count(u.deployment, u.node, +1);
  }

  /** Seed `deployment`'s counts from nodesOf the first time they are needed. */
  private seed(deployment: string): void {
    if (this.nodesOf === null || this.seeded.has(deployment)) return;
    this.seeded.add(deployment);
    for (const node of this.nodesOf(deployment)) this.count(deployment, node, +1);
  }

  /**
   * Nodes in insertion order. The array and its objects are the snapshot's
   * own: read them, change them only through setNode/assume/forget.
   */
  nodes(): readonly NodeState[] {
    return this.list;
  }

  get(name: string): NodeState | undefined {
    const slot = this.slotOf.get(name);
    return slot === undefined ? undefined : this.list[slot];
  }

  /** The hot numbers by node position (see NodeColumns). */
  columns(): Readonly<NodeColumns> {
    return this.cols;
  }

  /**
   * nameRanks()[i] = the place of nodes()[i].name in name order (plain string
   * `<`), so tie-breaks by name compare two integers. Rebuilt (O(n log n))
   * only after a node was added or removed.
   */
  nameRanks(): Int32Array {
    if (this.ranks === null) {
      const slots = this.list.map((_, i) => i).sort((a, b) => (this.list[a].name < this.list[b].name ? -1 : 1));
      const ranks = new Int32Array(this.list.length);
      slots.forEach((slot, place) => (ranks[slot] = place));
      this.ranks = ranks;
    }
    return this.ranks;
  }

  /** Changes when a node is added or removed (node positions are only stable in between). */
  get layoutVersion(): number {
    return this.layout;
  }

  /** Grows by one at every change to a node's numbers (setNode, assume, forget). */
  get changeVersion(): number {
    return this.changes;
  }

  /**
   * The slots of the nodes changed since changeVersion was `version` (in
   * order, possibly repeated), or null when that is too long ago to tell.
   * Valid within one layoutVersion.
   */
  changedSince(version: number): Int32Array | null {
    const count = this.changes - version;
    if (count < 0 || count > CHANGE_LOG_SIZE) return null;
    const out = new Int32Array(count);
    for (let k = 0; k < count; k++) out[k] = this.changeLog[(version + k) % CHANGE_LOG_SIZE];
    return out;
  }

  private changed(slot: number): void {
    this.changeLog[this.changes % CHANGE_LOG_SIZE] = slot;
    this.changes++;
  }

  /** How many nodes carry `flag` (one NODE_* bit). O(1). */
  countFlagged(flag: number): number {
    return this.flagged[31 - Math.clz32(flag)] ?? 0;
  }

  /**
   * Adds a node, or replaces what is known about it (readiness, cordon,
   * capacity, allocation, taints) keeping its position and its unit counts.
   */
  setNode(node: NodeState): void {
    const copy = copyNode(node);
    let slot = this.slotOf.get(node.name);
    if (slot === undefined) {
      slot = this.list.length;
      this.slotOf.set(node.name, slot);
      this.list.push(copy);
      this.ranks = null;
      this.layout++;
      if (slot >= this.cols.flags.length) this.grow(slot * 2);
    } else {
      this.list[slot] = copy;
      this.countFlags(this.cols.flags[slot], -1);
      this.changed(slot);
    }
    this.writeColumns(slot, copy);
    this.countFlags(this.cols.flags[slot], +1);
  }

  /** Drops a node (O(nodes), rare). Its unit counts stay until forget()ten. */
  removeNode(name: string): void {
    const slot = this.slotOf.get(name);
    if (slot === undefined) return;
    this.countFlags(this.cols.flags[slot], -1);
    this.list.splice(slot, 1);
    this.ranks = null;
    this.layout++;
    this.slotOf.delete(name);
    for (let i = slot; i < this.list.length; i++) this.slotOf.set(this.list[i].name, i);
    for (const column of Object.values(this.cols) as Array<Float64Array | Uint8Array | Int32Array>) {
      column.copyWithin(slot, slot + 1, this.list.length + 1);
    }
    for (const d of this.deployments.values()) d.bySlot = null;
  }

  /** Records a placement: the node's allocation grows by the request. O(1). */
  assume(node: string, req: UnitRequest): void {
    const slot = this.slotOf.get(node);
    if (slot === undefined) throw new Error(`assume: unknown node ${JSON.stringify(node)}`);
    this.allocate(slot, req.resources.cpu, req.resources.memory);
    this.count(req.deployment, node, +1);
  }

  /**
   * Reverses assume() (a unit was deleted or lost). A node no longer in the
   * snapshot only loses the count; a count never goes below zero. O(1).
   */
  forget(node: string, req: UnitRequest): void {
    const slot = this.slotOf.get(node);
    if (slot !== undefined) this.allocate(slot, -req.resources.cpu, -req.resources.memory);
    this.count(req.deployment, node, -1);
  }

  /** Units of `deployment` on `node`. O(1). */
  countOn(deployment: string, node: string): number {
    const d = this.lookup(deployment);
    return d ? (d.perNode.get(node) ?? 0) : 0;
  }

  /** Units of `deployment` in the whole cluster. O(1). */
  total(deployment: string): number {
    return this.lookup(deployment)?.total ?? 0;
  }

  /** The most units of `deployment` on any single node. O(1). */
  maxOnOneNode(deployment: string): number {
    return this.lookup(deployment)?.max ?? 0;
  }

  /**
   * Units of `deployment` by node position: result[i] = units on nodes()[i].
   * Undefined when the deployment has no units. A live view: valid until the
   * next assume/forget/setNode/removeNode; do not mutate.
   */
  countsBySlot(deployment: string): Int32Array | undefined {
    const d = this.lookup(deployment);
    if (!d) return undefined;
    if (d.bySlot === null || d.bySlot.length < this.list.length) {
      const bySlot = new Int32Array(Math.max(this.cols.flags.length, this.list.length));
      for (const [node, c] of d.perNode) {
        const slot = this.slotOf.get(node);
        if (slot !== undefined) bySlot[slot] = c;
      }
      d.bySlot = bySlot;
    }
    return d.bySlot;
  }

  private countFlags(flags: number, delta: 1 | -1): void {
    for (let b = 0; b < this.flagged.length; b++) if (flags & (1 << b)) this.flagged[b] += delta;
  }

  private allocate(slot: number, cpu: number, memory: number): void {
    const n = this.list[slot];
    n.allocated.cpu += cpu;
    n.allocated.memory += memory;
    this.cols.cpuAllocated[slot] = n.allocated.cpu;
    this.cols.memAllocated[slot] = n.allocated.memory;
    this.changed(slot);
  }

  private writeColumns(slot: number, n: NodeState): void {
    const c = this.cols;
    c.cpuCapacity[slot] = n.capacity.cpu;
    c.memCapacity[slot] = n.capacity.memory;
    c.cpuAllocated[slot] = n.allocated.cpu;
    c.memAllocated[slot] = n.allocated.memory;
    let flags = (n.ready ? 0 : NODE_NOT_READY) | (n.unschedulable ? NODE_CORDONED : 0);
    let prefer = 0;
    for (const t of n.taints) {
      if (t.effect === 'PreferNoSchedule') prefer++;
      flags |= t.effect === 'PreferNoSchedule' ? NODE_PREFER_NO_SCHEDULE : NODE_TAINTED;
    }
    c.flags[slot] = flags;
    c.preferNoScheduleTaints[slot] = prefer;
  }

  private grow(slots: number): void {
    const next = emptyColumns(Math.max(slots, INITIAL_COLUMN_SLOTS));
    next.cpuCapacity.set(this.cols.cpuCapacity);
    next.memCapacity.set(this.cols.memCapacity);
    next.cpuAllocated.set(this.cols.cpuAllocated);
    next.memAllocated.set(this.cols.memAllocated);
    next.flags.set(this.cols.flags);
    next.preferNoScheduleTaints.set(this.cols.preferNoScheduleTaints);
    this.cols = next;
  }

  private lookup(deployment: string): DeploymentCounts | undefined {
    if (deployment === this.cachedDeployment) return this.cachedCounts;
    this.seed(deployment);
    const d = this.deployments.get(deployment);
    if (d) {
      this.cachedDeployment = deployment;
      this.cachedCounts = d;
    }
    return d;
  }

  private count(deployment: string, node: string, delta: 1 | -1): void {
    this.seed(deployment);
    let d = this.deployments.get(deployment);
    if (!d) {
      if (delta < 0) return;
      d = { perNode: new Map(), total: 0, max: 0, nodesWithCount: [0], bySlot: null };
      this.deployments.set(deployment, d);
    }
    const before = d.perNode.get(node) ?? 0;
    const after = before + delta;
    if (after < 0) return;
    if (before > 0) d.nodesWithCount[before]--;
    if (after > 0) {
      d.nodesWithCount[after] = (d.nodesWithCount[after] ?? 0) + 1;
      d.perNode.set(node, after);
    } else {
      d.perNode.delete(node);
    }
    if (d.bySlot !== null) {
      const slot = this.slotOf.get(node);
      if (slot !== undefined && slot < d.bySlot.length) d.bySlot[slot] = after;
    }
    d.total += delta;
    if (after > d.max) d.max = after;
    else if (before === d.max && d.nodesWithCount[before] === 0) d.max = after;
    if (d.total === 0) {
      this.deployments.delete(deployment);
      if (this.cachedDeployment === deployment) {
        this.cachedDeployment = undefined;
        this.cachedCounts = undefined;
      }
    }
  }
}
