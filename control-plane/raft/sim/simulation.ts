// control-plane/raft/sim/simulation.ts -- deterministic simulation of a
// 3-replica Raft group in one process (TigerBeetle/FoundationDB style): an
// in-memory network that drops, delays, duplicates and reorders messages,
// partitions, crashes that lose everything not persisted through a Ready,
// restarts from the persisted state, client writes and linearizable reads.
// One seed fixes every choice, so a failing seed replays exactly.
//
// Each host follows the Ready contract in three separately scheduled phases
// (take ready -> persist -> send+apply+advance), so messages and ticks also
// arrive between ready() and advance(), and a crash can hit between phases.
//
// After every step the SafetyChecker asserts the Figure 3 properties. At the
// end the network heals, crashed replicas restart, and we check liveness (a
// leader is elected and a final write commits within a bound) and that no
// acknowledged write was lost (every replica applied every acknowledged write).

import { SeededRandom } from '../../../shared/random.ts';
import { RaftNode } from '../raft-node.ts';
import type { Entry, HardState, Message, NodeId, RaftConfig, Ready, Snapshot } from '../types.ts';
import { SafetyChecker, SafetyViolation } from './checker.ts';
import { WriteLog, decodeText, encodeText } from './write-log.ts';

/** Most messages the simulated network holds in flight; beyond it the oldest are dropped. */
export const MAX_NETWORK_MESSAGES = 1000;
/** Ticks after healing within which a leader must exist and a write must commit. */
export const LIVENESS_BOUND_TICKS = 400;
/** Ticks after the final write commits within which every replica must apply it. */
export const CONVERGENCE_BOUND_TICKS = 400;
/** Most Ready rounds one drain performs (guards against a core that never quiesces). */
const MAX_READY_ROUNDS_PER_DRAIN = 200;

export interface SimOptions {
  /** Random steps before the final heal (default 600). */
  steps?: number;
  /** Replicas in the group; default: 3, or 5 for a quarter of the seeds. */
  replicas?: number;
  /** Receives one line per step when set. */
  trace?: (line: string) => void;
}

export interface SimStats {
  steps: number;
  ticks: number;
  leaderTerms: number;
  proposals: number;
  acked: number;
  crashes: number;
  restarts: number;
  partitions: number;
  delivered: number;
  dropped: number;
  snapshotsInstalled: number;
  compactions: number;
  readsServed: number;
  finalCommit: number;
}

export interface SimResult {
  seed: number;
  ok: boolean;
  failure?: string;
  /** The step at which the failure was detected. */
  failedAtStep?: number;
  stats: SimStats;
  config: string;
}

interface Durable {
  hardState: HardState;
  snapshot: Snapshot | null;
  entries: Entry[];
}

interface PendingRead {
  context: string;
  index: number | null;
  /** Number of writes acknowledged when the read was issued: all must be visible. */
  ackedBefore: number;
}

class SimHost {
  durable: Durable = { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] };
  node: RaftNode | null = null;
  sm = new WriteLog();
  phase: 'idle' | 'taken' | 'persisted' = 'idle';
  rd: Ready | null = null;
  proposals = new Map<number, { term: number; value: string }>();
  reads: PendingRead[] = [];
  constructor(readonly id: NodeId) {}
}

interface InFlight {
  m: Message;
}

export function runSimulation(seed: number, options: SimOptions = {}): SimResult {
  const sim = new Simulation(seed, options);
  return sim.run();
}

class Simulation {
  private readonly rng: SeededRandom;
  private readonly ids: NodeId[];
  private readonly hosts = new Map<NodeId, SimHost>();
  private readonly checker = new SafetyChecker();
  private network: InFlight[] = [];
  private group = new Map<NodeId, number>(); // partition id per node
  private readonly acked: string[] = [];
  /** `${voter}@${term}` -> candidate it voted for (from messages actually sent). */
  private readonly votesGranted = new Map<string, NodeId>();
  private writeSeq = 0;
  private readSeq = 0;
  private stepNo = 0;
  private readonly stats: SimStats = {
    steps: 0,
    ticks: 0,
    leaderTerms: 0,
    proposals: 0,
    acked: 0,
    crashes: 0,
    restarts: 0,
    partitions: 0,
    delivered: 0,
    dropped: 0,
    snapshotsInstalled: 0,
    compactions: 0,
    readsServed: 0,
    finalCommit: 0,
  };
  // Per-seed knobs.
  private readonly raftKnobs: Pick<RaftConfig, 'electionTimeoutTicks' | 'heartbeatTicks' | 'preVote' | 'checkQuorum' | 'maxEntriesPerMsg' | 'maxInflight' | 'piggybackCommit'>;
  private readonly pDrop: number;
  private readonly pDup: number;
  private readonly pReorder: number;
  private readonly pSyncDrain: number;
  private readonly compactEvery: number;
  private reliable = false;

