// control-plane/raft-storage/disk-storage.ts -- durable Raft storage: the
// RaftStorage of control-plane/raft/types.ts on real files. A shell module:
// it owns the data directory and every write, rename and fsync in it.
//
// On disk (one directory per replica):
//   wal-<seq>.log         write-ahead log segments, seq = 16 decimal digits,
//                         records as in record.ts, grouped in batches (one
//                         batch per fsync, closed by a commit record).
//   snap-<index>-<term>.snap  the current snapshot (snapshot-file.ts).
//
// The durability contract (Figure 2: "respond to RPCs only after updating
// stable storage"): save() resolves only after its batch is written AND
// durable, so a host that awaits save() before sending Ready.messages never
// sends a vote or an append acknowledgement that a crash could take back.
// Segments are opened O_DSYNC: each write() returns only once its data (and
// the metadata needed to read it back, such as the file size) is on stable
// storage, exactly what write() + fdatasync() gives (POSIX synchronized I/O
// data integrity), but in one system call and one trip through libuv's
// thread pool instead of two. On this 2-core VM every trip costs a thread
// wake-up and a wake-up of the event loop, ~0.1 ms each on the write path.
//
// Preallocated segments, as etcd's WAL: a segment is made its full size
// (segmentMaxBytes; a sparse file, no block is allocated) when it is created,
// so a write lands inside the file and changes no file size, whose update
// the file system must otherwise journal and flush with every write. An
// ad-hoc C probe of 1,200-byte O_DSYNC writes on ext4 on the 2-core VM of
// docs/benchmarks.md: 0.16-0.18 ms and 61 us of CPU each when every write
// grew the file, 0.14 ms and 44 us into a preallocated one; with three
// writers at once, as three replicas on one disk, 0.37 against 0.31 ms.
// The unwritten rest reads as zeros, which segment-scan.ts takes for the end.
//
// Checkpoints instead of in-place compaction. A snapshot (local compaction or
// one installed from the leader) is committed by starting a NEW segment whose
// first batch is [checkpoint(snapshot meta, hard state), the entries kept after
// the snapshot, commit]. That segment alone is enough to rebuild the state, so
// every older segment and snapshot file is deleted once it is fsynced. Replay
// starts at the newest segment that begins with a committed checkpoint and
// ignores (and deletes) anything older, which makes every crash point inside
// a compaction safe: before the checkpoint batch is durable the old segments
// and the old snapshot still rule; after it, the new ones do. The price is
// rewriting the entries after the snapshot, which are the few not yet applied.
//
// Conflict truncation (§5.3) is append-only too: an entry record at index i
// replaces every earlier-written entry >= i when replayed, as in etcd's WAL.

import { constants as fsConstants } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { SNAPSHOT_ON_DISK, type Entry, type HardState, type PersistedState, type RaftStorage, type Ready, type Snapshot, type SnapshotMeta } from '../raft/types.ts';
import { encodeBatch, encodeBatchInSlices, encodedRecordBytes, MAX_BATCH_BYTES, MAX_RECORD_BYTES, RECORD_HEADER_BYTES, type WalRecord } from './record.ts';
import { scanSegment, type SegmentScan } from './segment-scan.ts';
import { decodeSnapshotFile, decodeSnapshotFileInSlices, snapshotFileInSlices } from './snapshot-file.ts';
import { lockDir } from './dir-lock.ts';
import { RaftStorageError } from './errors.ts';
import { appendProblem, hardStateProblem } from './checks.ts';

export { RaftStorageError, type RaftStorageErrorCode } from './errors.ts';

/** A new segment is started before a write once the current one holds this much. */
export const DEFAULT_SEGMENT_MAX_BYTES = 8 * 1024 * 1024;
/** Most save() calls merged into one write + one fsync (group commit). */
export const GROUP_COMMIT_MAX_SAVES = 256;
/** Group commit stops adding saves once a batch would pass this many bytes. */
export const GROUP_COMMIT_MAX_BYTES = 4 * 1024 * 1024;
/** A batch of more entry bytes than this is framed in slices (record.ts encodeBatchInSlices), yielding between them. */
export const ENCODE_IN_ONE_GO_BYTES = 1024 * 1024;
/** Most operations waiting for the disk; more is a host that does not await, refused. */
export const MAX_QUEUED_OPS = 4096;
/** A snapshot file is written and flushed in pieces of this many bytes. */
export const SNAPSHOT_WRITE_CHUNK = 1024 * 1024;

