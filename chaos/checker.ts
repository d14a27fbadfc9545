// chaos/checker.ts -- the PURE core of the live invariant checker: it folds a
// stream of observations (replica roles, API snapshots joined with /proc
// liveness, injected faults, the workload's writes) into violations of the
// architecture's invariants, and at the end into a verdict. It never reads a
// clock, the network or /proc itself: chaos/poller.ts does that and feeds it
// `Observation`s with times `t` in ms since the run began, so a test can feed
// it a fabricated stream and watch it fail.
//
// What each invariant checks (numbers as in the report):
//  1 election safety   every (term -> leader) pair a replica reported about
//                      itself; two ids for one term is a violation.
//  2 no lost writes    the final desired state of each deployment the workload
//                      touched is one a linearizable store could end in: the
//                      acknowledged writes in order, plus any subset of the
//                      writes whose outcome is unknown (timeouts, dropped
//                      connections), each placed anywhere after its call.
//                      Refused writes (4xx, 503 "refused") must not show.
//  3 fencing           (a) per agent incarnation (node + agent pid), units in
//                      start order carry non-decreasing terms: an agent that
//                      accepted term T never starts a unit of an older term;
//                      (b) no unit carries a term above every term a replica
//                      ever reported; (c) a unit started more than
//                      `fenceBoundMs` after a leader of term L was seen
//                      carries a term >= L (the deposed leader had that long
//                      to notice, by check-quorum or a higher term).
//  4 convergence       once faults and writes stop, every deployment has
//                      exactly spec.replicas Running units with live pids and
//                      none on a NotReady node, within `convergeBoundMs`;
//                      and during the run, a deployment is below its replicas
//                      for at most `deficitBoundMs` of calm time (the seed's
//                      exercise: a loss is made good within one pass).
//  5 no surplus        live unit pids of a deployment (Running or
//                      Terminating) exceed spec.replicas for at most
//                      `surplusBoundMs` of calm time.
//  6 not-ready nodes   a unit bound to a NotReady node is not shown Running
//                      or Pending after `lostGraceMs`; the units a dead agent
//                      ran are dead in /proc within `orphanBoundMs`; after
//                      `notReadyBoundMs` of calm time no live unit pid sits on
//                      a NotReady node.
//  7 capacity, taints  at every snapshot: the requests of the units bound to
//                      a node fit its capacity (and status.allocated does);
//                      every NoSchedule/NoExecute taint of a node is tolerated
//                      by each unit bound to it.
//  8 no orphans        after the cluster is stopped, no process ever seen as
//                      a unit, an agent (or an agent's child) or a replica is
//                      alive (identity = pid + start time, checked by the
//                      poller, so a recycled pid is not blamed).
//
// "Calm time" = time since the end of the last disruptive fault (heal time,
// or injection + calmAfterMs if sooner, plus its settle allowance); while a
// disruptive fault is active nothing is judged by a calm bound. Unit crashes are not disruptive: the reconcile loop must
// make them good within its bound even while they keep coming.

import type { Taint, Toleration } from '../shared/model.ts';

// ---------------------------------------------------------------- observations

export interface ReplicaObservation {
  type: 'replica';
  t: number;
  id: string;
  role: string; // leader | follower | candidate
  term: number;
  pid?: number | null;
  /** The poller's identity of that process (pid and start time), if it checks /proc. */
  pidId?: string | null;
}

export interface UnitObservation {
  name: string;
  deployment: string;
  node: string | null;
  phase: string;
  pid: number | null;
  /** The poller's /proc verdict for `pid` (false when pid is null). */
  pidAlive: boolean;
  /** The identity (pid and start time) of the unit's process, when /proc is checked. */
  pidId?: string | null;
  term: number | null;
  /** Agent clock, ms since epoch (same host: comparable with `startedAtEpochMs`). */
  startedAtMs: number | null;
  cpu: number;
  memory: number;
  tolerations: Toleration[];
  /** false for an unbound unit an agent still reports (being stopped). */
  bound: boolean;
}

export interface NodeObservation {
  name: string;
  ready: boolean;
  capacity: { cpu: number; memory: number };
  allocated: { cpu: number; memory: number } | null;
  taints: Taint[];
  agentPid: number | null;
  /** /proc verdict for agentPid; null when pids are not checkable. */
  agentAlive: boolean | null;
  /** The identity (pid and start time) of that agent process, when /proc is checked. */
  agentId?: string | null;
}

export interface DeploymentObservation {
  name: string;
  replicas: number;
  /** The workload's marker (env CHAOS_WRITE of the template), if any. */
  marker?: string | null;
}

