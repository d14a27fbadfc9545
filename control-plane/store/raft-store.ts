// control-plane/store/raft-store.ts -- the ReplicatedStore of a Raft group:
// the shell around the pure RaftNode. It owns the clock (one tick every
// TICK_MS), the disk (DiskStorage) and the peers (PeerTransport), and it
// drives the core by the Ready contract: PERSIST, THEN SEND, THEN APPLY,
// THEN advance(). A proposal resolves only once its entry is committed and
// applied here, so the API acknowledges nothing a majority does not hold.
// Clock, randomness, storage and transport are injected (options `clock`,
// `random`, `storage`, `transport`); the defaults are the real ones (Node's
// timers, Math.random, DiskStorage, PeerTransport), and the simulation of
// the production host (control-plane/sim/) passes memory ones.
//
// Failure answers, as docs/contract.md describes them:
//   * not leader / no leader known       -> NotLeaderError (the API forwards)
//   * leader without a recent quorum     -> NoQuorumError 'refused' (never in the log)
//   * proposed, not committed in time    -> NoQuorumError 'unknown' (may still apply)
//   * overwritten by a new leader's log  -> NoQuorumError 'refused' (it never applied)

import { nanoid } from 'nanoid';
import type { Clock, ClockTimer } from '../../shared/clock.ts';
import { randomId, type Random } from '../../shared/random.ts';
import { systemClock } from '../../shared/system-clock.ts';
import type { Mutation } from '../mutations.ts';
import { RaftNode, type Entry, type Message, type Ready, type Role as RaftRole } from '../raft/index.ts';
import { SNAPSHOT_ON_DISK, type RaftStorage, type SnapshotMeta } from '../raft/types.ts';
import { DiskStorage } from '../raft-storage/index.ts';
import { PeerTransport } from '../raft-transport/peer-transport.ts';
import { decodeStoreData, encodeStoreData } from '../../shared/codec.ts';
import type { Transport, TransportFactory } from '../raft-transport/transport.ts';
import { DesiredState, type ApplyResult, type DesiredSnapshot, type StoreCommand } from './desired-state.ts';
import { capture, packInSlices, SLICE_MS, unpackInSlices } from './snapshot-slices.ts';
import { NoQuorumError, NotLeaderError, type ReplicaStatus, type ReplicatedStore, type Role } from './store.ts';

export interface RaftTiming {
  tickMs: number;
  electionTimeoutTicks: number; // a follower campaigns after [T, 2T) ticks of silence
  heartbeatTicks: number;
}

/** A leader sends a follower its snapshot again after this many election timeouts without an answer (RaftConfig.snapshotRetryTicks). */
export const SNAPSHOT_RETRY_ELECTION_TIMEOUTS = 20;
/** 10 ms ticks; elections after 250-500 ms of silence; heartbeats every 50 ms. */
export const DEFAULT_RAFT_TIMING: RaftTiming = { tickMs: 10, electionTimeoutTicks: 25, heartbeatTicks: 5 };
/** Entry bytes in flight to one follower, at most (RaftConfig.maxInflightBytes). */
export const MAX_INFLIGHT_BYTES = 4 * 1024 * 1024;
/** A proposal not committed within this long fails with outcome unknown. */
export const PROPOSAL_TIMEOUT_MS = 3000;
export const READ_TIMEOUT_MS = 2000;
/** Take a snapshot and compact the log once this many entries were applied since the last... */
export const SNAPSHOT_EVERY_ENTRIES = 10000;
/**
 * ...and once the entries applied since hold at least this fraction of the
 * last snapshot's bytes. A snapshot packs the whole state (at 40,000
 * deployments 49 MiB: ~0.8 s of CPU packing and ~0.06 s checksumming on
 * each replica of the 2-core machine, then written), so taken every N
 * entries alone its cost per write would grow with the state. With this
 * floor a snapshot packs at most as many bytes as were logged since the
 * last one, whatever the state's size. At 0.5 (twice as many) the
 * snapshots cost a sixth of the writes at concurrency 16 between 10,000
 * and 70,000 deployments (docs/benchmarks.md). The log kept in memory (and
 * replayed at a restart) is the larger of the two: up to about 9,000
 * deployments (~1.25 KiB each packed, ~1.1 KiB an entry) the entry count
 * governs; past that it holds up to the state's packed size (etcd 3.4
 * keeps up to 100,000 entries).
 */
export const SNAPSHOT_LOG_FRACTION = 1;

/** How a proposal ended, for /metrics. */
export type ProposalOutcome = 'applied' | 'not_leader' | 'refused' | 'overwritten' | 'timeout';

