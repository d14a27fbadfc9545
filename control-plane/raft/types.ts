// control-plane/raft/types.ts -- the plain data the Raft core exchanges with its
// host: log entries, hard state, snapshots, the wire messages, Ready, and the
// shape of what storage must hand back on restart. Plain objects only (no
// classes, no methods) so storage can write them and a transport can msgpack
// them. Pure: no I/O here. Section numbers refer to the Raft paper (Ongaro &
// Ousterhout, "In Search of an Understandable Consensus Algorithm", 2014) and
// to Ongaro's PhD thesis ("thesis §x").

/** A replica's id, e.g. 'cp-1'. Membership is fixed (no §6 changes). */
export type NodeId = string;

/**
 * One log entry. `index` starts at 1; index 0 / term 0 is the empty log.
 * `kind: 'noop'` is the empty entry a new leader appends to commit entries of
 * earlier terms (§5.4.2, §8); the host must skip it when applying.
 */
export interface Entry {
  term: number;
  index: number;
  kind: 'normal' | 'noop';
  data: Uint8Array; // empty for 'noop'
}

/**
 * What must survive a crash besides the log (Figure 2, "persistent state on
 * all servers"): currentTerm and votedFor. `commit` is persisted too (as in
 * etcd) so a restart can re-apply without waiting for the leader; it is a
 * hint, never ahead of the stored log.
 */
export interface HardState {
  term: number;
  vote: NodeId | null;
  commit: number;
}

/** The last index and term a snapshot covers (§7: lastIncludedIndex/Term). */
export interface SnapshotMeta {
  index: number;
  term: number;
}

/**
 * A snapshot: the state machine's bytes as of `meta.index` (§7). `data` is
 * SNAPSHOT_ON_DISK (this very array) once the host has let the core drop the
 * bytes because its storage can read them back (RaftStorage.loadSnapshot):
 * a 'snapshot' message the core then makes carries it, and the host fills
 * in the bytes before the message leaves.
 */
export interface Snapshot {
  meta: SnapshotMeta;
  data: Uint8Array;
}

/** The bytes of a snapshot kept only by the storage (see Snapshot). */
export const SNAPSHOT_ON_DISK: Uint8Array = new Uint8Array(0);

/**
 * Everything storage returns on restart. `entries` are the stored entries
 * after the snapshot, contiguous, starting at (snapshot?.meta.index ?? 0) + 1.
 */
export interface PersistedState {
  hardState: HardState;
  snapshot: Snapshot | null;
  entries: Entry[];
}

/** A linearizable read became safe: serve it once applied >= index (§8, thesis §6.4). */
export interface ReadState {
  index: number;
  context: string;
}

/**
 * The work a host must do, produced by RaftNode.ready().
 *
 * ORDERING CONTRACT, IN CAPITALS BECAUSE EVERYTHING DEPENDS ON IT:
 *   1. PERSIST (AND FSYNC) `snapshot`, THEN `entries`, THEN `hardState`
 *      BEFORE SENDING ANY OF `messages`. A vote or an append acknowledgement
 *      that leaves this replica must already be on disk (Figure 2: "respond
 *      to RPCs only after updating stable storage").
 *   2. IF `snapshot` IS SET, RESTORE THE STATE MACHINE FROM IT, THEN APPLY
 *      `committedEntries` IN ORDER, ONLY AFTER STEP 1.
 *   3. CALL advance(ready) WHEN DONE. ready() RETURNS NOTHING NEW UNTIL THEN.
 * Steps may be called between ready() and advance() (e.g. while an fsync is
 * in flight); that is allowed.
 */
export interface Ready {
  /** Set when term, vote or commit changed since the last Ready. */
  hardState: HardState | null;
  /**
   * Entries to append to stable storage. If entries[0].index <= the last
   * stored index, storage must first delete every stored entry with index >=
   * entries[0].index (they were truncated by a conflict, §5.3).
   */
  entries: Entry[];
  /**
   * A snapshot received from the leader (InstallSnapshot, §7). Storage must
   * save it and DISCARD ALL stored entries (the log now restarts after
   * snapshot.meta.index); then append `entries`.
   */
  snapshot: Snapshot | null;
  /** Messages to send, only after persisting (see above). Loss is tolerated. */
  messages: Message[];
  /** Committed entries to apply, in index order, after persisting. */
  committedEntries: Entry[];
  /** Reads that may now be served once applied >= index. */
  readStates: ReadState[];
}

/**
 * The storage a host drives (implemented in control-plane/raft-storage/).
 * The core never calls it; the host does, following the Ready contract.
 */
export interface RaftStorage {
  /** Everything persisted so far; an empty log on first boot. */
  load(): Promise<PersistedState>;
  /** Persist ready.snapshot, ready.entries, ready.hardState (in that order) and fsync. */
  save(update: Pick<Ready, 'hardState' | 'entries' | 'snapshot'>): Promise<void>;
  /**
   * Persist a snapshot made locally by RaftNode.compact() and delete stored
   * entries with index <= snapshot.meta.index, KEEPING the later ones.
   */
  saveCompaction(snapshot: Snapshot): Promise<void>;
  /**
   * The snapshot last persisted (by save or saveCompaction), read back, or
   * null when there is none. A storage that has it lets its host keep the
   * snapshot's bytes out of memory (they are megabytes) between the rare
   * moments a lagging follower needs them.
   */
  loadSnapshot?(): Promise<Snapshot | null>;
}

// ---------------------------------------------------------------- messages
// A discriminated union on `type`; every message carries from, to, term.