  constructor(
    readonly seed: number,
    private readonly options: SimOptions,
  ) {
    this.rng = new SeededRandom(seed);
    const r = this.rng;
    this.raftKnobs = {
      electionTimeoutTicks: 10,
      heartbeatTicks: 1 + r.int(3),
      preVote: r.chance(0.7),
      checkQuorum: r.chance(0.7),
      maxEntriesPerMsg: 1 + r.int(4),
      maxInflight: 1 + r.int(4),
      // Both commit announcements (eager, or riding on the next append or
      // heartbeat) on alternate seeds; from the seed, not the stream, so
      // every other choice of a seed stays what it was.
      piggybackCommit: seed % 2 !== 0,
    };
    this.pDrop = r.next() * 0.2;
    this.pDup = r.next() * 0.1;
    this.pReorder = r.next() * 0.5;
    this.pSyncDrain = 0.5 + r.next() * 0.5;
    this.compactEvery = 3 + r.int(20);
    // Mostly the 3 replicas we deploy; some 5-replica groups, where a quorum
    // needs two peers, so Figure 8 and read-index confirmation bite harder.
    const size = options.replicas ?? (r.chance(0.25) ? 5 : 3);
    this.ids = Array.from({ length: size }, (_, i) => `n${i + 1}`);
    for (const id of this.ids) {
      const h = new SimHost(id);
      this.hosts.set(id, h);
      this.group.set(id, 0);
      this.boot(h);
    }
  }

  private configLine(): string {
    const k = this.raftKnobs;
    return `replicas=${this.ids.length} preVote=${k.preVote} checkQuorum=${k.checkQuorum} heartbeatTicks=${k.heartbeatTicks} maxEntriesPerMsg=${k.maxEntriesPerMsg} maxInflight=${k.maxInflight} piggybackCommit=${k.piggybackCommit} drop=${this.pDrop.toFixed(2)} dup=${this.pDup.toFixed(2)} reorder=${this.pReorder.toFixed(2)} compactEvery=${this.compactEvery}`;
  }

  run(): SimResult {
    const steps = this.options.steps ?? 600;
    try {
      this.trace(`seed ${this.seed}: ${this.configLine()}`);
      for (let i = 0; i < steps; i++) {
        this.stepNo++;
        this.randomStep();
        this.check();
      }
      this.finish();
      return this.result(true);
    } catch (err) {
      const msg = err instanceof SafetyViolation ? err.message : `unexpected error: ${(err as Error).stack ?? String(err)}`;
      this.trace(`FAILED at step ${this.stepNo}: ${msg}`);
      return this.result(false, msg);
    }
  }

  private result(ok: boolean, failure?: string): SimResult {
    this.stats.steps = this.stepNo;
    this.stats.acked = this.acked.length;
    this.stats.leaderTerms = this.checker.leaders().size;
    const res: SimResult = { seed: this.seed, ok, stats: { ...this.stats }, config: this.configLine() };
    if (!ok) {
      res.failure = failure;
      res.failedAtStep = this.stepNo;
    }
    return res;
  }

  private trace(line: string): void {
    this.options.trace?.(`[${this.stepNo}] ${line}`);
  }

  private check(): void {
    const up: Array<{ id: NodeId; node: RaftNode }> = [];
    for (const h of this.hosts.values()) if (h.node) up.push({ id: h.id, node: h.node });
    this.checker.checkStep(up);
  }

  // ------------------------------------------------------------ random schedule