export interface DiskStorageOptions {
  /** Rotate to a new segment once the current one reaches this size. Default 8 MiB. */
  segmentMaxBytes?: number;
  /** One line per notable recovery action (a torn tail cut off). Default: console.warn. */
  log?: (line: string) => void;
}

/** What Ready asks to persist (types.ts: snapshot, then entries, then hard state). */
export type SaveUpdate = Pick<Ready, 'hardState' | 'entries' | 'snapshot'>;

export interface StorageStats {
  /** Live segment files, the active one included. */
  segments: number;
  /** Bytes in live segment files. */
  walBytes: number;
  snapshotIndex: number;
  /** Index of the last stored entry (snapshotIndex when there are none). */
  lastIndex: number;
  /** Entries stored after the snapshot: what a compaction would drop once applied. */
  entriesSinceSnapshot: number;
}

type Op =
  | { type: 'save'; update: SaveUpdate; resolve: () => void; reject: (e: Error) => void }
  /** fileWritten: saveCompaction() wrote the snapshot file already, outside the queue. */
  | { type: 'compaction'; snapshot: Snapshot; fileWritten: boolean; resolve: () => void; reject: (e: Error) => void }
  | { type: 'close'; resolve: () => void; reject: (e: Error) => void };

interface Segment {
  seq: number;
  bytes: number;
}

const WAL_NAME = /^wal-(\d{16})\.log$/;
const SNAP_NAME = /^snap-(\d{16})-(\d{16})\.snap$/;

/** A live segment: read-write, every write durable on return (see the header). */
const SEGMENT_OPEN_FLAGS = fsConstants.O_RDWR | fsConstants.O_DSYNC;
/** A new segment: as above, and it must not exist yet. */
const SEGMENT_CREATE_FLAGS = SEGMENT_OPEN_FLAGS | fsConstants.O_CREAT | fsConstants.O_EXCL;

function walName(seq: number): string {
  return `wal-${String(seq).padStart(16, '0')}.log`;
}

function snapName(meta: SnapshotMeta): string {
  return `snap-${String(meta.index).padStart(16, '0')}-${String(meta.term).padStart(16, '0')}.snap`;
}

function corrupt(file: string, offset: number, reason: string): RaftStorageError {
  return new RaftStorageError('CORRUPT', `raft storage is corrupt: ${file} at byte offset ${offset}: ${reason}`);
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function writeAll(fh: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await fh.write(bytes, done, bytes.length - done, position + done);
    done += bytesWritten;
  }
}

/** Start a new segment durably: create (must not exist) O_DSYNC, preallocate `size` bytes, write `bytes` (none for a rotation), fsync the directory. */
async function writeNewSegment(dir: string, name: string, bytes: Uint8Array, size: number): Promise<FileHandle> {
  const fh = await open(join(dir, name), SEGMENT_CREATE_FLAGS);
  try {
    if (size > bytes.length) await fh.truncate(size);
    await writeAll(fh, bytes, 0); // durable on return: O_DSYNC
    await fsyncDir(dir);
    return fh;
  } catch (e) {
    await fh.close().catch(() => {});
    throw e;
  }
}

/** An entry bigger than one WAL record holds. */
function recordSizeProblem(e: Entry): string | null {
  if (encodedRecordBytes({ kind: 'entry', entry: e }) - RECORD_HEADER_BYTES <= MAX_RECORD_BYTES) return null;
  return `entry ${e.index} has ${e.data.length} data bytes, more than one record holds (${MAX_RECORD_BYTES})`;
}

function entryBytes(records: WalRecord[]): number {
  let n = 0;
  for (const r of records) if (r.kind === 'entry') n += r.entry.data.length;
  return n;
}

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

/**
 * The log after the snapshot, in memory: entries[k].index === snapshotIndex + 1 + k.
 * Shared by replay, save() and checkpoints so all three apply the same rules.
 */
class LogTail {
  constructor(
    public snapshotIndex: number,
    public snapshotTerm: number,
    public entries: Entry[],
  ) {}