/**
 * What this shell tells /metrics (api/metrics.ts implements it). The Raft
 * core stays pure: everything here is measured around it, in this file.
 */
export interface RaftStoreObserver {
  /** One save (entries and/or term and vote) became durable on disk after `seconds` (O_DSYNC write; saves may share one). */
  persisted(seconds: number): void;
  proposal(outcome: ProposalOutcome): void;
  /** A proposal of this leader was committed and applied `seconds` after it was proposed. */
  committed(seconds: number): void;
  /** This replica started an election: asked for votes in a new term (after a won pre-vote). */
  election(): void;
  /** This replica won an election. */
  electionWon(): void;
  /**
   * This replica learnt of a new leader (a new term's leader, the first one
   * included). `failoverSeconds`: since it last heard from the previous
   * leader (or stopped leading itself); null for the first leader it knows.
   */
  leaderChanged(leader: string, term: number, failoverSeconds: number | null): void;
  /**
   * A snapshot of `bytes` is in place and the log before it is gone:
   * 'taken' by this replica (`seconds` from its capture to its compaction),
   * or 'installed' from the leader (`seconds` to decode and restore it).
   */
  snapshot(kind: 'taken' | 'installed', bytes: number, seconds: number): void;
}

interface Waiter {
  term: number;
  /** clock.now() at propose. */
  at: number;
  resolve: (r: ApplyResult) => void;
  reject: (e: Error) => void;
  timer: ClockTimer;
}

/** The storage a RaftStore drives: RaftStorage that can also be closed (DiskStorage, or the simulation's MemoryStorage). */
/** A snapshot message whose bytes the storage holds (the core dropped them: RaftNode.releaseSnapshotData). */
function isSnapshotOnDisk(m: Message): m is Extract<Message, { type: 'snapshot' }> {
  return m.type === 'snapshot' && m.snapshot.data === SNAPSHOT_ON_DISK;
}

export interface StoreStorage extends RaftStorage {
  close(): Promise<void>;
}

export interface RaftStoreOptions<T extends Transport = PeerTransport> {
  id: string;
  peers: Map<string, string>; // id -> ws://host:port, this replica included
  dataDir: string;
  token: string;
  log: (line: string) => void;
  timing?: RaftTiming;
  snapshotEvery?: number;
  observer?: RaftStoreObserver;
  /** Timers and the time for latencies. Default: the system clock. */
  clock?: Clock;
  /** Election jitter and read-index ids. Default: Math.random and nanoid. */
  random?: Random;
  /** Opens this replica's storage. Default: DiskStorage in dataDir. */
  storage?: () => Promise<StoreStorage>;
  /** Builds the peer transport. Default: PeerTransport (WebSocket) to `peers` with `token`. */
  transport?: TransportFactory<T>;
  /** A deliberate bug, for the simulation's self-test only (mutations.ts). */
  mutation?: Mutation;
}

export class RaftStore<T extends Transport = PeerTransport> implements ReplicatedStore {
  readonly state = new DesiredState();
  readonly id: string;
  readonly transport: T;
  private readonly clock: Clock;
  private readonly waiters = new Map<number, Waiter>();
  private readonly reads = new Map<string, { resolve: () => void; reject: (e: Error) => void; timer: ClockTimer; index: number | null }>();
  private readonly listeners: Array<() => void> = [];
  private processing = false;
  /** This leader's Ready is being saved, its own committed entries applied: entries that commit meanwhile are applied at once. */
  private leaderSaving = false;
  /** sendAppendsSoon() has a send queued for the end of this turn. */
  private appendsScheduled = false;
  private ticker: ClockTimer | null = null;
  /** mutation 'apply-before-commit': entries up to here were applied when they were appended. */
  private appliedEarly = 0;
  private appliedSinceSnapshot = 0;
  private lastRole: RaftRole = 'follower';
  private lastTerm = 0;
  private lastLeader: string | null = null;
  private lastPreVoteTerm = -1;
  private savedTerm = 0;
  private savedVote: string | null = null;
  private closed = false;
  /** The (term, leader) last told to the observer, and when the leader was last heard from (performance.now()). */
  private knownLeader: string | null = null;
  private knownLeaderTerm = -1;
  private lastHeardFromLeader = 0;
  private lastCampaignTerm = -1;
  /** A snapshot is being packed; its bytes, once ready, wait here for the next gap between Readies. */
  private snapshotting = false;
  private packedSnapshot: { index: number; data: Uint8Array; startedAt: number } | null = null;
  /** clock.now() at the last tick and at the last heartbeat round pulse() sent; the heartbeat period in ms. */
  private lastTickAt = 0;
  private lastPulseAt = 0;
  private readonly heartbeatMs: number;

