// control-plane/raft/progress.ts -- the leader's view of one follower
// (nextIndex and matchIndex of Figure 2) plus flow control, modelled on
// etcd-io/raft's tracker.Progress. Pure.
//
// States:
//   probe     -- we do not know where the follower's log matches; send one
//                AppendEntries at a time and back up on rejection (§5.3).
//   replicate -- the follower is in sync; pipeline up to maxInflight
//                messages, advancing `next` optimistically.
//   snapshot  -- the entries it needs were compacted; an InstallSnapshot
//                (§7) is in flight; send nothing else until it is acked or
//                times out.

export type ProgressState = 'probe' | 'replicate' | 'snapshot';

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** In probe state: an append was sent and no reply or heartbeat reply came yet. */
  probeSent = false;
  /** In snapshot state: index of the snapshot sent. */
  pendingSnapshot = 0;
  /** Ticks spent in snapshot state; after an election timeout we retry. */
  snapshotTicks = 0;
  /** Last index of each un-acknowledged append, oldest first; length <= maxInflight. */
  inflights: number[] = [];
  /** The entry bytes of each of those appends, and their sum (bounded by maxInflightBytes). */
  private inflightBytes: number[] = [];
  private bytesInFlight = 0;
  /** Heard from since the last check-quorum round (thesis §6.2). */
  recentActive = false;
  /** Ticks since we last heard from this follower (for fast 'no quorum' refusals). */
  ticksSinceHeard = 0;

  constructor(
    next: number,
    private readonly maxInflight: number,
    /** 0: no bound. */
    private readonly maxInflightBytes = 0,
  ) {
    this.next = next;
  }

  private clearInflights(): void {
    this.inflights = [];
    this.inflightBytes = [];
    this.bytesInFlight = 0;
  }

  becomeProbe(): void {
    // After a snapshot, the follower has at least the snapshot's entries.
    if (this.state === 'snapshot') {
      this.next = Math.max(this.match + 1, this.pendingSnapshot + 1);
    } else {
      this.next = this.match + 1;
    }
    this.state = 'probe';
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.clearInflights();
  }

  becomeReplicate(): void {
    this.state = 'replicate';
    this.next = this.match + 1;
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.clearInflights();
  }

  becomeSnapshot(index: number): void {
    this.state = 'snapshot';
    this.pendingSnapshot = index;
    this.snapshotTicks = 0;
    this.probeSent = false;
    this.clearInflights();
  }

  /** A success reply for `index`. Returns false if it was stale (already known). */
  maybeUpdate(index: number): boolean {
    let updated = false;
    if (index > this.match) {
      this.match = index;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, index + 1);
    return updated;
  }

  /**
   * A rejection of prevLogIndex `rejected`, with the follower's hint. Returns
   * false if the rejection is stale (answers an older message) and must be
   * ignored; otherwise moves `next` back (§5.3: "decrement nextIndex and
   * retry", skipping ahead using the hint).
   */
  maybeDecrTo(rejected: number, hintIndex: number): boolean {
    if (this.state === 'replicate') {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, hintIndex + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  isPaused(): boolean {
    switch (this.state) {
      case 'probe':
        return this.probeSent;
      case 'replicate':
        return this.inflights.length >= this.maxInflight || (this.maxInflightBytes > 0 && this.bytesInFlight >= this.maxInflightBytes);
      case 'snapshot':
        return true;
    }
  }

  /** Bookkeeping after sending an append whose last entry is `lastIndex`, with `bytes` of entry data. */
  sentEntries(lastIndex: number, count: number, bytes: number): void {
    if (this.state === 'replicate') {
      if (count > 0) {
        this.next = lastIndex + 1;
        this.inflights.push(lastIndex);
        this.inflightBytes.push(bytes);
        this.bytesInFlight += bytes;
      }
    } else if (this.state === 'probe') {
      this.probeSent = true;
    }
  }

  /** Acknowledged through `index`: free those inflight slots. */
  freeTo(index: number): void {
    let i = 0;
    while (i < this.inflights.length && this.inflights[i] <= index) i++;
    if (i === 0) return;
    this.inflights.splice(0, i);
    for (const b of this.inflightBytes.splice(0, i)) this.bytesInFlight -= b;
  }
}