  get lastIndex(): number {
    return this.snapshotIndex + this.entries.length;
  }

  /** Term of the entry at `index`, the snapshot's term at its index, else null. */
  termAt(index: number): number | null {
    if (index === this.snapshotIndex) return this.snapshotTerm;
    const e = this.entries[index - this.snapshotIndex - 1];
    return e === undefined ? null : e.term;
  }

  /**
   * Why `entries` cannot be appended, or null. Entries at or below the snapshot
   * are allowed (they are skipped: already compacted); the first one kept must
   * not leave a gap after the last stored entry.
   */
  appendProblem(entries: Entry[]): string | null {
    return appendProblem(this.snapshotIndex, this.lastIndex, entries, recordSizeProblem);
  }

  /** Append (the caller checked appendProblem); returns the entries actually kept. */
  append(entries: Entry[]): Entry[] {
    const kept = entries.filter((e) => e.index > this.snapshotIndex);
    if (kept.length > 0) {
      this.entries.length = kept[0].index - this.snapshotIndex - 1; // §5.3: drop the conflicting suffix
      for (const e of kept) this.entries.push(e);
    }
    return kept;
  }
}

export class DiskStorage implements RaftStorage {
  private readonly queue: Op[] = [];
  private pumping = false;
  private failure: Error | null = null;
  private closed = false;

  private constructor(
    private readonly dir: string,
    private readonly segmentMaxBytes: number,
    private readonly releaseLock: () => Promise<void>,
    private hardState: HardState,
    private snapshot: Snapshot | null,
    private readonly tail: LogTail,
    /** Live segments in seq order; the last one is where writes go. */
    private readonly segments: Segment[],
    private active: FileHandle,
  ) {}

  /**
   * Open (or create) the storage in `dir`: replay the WAL, cut off a torn last
   * write, delete leftovers of an interrupted compaction. Throws a
   * RaftStorageError('CORRUPT') naming the file and offset if the files hold
   * damage other than a torn last write, or RaftStorageError('LOCKED') if
   * another live DiskStorage has the directory open.
   */
  static async open(dir: string, opts: DiskStorageOptions = {}): Promise<DiskStorage> {
    const segmentMaxBytes = opts.segmentMaxBytes ?? DEFAULT_SEGMENT_MAX_BYTES;
    if (!Number.isSafeInteger(segmentMaxBytes) || segmentMaxBytes < 1) {
      throw new RangeError(`segmentMaxBytes must be a positive integer, got ${segmentMaxBytes}`);
    }
    const log = opts.log ?? ((line: string) => console.warn(line));
    await mkdir(dir, { recursive: true });
    const release = await lockDir(dir);
    try {
      return await DiskStorage.recover(dir, segmentMaxBytes, log, release);
    } catch (e) {
      await release();
      throw e;
    }
  }

