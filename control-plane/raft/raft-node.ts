// control-plane/raft/raft-node.ts -- the pure Raft state machine of one
// replica, modelled on etcd-io/raft's RawNode: the host calls tick() for
// logical time, step(message) for each message received, propose() and
// readIndex() for clients, then drains ready() and calls advance(). The core
// never touches a clock, a disk, a socket or Math.random: time is tick(),
// randomness is config.random, I/O is the Ready the host executes.
//
// Roles are swapped step/tick functions (etcd: r.step = stepLeader). Paper
// references: §5.2 election, §5.3 log replication, §5.4.1 election
// restriction, §5.4.2 commit rule, §7 log compaction, §8 client interaction;
// thesis §9.6 pre-vote, thesis §6.2 check-quorum, thesis §6.4 read index.
//
// READY ORDERING CONTRACT (see Ready in types.ts): THE HOST PERSISTS AND
// FSYNCS ready.snapshot, ready.entries AND ready.hardState BEFORE SENDING
// ready.messages, AND APPLIES ready.committedEntries ONLY AFTER PERSISTING.

import { Progress } from './progress.ts';
import { RaftLog } from './raft-log.ts';
import type {
  AppendRequest,
  CompactResult,
  Entry,
  HardState,
  Heartbeat,
  Message,
  NodeId,
  ProposeResult,
  RaftConfig,
  RaftStatus,
  ReadIndexResult,
  ReadState,
  Ready,
  Role,
  Snapshot,
  SnapshotMeta,
  SnapshotRequest,
  VoteRequest,
} from './types.ts';

/** Maximum committed entries handed to the host in one Ready. */
export const MAX_COMMITTED_ENTRIES_PER_READY = 512;
const DEFAULT_MAX_UNCOMMITTED_ENTRIES = 1024;
const DEFAULT_MAX_BYTES_PER_MSG = 1024 * 1024;
/** After its leader's link closed, a follower campaigns in the slot of this many ticks its rank among the survivors gives it (peerLinkClosed). */
export const CLOSE_SLOT_TICKS = 4;
const DEFAULT_MAX_PENDING_READS = 1024;

interface PendingRead {
  context: string;
  index: number; // commit index when the read arrived (thesis §6.4 step 1)
  acks: Set<NodeId>;
}

export class RaftNode {
  readonly id: NodeId;
  private readonly peers: NodeId[]; // all members, including id
  private readonly others: NodeId[];
  private readonly quorum: number;
  /** maybeCommit's array of match indexes, one per peer. */
  private readonly matchScratch: number[];
  private readonly cfg: Required<Omit<RaftConfig, 'persisted'>>;

  private term = 0;
  private vote: NodeId | null = null;
  private lead: NodeId | null = null;
  private role: Role = 'follower';
  private readonly log: RaftLog;
  private applied: number;

  private stepRole: (m: Message) => void;
  private tickRole: () => void;
  private electionElapsed = 0;
  private heartbeatElapsed = 0;
  private randomizedElectionTimeout = 0;

  private votes = new Map<NodeId, boolean>();
  private prs = new Map<NodeId, Progress>();

  private msgs: Message[] = [];
  private readStates: ReadState[] = [];
  private pendingReads: PendingRead[] = [];
  /** Reads that arrived before this leader committed an entry of its term (§8). */
  private readsAwaitingCommit: string[] = [];
  /** A snapshot received from the leader, to be persisted and restored by the host. */
  private receivedSnapshot: Snapshot | null = null;
  private prevHardState: HardState;
  private readyOutstanding = false;
  /** While a leader's Ready is outstanding: its last log index when handed out, and the last entry it gave to apply. */
  private readyLastIndex = 0;
  private readyAppliesTo = 0;
  /** The last entry takeCommittedDuringSave() gave the host (applied once advance() is called). */
  private appliedDuringSave = 0;

  constructor(config: RaftConfig) {
    const problem = validateConfig(config);
    if (problem) throw new Error(`RaftNode config: ${problem}`);
    this.id = config.id;
    this.peers = [...new Set(config.peers)].sort();
    this.others = this.peers.filter((p) => p !== this.id);
    this.quorum = Math.floor(this.peers.length / 2) + 1;
    this.matchScratch = new Array<number>(this.peers.length).fill(0);
    this.cfg = {
      id: config.id,
      peers: this.peers,
      electionTimeoutTicks: config.electionTimeoutTicks,
      heartbeatTicks: config.heartbeatTicks,
      random: config.random,
      preVote: config.preVote,
      checkQuorum: config.checkQuorum,
      maxEntriesPerMsg: config.maxEntriesPerMsg,
      maxBytesPerMsg: config.maxBytesPerMsg ?? DEFAULT_MAX_BYTES_PER_MSG,
      snapshotRetryTicks: config.snapshotRetryTicks ?? config.electionTimeoutTicks,
      maxInflight: config.maxInflight,
      maxInflightBytes: config.maxInflightBytes ?? 0,
      maxUncommittedEntries: config.maxUncommittedEntries ?? DEFAULT_MAX_UNCOMMITTED_ENTRIES,
      maxPendingReads: config.maxPendingReads ?? DEFAULT_MAX_PENDING_READS,
      piggybackCommit: config.piggybackCommit ?? false,
    };

    const p = config.persisted;
    this.log = new RaftLog(p?.snapshot ?? null, p?.entries ?? [], p?.hardState.commit ?? 0);
    this.term = p?.hardState.term ?? 0;
    this.vote = p?.hardState.vote ?? null;
    // The host restores its state machine from the snapshot, then re-applies
    // committed entries from the first Ready.
    this.applied = this.log.snapshotMeta().index;
    this.prevHardState = this.hardState();

    this.stepRole = this.stepFollower;
    this.tickRole = this.tickElection;
    this.becomeFollower(this.term, null);
  }