export interface SnapshotObservation {
  type: 'snapshot';
  t: number;
  deployments: DeploymentObservation[];
  units: UnitObservation[];
  nodes: NodeObservation[];
  /** Other pids worth tracking for orphans (agents' children: guards, units). */
  helpers?: Array<{ pid: number; owner: string; id?: string | null }>;
}

export interface FaultObservation {
  type: 'fault';
  t: number;
  id: number;
  kind: string; // e.g. 'SIGKILL agent', 'SIGSTOP leader', 'SIGKILL unit'
  target: string;
  detail: string;
  /** Disruptive faults pause the calm-time clocks until healed + settleMs. */
  disruptive: boolean;
  settleMs: number;
  /** A disruptive fault stops pausing the calm clocks this long after it
   *  was injected even if not healed yet (e.g. a killed agent: the cluster
   *  must replace its units without waiting for its restart). */
  calmAfterMs?: number;
}

export interface HealObservation {
  type: 'heal';
  t: number;
  id: number; // the fault it ends
  kind: string; // e.g. 'restart agent', 'SIGCONT leader'
  detail: string;
}

export type WriteOutcome = 'ack' | 'refused' | 'unknown';

export interface WriteObservation {
  type: 'write';
  t: number; // when the call was made
  doneT: number; // when its answer (or timeout) came
  seq: number;
  op: 'apply' | 'scale' | 'delete';
  deployment: string;
  replicas?: number;
  marker?: string;
  outcome: WriteOutcome;
  detail: string;
}

/** The poller's liveness verdicts for pids the core asked about (trackedPids). */
export interface ProcsObservation {
  type: 'procs';
  t: number;
  /** Keys from trackedPids() whose process is gone. */
  dead: string[];
  /** true once the cluster was stopped: every tracked pid must be dead. */
  final?: boolean;
}

export type Observation = ReplicaObservation | SnapshotObservation | FaultObservation | HealObservation | WriteObservation | ProcsObservation;

// ---------------------------------------------------------------- config

export interface CheckerBounds {
  convergeBoundMs: number;
  deficitBoundMs: number;
  surplusBoundMs: number;
  lostGraceMs: number;
  orphanBoundMs: number;
  notReadyBoundMs: number;
  fenceBoundMs: number;
}

export const DEFAULT_BOUNDS: CheckerBounds = {
  convergeBoundMs: 10000,
  deficitBoundMs: 5000,
  surplusBoundMs: 3000,
  lostGraceMs: 2000,
  orphanBoundMs: 1500,
  notReadyBoundMs: 5000,
  fenceBoundMs: 5000,
};

/** Examples kept per invariant (the count keeps going). */
export const MAX_EXAMPLES_PER_INVARIANT = 5;
/** Most unknown-outcome writes per deployment explored by the write check. */
export const MAX_UNKNOWN_WRITES_EXPLORED = 10;
/** Most pids tracked for the orphan check. */
export const MAX_TRACKED_PIDS = 20000;

export const INVARIANTS = [
  { id: 1, name: 'election safety', text: 'at most one leader per term' },
  { id: 2, name: 'no lost writes', text: 'the final desired state reflects every acknowledged write' },
  { id: 3, name: 'fencing', text: 'no unit started from a stale term' },
  { id: 4, name: 'convergence', text: 'observed equals desired within a bound once faults stop; every deficit closes within a bound' },
  { id: 5, name: 'no surplus', text: 'live units never exceed replicas for longer than a bound' },
  { id: 6, name: 'not-ready nodes', text: "no unit runs on a NotReady node; a dead agent's units die with it" },
  { id: 7, name: 'capacity and taints', text: 'requests fit capacity; tainted nodes only get tolerating units' },
  { id: 8, name: 'no orphans', text: 'no process the cluster started outlives it' },
] as const;

export type InvariantId = (typeof INVARIANTS)[number]['id'];

export interface Violation {
  invariant: InvariantId;
  t: number;
  message: string;
}

export interface InvariantResult {
  id: InvariantId;
  name: string;
  text: string;
  checked: boolean;
  note: string; // what was covered, or why it was not checked
  violations: number;
  examples: Violation[];
}

export interface FaultRecord {
  id: number;
  t: number;
  kind: string;
  target: string;
  detail: string;
  disruptive: boolean;
  settleMs: number;
  calmAfterMs?: number;
  healT: number | null;
  healKind: string | null;
  /** ms from the fault to the first converged snapshot after it (after its
   *  heal, for faults that last until healed). */
  recoveryMs: number | null;
  /** Another fault came before it recovered. */
  overlapped: boolean;
}