  private constructor(
    private readonly opts: RaftStoreOptions<T>,
    private readonly disk: StoreStorage,
    private readonly raft: RaftNode,
  ) {
    this.id = opts.id;
    this.clock = opts.clock ?? systemClock;
    const timing = opts.timing ?? DEFAULT_RAFT_TIMING;
    this.heartbeatMs = timing.tickMs * timing.heartbeatTicks;
    const handlers = {
      onMessage: (m: Message) => this.onMessage(m),
      // Death by socket: a follower campaigns soon after its leader's connection closes.
      onPeerClosed: (peer: string) => this.raft.peerLinkClosed(peer),
    };
    this.transport = opts.transport ? opts.transport(handlers) : (new PeerTransport({ id: opts.id, peers: opts.peers, token: opts.token, log: opts.log, ...handlers }) as unknown as T);
    this.lastTerm = raft.status().term;
    const hs = raft.hardState();
    this.savedTerm = hs.term;
    this.savedVote = hs.vote;
  }

  static async open<T extends Transport = PeerTransport>(opts: RaftStoreOptions<T>): Promise<RaftStore<T>> {
    const timing = opts.timing ?? DEFAULT_RAFT_TIMING;
    const disk = opts.storage ? await opts.storage() : await DiskStorage.open(opts.dataDir, { log: opts.log });
    const persisted = await disk.load();
    const raft = new RaftNode({
      id: opts.id,
      peers: [...opts.peers.keys()],
      electionTimeoutTicks: timing.electionTimeoutTicks,
      heartbeatTicks: timing.heartbeatTicks,
      random: opts.random ? () => opts.random!.next() : Math.random,
      preVote: true,
      checkQuorum: true,
      maxEntriesPerMsg: 512,
      // The transport tells of a snapshot it could not send and of links that
      // close (sendSnapshotFromDisk, onPeerClosed), so a snapshot is sent again
      // only after a long silence: one of 71 MiB (43,800 of the bench's
      // deployments) took a follower seconds to receive and save, and resent
      // every election timeout, the whole state's bytes kept both busy until
      // leaders lost their followers (docs/architecture.md).
      snapshotRetryTicks: SNAPSHOT_RETRY_ELECTION_TIMEOUTS * timing.electionTimeoutTicks,
      maxInflight: 256,
      // A follower behind by more than this gets it a few MiB at a time, as it
      // answers: sent all at once (40,000 entries after a large snapshot), the
      // packing of those frames held the leader's loop for most of a second,
      // and taking them in one Ready held the follower's.
      maxInflightBytes: MAX_INFLIGHT_BYTES,
      maxUncommittedEntries: 8192,
      // Followers learn the commit index from the next append or heartbeat
      // (§5.3) instead of an extra frame + ack per write (RaftNode.announceCommit).
      piggybackCommit: true,
      persisted,
    });
    const s = new RaftStore<T>(opts, disk, raft);
    // Desired state as of the snapshot; committed entries after it come
    // back through the first Ready (RaftNode re-emits them).
    if (persisted.snapshot && persisted.snapshot.data.length > 0) {
      s.state.restore(decodeStoreData(persisted.snapshot.data, `snapshot at index ${persisted.snapshot.meta.index}`) as DesiredSnapshot);
      s.lastSnapshotBytes = persisted.snapshot.data.length;
    }
    if (persisted.snapshot) s.releaseSnapshot(persisted.snapshot.meta);
    s.lastTickAt = s.clock.now();
    s.ticker = s.clock.interval(() => {
      s.lastTickAt = s.clock.now();
      s.raft.tick();
      // While a Ready is being saved, a leader's heartbeats go out now, not
      // after the save (a compaction or a busy disk can hold it for seconds).
      if (s.processing) s.sendMessages(s.raft.takeLeaderMessages());
      s.kick();
    }, timing.tickMs);
    s.kick();
    return s;
  }

  /**
   * The host calls this from its I/O callbacks (each agent frame). Node runs
   * every ready socket's callback before it runs timers again, and at 5,000
   * agents one such round (peers' frames and the commits they bring,
   * agents' frames and the reports they carry) can take a second, while
   * agents' frames keep arriving: the tick timer, and with it
   * the leader's heartbeats, waits all along, and followers campaign
   * against a leader that is busy, not gone. So when the ticker is a
   * heartbeat period late, a leader sends a heartbeat round from here, at
   * most one per period. Nothing else moves: elections and check-quorum
   * still count ticks (RaftNode.heartbeatNow).
   */
  pulse(): void {
    const now = this.clock.now();
    if (now - this.lastTickAt < this.heartbeatMs || now - this.lastPulseAt < this.heartbeatMs || this.closed) return;
    if (!this.isLeader()) return;
    this.lastPulseAt = now;
    this.raft.heartbeatNow();
    if (this.processing) this.sendMessages(this.raft.takeLeaderMessages());
    else this.kick();
  }