  // ------------------------------------------------------------ host API

  /** Advance logical time by one tick. */
  tick(): void {
    this.tickRole();
  }

  /**
   * Feed one message from the network. Messages not addressed to this
   * replica, or from a non-member, are ignored (the transport validates
   * shape; membership is checked here).
   */
  step(m: Message): void {
    if (m.to !== this.id || m.from === this.id || !this.peers.includes(m.from)) return;

    if (m.term > this.term) {
      if (m.type === 'preVote') {
        // Thesis §9.6: grant a pre-vote only if we have not heard from a
        // leader within the election timeout. Never changes our term.
        if (this.lead !== null && this.electionElapsed < this.cfg.electionTimeoutTicks) {
          this.send({ type: 'preVoteResponse', from: this.id, to: m.from, term: this.term, reject: true });
          return;
        }
      } else if (m.type === 'vote') {
        // Thesis §4.2.3: with check-quorum, ignore RequestVote while we
        // believe a leader is alive; a real leader would have reached us.
        const inLease = this.cfg.checkQuorum && this.lead !== null && this.electionElapsed < this.cfg.electionTimeoutTicks;
        if (inLease) return;
        this.becomeFollower(m.term, null); // §5.1: step down on any higher term
      } else if (m.type === 'preVoteResponse' && !m.reject) {
        // The echo of the term we asked for; we have not moved to it yet.
      } else if (m.type === 'append' || m.type === 'heartbeat' || m.type === 'snapshot') {
        this.becomeFollower(m.term, m.from);
      } else {
        this.becomeFollower(m.term, null);
      }
    } else if (m.term < this.term) {
      if ((this.cfg.checkQuorum || this.cfg.preVote) && (m.type === 'append' || m.type === 'heartbeat')) {
        // A leader of an older term: tell it our term so it steps down. With
        // pre-vote/check-quorum our higher term may never reach it otherwise.
        this.send({ type: 'appendResponse', from: this.id, to: m.from, term: this.term, reject: false, index: 0, hintIndex: 0 });
      } else if (m.type === 'preVote') {
        this.send({ type: 'preVoteResponse', from: this.id, to: m.from, term: this.term, reject: true });
      }
      return; // §5.1: stale term, ignore
    }

    switch (m.type) {
      case 'vote':
      case 'preVote':
        this.handleVoteRequest(m);
        return;
      case 'append':
      case 'appendResponse':
      case 'heartbeat':
      case 'heartbeatResponse':
      case 'snapshot':
      case 'preVoteResponse':
      case 'voteResponse':
        this.stepRole(m);
    }
  }

  /**
   * Append a client command (leader only). Returns the index and term the
   * entry got: the host acknowledges the client when it applies an entry
   * with exactly that index AND term; a different term at that index means
   * the proposal was lost to a leader change and may be retried.
   */
  propose(data: Uint8Array): ProposeResult {
    if (this.role !== 'leader') return { ok: false, reason: 'not leader', leader: this.lead };
    if (!this.quorumRecentlyHeard()) return { ok: false, reason: 'no quorum' };
    if (this.log.lastIndex() - this.log.committed >= this.cfg.maxUncommittedEntries) {
      return { ok: false, reason: 'too many uncommitted entries' };
    }
    const entry: Entry = { term: this.term, index: this.log.lastIndex() + 1, kind: 'normal', data: data.slice() };
    this.log.append(entry);
    this.bcastAppend();
    return { ok: true, index: entry.index, term: entry.term };
  }

  /**
   * Linearizable read without a log entry (§8, thesis §6.4). Leader only.
   * The read's index is the commit index now; once a majority answers a
   * heartbeat carrying `context`, leadership is confirmed and a ReadState
   * {index, context} appears in a Ready. Serve the read when applied >=
   * index. A new leader first waits for its no-op entry to commit. If
   * leadership is lost meanwhile the read is silently dropped: hosts time
   * reads out (and fail them when status().role stops being 'leader').
   */
  readIndex(context: string): ReadIndexResult {
    if (this.role !== 'leader') return { ok: false, reason: 'not leader', leader: this.lead };
    if (this.pendingReads.some((r) => r.context === context) || this.readsAwaitingCommit.includes(context)) {
      return { ok: false, reason: 'duplicate context' };
    }
    if (this.pendingReads.length + this.readsAwaitingCommit.length >= this.cfg.maxPendingReads) {
      return { ok: false, reason: 'too many pending reads' };
    }
    if (!this.committedInCurrentTerm()) {
      this.readsAwaitingCommit.push(context);
    } else {
      this.startRead(context);
    }
    return { ok: true };
  }