  private static async recover(dir: string, segmentMaxBytes: number, log: (line: string) => void, release: () => Promise<void>): Promise<DiskStorage> {
    const names = await readdir(dir);
    const seqs = names
      .flatMap((n) => {
        const m = WAL_NAME.exec(n);
        return m ? [Number(m[1])] : [];
      })
      .sort((a, b) => a - b);
    const snapFiles = names.filter((n) => SNAP_NAME.test(n));
    const toDelete = names.filter((n) => n.endsWith('.tmp')); // an interrupted snapshot write

    // Find the base: the newest segment whose first batch is a committed checkpoint.
    const scans = new Map<number, SegmentScan>();
    let baseAt = -1;
    for (let i = seqs.length - 1; i >= 0; i--) {
      const scan = scanSegment(await readFile(join(dir, walName(seqs[i]))));
      scans.set(seqs[i], scan);
      const first = scan.batches[0]?.records[0];
      if (scan.batches[0]?.start === 0 && first?.record.kind === 'checkpoint') {
        baseAt = i;
        break;
      }
    }

    if (baseAt < 0) {
      const anyData = [...scans.entries()].find(([, s]) => s.batches.length > 0 || s.tail.state === 'corrupt');
      if (anyData !== undefined) {
        throw corrupt(walName(anyData[0]), 0, 'no segment starts with a checkpoint, so the log has no known beginning');
      }
      // First boot, or a crash while the very first checkpoint was being written.
      for (const seq of seqs) toDelete.push(walName(seq));
      if (seqs.length > 0) log(`raft-storage: ${dir}: dropped ${seqs.length} segment(s) holding only a torn first write; starting empty`);
      for (const name of toDelete) await unlink(join(dir, name));
      for (const name of snapFiles) await unlink(join(dir, name));
      const hardState: HardState = { term: 0, vote: null, commit: 0 };
      const batch = encodeBatch([{ kind: 'checkpoint', snapshot: { index: 0, term: 0 }, hardState }]);
      const fh = await writeNewSegment(dir, walName(1), batch, segmentMaxBytes);
      return new DiskStorage(dir, segmentMaxBytes, release, hardState, null, new LogTail(0, 0, []), [{ seq: 1, bytes: batch.length }], fh);
    }

    // Replay from the base to the end.
    let hardState: HardState = { term: 0, vote: null, commit: 0 };
    const tail = new LogTail(0, 0, []);
    const segments: Segment[] = [];
    let truncate: { seq: number; at: number; line: string } | null = null;
    for (let i = baseAt; i < seqs.length; i++) {
      const seq = seqs[i];
      const file = walName(seq);
      const isLast = i === seqs.length - 1;
      if (i > baseAt && seq !== seqs[i - 1] + 1) {
        throw corrupt(file, 0, `segment ${walName(seqs[i - 1] + 1)} is missing before it`);
      }
      let scan = scans.get(seq);
      if (scan === undefined) {
        scan = scanSegment(await readFile(join(dir, file)));
      }
      if (scan.tail.state === 'corrupt') throw corrupt(file, scan.tail.offset, scan.tail.reason);
      if (scan.tail.state === 'torn') {
        if (!isLast) throw corrupt(file, scan.tail.offset, `${scan.tail.reason}, in a segment that is not the last one`);
        truncate = {
          seq,
          at: scan.tail.truncateAt,
          line:
            `raft-storage: ${join(dir, file)}: cut off a torn last write at byte offset ${scan.tail.truncateAt} ` +
            `(damage found at ${scan.tail.offset}: ${scan.tail.reason}); that write was never acknowledged`,
        };
      }
      for (const [b, batch] of scan.batches.entries()) {
        for (const [r, { offset, record }] of batch.records.entries()) {
          switch (record.kind) {
            case 'checkpoint':
              if (i !== baseAt || b !== 0 || r !== 0) throw corrupt(file, offset, 'a checkpoint record that does not start its segment');
              hardState = record.hardState;
              tail.snapshotIndex = record.snapshot.index;
              tail.snapshotTerm = record.snapshot.term;
              break;
            case 'entry': {
              if (record.entry.index <= tail.snapshotIndex) {
                throw corrupt(file, offset, `entry ${record.entry.index} is not after the snapshot at ${tail.snapshotIndex}`);
              }
              const problem = tail.appendProblem([record.entry]);
              if (problem !== null) throw corrupt(file, offset, problem);
              tail.append([record.entry]);
              break;
            }
            case 'hardState':
              hardState = record.hardState;
              break;
            case 'commit':
              break; // never inside a batch's records: scanSegment consumes it
          }
        }
      }
      segments.push({ seq, bytes: truncate?.seq === seq ? truncate.at : (scan.batches.at(-1)?.end ?? 0) });
    }

    // The snapshot named by the base checkpoint; every other snapshot file is a leftover.
    let snapshot: Snapshot | null = null;
    if (tail.snapshotIndex > 0) {
      const meta = { index: tail.snapshotIndex, term: tail.snapshotTerm };
      const name = snapName(meta);
      let bytes: Uint8Array;
      try {
        bytes = await readFile(join(dir, name));
      } catch (e) {
        throw corrupt(name, 0, `snapshot file named by the checkpoint in ${walName(seqs[baseAt])} cannot be read: ${(e as Error).message}`);
      }
      const decoded = decodeSnapshotFile(bytes);
      if (typeof decoded === 'string') throw corrupt(name, 0, decoded);
      if (decoded.meta.index !== meta.index || decoded.meta.term !== meta.term) {
        throw corrupt(name, 8, `file holds snapshot ${decoded.meta.index}/${decoded.meta.term}, its name says ${meta.index}/${meta.term}`);
      }
      snapshot = decoded;
    }
    for (const name of snapFiles) if (snapshot === null || name !== snapName(snapshot.meta)) toDelete.push(name);
    for (let i = 0; i < baseAt; i++) toDelete.push(walName(seqs[i]));

    const activeSeq = seqs[seqs.length - 1];
    const active = await open(join(dir, walName(activeSeq)), SEGMENT_OPEN_FLAGS);
    try {
      if (truncate !== null) {
        await active.truncate(truncate.at);
        await active.datasync();
        log(truncate.line);
      }
      // Preallocated again after a cut, or for the first time if an older build wrote it.
      if ((await active.stat()).size < segmentMaxBytes) await active.truncate(segmentMaxBytes);
      // Newest first, so an interrupted cleanup never leaves a hole before a segment still needed.
      for (const name of toDelete.sort().reverse()) await unlink(join(dir, name));
      if (toDelete.length > 0) await fsyncDir(dir);
    } catch (e) {
      await active.close().catch(() => {});
      throw e;
    }
    return new DiskStorage(dir, segmentMaxBytes, release, hardState, snapshot, tail, segments, active);
  }