  private onMessage(m: Message): void {
    if (this.closed) return;
    if (m.from === this.lastLeader) this.lastHeardFromLeader = this.clock.now();
    this.raft.step(m);
    // A heartbeat is answered at once, even while a Ready is being saved
    // (RaftNode.takeEarlyMessages): a slow disk delays commits, not the
    // leader's knowledge that its followers are there.
    if (this.processing && m.type === 'heartbeat') this.sendMessages(this.raft.takeEarlyMessages());
    if (this.leaderSaving && m.type === 'appendResponse') this.applyCommittedDuringSave();
    this.kick();
  }

  /**
   * Applies what committed while this leader saves its Ready
   * (RaftNode.takeCommittedDuringSave), a few entries at a time, for at
   * most a slice's time in this callback; what is left waits for the next
   * acknowledgement or the next Ready. At concurrency 16 the leader's
   * proposal-to-apply time fell from 4.4-4.8 ms to 3.9-4.1 (the two
   * followers save faster than a leader that also serves the clients); at
   * concurrency 1 it does not change (docs/benchmarks.md).
   */
  private applyCommittedDuringSave(): void {
    const start = this.clock.now();
    do {
      const entries = this.raft.takeCommittedDuringSave(16);
      if (entries.length === 0) return;
      for (const e of entries) this.applyEntry(e);
    } while (this.clock.now() - start < SLICE_MS && !this.closed);
  }

  /**
   * A proposal made while a Ready is being saved waits for the next Ready,
   * but its appends need not: they go out at the end of this turn of the
   * event loop (one write per follower for all of the turn's proposals), as
   * a leader may send before its own save (RaftNode.takeLeaderMessages).
   * The followers save them meanwhile, and by the next Ready they are often
   * committed. At concurrency 16, overwriting, the leader's proposal to
   * apply fell 5-13% and its writes a second rose 8-19% (3 alternated pairs;
   * 2-4% and level with new names; docs/benchmarks.md).
   */
  private sendAppendsSoon(): void {
    if (this.appendsScheduled) return;
    this.appendsScheduled = true;
    this.clock.immediate(() => {
      this.appendsScheduled = false;
      if (this.processing && !this.closed) this.sendMessages(this.raft.takeLeaderMessages());
    });
  }

  /** Work off every pending Ready, one at a time (the core allows one in flight). */
  private kick(): void {
    if (this.processing || this.closed) return;
    this.processing = true;
    // Start after the current task, not inside it: proposals made in one
    // go (a reconcile pass binding many units) share one Ready (one fsync,
    // one frame per peer); while an fsync is in flight, everything that
    // arrives meanwhile piles up for the next Ready.
    queueMicrotask(() => {
      void this.drain().finally(() => {
        this.processing = false;
        if (!this.closed && this.raft.hasReady()) this.kick();
      });
    });
  }

  private async drain(): Promise<void> {
    this.sliceStart = this.clock.now();
    for (;;) {
      // Readies that need no write (a follower applying what it already
      // logged, 512 entries each) follow one another in microtasks: without
      // this the whole backlog ran as one task (an installing follower held
      // its loop ~1.1 s applying the ~20,000 entries after an 85,000-deployment
      // snapshot, profiled).
      if (this.sliceSpent()) await this.nextTurn();
      const rd = this.raft.ready();
      if (!rd) break;
      await this.handle(rd);
      this.raft.advance(rd);
      this.noticeRoleChange();
      this.serveReads();
      this.takePackedSnapshot();
      const every = this.opts.snapshotEvery ?? SNAPSHOT_EVERY_ENTRIES;
      const logged = this.appliedSinceSnapshot >= every && this.appliedBytesSinceSnapshot >= this.lastSnapshotBytes * SNAPSHOT_LOG_FRACTION;
      if (logged && rd.committedEntries.length > 0 && !this.snapshotting) {
        this.appliedSinceSnapshot = 0;
        this.startSnapshot();
        this.appliedBytesSinceSnapshot = 0;
      }
    }
  }

  /** The size of the last snapshot this replica packed, and the bytes of the entries applied since (its next one's size hint). */
  private lastSnapshotBytes = 0;
  private appliedBytesSinceSnapshot = 0;