  /**
   * The host applied through `index` and serialised its state machine into
   * `data`: drop log entries <= index (§7). The host must then persist the
   * returned snapshot with RaftStorage.saveCompaction().
   */
  compact(index: number, data: Uint8Array): CompactResult {
    const snapIndex = this.log.snapshotMeta().index;
    if (index <= snapIndex) return { ok: false, reason: `index ${index} is already compacted (snapshot at ${snapIndex})` };
    if (index > this.applied) return { ok: false, reason: `index ${index} is not applied yet (applied ${this.applied})` };
    const term = this.log.term(index);
    if (term === undefined) return { ok: false, reason: `no entry at index ${index}` };
    const snapshot: Snapshot = { meta: { index, term }, data };
    this.log.compact(snapshot);
    return { ok: true, snapshot };
  }

  /**
   * The host has the latest snapshot (at `meta`) in storage that can read it
   * back (RaftStorage.loadSnapshot): drop its bytes from memory. A snapshot
   * sent to a lagging follower then carries SNAPSHOT_ON_DISK, which the host
   * replaces. False (nothing dropped) when the latest snapshot is another.
   */
  releaseSnapshotData(meta: SnapshotMeta): boolean {
    return this.log.releaseSnapshotData(meta);
  }

  status(): RaftStatus {
    return {
      id: this.id,
      role: this.role,
      term: this.term,
      leader: this.lead,
      commit: this.log.committed,
      applied: this.applied,
      lastIndex: this.log.lastIndex(),
      snapshotIndex: this.log.snapshotMeta().index,
    };
  }

  hasReady(): boolean {
    if (this.readyOutstanding) return false;
    return (
      this.msgs.length > 0 ||
      this.readStates.length > 0 ||
      this.receivedSnapshot !== null ||
      this.log.hasUnstable() ||
      this.log.committed > this.applied ||
      !sameHardState(this.hardState(), this.prevHardState)
    );
  }

  /**
   * The next batch of work, or null if there is none. Call advance(ready)
   * after doing it; until then ready() throws (one Ready in flight at a time).
   */
  ready(): Ready | null {
    if (this.readyOutstanding) throw new Error('RaftNode.ready() called again before advance()');
    if (!this.hasReady()) return null;
    const hs = this.hardState();
    const hsChanged = !sameHardState(hs, this.prevHardState);
    const snapshot = this.receivedSnapshot;
    const entries = this.log.takeUnstable();
    let committedEntries: Entry[] = [];
    // After a received snapshot the state machine resumes at its index.
    const applyFrom = Math.max(this.applied, snapshot?.meta.index ?? 0) + 1;
    if (this.log.committed >= applyFrom) {
      const slice = this.log.slice(applyFrom, this.log.committed, MAX_COMMITTED_ENTRIES_PER_READY);
      if (slice === undefined) throw new Error(`RaftNode: committed entries from ${applyFrom} were compacted before being applied`);
      committedEntries = slice;
    }
    const rd: Ready = {
      hardState: hsChanged ? hs : null,
      entries,
      snapshot,
      messages: this.msgs,
      committedEntries,
      readStates: this.readStates,
    };
    this.msgs = [];
    this.readStates = [];
    this.receivedSnapshot = null;
    if (hsChanged) this.prevHardState = hs;
    this.readyOutstanding = true;
    this.readyLastIndex = this.log.lastIndex();
    this.readyAppliesTo = committedEntries.length > 0 ? committedEntries[committedEntries.length - 1].index : 0;
    return rd;
  }

  /**
   * A leader's entries committed since its outstanding Ready was handed
   * out, for the host to apply now, while it still saves that Ready: their
   * clients need not wait for the rest of the save. A leader counts itself
   * toward a commit only for entries on its own disk (advance), but two
   * followers are a majority of three without it (thesis §10.2.1: a leader
   * may commit an entry before it has written it itself), and a committed
   * entry may be applied at once. At most `max` entries, in order, each
   * handed out once (the next Ready's committedEntries starts after them),
   * and none past those handed out for saving (this Ready's included), so
   * that once advance() is called everything applied is on this replica's
   * disk, as before. Empty for any other role, or with no Ready outstanding.
   */
  takeCommittedDuringSave(max: number): Entry[] {
    if (!this.readyOutstanding || this.role !== 'leader') return [];
    const from = Math.max(this.applied, this.appliedDuringSave, this.readyAppliesTo) + 1;
    const to = Math.min(this.log.committed, this.readyLastIndex);
    if (to < from) return [];
    const slice = this.log.slice(from, to, max);
    if (slice === undefined || slice.length === 0) return [];
    this.appliedDuringSave = slice[slice.length - 1].index;
    return slice;
  }