  /** Everything persisted, for rebuilding the RaftNode and the state machine after a restart. */
  async load(): Promise<PersistedState> {
    if (this.failure !== null) throw this.failedError();
    const hardState = { ...this.hardState };
    const entries = this.tail.entries.slice();
    const snapshot = await this.loadSnapshot();
    // The bytes open() read are handed over once; from now on only the file holds them.
    if (this.snapshot !== null) this.snapshot = { meta: this.snapshot.meta, data: SNAPSHOT_ON_DISK };
    return { hardState, snapshot, entries };
  }

  /**
   * The current snapshot. Its bytes live in its file (megabytes: memory
   * keeps only its meta), read back and checksummed in slices that yield to
   * the event loop. Throws when the file cannot be read or is damaged, or
   * was superseded meanwhile (a newer snapshot deletes the older file).
   */
  async loadSnapshot(): Promise<Snapshot | null> {
    if (this.failure !== null) throw this.failedError();
    const s = this.snapshot;
    if (s === null) return null;
    if (s.data !== SNAPSHOT_ON_DISK) return s;
    const name = snapName(s.meta);
    const bytes = await readFile(join(this.dir, name));
    const decoded = await decodeSnapshotFileInSlices(bytes, () => new Promise((r) => setImmediate(r)));
    if (typeof decoded === 'string') throw corrupt(name, 0, decoded);
    if (decoded.meta.index !== s.meta.index || decoded.meta.term !== s.meta.term) {
      throw corrupt(name, 8, `file holds snapshot ${decoded.meta.index}/${decoded.meta.term}, its name says ${s.meta.index}/${s.meta.term}`);
    }
    return decoded;
  }

  /**
   * Persist one Ready: update.snapshot (installed from the leader: DISCARDS
   * every stored entry), then update.entries (an entry at index i replaces
   * stored entries >= i, §5.3), then update.hardState. Resolves after ONE
   * synchronized (O_DSYNC) write covering all of it; concurrent calls are queued and merged
   * into shared writes (group commit), in call order. Entries and snapshots
   * handed in must not be mutated afterwards (they are kept, not copied).
   */
  save(update: SaveUpdate): Promise<void>;
  /** The same, for hosts without a snapshot to install: save(hardState, entries). */
  save(hardState: HardState | null, entries: Entry[]): Promise<void>;
  save(a: SaveUpdate | HardState | null, entries?: Entry[]): Promise<void> {
    // Absent fields (undefined from a loosely built object) mean "nothing to save", like null.
    const update: SaveUpdate = Array.isArray(entries)
      ? { hardState: (a as HardState | null) ?? null, entries, snapshot: null }
      : { hardState: (a as SaveUpdate).hardState ?? null, entries: (a as SaveUpdate).entries ?? [], snapshot: (a as SaveUpdate).snapshot ?? null };
    return this.enqueue((resolve, reject) => ({ type: 'save', update, resolve, reject }));
  }

