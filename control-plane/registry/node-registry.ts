// control-plane/registry/node-registry.ts -- the observed side of the
// cluster, held in each replica's memory: which agents are connected, when
// each last heartbeated, whether it is Ready, and what units it reports.
// Agents are the source of truth for observed unit state; every replica
// hears every agent, so a new leader starts with a warm view.
//
// Liveness: a node is NotReady once no heartbeat arrived for
// `notReadyAfterMs` (default 1000 ms) and Ready again at the next heartbeat.
// Death by socket, silence by timer: when the agent's connection to this
// replica closes (its process died: the kernel closes its sockets) and no
// new connection from it arrives within CLOSE_GRACE_MS (room for the
// agent's reconnect after a close it survived), the node is NotReady at
// once, without waiting out the heartbeat timeout. A silent failure
// (SIGSTOP, a partition) closes nothing and still waits for the timer.
// The registry does not read a clock itself: `now` is passed in.

import type { NodeInfo, Resources, UnitReport } from '../../shared/model.ts';
import { BoundedTable, intern } from '../../shared/intern.ts';

export interface ObservedNodeState {
  name: string;
  info: NodeInfo;
  agentPid: number;
  connected: boolean;
  ready: boolean;
  lastHeartbeatMs: number;
  /** When the node last turned NotReady (for reasons in filter output). */
  notReadySinceMs: number | null;
  units: Map<string, UnitReport>;
  highestTerm: number;
  /** When this replica first heard the current agent process (its pid); for the first agent a seeded node hears, its seededAt. */
  reportsSince?: number;
  /** A node seeded by a new leader and not heard yet: when (its election); cleared by the first hello. */
  seededAt?: number;
  /** When the agent's connection to this replica closed (null while connected). */
  disconnectedAtMs?: number | null;
}

export type RegistryChange =
  | { type: 'node-ready'; node: string }
  | { type: 'node-not-ready'; node: string; silentForMs: number; why: string }
  | { type: 'node-registered'; node: string; info: NodeInfo }
  | { type: 'unit'; node: string; unit: UnitReport; previous: UnitReport | undefined }
  /** `deployment`: the one the gone report named ('' for none). */
  | { type: 'unit-gone'; node: string; name: string; deployment: string };

/**
 * One instance of the strings that many kept reports share (shared/intern.ts),
 * in place: a report decoded from a frame brings its own copy of each, and
 * at 10,000 units a follower's heap snapshot held "Running" 11,001 times and
 * each revision's spec hash 1,001 times. The unit's own name and message
 * are left as they came (mostly unique; they would only churn the table).
 */
function internShared(u: UnitReport): void {
  // Checked, not assumed: in-process callers (tests, the simulation) build reports by hand.
  if (typeof u.deployment === 'string') u.deployment = intern(u.deployment);
  if (typeof u.phase === 'string') u.phase = intern(u.phase) as UnitReport['phase'];
  if (typeof u.specHash === 'string') u.specHash = intern(u.specHash);
  if (typeof u.reason === 'string') u.reason = intern(u.reason);
  if (typeof u.signal === 'string') u.signal = intern(u.signal);
  if (u.resources !== null && typeof u.resources === 'object') u.resources = sharedResources(u.resources);
}

/** Requests kept reports share, by value ("cpu/memory"). */
const resourcesTable = new BoundedTable<string, Resources>(1024);

/**
 * One object for equal requests: a deployment's units all report the same
 * {cpu, memory}, and each decoded report brought its own (10,000 objects at
 * 10,000 units, each one more for the collector to mark). Reports are never
 * written to once kept, so sharing is safe. A value with any other field is
 * kept as it came.
 */
function sharedResources(r: Resources): Resources {
  if (typeof r.cpu !== 'number' || typeof r.memory !== 'number' || Object.keys(r).length !== 2) return r;
  return resourcesTable.share(`${r.cpu}/${r.memory}`, r);
}

/**
 * The nodes reporting a unit of one name: that node's name, or a list when
 * more than one does (for a moment during a move). Never a list of one: the
 * two indexes below held a one-node list per unit each, 100,000 heap
 * objects at 50,000 units for every major collection to mark.
 */
export type Reporters = string | readonly string[];