export interface Verdict {
  invariants: InvariantResult[];
  violations: number;
  faults: FaultRecord[];
  faultCounts: Record<string, number>;
  healCounts: Record<string, number>;
  writes: { ack: number; refused: number; unknown: number };
  quietAt: number | null;
  convergedAfterQuietMs: number | null;
  slowestRecovery: FaultRecord | null;
  longestDeficit: { deployment: string; ms: number } | null;
  longestSurplus: { deployment: string; ms: number } | null;
  leadersByTerm: Array<{ term: number; leaders: string[] }>;
  snapshots: number;
  replicaPolls: number;
  maxTermSeen: number;
  pidsTracked: { unit: number; agent: number; replica: number; helper: number };
}

export interface FinishInput {
  t: number;
  /** When faults and writes stopped (the convergence clock starts here). */
  quietAt: number;
  /** Final desired state read from the API after the run; null = unreadable. */
  finalDeployments: DeploymentObservation[] | null;
  /** The orphan check ran (a 'procs' observation with final: true was fed). */
  orphansChecked: boolean;
  /** Why something was not checked (e.g. no /proc access to a remote cluster). */
  notes?: Partial<Record<InvariantId, string>>;
}

// ---------------------------------------------------------------- helpers

/** Kubernetes toleration semantics, written independently of the scheduler
 *  so the checker is a second opinion, not a copy. */
export function tolerates(tols: readonly Toleration[], taint: Taint): boolean {
  return tols.some((tol) => {
    if (tol.effect && tol.effect !== taint.effect) return false;
    if (tol.operator === 'Exists') return !tol.key || tol.key === taint.key;
    return tol.key === taint.key && (tol.value ?? '') === (taint.value ?? '');
  });
}

const fmtT = (t: number) => `+${(t / 1000).toFixed(3)}s`;

interface Episode {
  since: number;
  reported: boolean;
}

interface TrackedPid {
  kind: 'unit' | 'agent' | 'replica' | 'helper';
  pid: number;
  what: string;
  deadAt: number | null;
  /** For units: the agent pid (incarnation) they ran under, and its key. */
  agentPid?: number;
  agentKey?: string;
  node?: string;
}

/**
 * A tracked process's key: its identity (pid and start time) when the
 * poller read one from /proc, else the pid. Pids are recycled (they wrap at
 * pid_max, 32768 on many hosts), so two processes with one pid in a long run
 * are two records, never one.
 */
function procKey(id: string | null | undefined, pid: number): string {
  return id ?? String(pid);
}

/** A deployment's desired state as the write check models it. */
interface DState {
  exists: boolean;
  replicas: number;
  marker: string | null;
}

function applyWrite(s: DState, w: WriteObservation): DState {
  switch (w.op) {
    case 'apply':
      return { exists: true, replicas: w.replicas ?? s.replicas, marker: w.marker ?? null };
    case 'scale':
      return s.exists ? { ...s, replicas: w.replicas ?? s.replicas } : s; // 404 on a missing deployment
    case 'delete':
      return { exists: false, replicas: 0, marker: null };
  }
}

const dkey = (s: DState) => (s.exists ? `${s.replicas}/${s.marker ?? ''}` : 'absent');

/** Every final state a linearizable store could end in, given one client's
 *  writes in call order: acked ones apply in order; each unknown one applies
 *  at most once, anywhere after the acked writes that completed before it
 *  was called. Exported for tests. */
export function possibleFinalStates(writes: readonly WriteObservation[], initial: DState = { exists: false, replicas: 0, marker: null }): Set<string> {
  const acked = writes.filter((w) => w.outcome === 'ack');
  const unknown = writes.filter((w) => w.outcome === 'unknown').slice(-MAX_UNKNOWN_WRITES_EXPLORED);
  // Earliest position (count of acked writes applied) an unknown write may take.
  const earliest = unknown.map((u) => acked.filter((a) => a.doneT <= u.t && a.seq < u.seq).length);
  const out = new Set<string>();
  const seen = new Set<string>();
  const visit = (pos: number, used: number, s: DState) => {
    const key = `${pos}|${used}|${dkey(s)}`;
    if (seen.has(key)) return;
    seen.add(key);
    if (pos === acked.length) out.add(dkey(s));
    for (let i = 0; i < unknown.length; i++) {
      if (used & (1 << i) || earliest[i] > pos) continue;
      visit(pos, used | (1 << i), applyWrite(s, unknown[i]));
    }
    if (pos < acked.length) visit(pos + 1, used, applyWrite(s, acked[pos]));
  };
  visit(0, 0, initial);
  return out;
}