  /**
   * A leader's messages queued since its last Ready, taken now so that the
   * host can send them while that Ready is still being saved: heartbeats
   * then keep their pace through a slow fsync, and followers do not
   * campaign against a leader that is only waiting for its disk. Safe for
   * the reason a leader may send its appends before its own save (thesis
   * §10.2.1): it counts itself toward a commit only for entries on its own
   * disk (advance), and the term and vote it leads with were handed out in
   * an earlier Ready, which a candidate saves before asking for votes.
   * Empty for any other role, or before that hard state was handed out.
   */
  takeLeaderMessages(): Message[] {
    if (this.role !== 'leader' || this.msgs.length === 0) return [];
    if (this.term !== this.prevHardState.term || this.vote !== this.prevHardState.vote) return [];
    const out = this.msgs;
    this.msgs = [];
    return out;
  }

  /**
   * A follower's answers to heartbeats, which may leave while a Ready is
   * still being saved (a leader has none; its own early messages are
   * takeLeaderMessages'). A heartbeat response acknowledges no entry and
   * grants no vote; it only says that this replica hears the leader,
   * which is true before its save is done. Held back behind a slow save, it let a disk that stalled every
   * replica at once for 0.6-1 s (a shared disk, in the 5,000-agent fleet)
   * cost an election: the leader heard no one for an election timeout and
   * stepped down (check-quorum). etcd-raft draws the same line when it
   * writes asynchronously: only append, vote and pre-vote responses wait
   * for the disk. Answers in a term not yet handed out in a Ready wait too.
   */
  takeEarlyMessages(): Message[] {
    if (this.msgs.length === 0 || this.term !== this.prevHardState.term) return [];
    const early: Message[] = [];
    const rest: Message[] = [];
    for (const m of this.msgs) (m.type === 'heartbeatResponse' ? early : rest).push(m);
    if (early.length > 0) this.msgs = rest;
    return early;
  }

  /**
   * A leader's heartbeat round now, outside its ticks: the host calls it
   * when its tick timer is late (its event loop busy with I/O callbacks,
   * which run before timers), so that followers keep hearing from a
   * leader that is working, not gone. Touches no election or check-quorum
   * clock: those still count ticks, so a late timer never makes a leader
   * step down or a follower campaign sooner. A no-op for other roles.
   */
  heartbeatNow(): void {
    if (this.role !== 'leader') return;
    this.heartbeatElapsed = 0;
    this.bcastHeartbeat(null);
  }

  /** The host has persisted, sent and applied `rd`. */
  advance(rd: Ready): void {
    if (!this.readyOutstanding) throw new Error('RaftNode.advance() without an outstanding ready()');
    this.readyOutstanding = false;
    this.log.stableTo(rd.entries);
    if (rd.snapshot) this.applied = Math.max(this.applied, rd.snapshot.meta.index);
    if (rd.committedEntries.length > 0) {
      this.applied = Math.max(this.applied, rd.committedEntries[rd.committedEntries.length - 1].index);
    }
    this.applied = Math.max(this.applied, this.appliedDuringSave);
    if (this.role === 'leader') {
      // The leader counts itself only for entries on its own disk.
      if (this.maybeCommit()) this.announceCommit();
    }
  }