  /**
   * A snapshot without a stop: the state is captured now (shallow copies,
   * a few ms for 10,000 records) and packed in slices that yield to the
   * event loop (store/snapshot-slices.ts), while Raft goes on; the log is
   * compacted at the captured index once the bytes are ready, between two
   * Readies (takePackedSnapshot).
   */
  private startSnapshot(): void {
    this.snapshotting = true;
    const index = this.state.appliedIndex;
    const startedAt = this.clock.now();
    const view = capture(this.state);
    // Yields and slice times from the injected clock (deterministic under the simulation).
    packInSlices(
      view,
      () => new Promise<void>((r) => this.clock.immediate(r)),
      SLICE_MS,
      () => this.clock.now(),
      // Room for what it may take, so it is one buffer and no concatenation: the last
      // snapshot's size and all written since, a little more. Room it does not use is
      // never touched, so never resident.
      (this.lastSnapshotBytes + this.appliedBytesSinceSnapshot) * 1.125,
    ).then(
      (data) => {
        this.lastSnapshotBytes = data.length;
        this.packedSnapshot = { index, data, startedAt };
        this.kick();
        if (!this.processing) this.takePackedSnapshot();
      },
      (err) => {
        this.snapshotting = false;
        this.opts.log(`raft: snapshot at ${index} failed: ${(err as Error).message}`);
      },
    );
  }

  private takePackedSnapshot(): void {
    const p = this.packedSnapshot;
    if (!p || this.closed) return;
    this.packedSnapshot = null;
    this.snapshotting = false;
    void this.compact(p.index, p.data, p.startedAt);
  }

  private async handle(rd: Ready): Promise<void> {
    // 1. PERSIST before anything leaves this replica. A Ready whose only
    // news is a higher commit index needs no write at all: commit is a hint
    // (a restarted replica relearns it from the leader), while term, vote
    // and entries must be on disk before any message that depends on them
    // (etcd's MustSync rule). This saves one fsync per write.
    const hs = rd.hardState;
    let termOrVote = hs !== null && (hs.term !== this.savedTerm || hs.vote !== this.savedVote);
    if (hs !== null && termOrVote && this.opts.mutation === 'skip-vote-fsync' && rd.entries.length === 0 && rd.snapshot === null) {
      // The deliberate bug: the vote is sent without being written.
      termOrVote = false;
      this.savedTerm = hs.term;
      this.savedVote = hs.vote;
    }
    // A leader may send its appends BEFORE its own fsync (thesis §10.2.1):
    // it counts itself toward a commit only once its entries are stable
    // (RaftNode.advance), and its term and vote were persisted when it was a
    // candidate. Followers and candidates keep the strict order.
    const sendFirst = !termOrVote && rd.snapshot === null && this.raft.status().role === 'leader';
    const mustPersist = termOrVote || rd.entries.length > 0 || rd.snapshot !== null;
    if (this.opts.mutation === 'apply-before-commit' && this.raft.status().role === 'leader' && rd.entries.length > 0) {
      // The deliberate bug: the leader applies (and acknowledges) what it has only appended.
      const early = rd.entries.filter((e) => e.index > Math.max(this.appliedEarly, this.state.appliedIndex));
      await this.applyCommitted(early);
      if (early.length > 0) this.appliedEarly = early[early.length - 1].index;
    }
    if (sendFirst) {
      // Our own write goes to the disk first (it only starts here; nothing
      // waits for it yet), then the appends go out, so both run at once.
      const persisted = mustPersist ? this.persist(rd) : null;
      try {
        this.sendMessages(rd.messages);
        // Committed entries are stored on a majority already (the leader
        // counts itself only for entries on its own disk, RaftNode.advance),
        // so applying them, and answering their clients, need not wait for
        // this Ready's write, which is about newer entries.
        await this.applyCommitted(rd.committedEntries);
        // Nor need the entries that commit while that write is on its way
        // (both followers have them): they are applied as the followers'
        // acknowledgements arrive (onMessage), not after the write.
        if (persisted) {
          this.leaderSaving = true;
          this.applyCommittedDuringSave();
        }
      } finally {
        if (persisted) await persisted;
        this.leaderSaving = false;
      }
    } else {
      if (mustPersist) await this.persist(rd);
      // 2. SEND.
      this.sendMessages(rd.messages);
      // 3. APPLY.
      if (rd.snapshot) {
        // Decoded and restored in slices (the Ready waits, the event loop does not: heartbeats
        // keep arriving, so this follower does not campaign meanwhile).
        const decodeStart = this.clock.now();
        const value = await unpackInSlices(
          rd.snapshot.data,
          `snapshot at index ${rd.snapshot.meta.index}`,
          () => new Promise<void>((r) => this.clock.immediate(r)),
          SLICE_MS,
          () => this.clock.now(),
        );
        await this.state.restoreInSlices(value as DesiredSnapshot, async () => {
          if (this.sliceSpent()) await this.nextTurn();
        });
        this.releaseSnapshot(rd.snapshot.meta); // persisted above
        this.opts.observer?.snapshot('installed', rd.snapshot.data.length, (this.clock.now() - decodeStart) / 1000);
        this.opts.log(`raft: installed a snapshot from the leader at index ${rd.snapshot.meta.index} (term ${rd.snapshot.meta.term})`);
        this.appliedSinceSnapshot = 0;
        this.lastSnapshotBytes = rd.snapshot.data.length;
        this.appliedBytesSinceSnapshot = 0;
      }
      await this.applyCommitted(rd.committedEntries);
    }
    for (const r of rd.readStates) {
      const read = this.reads.get(r.context);
      if (read) read.index = r.index;
    }
  }