// ---------------------------------------------------------------- the core

export class InvariantChecker {
  private readonly violations = new Map<InvariantId, { count: number; examples: Violation[] }>();
  private readonly leadersByTerm = new Map<number, Set<string>>();
  /** First time a leader of each term was seen (for fencing check c). */
  private readonly leaderFirstSeen = new Map<number, number>();
  private maxTerm = 0;
  private readonly faults: FaultRecord[] = [];
  private readonly writes: WriteObservation[] = [];
  private readonly episodes = new Map<string, Episode>();
  private readonly longest = { deficit: null as { deployment: string; ms: number } | null, surplus: null as { deployment: string; ms: number } | null };
  private readonly pids = new Map<string, TrackedPid>();
  /** Per agent incarnation "node/pid": units seen, for fencing check a. */
  private readonly incarnations = new Map<string, Array<{ name: string; startedAtMs: number; term: number }>>();
  private readonly unitsSeen = new Map<string, { term: number | null; startedAtMs: number | null }>();
  private readonly notReadySince = new Map<string, number>();
  private readonly reportedOnce = new Set<string>();
  private snapshots = 0;
  private replicaPolls = 0;
  private lastSnapshot: SnapshotObservation | null = null;
  private readonly convergedAt: number[] = [];
  /** Offset between the run's t and epoch ms, for agents' start times. */
  constructor(
    readonly bounds: CheckerBounds = DEFAULT_BOUNDS,
    private readonly startedAtEpochMs = 0,
  ) {}

  // ------------------------------------------------ intake

  observe(o: Observation): void {
    switch (o.type) {
      case 'replica':
        return this.onReplica(o);
      case 'snapshot':
        return this.onSnapshot(o);
      case 'fault':
        this.faults.push({ ...o, healT: null, healKind: null, recoveryMs: null, overlapped: false });
        for (const f of this.faults) if (f.id !== o.id && f.recoveryMs === null && f.t < o.t) f.overlapped = true;
        return;
      case 'heal': {
        const f = this.faults.find((x) => x.id === o.id);
        if (f && f.healT === null) {
          f.healT = o.t;
          f.healKind = o.kind;
        }
        return;
      }
      case 'write':
        this.writes.push(o);
        return;
      case 'procs':
        return this.onProcs(o);
    }
  }

  /** Keys (identities) of the processes whose liveness the poller should report (alive ones only). */
  trackedPids(): string[] {
    const out: string[] = [];
    for (const [key, p] of this.pids) if (p.deadAt === null) out.push(key);
    return out;
  }

  /** The latest snapshot was converged (every deployment at its replicas). */
  isConverged(): boolean {
    return this.lastSnapshot !== null && this.convergedNow(this.lastSnapshot);
  }

  lastConvergedAt(): number | null {
    return this.convergedAt.length ? this.convergedAt[this.convergedAt.length - 1] : null;
  }

  // ------------------------------------------------ violations

  private violate(invariant: InvariantId, t: number, message: string): void {
    let v = this.violations.get(invariant);
    if (!v) this.violations.set(invariant, (v = { count: 0, examples: [] }));
    v.count++;
    if (v.examples.length < MAX_EXAMPLES_PER_INVARIANT) v.examples.push({ invariant, t, message });
  }

  /** Report a condition once per key (a lasting state is one violation). */
  private violateOnce(key: string, invariant: InvariantId, t: number, message: string): void {
    if (this.reportedOnce.has(key)) return;
    this.reportedOnce.add(key);
    this.violate(invariant, t, message);
  }

  // ------------------------------------------------ calm time

  /** When calm began as of t: the end of the last disruptive fault (heal +
   *  settle), or +Infinity while one is active. */
  calmSince(t: number): number {
    let since = 0;
    for (const f of this.faults) {
      if (!f.disruptive || f.t > t) continue;
      const end = Math.min(f.healT ?? Infinity, f.t + (f.calmAfterMs ?? Infinity));
      if (end > t) return Infinity;
      since = Math.max(since, end + f.settleMs);
    }
    return since;
  }