  private randomStep(): void {
    const r = this.rng;
    const roll = r.next() * 100;
    if (roll < 45) this.deliverOne();
    else if (roll < 70) this.tickAll();
    else if (roll < 72) this.tickOne();
    else if (roll < 82) this.clientWrite();
    else if (roll < 85) this.clientRead();
    else if (roll < 95) this.progressOne();
    else if (roll < 95.6) this.crash(r.pick(this.ids));
    else if (roll < 97) this.restartOne();
    else if (roll < 97.6) this.partition();
    else if (roll < 98) this.heal();
    else this.deliverOne();
  }

  private up(): SimHost[] {
    return [...this.hosts.values()].filter((h) => h.node !== null);
  }

  private tickAll(): void {
    this.stats.ticks++;
    this.trace('tick all');
    for (const h of this.up()) {
      h.node!.tick();
      this.maybeDrain(h);
    }
  }

  private tickOne(): void {
    const up = this.up();
    if (up.length === 0) return;
    const h = this.rng.pick(up);
    this.trace(`tick ${h.id} (clock skew)`);
    h.node!.tick();
    this.maybeDrain(h);
  }

  private clientWrite(): void {
    const up = this.up();
    if (up.length === 0) return;
    const leaders = up.filter((h) => h.node!.status().role === 'leader');
    const h = leaders.length > 0 && this.rng.chance(0.85) ? this.rng.pick(leaders) : this.rng.pick(up);
    const value = `w${++this.writeSeq}`;
    const res = h.node!.propose(encodeText(value));
    if (res.ok) {
      this.stats.proposals++;
      h.proposals.set(res.index, { term: res.term, value });
      this.trace(`propose ${value} on ${h.id}: index ${res.index} term ${res.term}`);
    } else {
      this.trace(`propose ${value} on ${h.id}: refused (${res.reason})`);
    }
    this.maybeDrain(h);
  }

  private clientRead(): void {
    const leaders = this.up().filter((h) => h.node!.status().role === 'leader');
    if (leaders.length === 0) return;
    const h = this.rng.pick(leaders);
    const context = `r${++this.readSeq}`;
    const res = h.node!.readIndex(context);
    this.trace(`readIndex ${context} on ${h.id}: ${res.ok ? 'pending' : res.reason}`);
    if (res.ok) h.reads.push({ context, index: null, ackedBefore: this.acked.length });
    this.maybeDrain(h);
  }

  private progressOne(): void {
    const up = this.up();
    if (up.length === 0) return;
    const h = this.rng.pick(up);
    this.progress(h);
  }

  private crash(id: NodeId): void {
    const h = this.hosts.get(id)!;
    if (!h.node) return;
    this.stats.crashes++;
    this.trace(`CRASH ${id} (phase ${h.phase}; unpersisted state lost)`);
    h.node = null;
    h.rd = null;
    h.phase = 'idle';
    h.proposals.clear();
    h.reads = [];
    // The kernel closes a dead process's sockets: its peers see the links
    // close (the production host calls this from its transport).
    for (const other of this.hosts.values()) if (other.id !== id && other.node) other.node.peerLinkClosed(id);
  }

  private restartOne(): void {
    const down = [...this.hosts.values()].filter((h) => h.node === null);
    if (down.length === 0) return;
    const h = this.rng.pick(down);
    this.stats.restarts++;
    this.boot(h);
    this.trace(
      `RESTART ${h.id} from term ${h.durable.hardState.term} vote ${h.durable.hardState.vote} commit ${h.durable.hardState.commit}, ${h.durable.entries.length} entries, snapshot ${h.durable.snapshot?.meta.index ?? 0}`,
    );
  }

  private boot(h: SimHost): void {
    const nodeRandom = new SeededRandom(this.rng.int(2 ** 32));
    const persisted = structuredClone(h.durable);
    h.node = new RaftNode({
      id: h.id,
      peers: this.ids,
      random: () => nodeRandom.next(),
      ...this.raftKnobs,
      maxUncommittedEntries: 64,
      maxPendingReads: 64,
      persisted,
    });
    h.sm = WriteLog.fromSnapshot(h.durable.snapshot);
    if (h.durable.snapshot) this.checker.checkRestore(h.id, h.sm);
    h.phase = 'idle';
    h.rd = null;
  }

