// control-plane/raft-storage/segment-scan.ts -- reads the bytes of one WAL
// segment into committed batches and decides what its tail is: clean, a torn
// write to cut off, or corruption to refuse. Pure (bytes in, verdict out), so
// every torn-write shape is tested by feeding bytes, no files.
//
// The fault model allows exactly one kind of damage: the LAST write before a
// crash may be missing, cut short, or (power loss) have some of its pages
// written and others not. Writes are serialized and each is fsynced before the
// next starts, so only the last batch of the last segment can be damaged that
// way. Hence the rule, applied at the first record that does not parse:
//
//   * no acknowledged data can follow a torn batch. If a valid record is found
//     after the damaged batch's own commit record, or a commit record of a
//     LATER batch appears, the damage sits under data that was fsynced and
//     acknowledged: that is corruption, and we refuse rather than guess;
//   * otherwise the damaged batch was the unacknowledged last write: cut the
//     file at the batch's start.
//
// "Valid" means length in range and CRC-32C matching; a later valid record is
// looked for at every byte offset, since damage may have shifted alignment.
//
// Segments are preallocated (disk-storage.ts): a file is made its full size
// when it is created, and its unwritten rest reads as zeros. So the data ends
// where a batch would start and nothing but zero bytes follows: that is a
// clean end, not damage (no record has length 0, so no data looks like it).
// A torn write that reached the disk as zeros alone ends the same way; it
// was never acknowledged, and there is nothing to cut.

import { decodeRecordAt, MAX_BATCH_BYTES, RECORD_HEADER_BYTES, type WalRecord } from './record.ts';

/** A record and the byte offset it starts at (for error messages). */
export interface PlacedRecord {
  offset: number;
  record: WalRecord;
}

/** Records of one batch (commit record excluded), [start, end) including the commit record. */
export interface Batch {
  start: number;
  end: number;
  records: PlacedRecord[];
}

export type SegmentTail =
  /** The data ends exactly after a committed batch (or the segment is empty), followed by zero bytes or nothing. */
  | { state: 'clean' }
  /** The last batch is incomplete: keep [0, truncateAt). `offset` is where damage was first seen. */
  | { state: 'torn'; truncateAt: number; offset: number; reason: string }
  /** Damage at `offset` with acknowledged data after it: never read past it, never cut it. */
  | { state: 'corrupt'; offset: number; reason: string };

export interface SegmentScan {
  batches: Batch[];
  tail: SegmentTail;
}

/** Size of the commit record that closes every batch (header + kind + u32). */
const COMMIT_RECORD_BYTES = RECORD_HEADER_BYTES + 1 + 4;

export function scanSegment(bytes: Uint8Array): SegmentScan {
  const batches: Batch[] = [];
  let pending: PlacedRecord[] = [];
  let batchStart = 0;
  let offset = 0;
  while (offset < bytes.length) {
    const r = decodeRecordAt(bytes, offset);
    if (!r.ok) {
      if (offset === batchStart && zeroFrom(bytes, offset)) break; // the unwritten, preallocated rest
      return { batches, tail: classifyDamage(bytes, batchStart, offset, r.reason) };
    }
    if (r.record.kind === 'commit') {
      if (r.record.batchBytes !== offset - batchStart) {
        // A CRC-valid record with the wrong content cannot come from a torn write.
        return {
          batches,
          tail: { state: 'corrupt', offset, reason: `commit record covers ${r.record.batchBytes} bytes but its batch has ${offset - batchStart}` },
        };
      }
      batches.push({ start: batchStart, end: r.end, records: pending });
      pending = [];
      batchStart = r.end;
    } else {
      pending.push({ offset, record: r.record });
    }
    offset = r.end;
  }
  if (pending.length > 0) {
    return { batches, tail: { state: 'torn', truncateAt: batchStart, offset: batchStart, reason: 'the last batch has no commit record' } };
  }
  return { batches, tail: { state: 'clean' } };
}

const ZEROS = new Uint8Array(64 * 1024);

/** Whether every byte from `from` to the end is zero (compared a 64 KiB block at a time). */
export function zeroFrom(bytes: Uint8Array, from: number): boolean {
  for (let o = from; o < bytes.length; o += ZEROS.length) {
    const n = Math.min(ZEROS.length, bytes.length - o);
    if (Buffer.compare(bytes.subarray(o, o + n), ZEROS.subarray(0, n)) !== 0) return false;
  }
  return true;
}

/** Decide whether damage at `damageAt` (inside the batch starting at `batchStart`) is a torn last write. */
function classifyDamage(bytes: Uint8Array, batchStart: number, damageAt: number, reason: string): SegmentTail {
  if (bytes.length - batchStart > MAX_BATCH_BYTES + COMMIT_RECORD_BYTES) {
    return { state: 'corrupt', offset: damageAt, reason: `${reason}, followed by more bytes than one batch can hold` };
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let ownCommitEnd = -1;
  for (let o = damageAt + 1; o + RECORD_HEADER_BYTES < bytes.length; o++) {
    // Cheap pre-check before paying for a CRC: the length must fit what is left.
    const length = view.getUint32(o);
    if (length === 0 || o + RECORD_HEADER_BYTES + length > bytes.length) continue;
    const r = decodeRecordAt(bytes, o);
    if (!r.ok) continue;
    if (ownCommitEnd >= 0 && o >= ownCommitEnd) {
      return { state: 'corrupt', offset: damageAt, reason: `${reason}; a valid ${r.record.kind} record follows at offset ${o}, after the damaged batch was committed` };
    }
    if (r.record.kind === 'commit') {
      if (o - r.record.batchBytes === batchStart) {
        ownCommitEnd = r.end; // the damaged batch's own commit record survived a page-reordered write
        continue;
      }
      return { state: 'corrupt', offset: damageAt, reason: `${reason}; a later committed batch ends at offset ${r.end}` };
    }
    // A valid non-commit record before any commit: part of the same torn batch.
  }
  return { state: 'torn', truncateAt: batchStart, offset: damageAt, reason };
}