  private async persist(rd: Ready): Promise<void> {
    const hs = rd.hardState;
    const t0 = this.clock.now();
    await this.disk.save({ hardState: hs, entries: rd.entries, snapshot: rd.snapshot });
    this.sliceStart = this.clock.now(); // the loop ran while the disk wrote
    this.opts.observer?.persisted((this.clock.now() - t0) / 1000);
    if (hs) {
      this.savedTerm = hs.term;
      this.savedVote = hs.vote;
    }
  }

  /**
   * The event loop is not held longer than SLICE_MS by a Ready's work: once
   * a stretch of it has run that long (sliceSpent), the next turn of the
   * loop comes first (heartbeats, client requests and timers run
   * meanwhile). The clock is the injected one, so under the simulation's
   * virtual time no slice ever runs out and nothing changes.
   */
  private sliceSpent(): boolean {
    return this.clock.now() - this.sliceStart >= SLICE_MS;
  }

  private async nextTurn(): Promise<void> {
    await new Promise<void>((r) => this.clock.immediate(r));
    this.sliceStart = this.clock.now();
  }

  /** When the current stretch of work without a yield began (drain, nextTurn, and after every write). */
  private sliceStart = 0;

  /**
   * Apply in order, in slices (the next turn of the loop between two
   * entries once a slice is spent): the state is always the log's prefix up
   * to appliedIndex. A Ready's few entries run in one go, with no await.
   */
  private async applyCommitted(entries: Entry[]): Promise<void> {
    for (const e of entries) {
      if (this.sliceSpent()) {
        await this.nextTurn();
        if (this.closed) return;
      }
      this.applyEntry(e);
    }
  }

  private applyEntry(e: Entry): void {
    if (e.index <= this.appliedEarly && e.index <= this.state.appliedIndex) return; // mutation 'apply-before-commit' applied it already
    let result: ApplyResult = { ok: true };
    if (e.kind === 'normal' && e.data.length > 0) {
      try {
        result = this.state.apply(e.index, decodeStoreData(e.data, `raft log entry ${e.index}`) as StoreCommand);
      } catch (err) {
        // A command this version cannot apply is skipped the same way on
        // every replica (apply is deterministic); say so loudly.
        this.opts.log(`raft: entry ${e.index} could not be applied: ${(err as Error).message}`);
        result = { ok: false, code: 400, error: `entry could not be applied: ${(err as Error).message}` };
      }
    } else {
      this.state.appliedIndex = e.index;
    }
    this.appliedSinceSnapshot++;
    this.appliedBytesSinceSnapshot += e.data.length;
    const w = this.waiters.get(e.index);
    if (w) {
      this.waiters.delete(e.index);
      this.clock.cancel(w.timer);
      const obs = this.opts.observer;
      if (obs) {
        if (w.term === e.term) obs.committed((this.clock.now() - w.at) / 1000);
        obs.proposal(w.term === e.term ? 'applied' : 'overwritten');
      }
      if (w.term === e.term) w.resolve(result);
      else w.reject(new NoQuorumError(`no quorum: leadership changed before the write committed; it was not applied (entry ${e.index} holds term ${e.term}'s entry)`, 'refused'));
    }
  }

  private sendMessages(messages: Message[]): void {
    if (messages.length === 0) return;
    for (const m of messages) this.describe(m);
    const fromDisk = messages.filter(isSnapshotOnDisk);
    this.transport.sendBatch(fromDisk.length === 0 ? messages : messages.filter((m) => !isSnapshotOnDisk(m)));
    for (const m of messages) {
      if (m.type === 'snapshot' && m.snapshot.data !== SNAPSHOT_ON_DISK && !this.transport.connectedPeers().includes(m.to)) this.raft.reportSnapshotUnsent(m.to);
    }
    for (const m of fromDisk) this.sendSnapshotFromDisk(m);
  }