  /** A condition that may hold for at most boundMs of calm time. */
  private episode(
    key: string,
    holds: boolean,
    t: number,
    boundMs: number,
    invariant: InvariantId,
    message: () => string,
    longestKind?: 'deficit' | 'surplus',
    deployment?: string,
  ): void {
    const e = this.episodes.get(key);
    if (!holds) {
      if (e && longestKind && deployment) this.noteLongest(longestKind, deployment, t - e.since);
      this.episodes.delete(key);
      return;
    }
    if (!e) {
      this.episodes.set(key, { since: t, reported: false });
      return;
    }
    const from = Math.max(e.since, this.calmSince(t));
    if (!e.reported && t - from > boundMs) {
      e.reported = true;
      this.violate(invariant, t, `${message()} for ${((t - e.since) / 1000).toFixed(1)}s (since ${fmtT(e.since)}; bound ${boundMs / 1000}s of calm time)`);
    }
  }

  private noteLongest(kind: 'deficit' | 'surplus', deployment: string, ms: number): void {
    const cur = this.longest[kind];
    if (!cur || ms > cur.ms) this.longest[kind] = { deployment, ms };
  }

  // ------------------------------------------------ replicas (invariant 1)

  private onReplica(o: ReplicaObservation): void {
    this.replicaPolls++;
    if (o.term > this.maxTerm) this.maxTerm = o.term;
    if (o.pid) this.track(procKey(o.pidId, o.pid), { kind: 'replica', pid: o.pid, what: `replica ${o.id}`, deadAt: null });
    if (o.role !== 'leader') return;
    let set = this.leadersByTerm.get(o.term);
    if (!set) {
      this.leadersByTerm.set(o.term, (set = new Set()));
      this.leaderFirstSeen.set(o.term, o.t);
    }
    if (!set.has(o.id)) {
      set.add(o.id);
      if (set.size > 1) this.violate(1, o.t, `term ${o.term} has ${set.size} leaders: ${[...set].join(', ')}`);
    }
  }

  private track(key: string, p: TrackedPid): void {
    if (this.pids.has(key) || this.pids.size >= MAX_TRACKED_PIDS) return;
    this.pids.set(key, p);
  }

  // ------------------------------------------------ snapshots (3..7)

  private liveOf(s: SnapshotObservation, deployment: string): UnitObservation[] {
    return s.units.filter((u) => u.deployment === deployment && u.pidAlive && (u.phase === 'Running' || u.phase === 'Terminating'));
  }

  private convergedNow(s: SnapshotObservation): boolean {
    const ready = new Map(s.nodes.map((n) => [n.name, n.ready]));
    const desired = new Map(s.deployments.map((d) => [d.name, d.replicas]));
    for (const d of s.deployments) {
      const running = s.units.filter((u) => u.deployment === d.name && u.bound && u.phase === 'Running' && u.pidAlive);
      if (running.length !== d.replicas) return false;
    }
    for (const u of s.units) {
      if (!u.pidAlive) continue;
      if (!desired.has(u.deployment)) return false; // a deleted deployment still runs
      if (u.node && ready.get(u.node) === false) return false;
      if (!u.bound) return false; // a leftover still being stopped
    }
    return true;
  }