  private partition(): void {
    this.stats.partitions++;
    for (const id of this.ids) this.group.set(id, this.rng.int(2));
    this.trace(`PARTITION ${this.ids.map((id) => `${id}:${this.group.get(id)}`).join(' ')}`);
  }

  private heal(): void {
    for (const id of this.ids) this.group.set(id, 0);
    this.trace('HEAL');
  }

  // ------------------------------------------------------------ network

  private send(m: Message): void {
    if (!this.reliable && this.rng.chance(this.pDrop)) {
      this.stats.dropped++;
      return;
    }
    this.network.push({ m: structuredClone(m) });
    if (!this.reliable && this.rng.chance(this.pDup)) this.network.push({ m: structuredClone(m) });
    while (this.network.length > MAX_NETWORK_MESSAGES) {
      this.network.shift();
      this.stats.dropped++;
    }
  }

  private deliverOne(): void {
    if (this.network.length === 0) return;
    const i = this.rng.chance(this.pReorder) ? this.rng.int(this.network.length) : 0;
    const [{ m }] = this.network.splice(i, 1);
    this.deliver(m);
  }

  private deliver(m: Message): void {
    const h = this.hosts.get(m.to);
    if (!h || !h.node || this.group.get(m.from) !== this.group.get(m.to)) {
      this.stats.dropped++;
      this.trace(`drop ${describe(m)}`);
      return;
    }
    this.stats.delivered++;
    this.trace(`deliver ${describe(m)}`);
    h.node.step(m);
    this.maybeDrain(h);
  }

  // ------------------------------------------------------------ the host's Ready loop

  private maybeDrain(h: SimHost): void {
    if (this.rng.chance(this.pSyncDrain)) this.drain(h);
  }

  private drain(h: SimHost): void {
    for (let i = 0; i < MAX_READY_ROUNDS_PER_DRAIN; i++) {
      if (!h.node) return;
      if (h.phase === 'idle' && !h.node.hasReady()) return;
      this.progress(h);
    }
    throw new SafetyViolation('Quiescence', `${h.id} still had work after ${MAX_READY_ROUNDS_PER_DRAIN} Ready rounds`);
  }

  /** One phase of the host loop: take -> persist -> send/apply/advance. */
  private progress(h: SimHost): void {
    const node = h.node;
    if (!node) return;
    if (h.phase === 'idle') {
      const rd = node.ready();
      if (!rd) return;
      h.rd = rd;
      h.phase = 'taken';
      return;
    }
    const rd = h.rd!;
    if (h.phase === 'taken') {
      this.persist(h, rd);
      h.phase = 'persisted';
      return;
    }
    // phase 'persisted': the contract allows sending and applying now.
    for (const m of rd.messages) {
      this.checkPersistedBeforeSend(h, m);
      this.send(m);
    }
    if (rd.snapshot) {
      h.sm = WriteLog.fromSnapshot(rd.snapshot);
      this.checker.checkRestore(h.id, h.sm);
      this.stats.snapshotsInstalled++;
      this.trace(`${h.id} restored snapshot at ${rd.snapshot.meta.index}`);
    }
    for (const e of rd.committedEntries) this.apply(h, e);
    for (const rs of rd.readStates) {
      const read = h.reads.find((r) => r.context === rs.context);
      if (read) read.index = rs.index;
    }
    node.advance(rd);
    h.rd = null;
    h.phase = 'idle';
    this.serveReads(h);
    const st = node.status();
    if (st.applied !== h.sm.appliedIndex) {
      throw new SafetyViolation('Host contract', `${h.id} core says applied ${st.applied}, state machine applied ${h.sm.appliedIndex}`);
    }
    if (st.applied - st.snapshotIndex >= this.compactEvery && this.rng.chance(0.5)) {
      const res = node.compact(st.applied, h.sm.toBytes());
      if (!res.ok) throw new SafetyViolation('Host contract', `${h.id} compact(${st.applied}) refused: ${res.reason}`);
      // RaftStorage.saveCompaction: keep the snapshot, drop entries it covers.
      h.durable.snapshot = structuredClone(res.snapshot);
      h.durable.entries = h.durable.entries.filter((e) => e.index > res.snapshot.meta.index);
      this.stats.compactions++;
      this.trace(`${h.id} compacted through ${st.applied}`);
    }
  }