  /**
   * Persist a snapshot made locally (RaftNode.compact()) and drop the stored
   * entries <= snapshot.meta.index, keeping the later ones. The snapshot must
   * cover a stored entry with the same index and term.
   */
  async saveCompaction(snapshot: Snapshot): Promise<void> {
    // The snapshot file (megabytes: checksum, write, fsync) is written before
    // the compaction queues, so the saves of new entries queued meanwhile do
    // not wait behind it: a replica that compacts keeps persisting, and so
    // keeps acknowledging and sending heartbeats. Until its checkpoint is
    // durable the file is a leftover that open() deletes.
    if (this.closed) throw new RaftStorageError('CLOSED', `raft storage in ${this.dir} is closed`);
    if (this.failure !== null) throw this.failedError();
    const meta = snapshot.meta;
    if (!Number.isSafeInteger(meta.index) || meta.index < 1 || !Number.isSafeInteger(meta.term) || meta.term < 0) {
      throw new RaftStorageError('INVALID', `snapshot meta ${meta.index}/${meta.term} is not a positive index and a term`);
    }
    if (meta.index === this.tail.snapshotIndex && meta.term === this.tail.snapshotTerm) return; // already compacted there
    if (meta.index <= this.tail.snapshotIndex) return this.enqueue((resolve, reject) => ({ type: 'compaction', snapshot, fileWritten: false, resolve, reject })); // refused in turn
    try {
      await this.writeSnapshotFile(snapshot);
    } catch (e) {
      this.fail(e);
      throw this.failedError();
    }
    return this.enqueue((resolve, reject) => ({ type: 'compaction', snapshot, fileWritten: true, resolve, reject }));
  }

  /** `snap-<index>-<term>.snap`: a temp file, fsynced, renamed, directory fsynced. */
  private async writeSnapshotFile(snap: Snapshot): Promise<void> {
    const name = snapName(snap.meta);
    const tmp = join(this.dir, `${name}.tmp`);
    const pieces = await snapshotFileInSlices(snap, () => new Promise((r) => setImmediate(r)));
    const fh = await open(tmp, 'w');
    try {
      // A chunk at a time, each flushed: one fsync of 12 MiB holds the file
      // system's journal long enough that the WAL's O_DSYNC writes queued
      // behind it (this replica's and its neighbours') wait hundreds of ms.
      let position = 0;
      for (const piece of pieces) {
        for (let at = 0; at < piece.length; at += SNAPSHOT_WRITE_CHUNK) {
          const chunk = piece.subarray(at, Math.min(piece.length, at + SNAPSHOT_WRITE_CHUNK));
          await writeAll(fh, chunk, position);
          position += chunk.length;
          if (chunk.length === SNAPSHOT_WRITE_CHUNK) await fh.datasync();
        }
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, join(this.dir, name));
    await fsyncDir(this.dir);
  }

  /** Another name for saveCompaction(). */
  saveSnapshot(snapshot: Snapshot): Promise<void> {
    return this.saveCompaction(snapshot);
  }

  /** Finish queued work, then close the active segment. Later calls fail with CLOSED. */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    const p = this.enqueue((resolve, reject) => ({ type: 'close', resolve, reject }));
    this.closed = true;
    return p;
  }

  /** Sizes the host uses to decide when to compact (e.g. entriesSinceSnapshot > a threshold). */
  stats(): StorageStats {
    return {
      segments: this.segments.length,
      walBytes: this.segments.reduce((sum, s) => sum + s.bytes, 0),
      snapshotIndex: this.tail.snapshotIndex,
      lastIndex: this.tail.lastIndex,
      entriesSinceSnapshot: this.tail.entries.length,
    };
  }

  // ------------------------------------------------------------ the queue

  private enqueue(make: (resolve: () => void, reject: (e: Error) => void) => Op): Promise<void> {
    if (this.closed) return Promise.reject(new RaftStorageError('CLOSED', `raft storage in ${this.dir} is closed`));
    if (this.failure !== null) return Promise.reject(this.failedError());
    if (this.queue.length >= MAX_QUEUED_OPS) {
      return Promise.reject(new RaftStorageError('QUEUE_FULL', `more than ${MAX_QUEUED_OPS} storage operations are waiting; await save() before the next`));
    }
    return new Promise<void>((resolve, reject) => {
      this.queue.push(make(resolve, reject));
      void this.pump();
    });
  }

