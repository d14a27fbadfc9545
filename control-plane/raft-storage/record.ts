// control-plane/raft-storage/record.ts -- the byte layout of one write-ahead-log
// record, and of the batches records are grouped in. Pure: bytes in, values out
// (no node:* imports), so the format can be tested by feeding it bytes.
//
// One record:
//
//   offset 0  u32 BE  length   bytes that follow the 8-byte header (kind + payload), >= 1
//   offset 4  u32 BE  crc      CRC-32C of those `length` bytes
//   offset 8  u8      kind     1 checkpoint | 2 entry | 3 hardState | 4 commit
//   offset 9  ...     payload  fixed big-endian layout per kind (below)
//
// A zero-filled region (a file extended but never written) reads as length 0
// and is therefore never a record. The CRC does not cover the length field; a
// damaged length makes the CRC run over the wrong bytes and fail instead.
//
// Records are written in BATCHES, one batch per fsync: the records of one
// flush, then a `commit` record whose payload is the byte length of the batch
// before it. Replay applies a batch only when its commit record is read, so a
// save() is all-or-nothing and a torn tail is exactly "an uncommitted batch".
//
// Payloads (u64 = two u32 BE, high word first; values must be safe integers):
//   entry       u64 term, u64 index, u8 kind (0 normal, 1 noop), data bytes to the end
//   hardState   u64 term, u64 commit, u8 hasVote, vote as UTF-8 to the end
//   checkpoint  u64 snapshotIndex, u64 snapshotTerm, then a hardState payload
//   commit      u32 batchBytes

import type { Entry, HardState, SnapshotMeta } from '../raft/types.ts';
import { crc32c } from './crc32c.ts';

export const RECORD_HEADER_BYTES = 8;
/** Largest `length` accepted; an entry whose data needs more is refused by save(). */
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;
/** Largest batch (records before the commit record); bounds the torn-tail search too. */
export const MAX_BATCH_BYTES = 64 * 1024 * 1024;

const KIND_CHECKPOINT = 1;
const KIND_ENTRY = 2;
const KIND_HARD_STATE = 3;
const KIND_COMMIT = 4;

/**
 * A checkpoint starts a segment written by a snapshot: it resets replay to
 * "snapshot at this index, this hard state, no entries"; the entries of its
 * batch follow it.
 */
export type WalRecord =
  | { kind: 'checkpoint'; snapshot: SnapshotMeta; hardState: HardState }
  | { kind: 'entry'; entry: Entry }
  | { kind: 'hardState'; hardState: HardState }
  | { kind: 'commit'; batchBytes: number };

export type DecodeResult = { ok: true; record: WalRecord; end: number } | { ok: false; reason: string };

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