  /**
   * The Ready contract seen from the disk: a vote leaves only once stored
   * (at most one vote per term, §5.2, must survive a crash), and an append
   * acknowledgement only covers entries that are stored.
   */
  private checkPersistedBeforeSend(h: SimHost, m: Message): void {
    if (m.type === 'voteResponse' && !m.reject) {
      const key = `${m.from}@${m.term}`;
      const earlier = this.votesGranted.get(key);
      if (earlier !== undefined && earlier !== m.to) {
        throw new SafetyViolation('One vote per term', `${m.from} voted for ${earlier} and ${m.to} in term ${m.term}`);
      }
      this.votesGranted.set(key, m.to);
      const hs = h.durable.hardState;
      // A later term in the same Ready supersedes the vote (it can no longer be re-cast).
      if (hs.term < m.term || (hs.term === m.term && hs.vote !== m.to)) {
        throw new SafetyViolation('Ready contract', `${m.from} sent a vote for ${m.to} in term ${m.term} but stored term ${hs.term} vote ${hs.vote}`);
      }
    }
    // (If a higher term reached this replica in the same Ready, its log may
    // since have been truncated by that term's leader; the old ack is moot.)
    if (m.type === 'appendResponse' && !m.reject && m.index > 0 && h.durable.hardState.term === m.term) {
      const d = h.durable;
      const stored = d.entries.length > 0 ? d.entries[d.entries.length - 1].index : (d.snapshot?.meta.index ?? 0);
      if (stored < m.index) {
        throw new SafetyViolation('Ready contract', `${m.from} acknowledged index ${m.index} but stored only through ${stored}`);
      }
    }
  }

  private persist(h: SimHost, rd: Ready): void {
    const d = h.durable;
    if (rd.snapshot) {
      d.snapshot = structuredClone(rd.snapshot);
      d.entries = [];
    }
    if (rd.entries.length > 0) {
      const first = rd.entries[0].index;
      const base = (d.snapshot?.meta.index ?? 0) + 1;
      const keep = d.entries.filter((e) => e.index < first);
      if (keep.length + base !== first) {
        throw new SafetyViolation('Host contract', `${h.id} Ready entries start at ${first} but storage holds ${base}..${base + d.entries.length - 1}`);
      }
      d.entries = keep.concat(structuredClone(rd.entries));
    }
    if (rd.hardState) d.hardState = { ...rd.hardState };
  }

  private apply(h: SimHost, e: Entry): void {
    this.checker.checkApply(h.id, e);
    const problem = h.sm.apply(e);
    if (problem) throw new SafetyViolation('State Machine Safety', `${h.id}: ${problem}`);
    const p = h.proposals.get(e.index);
    if (p) {
      h.proposals.delete(e.index);
      if (p.term === e.term) {
        const text = decodeText(e.data);
        if (text !== p.value) {
          throw new SafetyViolation('Acknowledgement', `${h.id} index ${e.index} term ${e.term} holds ${text}, proposed ${p.value}`);
        }
        this.acked.push(p.value);
        this.trace(`ACK ${p.value} at ${e.index} on ${h.id}`);
      }
    }
  }

  /** Linearizability of read index (§8): a read sees every write acknowledged before it began. */
  private serveReads(h: SimHost): void {
    const remaining: PendingRead[] = [];
    for (const r of h.reads) {
      if (r.index === null || r.index > h.sm.appliedIndex) {
        remaining.push(r);
        continue;
      }
      for (let i = 0; i < r.ackedBefore; i++) {
        if (!h.sm.has(this.acked[i])) {
          throw new SafetyViolation('Linearizable read', `${h.id} served ${r.context} at index ${r.index} without acknowledged write ${this.acked[i]}`);
        }
      }
      this.stats.readsServed++;
      this.trace(`READ ${r.context} served on ${h.id} at ${r.index}`);
    }
    h.reads = remaining;
  }

  // ------------------------------------------------------------ the end: heal, liveness, durability