interface MessageBase {
  from: NodeId;
  to: NodeId;
  /**
   * The sender's term. For 'preVote' it is the term the sender WOULD use
   * (its term + 1) without having incremented it (thesis §9.6); a granted
   * 'preVoteResponse' echoes that term.
   */
  term: number;
}

/** RequestVote / pre-vote (§5.2, §5.4.1, thesis §9.6). */
export interface VoteRequest extends MessageBase {
  type: 'vote' | 'preVote';
  lastLogIndex: number;
  lastLogTerm: number;
}

export interface VoteResponse extends MessageBase {
  type: 'voteResponse' | 'preVoteResponse';
  reject: boolean;
}

/** AppendEntries (§5.3). Empty `entries` probes or carries commit. */
export interface AppendRequest extends MessageBase {
  type: 'append';
  prevLogIndex: number;
  prevLogTerm: number;
  entries: Entry[];
  commit: number;
}

/**
 * AppendEntries reply. On success `index` is the highest index now known to
 * match the leader. On reject `index` is the rejected prevLogIndex and
 * `hintIndex` the highest index the follower may still match, so the leader
 * can skip back more than one entry at a time (§5.3, "the protocol can be
 * optimized to reduce the number of rejected AppendEntries RPCs").
 */
export interface AppendResponse extends MessageBase {
  type: 'appendResponse';
  reject: boolean;
  index: number;
  hintIndex: number;
}

/** Leader heartbeat; `context` non-null when it confirms a read index (§8). */
export interface Heartbeat extends MessageBase {
  type: 'heartbeat';
  commit: number;
  context: string | null;
}

export interface HeartbeatResponse extends MessageBase {
  type: 'heartbeatResponse';
  context: string | null;
}

/** InstallSnapshot (§7), sent whole; answered with an 'appendResponse'. */
export interface SnapshotRequest extends MessageBase {
  type: 'snapshot';
  snapshot: Snapshot;
}

export type Message = VoteRequest | VoteResponse | AppendRequest | AppendResponse | Heartbeat | HeartbeatResponse | SnapshotRequest;

export type MessageType = Message['type'];

export type Role = 'follower' | 'preCandidate' | 'candidate' | 'leader';

/** Snapshot of a node's volatile view, for hosts, APIs and tests. */
export interface RaftStatus {
  id: NodeId;
  role: Role;
  term: number;
  leader: NodeId | null;
  commit: number;
  applied: number;
  lastIndex: number;
  /** Index of the last snapshot (0 if none); entries <= it are compacted. */
  snapshotIndex: number;
}

export type ProposeResult =
  { ok: true; index: number; term: number } | { ok: false; reason: 'not leader'; leader: NodeId | null } | { ok: false; reason: 'no quorum' | 'too many uncommitted entries' };

export type ReadIndexResult = { ok: true } | { ok: false; reason: 'not leader'; leader: NodeId | null } | { ok: false; reason: 'too many pending reads' | 'duplicate context' };

export type CompactResult = { ok: true; snapshot: Snapshot } | { ok: false; reason: string };

/** Construction options. Ticks are logical: the host decides how long one is. */
export interface RaftConfig {
  id: NodeId;
  /** All members including `id`. Fixed membership. */
  peers: NodeId[];
  /** T: a follower campaigns after a random timeout in [T, 2T) ticks (§5.2). */
  electionTimeoutTicks: number;
  /** Leader heartbeat period; must be < electionTimeoutTicks. */
  heartbeatTicks: number;
  /** Injected PRNG in [0, 1): the only source of randomness (election jitter). */
  random: () => number;
  /** Pre-vote phase before a real election (thesis §9.6). */
  preVote: boolean;
  /** Leader steps down if it hears from no majority for an election timeout (thesis §6.2). */
  checkQuorum: boolean;
  /** Maximum entries in one AppendEntries. */
  maxEntriesPerMsg: number;
  /**
   * Maximum bytes of entry data in one AppendEntries (one entry always
   * goes, whatever its size). Default 1 MiB, etcd's MaxSizePerMsg: with
   * only a count, 512 entries of 1 MiB manifests made one 512 MiB message,
   * more than a peer frame carries.
   */
  maxBytesPerMsg?: number;
  /**
   * Ticks a leader waits for a follower to answer an InstallSnapshot
   * before it sends the snapshot again. Default electionTimeoutTicks. A
   * host that reports a snapshot it could not hand over
   * (RaftNode.reportSnapshotUnsent) and links that close
   * (RaftNode.peerLinkClosed) can wait longer: a large snapshot takes a
   * follower seconds to save, and each early resend is the whole state again.
   */
  snapshotRetryTicks?: number;
  /** Maximum un-acknowledged AppendEntries per follower in pipelined mode. */
  maxInflight: number;
  /**
   * Maximum bytes of entry data in un-acknowledged AppendEntries per
   * follower in pipelined mode (etcd's MaxInflightBytes); the append that
   * crosses it still goes. Default: no bound. With the count alone, a
   * follower back from a snapshot 40,000 entries behind was sent all of
   * them at once, and packing those frames held the leader's loop.
   */
  maxInflightBytes?: number;
  /** Maximum proposals appended but not yet committed (flow control). Default 1024. */
  maxUncommittedEntries?: number;
  /** Maximum read-index requests waiting for confirmation. Default 1024. */
  maxPendingReads?: number;
  /**
   * Default false: when the commit index moves, the leader sends every
   * follower an AppendEntries at once (empty if needed) to carry it. True:
   * the index rides on the next AppendEntries or heartbeat instead (§5.3),
   * saving a frame and an acknowledgement per follower per commit.
   */
  piggybackCommit?: boolean;
  /** State loaded from storage on restart; absent for a fresh replica. */
  persisted?: PersistedState;
}