  /** One loop drains the queue; saves that piled up during an fsync share the next one. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.queue.length > 0) {
        const op = this.queue[0];
        if (this.failure !== null && op.type !== 'close') {
          this.queue.shift();
          op.reject(this.failedError());
          continue;
        }
        if (op.type === 'save' && op.update.snapshot === null) {
          const group: Array<Extract<Op, { type: 'save' }>> = [];
          let bytes = 0;
          while (group.length < GROUP_COMMIT_MAX_SAVES && this.queue.length > 0) {
            const next = this.queue[0];
            if (next.type !== 'save' || next.update.snapshot !== null) break;
            const size = next.update.entries.reduce((sum, e) => sum + e.data.length + 64, 64);
            if (group.length > 0 && bytes + size > GROUP_COMMIT_MAX_BYTES) break;
            bytes += size;
            group.push(next);
            this.queue.shift();
          }
          await this.flushSaves(group);
        } else if (op.type === 'close') {
          this.queue.shift();
          await this.active.close().finally(this.releaseLock).then(op.resolve, op.reject);
        } else {
          this.queue.shift();
          await this.writeCheckpoint(op);
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  private failedError(): RaftStorageError {
    return new RaftStorageError('FAILED', `raft storage in ${this.dir} failed earlier and accepts nothing more (restart the replica): ${this.failure?.message}`);
  }

  /** A write or fsync failed: what reached the disk is unknown, so stop (the "fsyncgate" lesson). */
  private fail(e: unknown): void {
    this.failure = e instanceof Error ? e : new Error(String(e));
  }

  // ------------------------------------------------------------ writes

  private async flushSaves(group: Array<Extract<Op, { type: 'save' }>>): Promise<void> {
    const records: WalRecord[] = [];
    const accepted: typeof group = [];
    for (const op of group) {
      const { entries, hardState } = op.update;
      const problem = this.tail.appendProblem(entries) ?? (hardState === null ? null : hardStateProblem(hardState));
      if (problem !== null) {
        op.reject(new RaftStorageError('INVALID', `save refused: ${problem}`));
        continue;
      }
      for (const entry of this.tail.append(entries)) records.push({ kind: 'entry', entry });
      if (hardState !== null && !sameHardState(hardState, this.hardState)) {
        this.hardState = { ...hardState };
        records.push({ kind: 'hardState', hardState: this.hardState });
      }
      accepted.push(op);
    }
    if (records.length > 0) {
      try {
        // A large batch (a follower catching up takes up to its 4 MiB
        // in-flight bound of entries in one Ready; 30 MiB before raft's empty
        // append for a full window) is framed in slices.
        const batch = entryBytes(records) > ENCODE_IN_ONE_GO_BYTES ? await encodeBatchInSlices(records, () => new Promise((r) => setImmediate(r))) : encodeBatch(records);
        // Only await when a rotation is due: otherwise the write below is
        // handed to the thread pool in this same task, before the caller
        // (a leader sending its appends meanwhile) moves on.
        if (this.segments[this.segments.length - 1].bytes >= this.segmentMaxBytes) await this.rotateIfFull();
        const seg = this.segments[this.segments.length - 1];
        await writeAll(this.active, batch, seg.bytes); // durable on return: O_DSYNC
        seg.bytes += batch.length;
      } catch (e) {
        this.fail(e);
        for (const op of accepted) op.reject(this.failedError());
        return;
      }
    }
    for (const op of accepted) op.resolve();
  }

  private async rotateIfFull(): Promise<void> {
    const seg = this.segments[this.segments.length - 1];
    if (seg.bytes < this.segmentMaxBytes) return;
    const seq = seg.seq + 1;
    const fh = await writeNewSegment(this.dir, walName(seq), new Uint8Array(0), this.segmentMaxBytes); // empty, preallocated
    await this.active.close();
    this.active = fh;
    this.segments.push({ seq, bytes: 0 });
  }

