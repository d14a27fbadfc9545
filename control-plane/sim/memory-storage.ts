// control-plane/sim/memory-storage.ts -- Raft storage in memory, for the
// simulation of the production host: the StoreStorage RaftStore drives
// (load, save, saveCompaction, close) with the rules of DiskStorage
// (control-plane/raft-storage/disk-storage.ts): an entry at index i replaces
// the stored entries from i on (§5.3), a save that leaves a gap is refused
// with INVALID, an installed snapshot discards every stored entry, a
// compaction keeps the later ones, a second open of the same disk is LOCKED,
// a closed storage refuses with CLOSED. test/unit/storage-conformance.test.ts
// runs one suite against both.
//
// What survives a crash is the MemoryDisk, and only what a save made durable.
// With a clock, every operation becomes durable `writeDelayMs()` later, in
// call order (an fsync takes time, and the host's other work runs meanwhile);
// crash() throws away every operation not yet durable, or keeps a prefix of
// them (a write that reached the disk just before the power went). Pure: the
// clock is injected.

import type { Clock, ClockTimer } from '../../shared/clock.ts';
import type { Entry, HardState, PersistedState, Ready, Snapshot } from '../raft/types.ts';
import { RaftStorageError } from '../raft-storage/errors.ts';
import { appendProblem, hardStateProblem } from '../raft-storage/checks.ts';

/** The durable bytes of one replica, as plain data: it outlives every MemoryStorage opened on it. */
export class MemoryDisk {
  hardState: HardState = { term: 0, vote: null, commit: 0 };
  snapshot: Snapshot | null = null;
  /** entries[k].index === snapshotIndex + 1 + k */
  entries: Entry[] = [];
  locked = false;

  get snapshotIndex(): number {
    return this.snapshot?.meta.index ?? 0;
  }

  get lastIndex(): number {
    return this.snapshotIndex + this.entries.length;
  }

  /** Term of the stored entry at `index` (the snapshot's at its index), or null. */
  termAt(index: number): number | null {
    if (this.snapshot && index === this.snapshot.meta.index) return this.snapshot.meta.term;
    const e = this.entries[index - this.snapshotIndex - 1];
    return e === undefined ? null : e.term;
  }

  entryAt(index: number): Entry | undefined {
    return this.entries[index - this.snapshotIndex - 1];
  }
}

export type SaveUpdate = Pick<Ready, 'hardState' | 'entries' | 'snapshot'>;

export interface MemoryStorageOptions {
  /** Durability takes time on this clock; without one an operation is durable at once (resolved in a microtask). */
  clock?: Clock;
  /** How long each operation takes to become durable, in clock ms. Default 0. */
  writeDelayMs?: () => number;
}

type Op = { kind: 'save'; update: SaveUpdate } | { kind: 'compaction'; snapshot: Snapshot };

interface Pending {
  op: Op;
  resolve: () => void;
  reject: (e: Error) => void;
  timer: ClockTimer | null;
}

export class MemoryStorage {
  private readonly queue: Pending[] = [];
  private closed = false;
  private crashed = false;
  private lastDueAt = Number.NEGATIVE_INFINITY;
  /** Operations made durable (for the simulation's statistics). */
  durableOps = 0;

  private constructor(
    readonly disk: MemoryDisk,
    private readonly opts: MemoryStorageOptions,
  ) {}

  static async open(disk: MemoryDisk, opts: MemoryStorageOptions = {}): Promise<MemoryStorage> {
    if (disk.locked) throw new RaftStorageError('LOCKED', 'raft storage is locked: another MemoryStorage holds this disk');
    disk.locked = true;
    return new MemoryStorage(disk, opts);
  }

  async load(): Promise<PersistedState> {
    const d = this.disk;
    return { hardState: { ...d.hardState }, snapshot: d.snapshot, entries: d.entries.slice() };
  }

  save(update: SaveUpdate): Promise<void> {
    const u: SaveUpdate = { hardState: update.hardState ?? null, entries: update.entries ?? [], snapshot: update.snapshot ?? null };
    return this.enqueue({ kind: 'save', update: u });
  }

  saveCompaction(snapshot: Snapshot): Promise<void> {
    return this.enqueue({ kind: 'compaction', snapshot });
  }

  /** Operations handed in and not yet durable. */
  get pendingOps(): number {
    return this.queue.length;
  }