  private onSnapshot(s: SnapshotObservation): void {
    this.snapshots++;
    this.lastSnapshot = s;
    const t = s.t;
    const nodes = new Map(s.nodes.map((n) => [n.name, n]));

    for (const n of s.nodes) {
      if (n.agentPid) {
        const key = procKey(n.agentId, n.agentPid);
        this.track(key, { kind: 'agent', pid: n.agentPid, what: `agent of ${n.name}`, deadAt: null, node: n.name });
        if (n.agentAlive === false) this.markDead(key, t);
      }
      if (!n.ready) {
        if (!this.notReadySince.has(n.name)) this.notReadySince.set(n.name, t);
      } else this.notReadySince.delete(n.name);
    }

    // Units: tracking, fencing (3), lost phase (6).
    for (const u of s.units) {
      const node = u.node ? nodes.get(u.node) : undefined;
      const agentKey = node?.agentPid ? procKey(node.agentId, node.agentPid) : undefined;
      if (u.pid && u.pidAlive) {
        this.track(procKey(u.pidId, u.pid), {
          kind: 'unit',
          pid: u.pid,
          what: `unit ${u.name}`,
          deadAt: null,
          agentPid: node?.agentPid ?? undefined,
          agentKey,
          node: u.node ?? undefined,
        });
      } else if (u.pid && !u.pidAlive) this.markDead(procKey(u.pidId, u.pid), t);
      if (!this.unitsSeen.has(u.name) && u.term !== null && u.startedAtMs !== null && u.node && agentKey && (u.phase === 'Running' || u.phase === 'Terminating') && u.pidAlive) {
        this.unitsSeen.set(u.name, { term: u.term, startedAtMs: u.startedAtMs });
        this.checkFencing(u, `${u.node}/${agentKey}`, t);
      }
      if (u.bound && node && !node.ready && (u.phase === 'Running' || u.phase === 'Pending')) {
        const since = this.notReadySince.get(node.name) ?? t;
        if (t - since > this.bounds.lostGraceMs)
          this.violateOnce(`lost-phase/${u.name}/${since}`, 6, t, `unit ${u.name} is shown ${u.phase} on ${node.name}, NotReady since ${fmtT(since)}`);
      }
    }

    // After the units, so a unit's pid is tracked as a unit (with its agent).
    for (const h of s.helpers ?? []) this.track(procKey(h.id, h.pid), { kind: 'helper', pid: h.pid, what: `child ${h.pid} of ${h.owner}`, deadAt: null });

    // Deployments: deficit (4) and surplus (5).
    const desired = new Map(s.deployments.map((d) => [d.name, d.replicas]));
    const names = new Set([...desired.keys(), ...s.units.map((u) => u.deployment)]);
    for (const name of names) {
      const want = desired.get(name) ?? 0;
      const live = this.liveOf(s, name).length;
      const running = s.units.filter((u) => u.deployment === name && u.bound && u.phase === 'Running' && u.pidAlive).length;
      this.episode(
        `deficit/${name}`,
        desired.has(name) && running < want,
        t,
        this.bounds.deficitBoundMs,
        4,
        () => `deployment ${name} had ${running} of ${want} units running`,
        'deficit',
        name,
      );
      this.episode(
        `surplus/${name}`,
        live > want,
        t,
        this.bounds.surplusBoundMs,
        5,
        () => `deployment ${name} had ${live} live units for ${want} replicas${desired.has(name) ? '' : ' (deleted)'}`,
        'surplus',
        name,
      );
    }

    // Live units on NotReady nodes (6).
    for (const n of s.nodes) {
      const live = s.units.filter((u) => u.node === n.name && u.pidAlive && u.phase !== 'Succeeded' && u.phase !== 'Failed');
      this.episode(
        `notready/${n.name}`,
        !n.ready && live.length > 0,
        t,
        this.bounds.notReadyBoundMs,
        6,
        () =>
          `node ${n.name} is NotReady with ${live.length} live unit pids (${live
            .slice(0, 3)
            .map((u) => `${u.name} pid ${u.pid}`)
            .join(', ')})`,
      );
    }

    // Capacity and taints (7).
    for (const n of s.nodes) {
      const bound = s.units.filter((u) => u.bound && u.node === n.name);
      const cpu = bound.reduce((a, u) => a + u.cpu, 0);
      const mem = bound.reduce((a, u) => a + u.memory, 0);
      if (cpu > n.capacity.cpu || mem > n.capacity.memory) {
        this.violateOnce(
          `cap/${n.name}/${cpu}/${mem}`,
          7,
          t,
          `node ${n.name}: units bound request cpu=${cpu}m memory=${mem}Mi > capacity cpu=${n.capacity.cpu}m memory=${n.capacity.memory}Mi`,
        );
      }
      if (n.allocated && (n.allocated.cpu > n.capacity.cpu || n.allocated.memory > n.capacity.memory)) {
        this.violateOnce(
          `alloc/${n.name}/${n.allocated.cpu}/${n.allocated.memory}`,
          7,
          t,
          `node ${n.name}: status.allocated cpu=${n.allocated.cpu}m memory=${n.allocated.memory}Mi > capacity`,
        );
      }
      for (const taint of n.taints) {
        if (taint.effect === 'PreferNoSchedule') continue;
        for (const u of bound) {
          if (!tolerates(u.tolerations, taint))
            this.violateOnce(`taint/${u.name}/${n.name}`, 7, t, `unit ${u.name} is bound to ${n.name} but does not tolerate its taint ${taint.key}:${taint.effect}`);
        }
      }
    }

    if (this.convergedNow(s)) {
      this.convergedAt.push(t);
      for (const f of this.faults) {
        // A snapshot implies a working leader (reads pass its read barrier),
        // so for a fault the cluster must absorb on its own (a unit crash, a
        // killed agent, a killed leader with failover) recovery is the first
        // converged snapshot after it; for one that lasts until healed (a
        // stopped leader, a partition), the first after the heal.
        const ownRecovery = !f.disruptive || f.calmAfterMs !== undefined;
        if (f.recoveryMs === null && f.t < t && (ownRecovery || (f.healT !== null && f.healT <= t))) f.recoveryMs = t - f.t;
      }
    }
  }