  /**
   * The snapshot a lagging follower needs, read back from storage (memory
   * keeps none: releaseSnapshot), then sent. Raft tolerates the delay like
   * any other; if the file was superseded or cannot be read the message is
   * dropped, and the leader sends the next snapshot when it retries.
   */
  private sendSnapshotFromDisk(m: Extract<Message, { type: 'snapshot' }>): void {
    const load = this.disk.loadSnapshot;
    const unsent = () => {
      if (!this.closed) this.raft.reportSnapshotUnsent(m.to);
    };
    if (!load) return unsent();
    load.call(this.disk).then(
      (snap) => {
        if (this.closed || snap === null || snap.meta.index !== m.snapshot.meta.index || snap.meta.term !== m.snapshot.meta.term) return unsent();
        if (!this.transport.connectedPeers().includes(m.to)) return unsent();
        this.opts.log(`raft: snapshot at index ${snap.meta.index} read back from disk for ${m.to} (${snap.data.length} bytes)`);
        this.transport.sendBatch([{ ...m, snapshot: snap }]);
      },
      (err) => {
        this.opts.log(`raft: snapshot for ${m.to} not sent: ${(err as Error).message}`);
        unsent();
      },
    );
  }

  /** The snapshot at `meta` is in storage that can read it back: the core need not keep its bytes (megabytes) in memory. */
  private releaseSnapshot(meta: SnapshotMeta): void {
    if (this.disk.loadSnapshot) this.raft.releaseSnapshotData(meta);
  }

  private async compact(index: number, data: Uint8Array, startedAt: number): Promise<void> {
    const r = this.raft.compact(index, data);
    if (!r.ok) return;
    try {
      await this.disk.saveCompaction(r.snapshot);
      this.releaseSnapshot(r.snapshot.meta);
      this.opts.observer?.snapshot('taken', data.length, (this.clock.now() - startedAt) / 1000);
      this.opts.log(`raft: snapshot at index ${index}; log compacted`);
    } catch (err) {
      this.opts.log(`raft: compaction at ${index} failed: ${(err as Error).message}`);
    }
  }

  /** The election, told as it happens (lesson 2's step 8, for real). */
  private describe(m: Message): void {
    const log = this.opts.log;
    switch (m.type) {
      case 'preVote':
        // Once per term: a replica cut off from its peers retries every timeout.
        if (m.term !== this.lastPreVoteTerm) {
          this.lastPreVoteTerm = m.term;
          log(`election: ${this.id} heard no leader for an election timeout; asking peers for a pre-vote for term ${m.term}`);
        }
        break;
      case 'vote':
        if (m.term !== this.lastCampaignTerm) {
          this.lastCampaignTerm = m.term;
          this.opts.observer?.election();
        }
        if (m.to === [...this.opts.peers.keys()].find((p) => p !== this.id))
          log(`election: ${this.id} is a candidate in term ${m.term} (last log ${m.lastLogIndex}/t${m.lastLogTerm}); requesting votes`);
        break;
      case 'voteResponse':
        log(`election: ${this.id} ${m.reject ? 'refuses' : 'grants'} its vote to ${m.to} for term ${m.term}`);
        break;
      case 'preVoteResponse':
      case 'append':
      case 'appendResponse':
      case 'heartbeat':
      case 'heartbeatResponse':
      case 'snapshot':
        break; // not part of the election story
    }
  }

  private noticeRoleChange(): void {
    const s = this.raft.status();
    if (s.role === this.lastRole && s.term === this.lastTerm && s.leader === this.lastLeader) return;
    const was = this.lastRole;
    this.lastRole = s.role;
    this.lastTerm = s.term;
    this.lastLeader = s.leader;
    this.observeLeadership(s.role, was, s.term, s.leader);
    if (s.role === 'leader' && was !== 'leader') this.opts.log(`election: ${this.id} won the election: leader of term ${s.term}`);
    else if (was === 'leader' && s.role !== 'leader')
      this.opts.log(`election: ${this.id} steps down in term ${s.term}${s.leader ? ` (leader is now ${s.leader})` : ' (no quorum heard)'}`);
    else if (s.role === 'follower' && s.leader) this.opts.log(`election: ${this.id} follows ${s.leader} in term ${s.term}`);
    if (s.role !== 'leader') this.failPending();
    for (const fn of this.listeners) fn();
  }