  /** Finish queued work, then release the disk. Later calls fail with CLOSED. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.queue.length > 0) {
      await new Promise<void>((resolve) => {
        const last = this.queue[this.queue.length - 1];
        const { resolve: r, reject: j } = last;
        last.resolve = () => {
          r();
          resolve();
        };
        last.reject = (e) => {
          j(e);
          resolve();
        };
      });
    }
    this.disk.locked = false;
  }

  /**
   * The process dies: the first `keep` pending operations reached the disk,
   * the rest never will (their promises never settle, as in a dead process).
   */
  crash(keep = 0): void {
    if (this.crashed) return;
    this.crashed = true;
    this.closed = true;
    const survivors = this.queue.splice(0, Math.min(keep, this.queue.length));
    for (const p of this.queue) this.opts.clock?.cancel(p.timer);
    this.queue.length = 0;
    for (const p of survivors) {
      this.opts.clock?.cancel(p.timer);
      this.apply(p.op);
    }
    this.disk.locked = false;
  }

  private enqueue(op: Op): Promise<void> {
    if (this.closed) return Promise.reject(new RaftStorageError('CLOSED', 'raft storage is closed'));
    return new Promise<void>((resolve, reject) => {
      const p: Pending = { op, resolve, reject, timer: null };
      this.queue.push(p);
      const clock = this.opts.clock;
      if (!clock) {
        queueMicrotaskFree(() => this.complete(p));
        return;
      }
      // Durable in call order: never before the operation queued ahead of it.
      const due = Math.max(clock.now() + Math.max(0, this.opts.writeDelayMs?.() ?? 0), this.lastDueAt);
      this.lastDueAt = due;
      p.timer = clock.timeout(() => this.complete(p), due - clock.now());
    });
  }

  private complete(p: Pending): void {
    if (this.crashed || this.queue[0] !== p) return;
    this.queue.shift();
    const problem = this.apply(p.op);
    if (problem) p.reject(new RaftStorageError('INVALID', problem));
    else p.resolve();
  }

  /** Make one operation durable; a reason when it is refused (nothing changes then). */
  private apply(op: Op): string | null {
    const d = this.disk;
    if (op.kind === 'compaction') {
      const meta = op.snapshot.meta;
      if (!Number.isSafeInteger(meta.index) || meta.index < 1 || !Number.isSafeInteger(meta.term) || meta.term < 0)
        return `snapshot meta ${meta.index}/${meta.term} is not a positive index and a term`;
      if (d.snapshot && meta.index === d.snapshot.meta.index && meta.term === d.snapshot.meta.term) return null;
      const term = d.termAt(meta.index);
      if (meta.index <= d.snapshotIndex || term !== meta.term) {
        return `compaction to ${meta.index}/${meta.term} refused: stored log has snapshot ${d.snapshotIndex} and entries to ${d.lastIndex}, term at ${meta.index} is ${term ?? 'none'}`;
      }
      d.entries = d.entries.slice(meta.index - d.snapshotIndex);
      d.snapshot = op.snapshot;
      this.durableOps++;
      return null;
    }
    const { snapshot, entries, hardState } = op.update;
    let snapIndex = d.snapshotIndex;
    let last = d.lastIndex;
    if (snapshot) {
      const meta = snapshot.meta;
      if (!Number.isSafeInteger(meta.index) || meta.index < 1 || !Number.isSafeInteger(meta.term) || meta.term < 0)
        return `snapshot meta ${meta.index}/${meta.term} is not a positive index and a term`;
      if (meta.index <= d.snapshotIndex) return `installing snapshot ${meta.index} refused: it is not newer than the stored snapshot ${d.snapshotIndex}`;
      snapIndex = meta.index;
      last = meta.index;
    }
    const problem = appendProblem(snapIndex, last, entries) ?? (hardState === null ? null : hardStateProblem(hardState));
    if (problem !== null) return `save refused: ${problem}`;
    if (snapshot) {
      d.snapshot = snapshot;
      d.entries = [];
    }
    const kept = entries.filter((e) => e.index > d.snapshotIndex);
    if (kept.length > 0) {
      d.entries.length = kept[0].index - d.snapshotIndex - 1; // §5.3: drop the conflicting suffix
      for (const e of kept) d.entries.push(e);
    }
    if (hardState !== null) d.hardState = { ...hardState };
    this.durableOps++;
    return null;
  }
}

/** Settle after the current task without a timer: a resolved promise's continuation. */
function queueMicrotaskFree(fn: () => void): void {
  void Promise.resolve().then(fn);
}