  /**
   * Snapshot file first (temp, fsync, rename, fsync dir), then a new segment
   * starting with the checkpoint batch, then delete what it supersedes. Memory
   * changes only once the checkpoint is durable.
   */
  private async writeCheckpoint(op: Exclude<Op, { type: 'close' }>): Promise<void> {
    const snap = op.type === 'save' ? op.update.snapshot! : op.snapshot;
    const meta = snap.meta;
    let next: LogTail;
    let hardState = this.hardState;
    if (!Number.isSafeInteger(meta.index) || meta.index < 1 || !Number.isSafeInteger(meta.term) || meta.term < 0) {
      op.reject(new RaftStorageError('INVALID', `snapshot meta ${meta.index}/${meta.term} is not a positive index and a term`));
      return;
    }
    if (op.type === 'compaction') {
      if (meta.index === this.tail.snapshotIndex && meta.term === this.tail.snapshotTerm) {
        op.resolve(); // already compacted there
        return;
      }
      const term = this.tail.termAt(meta.index);
      if (meta.index <= this.tail.snapshotIndex || term !== meta.term) {
        if (op.fileWritten && (this.snapshot === null || snapName(this.snapshot.meta) !== snapName(meta))) await unlink(join(this.dir, snapName(meta))).catch(() => {});
        op.reject(
          new RaftStorageError(
            'INVALID',
            `compaction to ${meta.index}/${meta.term} refused: stored log has ` +
              `snapshot ${this.tail.snapshotIndex} and entries to ${this.tail.lastIndex}, term at ${meta.index} is ${term ?? 'none'}`,
          ),
        );
        return;
      }
      next = new LogTail(meta.index, meta.term, this.tail.entries.slice(meta.index - this.tail.snapshotIndex));
    } else {
      // InstallSnapshot (§7): the log restarts after the snapshot, then Ready's entries and hard state follow.
      if (meta.index <= this.tail.snapshotIndex) {
        op.reject(new RaftStorageError('INVALID', `installing snapshot ${meta.index} refused: it is not newer than the stored snapshot ${this.tail.snapshotIndex}`));
        return;
      }
      next = new LogTail(meta.index, meta.term, []);
      const { entries, hardState: hs } = op.update;
      const problem = next.appendProblem(entries) ?? (hs === null ? null : hardStateProblem(hs));
      if (problem !== null) {
        op.reject(new RaftStorageError('INVALID', `save refused: ${problem}`));
        return;
      }
      next.append(entries);
      if (hs !== null) hardState = { ...hs };
    }

    let batch: Uint8Array;
    try {
      // In slices: thousands of entries may follow the snapshot (record.ts encodeBatchInSlices).
      batch = await encodeBatchInSlices(
        [{ kind: 'checkpoint', snapshot: { index: meta.index, term: meta.term }, hardState }, ...next.entries.map((entry): WalRecord => ({ kind: 'entry', entry }))],
        () => new Promise((r) => setImmediate(r)),
      );
    } catch (e) {
      op.reject(new RaftStorageError('INVALID', `snapshot refused: the entries kept after it do not fit one batch (${MAX_BATCH_BYTES} bytes): ${(e as Error).message}`));
      return;
    }

    const oldSegments = this.segments.slice();
    const oldSnapshot = this.snapshot;
    const seq = oldSegments[oldSegments.length - 1].seq + 1;
    try {
      if (op.type !== 'compaction' || !op.fileWritten) await this.writeSnapshotFile(snap);
      const active = await writeNewSegment(this.dir, walName(seq), batch, this.segmentMaxBytes); // the commit point
      await this.active.close();
      this.active = active;
    } catch (e) {
      this.fail(e);
      op.reject(this.failedError());
      return;
    }
    this.snapshot = { meta: snap.meta, data: SNAPSHOT_ON_DISK }; // its file holds the bytes (loadSnapshot)
    this.hardState = hardState;
    this.tail.snapshotIndex = next.snapshotIndex;
    this.tail.snapshotTerm = next.snapshotTerm;
    this.tail.entries = next.entries;
    this.segments.splice(0, this.segments.length, { seq, bytes: batch.length });

    // Cleanup: failing here loses nothing (open() deletes leftovers), so it does not fail the storage.
    try {
      for (const s of oldSegments.reverse()) await unlink(join(this.dir, walName(s.seq)));
      if (oldSnapshot !== null && snapName(oldSnapshot.meta) !== snapName(meta)) await unlink(join(this.dir, snapName(oldSnapshot.meta)));
      await fsyncDir(this.dir);
    } catch {
      // leftovers are removed by the next open()
    }
    op.resolve();
  }
}