  private checkFencing(u: UnitObservation, incarnation: string, t: number): void {
    const term = u.term!;
    const started = u.startedAtMs!;
    // (a) per incarnation, terms never go down in start order.
    let list = this.incarnations.get(incarnation);
    if (!list) this.incarnations.set(incarnation, (list = []));
    for (const o of list) {
      if (o.startedAtMs < started && o.term > term)
        this.violate(3, t, `unit ${u.name} (term ${term}) started on ${u.node} after ${o.name} of term ${o.term}: the agent accepted a stale term`);
      if (o.startedAtMs > started && o.term < term)
        this.violate(3, t, `unit ${o.name} (term ${o.term}) started on ${u.node} after ${u.name} of term ${term}: the agent accepted a stale term`);
    }
    list.push({ name: u.name, startedAtMs: started, term });
    // (c) a leader of a higher term had been known for fenceBoundMs already.
    const startedT = started - this.startedAtEpochMs;
    for (const [lterm, seenAt] of this.leaderFirstSeen) {
      if (lterm > term && startedT > seenAt + this.bounds.fenceBoundMs) {
        this.violate(3, t, `unit ${u.name} started at ${fmtT(startedT)} with term ${term}, ${((startedT - seenAt) / 1000).toFixed(1)}s after a leader of term ${lterm} was seen`);
        break;
      }
    }
  }

  // ------------------------------------------------ processes (6, 8)

  private markDead(key: string, t: number): void {
    const p = this.pids.get(key);
    if (p && p.deadAt === null) p.deadAt = t;
  }

  private onProcs(o: ProcsObservation): void {
    for (const key of o.dead) this.markDead(key, o.t);
    // A dead agent's units must be dead within orphanBoundMs.
    for (const [key, p] of this.pids) {
      if (p.kind !== 'unit' || p.deadAt !== null || !p.agentKey) continue;
      const agent = this.pids.get(p.agentKey);
      if (agent?.deadAt != null && o.t - agent.deadAt > this.bounds.orphanBoundMs) {
        this.violateOnce(
          `orphan-unit/${key}`,
          6,
          o.t,
          `${p.what} pid ${p.pid} on ${p.node} still alive ${((o.t - agent.deadAt) / 1000).toFixed(1)}s after its agent pid ${p.agentPid} died`,
        );
      }
    }
    if (o.final) {
      for (const [key, p] of this.pids) {
        if (p.deadAt === null) this.violateOnce(`orphan/${key}`, 8, o.t, `${p.what} pid ${p.pid} is still alive after the cluster stopped`);
      }
    }
  }

  // ------------------------------------------------ the verdict