function withReporter(r: Reporters | undefined, node: string): Reporters {
  if (r === undefined || r === node) return node;
  if (typeof r === 'string') return [r, node];
  return r.includes(node) ? r : [...r, node];
}

/** `r` without `node`; undefined when no node is left. */
function withoutReporter(r: Reporters, node: string): Reporters | undefined {
  if (typeof r === 'string') return r === node ? undefined : r;
  const left = r.filter((x) => x !== node);
  return left.length === 0 ? undefined : left.length === 1 ? left[0] : left;
}

/** A liveness check this late after the previous one means we stalled. */
export const STALL_SKIP_MS = 250;
/**
 * How long a closed agent connection may stay closed before the node is
 * NotReady: an agent that lives reconnects 100 ms after a close (its
 * RECONNECT_AFTER_CLOSE_MS) plus the connect itself.
 */
export const CLOSE_GRACE_MS = 150;

export class NodeRegistry {
  readonly nodes = new Map<string, ObservedNodeState>();
  /** Hellos from a node or agent process not heard before (each starts a new reportsSince): the controller's idle check compares it. */
  agentStarts = 0;
  /**
   * Unit name -> the nodes reporting it (one, but for a moment during a
   * move), so findUnit() is O(1) and not a walk over every node: the
   * controller asks it for every spawn and terminate in flight, each pass.
   */
  private readonly reportedBy = new Map<string, Reporters>();
  /**
   * The same reports by the deployment they name ('' for none): unit name ->
   * nodes reporting it. A scoped reconcile pass reads its deployments'
   * reports from here, not from a walk over every report of every node
   * (50,000 reports, three walks per pass, at 5,000 agents).
   */
  private readonly byDeployment = new Map<string, Map<string, Reporters>>();
  private lastCheckMs = Number.POSITIVE_INFINITY;
  /**
   * No Ready node can turn NotReady at or before this time (ms): the
   * earliest deadline the last full check found, lowered by whatever sets
   * an earlier one (a connection closed, a node turning Ready, a seeded
   * node, a seeded node's first heartbeat before its grace ends). Other
   * heartbeats only move deadlines later. A check before it only
   * notes the time: at 5,000 nodes each check walked all of them, 6-7
   * times a second, to find one due every few seconds.
   */
  private judgeAtMs = Number.NEGATIVE_INFINITY;
  private listeners: Array<(c: RegistryChange) => void> = [];

  constructor(readonly notReadyAfterMs: number) {}

  onChange(fn: (c: RegistryChange) => void): void {
    this.listeners.push(fn);
  }

  private emit(c: RegistryChange): void {
    for (const fn of this.listeners) fn(c);
  }

  /** An agent said hello: (re)register it with the full list of its units. */
  hello(info: NodeInfo, agentPid: number, units: UnitReport[], highestTerm: number, now: number): void {
    let n = this.nodes.get(info.name);
    const fresh = !n;
    if (!n) {
      n = { name: info.name, info, agentPid, connected: true, ready: false, lastHeartbeatMs: now, notReadySinceMs: null, units: new Map(), highestTerm };
      this.nodes.set(info.name, n);
    }
    if (fresh || n.agentPid !== agentPid) {
      // A new agent process. For a node seeded at this replica's election, the
      // first agent it hears may well be the one that ran before: what this
      // leader bound since the election was never sent, not lost with an agent.
      n.reportsSince = n.seededAt ?? now;
      n.seededAt = undefined;
      this.agentStarts++;
    }
    const infoChanged = fresh || JSON.stringify(n.info) !== JSON.stringify(info);
    n.info = info;
    n.agentPid = agentPid;
    n.connected = true;
    n.disconnectedAtMs = null;
    n.highestTerm = Math.max(n.highestTerm, highestTerm);
    if (infoChanged) this.emit({ type: 'node-registered', node: info.name, info });
    // The hello carries everything the agent holds: units we knew of that it
    // no longer reports are gone (e.g. the agent restarted).
    const reported = new Set(units.map((u) => u.name));
    for (const name of [...n.units.keys()]) {
      if (!reported.has(name)) {
        const gone = n.units.get(name)!;
        n.units.delete(name);
        this.unindex(gone, info.name);
        this.emit({ type: 'unit-gone', node: info.name, name, deployment: gone.deployment ?? '' });
      }
    }
    for (const u of units) this.unitStatus(info.name, u);
    this.heartbeat(info.name, now);
  }