  private observeLeadership(role: RaftRole, was: RaftRole, term: number, leader: string | null): void {
    const obs = this.opts.observer;
    const now = this.clock.now();
    // Stepping down is the moment this replica stopped hearing a leader.
    if (was === 'leader' && role !== 'leader') this.lastHeardFromLeader = now;
    if (!obs) return;
    if (role === 'leader' && was !== 'leader') {
      // A single replica wins without asking anyone: that is its election.
      if (this.lastCampaignTerm !== term) {
        this.lastCampaignTerm = term;
        obs.election();
      }
      obs.electionWon();
    }
    if (leader !== null && (leader !== this.knownLeader || term !== this.knownLeaderTerm)) {
      obs.leaderChanged(leader, term, this.knownLeader === null ? null : (now - this.lastHeardFromLeader) / 1000);
      this.knownLeader = leader;
      this.knownLeaderTerm = term;
      this.lastHeardFromLeader = now;
    }
  }

  /** Waiters for proposals of this replica not yet applied (for /metrics). */
  get pendingProposals(): number {
    return this.waiters.size;
  }

  /** Proposals and reads waiting on a leader that is no longer us. */
  private failPending(): void {
    for (const [ctx, r] of this.reads) {
      this.clock.cancel(r.timer);
      this.reads.delete(ctx);
      r.reject(new NotLeaderError(this.raft.status().leader));
    }
    // Proposals stay: their entries may still commit under the new leader;
    // they resolve, fail on overwrite, or time out with outcome unknown.
  }

  private serveReads(): void {
    const applied = this.state.appliedIndex;
    for (const [ctx, r] of this.reads) {
      if (r.index !== null && applied >= r.index) {
        this.clock.cancel(r.timer);
        this.reads.delete(ctx);
        r.resolve();
      }
    }
  }

  propose(cmd: StoreCommand): Promise<ApplyResult> {
    const res = this.raft.propose(encodeStoreData(cmd));
    if (!res.ok) {
      this.opts.observer?.proposal(res.reason === 'not leader' ? 'not_leader' : 'refused');
      if (res.reason === 'not leader') return Promise.reject(new NotLeaderError(res.leader));
      const reachable = this.transport.connectedPeers().length + 1;
      return Promise.reject(
        new NoQuorumError(
          `no quorum: ${res.reason} (${reachable} of ${this.opts.peers.size} replicas reachable from ${this.id}); the write was refused and will never apply`,
          'refused',
        ),
      );
    }
    const done = new Promise<ApplyResult>((resolve, reject) => {
      const timer = this.clock.timeout(() => {
        this.waiters.delete(res.index);
        this.opts.observer?.proposal('timeout');
        reject(
          new NoQuorumError(
            `no quorum: the write was proposed at index ${res.index} (term ${res.term}) but not committed within ${PROPOSAL_TIMEOUT_MS} ms; its outcome is unknown: it may still apply once a quorum returns`,
            'unknown',
          ),
        );
      }, PROPOSAL_TIMEOUT_MS);
      this.waiters.set(res.index, { term: res.term, at: this.clock.now(), resolve, reject, timer });
    });
    this.kick();
    if (this.processing) this.sendAppendsSoon();
    return done;
  }

  readBarrier(): Promise<void> {
    const ctx = this.opts.random ? randomId(this.opts.random, 12) : nanoid(12);
    const res = this.raft.readIndex(ctx);
    if (!res.ok) {
      if (res.reason === 'not leader') return Promise.reject(new NotLeaderError(res.leader));
      return Promise.reject(new NoQuorumError(`no quorum: read refused: ${res.reason}`, 'refused'));
    }
    const done = new Promise<void>((resolve, reject) => {
      const timer = this.clock.timeout(() => {
        this.reads.delete(ctx);
        reject(new NoQuorumError(`no quorum: the leader could not confirm its leadership with a majority within ${READ_TIMEOUT_MS} ms`, 'refused'));
      }, READ_TIMEOUT_MS);
      this.reads.set(ctx, { resolve, reject, timer, index: null });
    });
    this.kick();
    return done;
  }

  isLeader(): boolean {
    return this.raft.status().role === 'leader';
  }
  caughtUp(): boolean {
    const s = this.raft.status();
    return s.role === 'leader' && this.raft.committedInCurrentTerm() && this.state.appliedIndex >= s.commit;
  }
  term(): number {
    return this.raft.status().term;
  }
  leaderId(): string | null {
    return this.raft.status().leader;
  }
  status(): ReplicaStatus {
    const s = this.raft.status();
    const role: Role = s.role === 'leader' ? 'leader' : s.role === 'follower' ? 'follower' : 'candidate';
    return { id: this.id, role, term: s.term, commitIndex: s.commit, appliedIndex: this.state.appliedIndex, leaderId: s.leader };
  }
  onRoleChange(fn: () => void): void {
    this.listeners.push(fn);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.clock.cancel(this.ticker);
    this.transport.close();
    for (const w of this.waiters.values()) this.clock.cancel(w.timer);
    for (const r of this.reads.values()) this.clock.cancel(r.timer);
    await this.disk.close();
  }
}