  /** The persistent state as of now (what the next Ready's hardState would carry). */
  hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.log.committed };
  }

  /** Read-only view of the in-memory log, for simulation checkers and debugging. */
  inspectLog(): { snapshot: SnapshotMeta; entries: readonly Entry[] } {
    return { snapshot: this.log.snapshotMeta(), entries: this.log.allEntries() };
  }

  // ------------------------------------------------------------ roles

  private reset(term: number): void {
    if (term !== this.term) {
      this.term = term;
      this.vote = null;
    }
    this.lead = null;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.resetRandomizedElectionTimeout();
    this.votes.clear();
    this.prs.clear();
    this.pendingReads = [];
    this.readsAwaitingCommit = [];
  }

  /** §5.2: timeouts are randomized in [T, 2T) so split votes are rare. */
  private resetRandomizedElectionTimeout(): void {
    const t = this.cfg.electionTimeoutTicks;
    const r = this.cfg.random();
    this.randomizedElectionTimeout = t + Math.min(t - 1, Math.floor(r * t));
  }

  private becomeFollower(term: number, lead: NodeId | null): void {
    this.reset(term);
    this.lead = lead;
    this.role = 'follower';
    this.stepRole = this.stepFollower;
    this.tickRole = this.tickElection;
  }

  private becomePreCandidate(): void {
    // Thesis §9.6: no term change and no vote yet; only ask.
    this.votes.clear();
    this.lead = null;
    this.role = 'preCandidate';
    this.resetRandomizedElectionTimeout();
    this.stepRole = this.stepCandidate;
    this.tickRole = this.tickElection;
  }

  private becomeCandidate(): void {
    // §5.2: increment currentTerm, vote for self.
    this.reset(this.term + 1);
    this.vote = this.id;
    this.role = 'candidate';
    this.stepRole = this.stepCandidate;
    this.tickRole = this.tickElection;
  }

  private becomeLeader(): void {
    this.reset(this.term);
    this.lead = this.id;
    this.role = 'leader';
    this.stepRole = this.stepLeader;
    this.tickRole = this.tickHeartbeat;
    const last = this.log.lastIndex();
    for (const p of this.others) {
      const pr = new Progress(last + 1, this.cfg.maxInflight, this.cfg.maxInflightBytes);
      pr.recentActive = true;
      this.prs.set(p, pr);
    }
    // §5.4.2 / §8: a leader cannot know which earlier-term entries are
    // committed until it commits one of its own term; append a no-op now.
    this.log.append({ term: this.term, index: last + 1, kind: 'noop', data: new Uint8Array(0) });
    this.bcastAppend();
  }

  private tickElection(): void {
    this.electionElapsed++;
    if (this.electionElapsed >= this.randomizedElectionTimeout) {
      this.electionElapsed = 0;
      this.hup();
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    for (const pr of this.prs.values()) {
      pr.ticksSinceHeard++;
      if (pr.state === 'snapshot' && ++pr.snapshotTicks > this.cfg.snapshotRetryTicks) {
        // The InstallSnapshot or its reply was lost; try again from probe.
        pr.becomeProbe();
      }
    }
    if (this.electionElapsed >= this.cfg.electionTimeoutTicks) {
      this.electionElapsed = 0;
      if (this.cfg.checkQuorum) {
        // Thesis §6.2: a leader that has not heard from a majority within an
        // election timeout steps down, so clients find the real leader.
        let active = 1;
        for (const pr of this.prs.values()) if (pr.recentActive) active++;
        if (active < this.quorum) {
          this.becomeFollower(this.term, null);
          return;
        }
      }
      for (const pr of this.prs.values()) pr.recentActive = false;
    }
    if (this.heartbeatElapsed >= this.cfg.heartbeatTicks) {
      this.heartbeatElapsed = 0;
      this.bcastHeartbeat(null);
    }
  }

  /**
   * The host saw its connection to `peer` close: on a crash-stop the kernel
   * closes the dead process's sockets, so a follower learns of its leader's
   * death at once instead of after an election timeout of silence. If
   * `peer` is the leader we follow, forget it (our lease on it is over, so
   * we grant pre-votes and votes again) and campaign within a few ticks.
   * The survivors take turns: each campaigns in its own slot of
   * CLOSE_SLOT_TICKS by its rank among them (ids in order), at a random
   * tick of the slot's first two, so two followers that both saw the close
   * never campaign at once and split the vote (with 1..5 random ticks for
   * both, one failover in five did, and then waited out a whole election
   * timeout). Safety is untouched (votes stay one per term, §5.2); pre-vote
   * still protects a live leader: a follower that keeps hearing it rejects
   * the pre-vote, and no term moves. A silent failure closes nothing and
   * waits for the timer as before.
   */
  peerLinkClosed(peer: NodeId): void {
    if (this.role === 'leader') {
      // An InstallSnapshot on that link may be lost with it: send it again once the peer answers.
      this.reportSnapshotUnsent(peer);
      return;
    }
    if (this.role !== 'follower' || this.lead !== peer) return;
    this.lead = null;
    const survivors = [this.id, ...this.others].filter((p) => p !== peer).sort();
    const rank = survivors.indexOf(this.id);
    const jitter = 1 + rank * CLOSE_SLOT_TICKS + Math.floor(this.cfg.random() * 2);
    this.electionElapsed = Math.max(this.electionElapsed, this.randomizedElectionTimeout - jitter);
  }

  /**
   * The host could not hand the InstallSnapshot for `peer` to its link
   * (not connected, its file superseded or unreadable): stop waiting for
   * its answer (snapshotRetryTicks), and send a snapshot again once the
   * peer next answers. A no-op unless this leader is sending `peer` one.
   */
  reportSnapshotUnsent(peer: NodeId): void {
    const pr = this.role === 'leader' ? this.prs.get(peer) : undefined;
    if (pr?.state === 'snapshot') pr.becomeProbe();
  }

  private hup(): void {
    if (this.role === 'leader') return;
    this.campaign(this.cfg.preVote ? 'pre' : 'election');
  }

  private campaign(kind: 'pre' | 'election'): void {
    let voteTerm: number;
    if (kind === 'pre') {
      this.becomePreCandidate();
      voteTerm = this.term + 1;
    } else {
      this.becomeCandidate();
      voteTerm = this.term;
    }
    if (this.poll(this.id, true) === 'won') {
      if (kind === 'pre') this.campaign('election');
      else this.becomeLeader();
      return;
    }
    const lastLogIndex = this.log.lastIndex();
    const lastLogTerm = this.log.lastTerm();
    for (const to of this.others) {
      const m: VoteRequest = { type: kind === 'pre' ? 'preVote' : 'vote', from: this.id, to, term: voteTerm, lastLogIndex, lastLogTerm };
      this.send(m);
    }
  }

  private poll(from: NodeId, granted: boolean): 'won' | 'lost' | 'pending' {
    if (!this.votes.has(from)) this.votes.set(from, granted);
    let yes = 0;
    let no = 0;
    for (const v of this.votes.values()) v ? yes++ : no++;
    if (yes >= this.quorum) return 'won';
    if (no >= this.quorum) return 'lost';
    return 'pending';
  }

  /**
   * §5.2: at most one vote per term, first come first served; §5.4.1: only
   * for a candidate whose log is at least as up-to-date as ours.
   */
  private handleVoteRequest(m: VoteRequest): void {
    const canVote = this.vote === m.from || (this.vote === null && this.lead === null) || (m.type === 'preVote' && m.term > this.term);
    const respType = m.type === 'vote' ? 'voteResponse' : 'preVoteResponse';
    if (canVote && this.log.isUpToDate(m.lastLogIndex, m.lastLogTerm)) {
      this.send({ type: respType, from: this.id, to: m.from, term: m.term, reject: false });
      if (m.type === 'vote') {
        this.electionElapsed = 0;
        this.vote = m.from; // persisted (Ready.hardState) before the response leaves
      } else if (this.role === 'preCandidate' && m.term === this.term + 1 && m.from < this.id) {
        // Two pre-candidates of one term that grant each other would both
        // stand as candidates and split the vote (each votes for itself):
        // the one later in rank (ids in order, as peerLinkClosed's slots)
        // stands down; the earlier one keeps its campaign and refuses no
        // one. If that campaign fails, this replica's own timer comes round.
        this.becomeFollower(this.term, null);
      }
    } else {
      this.send({ type: respType, from: this.id, to: m.from, term: this.term, reject: true });
    }
  }

  private stepFollower(m: Message): void {
    switch (m.type) {
      case 'append':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleAppend(m);
        return;
      case 'heartbeat':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleHeartbeat(m);
        return;
      case 'snapshot':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleSnapshot(m);
        return;
      case 'appendResponse':
      case 'heartbeatResponse':
      case 'preVote':
      case 'preVoteResponse':
      case 'vote':
      case 'voteResponse':
        return; // stale responses from an earlier candidacy or leadership (requests are handled in step)
    }
  }

  private stepCandidate(m: Message): void {
    switch (m.type) {
      case 'append':
      case 'heartbeat':
      case 'snapshot':
        // §5.2: a leader of our term (or higher) exists: return to follower.
        this.becomeFollower(m.term, m.from);
        this.stepFollower(m);
        return;
      case 'preVoteResponse':
      case 'voteResponse': {
        const expected = this.role === 'preCandidate' ? 'preVoteResponse' : 'voteResponse';
        const expectedTerm = this.role === 'preCandidate' ? this.term + 1 : this.term;
        if (m.type !== expected) return;
        if (!m.reject && m.term !== expectedTerm) return; // grant for an older campaign
        const result = this.poll(m.from, !m.reject);
        if (result === 'won') {
          if (this.role === 'preCandidate') this.campaign('election');
          else {
            this.becomeLeader();
          }
        } else if (result === 'lost') {
          this.becomeFollower(this.term, null);
        }
        return;
      }
      case 'appendResponse':
      case 'heartbeatResponse':
      case 'preVote':
      case 'vote':
        return; // stale responses; vote requests are handled in step
    }
  }

  private stepLeader(m: Message): void {
    const pr = this.prs.get(m.from);
    if (!pr) return;
    switch (m.type) {
      case 'appendResponse': {
        pr.recentActive = true;
        pr.ticksSinceHeard = 0;
        if (m.reject) {
          if (pr.maybeDecrTo(m.index, m.hintIndex)) {
            if (pr.state === 'replicate') pr.becomeProbe();
            this.sendAppend(m.from, true);
          }
          return;
        }
        const wasPaused = pr.isPaused();
        if (pr.maybeUpdate(m.index)) {
          if (pr.state === 'probe') pr.becomeReplicate();
          else if (pr.state === 'snapshot' && pr.match >= pr.pendingSnapshot) {
            pr.becomeProbe();
            pr.becomeReplicate();
          } else if (pr.state === 'replicate') pr.freeTo(m.index);
          if (this.maybeCommit()) this.announceCommit();
          else if (wasPaused) this.sendAppend(m.from, true);
          // Fill the pipeline window with whatever is still unsent.
          while (this.sendAppend(m.from, false)) {
            /* keep sending */
          }
        }
        return;
      }
      case 'heartbeatResponse': {
        pr.recentActive = true;
        pr.ticksSinceHeard = 0;
        pr.probeSent = false;
        // A follower whose window is full gets an empty append, as
        // etcd-io/raft does since 3.6: its answer (accept or reject) clears
        // the window, so appends lost on the way cannot stall it, and a busy
        // follower is not sent more. Freeing a slot per heartbeat instead
        // let 30-39 MiB pile up at a follower installing a snapshot, against
        // a 4 MiB bound (measured), as it answers heartbeats while busy.
        if (pr.match < this.log.lastIndex()) this.sendAppend(m.from, true, true);
        if (m.context !== null) this.ackRead(m.from, m.context);
        return;
      }
      case 'append':
      case 'heartbeat':
      case 'snapshot':
      case 'preVote':
      case 'preVoteResponse':
      case 'vote':
      case 'voteResponse':
        return; // another leader of our term cannot exist (§5.2); votes are handled in step
    }
  }

  // ------------------------------------------------------------ replication

  /** §5.3: the consistency check on prevLogIndex/prevLogTerm. */
  private handleAppend(m: AppendRequest): void {
    for (let i = 0; i < m.entries.length; i++) {
      if (m.entries[i].index !== m.prevLogIndex + 1 + i) return; // malformed: ignore
    }
    if (m.prevLogIndex < this.log.committed) {
      // Everything up to our commit index already matches the leader.
      this.send({ type: 'appendResponse', from: this.id, to: m.from, term: this.term, reject: false, index: this.log.committed, hintIndex: 0 });
      return;
    }
    if (this.log.matchTerm(m.prevLogIndex, m.prevLogTerm)) {
      const lastNew = this.log.maybeAppend(m.prevLogIndex, m.entries);
      // Figure 2: commitIndex = min(leaderCommit, index of last new entry).
      this.log.commitTo(Math.min(m.commit, lastNew));
      this.send({ type: 'appendResponse', from: this.id, to: m.from, term: this.term, reject: false, index: lastNew, hintIndex: 0 });
      return;
    }
    // Reject, with a hint: the highest index whose term is <= prevLogTerm,
    // so the leader can skip a whole conflicting term at once.
    let hint = Math.min(m.prevLogIndex, this.log.lastIndex());
    while (hint > this.log.committed) {
      const t = this.log.term(hint);
      if (t === undefined || t <= m.prevLogTerm) break;
      hint--;
    }
    this.send({ type: 'appendResponse', from: this.id, to: m.from, term: this.term, reject: true, index: m.prevLogIndex, hintIndex: hint });
  }

  private handleHeartbeat(m: Heartbeat): void {
    this.log.commitTo(m.commit);
    this.send({ type: 'heartbeatResponse', from: this.id, to: m.from, term: this.term, context: m.context });
  }

  /** §7 InstallSnapshot receiver. */
  private handleSnapshot(m: SnapshotRequest): void {
    const { index, term } = m.snapshot.meta;
    if (index <= this.log.committed) {
      this.send({ type: 'appendResponse', from: this.id, to: m.from, term: this.term, reject: false, index: this.log.committed, hintIndex: 0 });
      return;
    }
    if (this.log.matchTerm(index, term)) {
      // §7: "If existing log entry has same index and term as snapshot's last
      // included entry, retain log entries following it."
      this.log.commitTo(index);
    } else {
      // §7: "Discard the entire log"; the host resets its state machine.
      // The host restores its state machine from the next Ready; applied
      // moves to the snapshot's index when that Ready is advanced.
      this.log.restore(m.snapshot);
      this.receivedSnapshot = m.snapshot;
    }
    this.send({ type: 'appendResponse', from: this.id, to: m.from, term: this.term, reject: false, index: this.log.committed, hintIndex: 0 });
  }

  /**
   * Send the follower what it lacks: entries from pr.next, or the snapshot
   * if they were compacted (§7). Returns whether a message was sent. With
   * `emptyIfFull`, a follower whose window is full (replicate, paused) gets
   * an append without entries.
   */
  private sendAppend(to: NodeId, sendIfEmpty: boolean, emptyIfFull = false): boolean {
    const pr = this.prs.get(to);
    if (!pr) return false;
    const full = pr.isPaused();
    if (full && !(emptyIfFull && pr.state === 'replicate')) return false;
    const prevLogIndex = pr.next - 1;
    const prevLogTerm = this.log.term(prevLogIndex);
    const entries = full ? [] : this.log.slice(pr.next, this.log.lastIndex(), this.cfg.maxEntriesPerMsg, this.cfg.maxBytesPerMsg);
    if (prevLogTerm === undefined || entries === undefined) {
      const snapshot = this.log.snapshot;
      if (!snapshot) return false; // cannot happen: compaction always leaves a snapshot
      pr.becomeSnapshot(snapshot.meta.index);
      this.send({ type: 'snapshot', from: this.id, to, term: this.term, snapshot });
      return true;
    }
    if (entries.length === 0 && !sendIfEmpty) return false;
    this.send({ type: 'append', from: this.id, to, term: this.term, prevLogIndex, prevLogTerm, entries, commit: this.log.committed });
    let bytes = 0;
    for (const e of entries) bytes += e.data.length;
    pr.sentEntries(prevLogIndex + entries.length, entries.length, bytes);
    return true;
  }

  private bcastAppend(): void {
    for (const p of this.others) this.sendAppend(p, true);
  }

  /**
   * The commit index moved. Eagerly (etcd's way) every follower gets an
   * AppendEntries now, empty if it has every entry, just to carry the new
   * index. With config.piggybackCommit the index instead rides on the next
   * AppendEntries or heartbeat, as §5.3 puts it ("it includes that index in
   * future AppendEntries RPCs (including heartbeats) so that the other
   * servers eventually find out"): one frame and one ack fewer per follower
   * per commit, and followers learn it at most a heartbeat later. Safety is
   * the same either way: what a follower commits is still bounded by what it
   * holds of the leader's log (handleAppend, handleHeartbeat's min(match)).
   */
  private announceCommit(): void {
    if (!this.cfg.piggybackCommit) {
      this.bcastAppend();
      return;
    }
    // Entries proposals appended were sent then; send only what is still unsent.
    for (const p of this.others) this.sendAppend(p, false);
  }

  private bcastHeartbeat(context: string | null): void {
    // Regular heartbeats repeat the newest pending read's context so a lost
    // heartbeat does not strand a read.
    const ctx = context ?? (this.pendingReads.length > 0 ? this.pendingReads[this.pendingReads.length - 1].context : null);
    for (const p of this.others) {
      const pr = this.prs.get(p) as Progress;
      // Never tell a follower to commit past what it is known to hold.
      const commit = Math.min(pr.match, this.log.committed);
      this.send({ type: 'heartbeat', from: this.id, to: p, term: this.term, commit, context: ctx });
    }
  }

  /**
   * §5.3 + §5.4.2: the highest index stored on a majority is committed, but
   * only if its entry is from the current term; earlier-term entries commit
   * indirectly (Figure 8).
   */
  private maybeCommit(): boolean {
    // Every peer's match index, highest first, in one array kept for it: this runs at every
    // acknowledgement, and a new array and a sort each time were 2.2% of a busy leader's
    // allocation (a heap profile of the fleet bench while 5,000 agents' units arrived).
    const matches = this.matchScratch;
    for (let i = 0; i < this.peers.length; i++) {
      const p = this.peers[i];
      const m = p === this.id ? this.log.persistedTo : (this.prs.get(p) as Progress).match;
      let j = i;
      for (; j > 0 && matches[j - 1] < m; j--) matches[j] = matches[j - 1];
      matches[j] = m;
    }
    const candidate = matches[this.quorum - 1];
    if (candidate > this.log.committed && this.log.term(candidate) === this.term) {
      const hadCommitInTerm = this.committedInCurrentTerm();
      this.log.commitTo(candidate);
      if (!hadCommitInTerm) this.releaseReadsAwaitingCommit();
      return true;
    }
    return false;
  }

  // ------------------------------------------------------------ read index

  /** The leader has committed an entry of its own term: its commit index covers every entry committed before it led (§8). */
  committedInCurrentTerm(): boolean {
    return this.log.term(this.log.committed) === this.term;
  }

  private releaseReadsAwaitingCommit(): void {
    const waiting = this.readsAwaitingCommit;
    this.readsAwaitingCommit = [];
    for (const ctx of waiting) this.startRead(ctx);
  }

  private startRead(context: string): void {
    if (this.others.length === 0) {
      this.readStates.push({ index: this.log.committed, context });
      return;
    }
    this.pendingReads.push({ context, index: this.log.committed, acks: new Set([this.id]) });
    this.bcastHeartbeat(context);
  }

  /**
   * Thesis §6.4 step 3: a majority answered a heartbeat sent after the read
   * arrived, so we were still leader then. That also confirms every earlier
   * pending read.
   */
  private ackRead(from: NodeId, context: string): void {
    const i = this.pendingReads.findIndex((r) => r.context === context);
    if (i < 0) return;
    const read = this.pendingReads[i];
    read.acks.add(from);
    if (read.acks.size < this.quorum) return;
    const done = this.pendingReads.splice(0, i + 1);
    for (const r of done) this.readStates.push({ index: r.index, context: r.context });
  }

  private quorumRecentlyHeard(): boolean {
    let active = 1;
    for (const pr of this.prs.values()) if (pr.ticksSinceHeard < this.cfg.electionTimeoutTicks) active++;
    return active >= this.quorum;
  }

  private send(m: Message): void {
    this.msgs.push(m);
  }
}

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