  private finish(): void {
    this.trace('--- final phase: heal, restart everything, reliable network ---');
    this.heal();
    this.reliable = true;
    for (const h of this.hosts.values())
      if (!h.node) {
        this.boot(h);
        this.trace(`RESTART ${h.id}`);
      }
    for (const h of this.hosts.values()) this.drain(h);

    let final: { host: SimHost; value: string; index: number; term: number } | null = null;
    let committedAt = -1;
    for (let t = 0; t < LIVENESS_BOUND_TICKS + CONVERGENCE_BOUND_TICKS; t++) {
      this.stepNo++;
      this.tickAll();
      this.flushNetwork();
      this.check();
      if (committedAt < 0) {
        if (final && this.acked.includes(final.value)) {
          committedAt = t;
        } else if (!final || !final.host.node || !final.host.proposals.has(final.index) || final.host.node.status().term !== final.term) {
          // No final write yet, or it was lost to a crash or a leader change: (re)propose.
          const leader = this.up().find((h) => h.node!.status().role === 'leader');
          if (leader) {
            const value = `final-${this.seed}-${t}`;
            const res = leader.node!.propose(encodeText(value));
            if (res.ok) {
              leader.proposals.set(res.index, { term: res.term, value });
              final = { host: leader, value, index: res.index, term: res.term };
              this.trace(`final write ${value} on ${leader.id} at ${res.index}`);
              this.drain(leader);
              this.flushNetwork();
            }
          }
        }
        if (committedAt < 0 && t >= LIVENESS_BOUND_TICKS) {
          throw new SafetyViolation('Liveness', `no final write committed within ${LIVENESS_BOUND_TICKS} ticks after healing`);
        }
      } else if (this.allConverged()) {
        break;
      }
    }
    if (committedAt < 0 || !this.allConverged()) {
      const states = this.up()
        .map((h) => `${h.id}:${JSON.stringify(h.node!.status())}`)
        .join(' ');
      throw new SafetyViolation('Liveness', `replicas did not converge within ${CONVERGENCE_BOUND_TICKS} ticks: ${states}`);
    }
    // No acknowledged write lost: every replica applied every acknowledged write.
    for (const h of this.hosts.values()) {
      for (const v of this.acked) {
        if (!h.sm.has(v)) throw new SafetyViolation('Durability', `acknowledged write ${v} missing on ${h.id} after healing`);
      }
    }
    const leader = this.up().find((h) => h.node!.status().role === 'leader');
    this.stats.finalCommit = leader?.node!.status().commit ?? 0;
  }

  private allConverged(): boolean {
    const up = this.up();
    const leader = up.find((h) => h.node!.status().role === 'leader');
    if (!leader) return false;
    const commit = leader.node!.status().commit;
    return up.every((h) => h.sm.appliedIndex >= commit && h.phase === 'idle');
  }

  private flushNetwork(): void {
    for (let guard = 0; guard < 10_000 && this.network.length > 0; guard++) {
      const { m } = this.network.shift()!;
      this.deliver(m);
      for (const h of this.hosts.values()) this.drain(h);
    }
    for (const h of this.hosts.values()) this.drain(h);
  }
}

function describe(m: Message): string {
  const head = `${m.type} ${m.from}->${m.to} t${m.term}`;
  switch (m.type) {
    case 'vote':
    case 'preVote':
      return `${head} last ${m.lastLogIndex}/${m.lastLogTerm}`;
    case 'voteResponse':
    case 'preVoteResponse':
      return `${head} ${m.reject ? 'REJECT' : 'grant'}`;
    case 'append':
      return `${head} prev ${m.prevLogIndex}/${m.prevLogTerm} n=${m.entries.length} commit ${m.commit}`;
    case 'appendResponse':
      return `${head} ${m.reject ? `REJECT ${m.index} hint ${m.hintIndex}` : `ok ${m.index}`}`;
    case 'heartbeat':
      return `${head} commit ${m.commit}${m.context ? ` ctx ${m.context}` : ''}`;
    case 'heartbeatResponse':
      return `${head}${m.context ? ` ctx ${m.context}` : ''}`;
    case 'snapshot':
      return `${head} at ${m.snapshot.meta.index}/${m.snapshot.meta.term}`;
  }
}