  finish(input: FinishInput): Verdict {
    const notes: Partial<Record<InvariantId, string>> = { ...input.notes };
    const checked: Record<InvariantId, boolean> = { 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: input.orphansChecked };

    // (2) acknowledged writes.
    const byDeployment = new Map<string, WriteObservation[]>();
    for (const w of [...this.writes].sort((a, b) => a.seq - b.seq)) {
      let l = byDeployment.get(w.deployment);
      if (!l) byDeployment.set(w.deployment, (l = []));
      l.push(w);
    }
    if (input.finalDeployments === null) {
      if (this.writes.some((w) => w.outcome === 'ack')) this.violate(2, input.t, 'the final desired state could not be read from the API');
    } else {
      const final = new Map(input.finalDeployments.map((d) => [d.name, d]));
      for (const [name, ws] of byDeployment) {
        const possible = possibleFinalStates(ws);
        const d = final.get(name);
        const got = d ? dkey({ exists: true, replicas: d.replicas, marker: d.marker ?? null }) : 'absent';
        if (!possible.has(got)) {
          const lastAck = [...ws].reverse().find((w) => w.outcome === 'ack');
          this.violate(
            2,
            input.t,
            `deployment ${name}: final state ${got} (replicas/marker) is none of ${[...possible].join(' | ')}; last acknowledged write #${lastAck?.seq ?? '-'} ${lastAck ? `${lastAck.op}${lastAck.replicas !== undefined ? ' ' + lastAck.replicas : ''} at ${fmtT(lastAck.t)}` : ''}`,
          );
        }
      }
    }

    // (3b) no term above every term ever seen.
    for (const [name, u] of this.unitsSeen) {
      if (u.term !== null && u.term > this.maxTerm && this.replicaPolls > 0)
        this.violate(3, input.t, `unit ${name} carries term ${u.term}, above every term a replica reported (max ${this.maxTerm})`);
    }

    // (4) convergence after the quiet point.
    const after = this.convergedAt.find((t) => t >= input.quietAt);
    const convergedAfterQuietMs = after === undefined ? null : after - input.quietAt;
    const stillConverged = this.lastSnapshot !== null && this.convergedNow(this.lastSnapshot) && this.lastSnapshot.t >= input.quietAt;
    if (convergedAfterQuietMs === null || convergedAfterQuietMs > this.bounds.convergeBoundMs) {
      this.violate(
        4,
        input.t,
        convergedAfterQuietMs === null
          ? `observed never equalled desired after the last fault at ${fmtT(input.quietAt)}${this.lastSnapshot ? ': ' + this.describeGap(this.lastSnapshot) : ''}`
          : `observed equalled desired only ${(convergedAfterQuietMs / 1000).toFixed(1)}s after the last fault (bound ${this.bounds.convergeBoundMs / 1000}s)`,
      );
    } else if (!stillConverged && this.lastSnapshot) {
      this.violate(4, input.t, `converged at ${fmtT(after!)} but the last snapshot differs again: ${this.describeGap(this.lastSnapshot)}`);
    }
    // Close open episodes for the "longest" figures.
    if (this.lastSnapshot) {
      for (const [key, e] of this.episodes) {
        const [kind, dep] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
        if (kind === 'deficit' || kind === 'surplus') this.noteLongest(kind, dep, this.lastSnapshot.t - e.since);
      }
    }

    if (!checked[8]) notes[8] ??= 'not checked: the cluster was not stopped by this run';
    const invariants: InvariantResult[] = INVARIANTS.map((inv) => {
      const v = this.violations.get(inv.id);
      return { id: inv.id, name: inv.name, text: inv.text, checked: checked[inv.id], note: notes[inv.id] ?? '', violations: v?.count ?? 0, examples: v?.examples ?? [] };
    });
    const faultCounts: Record<string, number> = {};
    const healCounts: Record<string, number> = {};
    for (const f of this.faults) {
      faultCounts[f.kind] = (faultCounts[f.kind] ?? 0) + 1;
      if (f.healKind) healCounts[f.healKind] = (healCounts[f.healKind] ?? 0) + 1;
    }
    const recovered = this.faults.filter((f) => f.recoveryMs !== null);
    const slowestRecovery = recovered.reduce<FaultRecord | null>((a, f) => (!a || f.recoveryMs! > a.recoveryMs! ? f : a), null);
    return {
      invariants,
      violations: invariants.reduce((a, i) => a + i.violations, 0),
      faults: this.faults,
      faultCounts,
      healCounts,
      writes: {
        ack: this.writes.filter((w) => w.outcome === 'ack').length,
        refused: this.writes.filter((w) => w.outcome === 'refused').length,
        unknown: this.writes.filter((w) => w.outcome === 'unknown').length,
      },
      quietAt: input.quietAt,
      convergedAfterQuietMs,
      slowestRecovery,
      longestDeficit: this.longest.deficit,
      longestSurplus: this.longest.surplus,
      leadersByTerm: [...this.leadersByTerm].sort((a, b) => a[0] - b[0]).map(([term, s]) => ({ term, leaders: [...s] })),
      snapshots: this.snapshots,
      replicaPolls: this.replicaPolls,
      maxTermSeen: this.maxTerm,
      pidsTracked: this.pidCounts(),
    };
  }

  private pidCounts(): Verdict['pidsTracked'] {
    const c = { unit: 0, agent: 0, replica: 0, helper: 0 };
    for (const p of this.pids.values()) c[p.kind]++;
    return c;
  }

  private describeGap(s: SnapshotObservation): string {
    const parts: string[] = [];
    for (const d of s.deployments) {
      const running = s.units.filter((u) => u.deployment === d.name && u.bound && u.phase === 'Running' && u.pidAlive).length;
      if (running !== d.replicas) parts.push(`${d.name} ${running}/${d.replicas} running`);
    }
    const desired = new Set(s.deployments.map((d) => d.name));
    const stray = s.units.filter((u) => u.pidAlive && (!desired.has(u.deployment) || !u.bound));
    if (stray.length)
      parts.push(
        `${stray.length} live units not wanted (${stray
          .slice(0, 3)
          .map((u) => u.name)
          .join(', ')})`,
      );
    const notReady = s.nodes.filter((n) => !n.ready && s.units.some((u) => u.node === n.name && u.pidAlive));
    if (notReady.length) parts.push(`live units on NotReady ${notReady.map((n) => n.name).join(', ')}`);
    return parts.join('; ') || 'no gap in the last snapshot';
  }
}