function writeU64(view: DataView, offset: number, value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${what} must be a non-negative safe integer, got ${value}`);
  }
  view.setUint32(offset, Math.floor(value / 0x1_0000_0000));
  view.setUint32(offset + 4, value >>> 0);
}

function readU64(view: DataView, offset: number): number {
  // high word < 2^21 keeps the result a safe integer; larger is not something we wrote.
  const high = view.getUint32(offset);
  if (high >= 0x20_0000) return Number.NaN;
  return high * 0x1_0000_0000 + view.getUint32(offset + 4);
}

function payloadBytes(rec: WalRecord): number {
  switch (rec.kind) {
    case 'entry':
      return 17 + rec.entry.data.length;
    case 'hardState':
      return 17 + (rec.hardState.vote === null ? 0 : utf8Encoder.encode(rec.hardState.vote).length);
    case 'checkpoint':
      return 16 + 17 + (rec.hardState.vote === null ? 0 : utf8Encoder.encode(rec.hardState.vote).length);
    case 'commit':
      return 4;
  }
}

function writeHardState(out: Uint8Array, view: DataView, at: number, hs: HardState): void {
  writeU64(view, at, hs.term, 'hardState.term');
  writeU64(view, at + 8, hs.commit, 'hardState.commit');
  out[at + 16] = hs.vote === null ? 0 : 1;
  if (hs.vote !== null) out.set(utf8Encoder.encode(hs.vote), at + 17);
}

/** Bytes one record occupies on disk, header included. */
export function encodedRecordBytes(rec: WalRecord): number {
  return RECORD_HEADER_BYTES + 1 + payloadBytes(rec);
}

/**
 * Write `rec` framed (header, kind, payload) into out[at...]; returns the end
 * offset. `out` must have encodedRecordBytes(rec) bytes free at `at`. Throws
 * RangeError for values the layout cannot hold (a caller bug, never a disk fault).
 */
export function writeRecord(out: Uint8Array, at: number, rec: WalRecord): number {
  const length = 1 + payloadBytes(rec);
  if (length > MAX_RECORD_BYTES) {
    throw new RangeError(`a ${rec.kind} record of ${length} bytes exceeds MAX_RECORD_BYTES (${MAX_RECORD_BYTES})`);
  }
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const p = at + RECORD_HEADER_BYTES + 1; // payload start
  switch (rec.kind) {
    case 'entry': {
      const e = rec.entry;
      out[at + 8] = KIND_ENTRY;
      writeU64(view, p, e.term, 'entry.term');
      writeU64(view, p + 8, e.index, 'entry.index');
      out[p + 16] = e.kind === 'noop' ? 1 : 0;
      out.set(e.data, p + 17);
      break;
    }
    case 'hardState':
      out[at + 8] = KIND_HARD_STATE;
      writeHardState(out, view, p, rec.hardState);
      break;
    case 'checkpoint':
      out[at + 8] = KIND_CHECKPOINT;
      writeU64(view, p, rec.snapshot.index, 'snapshot.index');
      writeU64(view, p + 8, rec.snapshot.term, 'snapshot.term');
      writeHardState(out, view, p + 16, rec.hardState);
      break;
    case 'commit':
      out[at + 8] = KIND_COMMIT;
      view.setUint32(p, rec.batchBytes);
      break;
  }
  view.setUint32(at, length);
  view.setUint32(at + 4, crc32c(out, at + RECORD_HEADER_BYTES, at + RECORD_HEADER_BYTES + length));
  return at + RECORD_HEADER_BYTES + length;
}

/** Frame a whole batch: the records, then their commit record, in one buffer (one write). */
export function encodeBatch(records: WalRecord[]): Uint8Array {
  const { out, commit } = batchBuffer(records);
  let at = 0;
  for (const rec of records) at = writeRecord(out, at, rec);
  writeRecord(out, at, commit);
  return out;
}

/**
 * encodeBatch's very bytes, with `yieldNow` awaited after every `sliceBytes`
 * of records written: a checkpoint rewrites every entry kept after its
 * snapshot, 5,000-10,000 of them while the fleet bench placed 50,000 units,
 * which held a replica 56-237 ms in one go. Throws as encodeBatch does,
 * before the first yield.
 */
export async function encodeBatchInSlices(records: WalRecord[], yieldNow: () => Promise<void>, sliceBytes = 256 * 1024): Promise<Uint8Array> {
  const { out, commit } = batchBuffer(records);
  let at = 0;
  let sliceEnd = sliceBytes;
  for (const rec of records) {
    at = writeRecord(out, at, rec);
    if (at >= sliceEnd) {
      await yieldNow();
      sliceEnd = at + sliceBytes;
    }
  }
  writeRecord(out, at, commit);
  return out;
}

/** The buffer a batch of `records` and its commit record fill, and that commit record. */
function batchBuffer(records: WalRecord[]): { out: Uint8Array; commit: WalRecord } {
  let batchBytes = 0;
  for (const rec of records) batchBytes += encodedRecordBytes(rec);
  if (batchBytes > MAX_BATCH_BYTES) {
    throw new RangeError(`a batch of ${batchBytes} bytes exceeds MAX_BATCH_BYTES (${MAX_BATCH_BYTES})`);
  }
  const commit: WalRecord = { kind: 'commit', batchBytes };
  return { out: new Uint8Array(batchBytes + encodedRecordBytes(commit)), commit };
}

function readHardState(bytes: Uint8Array, view: DataView, at: number, end: number): HardState | string {
  if (end - at < 17) return 'hard state payload too short';
  const term = readU64(view, at);
  const commit = readU64(view, at + 8);
  const hasVote = bytes[at + 16];
  if (Number.isNaN(term) || Number.isNaN(commit)) return 'hard state number out of range';
  if (hasVote > 1) return `hard state vote flag ${hasVote} is not 0 or 1`;
  let vote: string | null = null;
  if (hasVote === 1) {
    try {
      vote = utf8Decoder.decode(bytes.subarray(at + 17, end));
    } catch {
      return 'hard state vote is not UTF-8';
    }
  } else if (end !== at + 17) {
    return 'hard state without a vote has trailing bytes';
  }
  return { term, vote, commit };
}

/**
 * Read the record that starts at `offset`. Never throws: any bytes give either
 * a record whose CRC matched and whose payload parsed, or the reason they are
 * not one. Entry data is a copy, so the caller may drop the file buffer.
 */
export function decodeRecordAt(bytes: Uint8Array, offset: number): DecodeResult {
  const avail = bytes.length - offset;
  if (avail < RECORD_HEADER_BYTES) return { ok: false, reason: `record header cut short (${avail} of ${RECORD_HEADER_BYTES} bytes)` };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const length = view.getUint32(offset);
  if (length === 0) return { ok: false, reason: 'record length is 0' };
  if (length > MAX_RECORD_BYTES) return { ok: false, reason: `record length ${length} exceeds MAX_RECORD_BYTES` };
  const start = offset + RECORD_HEADER_BYTES;
  const end = start + length;
  if (end > bytes.length) return { ok: false, reason: `record of ${length} bytes runs past the end of the file` };
  const crc = view.getUint32(offset + 4);
  if (crc32c(bytes, start, end) !== crc) return { ok: false, reason: 'record checksum mismatch' };

  const kind = bytes[start];
  const p = start + 1;
  switch (kind) {
    case KIND_ENTRY: {
      if (end - p < 17) return { ok: false, reason: 'entry payload too short' };
      const term = readU64(view, p);
      const index = readU64(view, p + 8);
      const entryKind = bytes[p + 16];
      if (Number.isNaN(term) || Number.isNaN(index)) return { ok: false, reason: 'entry number out of range' };
      if (entryKind > 1) return { ok: false, reason: `entry kind ${entryKind} is not 0 (normal) or 1 (noop)` };
      const data = new Uint8Array(bytes.subarray(p + 17, end)); // a copy: `bytes` may be a Buffer, whose slice() is a view
      return { ok: true, end, record: { kind: 'entry', entry: { term, index, kind: entryKind === 1 ? 'noop' : 'normal', data } } };
    }
    case KIND_HARD_STATE: {
      const hs = readHardState(bytes, view, p, end);
      if (typeof hs === 'string') return { ok: false, reason: hs };
      return { ok: true, end, record: { kind: 'hardState', hardState: hs } };
    }
    case KIND_CHECKPOINT: {
      if (end - p < 16) return { ok: false, reason: 'checkpoint payload too short' };
      const index = readU64(view, p);
      const term = readU64(view, p + 8);
      if (Number.isNaN(index) || Number.isNaN(term)) return { ok: false, reason: 'checkpoint number out of range' };
      const hs = readHardState(bytes, view, p + 16, end);
      if (typeof hs === 'string') return { ok: false, reason: hs };
      return { ok: true, end, record: { kind: 'checkpoint', snapshot: { index, term }, hardState: hs } };
    }
    case KIND_COMMIT: {
      if (end - p !== 4) return { ok: false, reason: 'commit payload is not 4 bytes' };
      return { ok: true, end, record: { kind: 'commit', batchBytes: view.getUint32(p) } };
    }
    default:
      return { ok: false, reason: `unknown record kind ${kind}` };
  }
}