function validateConfig(c: RaftConfig): string | null {
  if (typeof c.id !== 'string' || c.id === '') return 'id must be a non-empty string';
  if (!Array.isArray(c.peers) || !c.peers.includes(c.id)) return `peers must include this node's id '${c.id}'`;
  if (!Number.isInteger(c.heartbeatTicks) || c.heartbeatTicks < 1) return 'heartbeatTicks must be an integer >= 1';
  if (!Number.isInteger(c.electionTimeoutTicks) || c.electionTimeoutTicks <= c.heartbeatTicks) {
    return 'electionTimeoutTicks must be an integer > heartbeatTicks';
  }
  if (typeof c.random !== 'function') return 'random must be a function returning [0, 1)';
  if (!Number.isInteger(c.maxEntriesPerMsg) || c.maxEntriesPerMsg < 1) return 'maxEntriesPerMsg must be an integer >= 1';
  if (!Number.isInteger(c.maxInflight) || c.maxInflight < 1) return 'maxInflight must be an integer >= 1';
  if (c.snapshotRetryTicks !== undefined && !(Number.isInteger(c.snapshotRetryTicks) && c.snapshotRetryTicks >= 1)) return 'snapshotRetryTicks must be an integer >= 1';
  if (c.maxBytesPerMsg !== undefined && !(Number.isInteger(c.maxBytesPerMsg) && c.maxBytesPerMsg >= 1)) return 'maxBytesPerMsg must be an integer >= 1';
  if (c.maxInflightBytes !== undefined && !(Number.isInteger(c.maxInflightBytes) && c.maxInflightBytes >= 0)) return 'maxInflightBytes must be an integer >= 0 (0: no bound)';
  return null;
}
