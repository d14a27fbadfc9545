// control-plane/raft/raft-log.ts -- the in-memory replicated log of one
// replica: entries after the last snapshot, the commit index, and which
// suffix has not yet been handed to the host for persistence. Pure.
//
// Index arithmetic: entries[i] has index offset + i. The snapshot covers
// everything up to offset - 1 (its index and term are kept here so
// term(offset - 1) answers the consistency check right after compaction, §7).

import { SNAPSHOT_ON_DISK, type Entry, type Snapshot, type SnapshotMeta } from './types.ts';

export class RaftLog {
  private entries: Entry[];
  private offset: number; // index of entries[0]
  private snapshotTerm: number; // term of entry offset - 1
  /** The latest snapshot (local compaction or received), sent to lagging followers (§7). */
  snapshot: Snapshot | null;
  committed: number;
  /** First index not yet handed out in a Ready for persistence. */
  private unstableFrom: number;
  /** Highest index known persisted and still part of this log. */
  persistedTo: number;

  constructor(snapshot: Snapshot | null, entries: Entry[], committed: number) {
    const snapIndex = snapshot?.meta.index ?? 0;
    this.snapshot = snapshot;
    this.offset = snapIndex + 1;
    this.snapshotTerm = snapshot?.meta.term ?? 0;
    entries.forEach((e, i) => {
      if (e.index !== this.offset + i) {
        throw new Error(`RaftLog: stored entries not contiguous: expected index ${this.offset + i}, got ${e.index}`);
      }
    });
    this.entries = entries.slice();
    const last = this.lastIndex();
    // commit is a persisted hint: never behind the snapshot, never past the log.
    this.committed = Math.min(Math.max(committed, snapIndex), last);
    this.unstableFrom = last + 1;
    this.persistedTo = last;
  }

  firstIndex(): number {
    return this.offset;
  }

  lastIndex(): number {
    return this.offset + this.entries.length - 1;
  }

  lastTerm(): number {
    return this.term(this.lastIndex()) as number;
  }

  snapshotMeta(): SnapshotMeta {
    return { index: this.offset - 1, term: this.snapshotTerm };
  }

  /** Term of the entry at `index`, or undefined if compacted away or beyond the log. */
  term(index: number): number | undefined {
    if (index === this.offset - 1) return this.snapshotTerm;
    if (index < this.offset - 1 || index > this.lastIndex()) return undefined;
    return this.entries[index - this.offset].term;
  }

  matchTerm(index: number, term: number): boolean {
    return this.term(index) === term;
  }

  /**
   * §5.4.1: a candidate's log is at least as up-to-date as ours if its last
   * term is higher, or equal with a last index at least as large.
   */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const myTerm = this.lastTerm();
    return lastTerm > myTerm || (lastTerm === myTerm && lastIndex >= this.lastIndex());
  }

  /**
   * Entries in [lo, hi], at most maxCount of them and, past the first, at
   * most maxBytes of data in all; undefined if lo is compacted.
   */
  slice(lo: number, hi: number, maxCount: number, maxBytes = Infinity): Entry[] | undefined {
    if (lo < this.offset) return undefined;
    let end = Math.min(hi, this.lastIndex(), lo + maxCount - 1);
    if (end < lo) return [];
    let bytes = this.entries[lo - this.offset].data.length;
    for (let i = lo + 1; i <= end; i++) {
      bytes += this.entries[i - this.offset].data.length;
      if (bytes > maxBytes) {
        end = i - 1;
        break;
      }
    }
    return this.entries.slice(lo - this.offset, end - this.offset + 1);
  }

  /** A read-only view of the entries in memory (for simulation checkers and debugging). */
  allEntries(): readonly Entry[] {
    return this.entries;
  }

  /** Leader append of new entries at the end of its own log. */
  append(entry: Entry): void {
    if (entry.index !== this.lastIndex() + 1) {
      throw new Error(`RaftLog.append: index ${entry.index} does not follow last ${this.lastIndex()}`);
    }
    this.entries.push(entry);
  }

  /**
   * The follower side of the consistency check (§5.3), called once
   * prevLogIndex/prevLogTerm matched: append what is new and, at the first
   * conflicting index, delete the existing entry and all that follow it.
   * Entries that already match are left alone, so a delayed or duplicated
   * AppendEntries never truncates anything. Returns the last new index.
   */
  maybeAppend(prevIndex: number, entries: Entry[]): number {
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i];
      if (e.index < this.offset) continue; // covered by our snapshot: committed, so equal
      const existing = this.term(e.index);
      if (existing === e.term) continue;
      if (existing !== undefined) {
        if (e.index <= this.committed) {
          throw new Error(`RaftLog: conflict at committed index ${e.index} (committed ${this.committed}): safety violated`);
        }
        this.truncateFrom(e.index);
      }
      for (let j = i; j < entries.length; j++) {
        const added = entries[j];
        // The constant, not the decoded copy of the word: a follower keeps thousands of entries until a snapshot.
        added.kind = added.kind === 'noop' ? 'noop' : 'normal';
        this.entries.push(added);
      }
      break;
    }
    return prevIndex + entries.length;
  }

  private truncateFrom(index: number): void {
    this.entries.length = index - this.offset;
    this.unstableFrom = Math.min(this.unstableFrom, index);
    this.persistedTo = Math.min(this.persistedTo, index - 1);
  }

  commitTo(index: number): void {
    const target = Math.min(index, this.lastIndex());
    if (target > this.committed) this.committed = target;
  }

  /** Entries not yet handed to the host; marks them handed out. */
  takeUnstable(): Entry[] {
    if (this.unstableFrom > this.lastIndex()) return [];
    const out = this.entries.slice(this.unstableFrom - this.offset);
    this.unstableFrom = this.lastIndex() + 1;
    return out;
  }

  hasUnstable(): boolean {
    return this.unstableFrom <= this.lastIndex();
  }

  /**
   * The host persisted `entries`. The persisted prefix is the part that still
   * matches the log (a conflict may have truncated some of it meanwhile); by
   * the Log Matching Property (§5.3) everything before a matching entry
   * matches too.
   */
  stableTo(entries: Entry[]): void {
    for (let i = entries.length - 1; i >= 0; i--) {
      const e = entries[i];
      if (this.term(e.index) === e.term) {
        this.persistedTo = Math.max(this.persistedTo, e.index);
        return;
      }
    }
  }

  /** Discard entries <= index after a local snapshot (§7). */
  compact(snapshot: Snapshot): void {
    const index = snapshot.meta.index;
    this.entries = this.entries.slice(index + 1 - this.offset);
    this.offset = index + 1;
    this.snapshotTerm = snapshot.meta.term;
    this.snapshot = snapshot;
  }

  /** Drop the latest snapshot's bytes (SNAPSHOT_ON_DISK) if it is still the one at `meta`; true if it was. */
  releaseSnapshotData(meta: SnapshotMeta): boolean {
    const s = this.snapshot;
    if (s === null || s.meta.index !== meta.index || s.meta.term !== meta.term) return false;
    if (s.data !== SNAPSHOT_ON_DISK) this.snapshot = { meta: s.meta, data: SNAPSHOT_ON_DISK };
    return true;
  }

  /** Replace the whole log by a snapshot received from the leader (§7). */
  restore(snapshot: Snapshot): void {
    const index = snapshot.meta.index;
    this.entries = [];
    this.offset = index + 1;
    this.snapshotTerm = snapshot.meta.term;
    this.snapshot = snapshot;
    this.committed = index;
    this.unstableFrom = index + 1;
    this.persistedTo = index;
  }
}