  /** A node the desired state knows but whose agent this replica has not
   *  heard yet (this replica just started): count it Ready until
   *  `graceUntil` + notReadyAfterMs, so a restarted control plane gives agents
   *  time to reconnect instead of replacing every unit at once (the
   *  Kubernetes node controller's startup grace period). */
  seed(info: NodeInfo, seededAt: number, graceUntil: number): void {
    if (this.nodes.has(info.name)) return;
    this.nodes.set(info.name, {
      name: info.name,
      info,
      seededAt,
      agentPid: 0,
      connected: false,
      ready: true,
      lastHeartbeatMs: graceUntil,
      notReadySinceMs: null,
      units: new Map(),
      highestTerm: 0,
    });
    this.noteDeadline(this.nodes.get(info.name)!);
  }

  heartbeat(node: string, now: number): void {
    const n = this.nodes.get(node);
    if (!n) return;
    // Earlier than the last: a seeded node's grace ran ahead of the clock.
    const earlier = now < n.lastHeartbeatMs;
    n.lastHeartbeatMs = now;
    if (!n.ready) {
      n.ready = true;
      n.notReadySinceMs = null;
      this.noteDeadline(n);
      this.emit({ type: 'node-ready', node });
    } else if (earlier) this.noteDeadline(n);
  }

  unitStatus(node: string, u: UnitReport): void {
    const n = this.nodes.get(node);
    if (!n) return;
    const prev = n.units.get(u.name);
    if (
      prev &&
      prev.phase === u.phase &&
      prev.pid === u.pid &&
      prev.exitCode === u.exitCode &&
      prev.signal === u.signal &&
      prev.ready === u.ready &&
      prev.reason === u.reason &&
      prev.message === u.message
    ) {
      return;
    }
    internShared(u);
    // The maps keep the first report's name as their key: the new report takes that very string, not a second copy.
    if (prev) u.name = prev.name;
    n.units.set(u.name, u);
    if (prev && prev.deployment !== u.deployment) this.unindex(prev, node);
    if (!prev || prev.deployment !== u.deployment) this.index(u, node);
    this.emit({ type: 'unit', node, unit: u, previous: prev });
  }

  unitGone(node: string, name: string): void {
    const n = this.nodes.get(node);
    const gone = n?.units.get(name);
    if (!n || !gone) return;
    n.units.delete(name);
    this.unindex(gone, node);
    this.emit({ type: 'unit-gone', node, name, deployment: gone.deployment ?? '' });
  }

  /**
   * A forced delete (`mo delete unit X --force`): forget what a NotReady
   * node last reported of a unit, so it is no longer listed as Lost. A Ready
   * node's reports are the truth and are kept. Returns whether it forgot.
   */
  forgetUnit(node: string, name: string): boolean {
    const n = this.nodes.get(node);
    const gone = n?.units.get(name);
    if (!n || n.ready || !gone) return false;
    n.units.delete(name);
    this.unindex(gone, node);
    this.emit({ type: 'unit-gone', node, name, deployment: gone.deployment ?? '' });
    return true;
  }

  disconnected(node: string, now: number): void {
    const n = this.nodes.get(node);
    if (!n) return;
    n.connected = false;
    n.disconnectedAtMs = now;
    this.noteDeadline(n);
  }

  /** When a Ready node turns NotReady unless it is heard from: its heartbeat timeout, or the grace after its connection closed. */
  private deadlineOf(n: ObservedNodeState): number {
    const closedAt = n.connected ? null : (n.disconnectedAtMs ?? null);
    return Math.min(n.lastHeartbeatMs + this.notReadyAfterMs, closedAt === null ? Number.POSITIVE_INFINITY : closedAt + CLOSE_GRACE_MS);
  }

  /** A node's deadline may have moved earlier than any the last check found. */
  private noteDeadline(n: ObservedNodeState): void {
    if (n.ready) this.judgeAtMs = Math.min(this.judgeAtMs, this.deadlineOf(n));
  }

  /** Turn silent nodes NotReady. Called on a short period by the shell. */
  checkLiveness(now: number): void {
    // If this process itself stalled (a long GC, a blocked loop), heartbeats
    // may sit unread in socket buffers: skip one round so they are read
    // before any node is judged. Timers run before I/O in Node's loop.
    const stalledMs = now - this.lastCheckMs;
    this.lastCheckMs = now;
    if (stalledMs > STALL_SKIP_MS) return;
    if (now <= this.judgeAtMs) return;
    // Listeners may lower it meanwhile (a node-not-ready listener that acts at once).
    this.judgeAtMs = Number.POSITIVE_INFINITY;
    let judgeAt = Number.POSITIVE_INFINITY;
    for (const n of this.nodes.values()) {
      if (!n.ready) continue;
      const silentForMs = now - n.lastHeartbeatMs;
      const closedAt = n.connected ? null : (n.disconnectedAtMs ?? null);
      const closedForMs = closedAt === null ? -1 : now - closedAt;
      let why: string | null = null;
      if (closedForMs > CLOSE_GRACE_MS) why = `agent connection closed ${(closedForMs / 1000).toFixed(2)}s ago, no reconnect`;
      else if (silentForMs > this.notReadyAfterMs) why = `no heartbeat for ${(silentForMs / 1000).toFixed(1)}s`;
      if (why !== null) {
        n.ready = false;
        n.notReadySinceMs = now;
        this.emit({ type: 'node-not-ready', node: n.name, silentForMs, why });
        continue;
      }
      judgeAt = Math.min(judgeAt, this.deadlineOf(n));
    }
    this.judgeAtMs = Math.min(this.judgeAtMs, judgeAt);
  }

  /** The nodes reporting a unit of this name, or undefined when none does. O(1). */
  reportersOf(name: string): Reporters | undefined {
    return this.reportedBy.get(name);
  }

  /** Where is unit `name` observed? (a unit is reported by one node; of several, the first to report it). O(1). */
  findUnit(name: string): { node: string; report: UnitReport } | undefined {
    const nodes = this.reportedBy.get(name);
    if (nodes === undefined) return undefined;
    const node = typeof nodes === 'string' ? nodes : nodes[0];
    const report = this.nodes.get(node)?.units.get(name);
    return report === undefined ? undefined : { node, report };
  }

  /**
   * Every (node, report) naming `deployment` ('' for reports that name
   * none), in no particular order, each handed to `visit`: a callback, not a
   * generator, since a pass over 4,000 units calls it for each (the
   * generator's steps were the largest part of a 50,000-unit sweep).
   */
  reportsOf(deployment: string, visit: (node: ObservedNodeState, report: UnitReport) => void): void {
    const units = this.byDeployment.get(deployment);
    if (units === undefined) return;
    units.forEach((nodes, name) => {
      if (typeof nodes === 'string') return this.visitReport(nodes, name, visit);
      for (let i = 0; i < nodes.length; i++) this.visitReport(nodes[i], name, visit);
    });
  }

  private visitReport(name: string, unit: string, visit: (node: ObservedNodeState, report: UnitReport) => void): void {
    const node = this.nodes.get(name);
    const report = node?.units.get(unit);
    if (node && report) visit(node, report);
  }

  /** The deployments some report names (not ''). */
  *reportedDeployments(): Generator<string> {
    for (const d of this.byDeployment.keys()) if (d) yield d;
  }

  private index(u: UnitReport, node: string): void {
    this.reportedBy.set(u.name, withReporter(this.reportedBy.get(u.name), node));
    const key = u.deployment ?? '';
    let units = this.byDeployment.get(key);
    if (units === undefined) this.byDeployment.set(key, (units = new Map()));
    units.set(u.name, withReporter(units.get(u.name), node));
  }

  private unindex(u: UnitReport, node: string): void {
    const nodes = this.reportedBy.get(u.name);
    if (nodes !== undefined) {
      const left = withoutReporter(nodes, node);
      if (left === undefined) this.reportedBy.delete(u.name);
      else this.reportedBy.set(u.name, left);
    }
    const key = u.deployment ?? '';
    const units = this.byDeployment.get(key);
    const on = units?.get(u.name);
    if (units === undefined || on === undefined) return;
    const left = withoutReporter(on, node);
    if (left === undefined) units.delete(u.name);
    else units.set(u.name, left);
    if (units.size === 0) this.byDeployment.delete(key);
  }
}
