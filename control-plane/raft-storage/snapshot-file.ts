// control-plane/raft-storage/snapshot-file.ts -- the byte layout of one
// snapshot file, `snap-<index>-<term>.snap`. Pure: bytes in, values out.
//
//   offset 0   8 bytes  magic "MOSNAP01": "MOSNAP", then the format version "01"
//   offset 8   u64 BE   meta.index   (two u32, high word first)
//   offset 16  u64 BE   meta.term
//   offset 24  u64 BE   data length
//   offset 32  ...      data (the state machine's bytes, opaque here)
//   end - 4    u32 BE   CRC-32C of everything before it
//
// Snapshot files are written to a temp name, fsynced and renamed, so a torn
// snapshot file is not part of the fault model; the CRC is there so that if
// one is ever damaged, the replica refuses to start instead of restoring junk.

import type { Snapshot } from '../raft/types.ts';
import { crc32c } from './crc32c.ts';

const MAGIC = new TextEncoder().encode('MOSNAP01');
const HEADER_BYTES = 32;
const TRAILER_BYTES = 4;

function setU64(view: DataView, at: number, value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${what} must be a non-negative safe integer, got ${value}`);
  view.setUint32(at, Math.floor(value / 0x1_0000_0000));
  view.setUint32(at + 4, value >>> 0);
}

function getU64(view: DataView, at: number): number {
  const high = view.getUint32(at);
  return high >= 0x20_0000 ? Number.NaN : high * 0x1_0000_0000 + view.getUint32(at + 4);
}

/** The file's first HEADER_BYTES: magic, index, term, data length. */
function fileHeader(snap: Snapshot): Uint8Array {
  const header = new Uint8Array(HEADER_BYTES);
  const view = new DataView(header.buffer);
  header.set(MAGIC, 0);
  setU64(view, 8, snap.meta.index, 'snapshot.meta.index');
  setU64(view, 16, snap.meta.term, 'snapshot.meta.term');
  setU64(view, 24, snap.data.length, 'snapshot data length');
  return header;
}

/** The file's last TRAILER_BYTES: the CRC of everything before. */
function fileTrailer(crc: number): Uint8Array {
  const trailer = new Uint8Array(TRAILER_BYTES);
  new DataView(trailer.buffer).setUint32(0, crc);
  return trailer;
}

export function encodeSnapshotFile(snap: Snapshot): Uint8Array {
  const header = fileHeader(snap);
  const out = new Uint8Array(HEADER_BYTES + snap.data.length + TRAILER_BYTES);
  out.set(header, 0);
  out.set(snap.data, HEADER_BYTES);
  out.set(fileTrailer(crc32c(snap.data, 0, snap.data.length, crc32c(header))), HEADER_BYTES + snap.data.length);
  return out;
}

/** Bytes checksummed between two yields of snapshotFileInSlices (~1-5 ms of CRC on the 2-core machine). */
export const CRC_SLICE_BYTES = 256 * 1024;

/**
 * The same file as encodeSnapshotFile, as three pieces to write one after the
 * other: its header, the snapshot's own data (not copied: a copy of 12 MiB
 * was garbage the replica's heap kept long after the file was written) and
 * its trailer. `yieldNow` is awaited after every CRC_SLICE_BYTES of checksum:
 * the byte-wise CRC of a 12 MiB snapshot is 50-300 ms of CPU, longer than a
 * heartbeat on a busy machine.
 */
export async function snapshotFileInSlices(snap: Snapshot, yieldNow: () => Promise<void>, sliceBytes = CRC_SLICE_BYTES): Promise<Uint8Array[]> {
  const header = fileHeader(snap);
  let crc = crc32c(header);
  for (let at = 0; at < snap.data.length; at += sliceBytes) {
    crc = crc32c(snap.data, at, Math.min(snap.data.length, at + sliceBytes), crc);
    if (at + sliceBytes < snap.data.length) await yieldNow();
  }
  return [header, snap.data, fileTrailer(crc)];
}

/** The snapshot in `bytes` (its data a view of them), or the reason they are not one. Never throws. */
export function decodeSnapshotFile(bytes: Uint8Array): Snapshot | string {
  const f = parseSnapshotFile(bytes);
  if (typeof f === 'string') return f;
  if (crc32c(bytes, 0, f.crcAt) !== f.crc) return 'checksum mismatch';
  return f.snapshot();
}

/** The same as decodeSnapshotFile, with `yieldNow` awaited after every CRC_SLICE_BYTES of checksum (a leader reading its snapshot back for a follower). */
export async function decodeSnapshotFileInSlices(bytes: Uint8Array, yieldNow: () => Promise<void>, sliceBytes = CRC_SLICE_BYTES): Promise<Snapshot | string> {
  const f = parseSnapshotFile(bytes);
  if (typeof f === 'string') return f;
  let crc = 0;
  for (let at = 0; at < f.crcAt; at += sliceBytes) {
    crc = crc32c(bytes, at, Math.min(f.crcAt, at + sliceBytes), crc);
    if (at + sliceBytes < f.crcAt) await yieldNow();
  }
  if (crc !== f.crc) return 'checksum mismatch';
  return f.snapshot();
}

/** Header and length checks; the checksum is the caller's. */
function parseSnapshotFile(bytes: Uint8Array): { crcAt: number; crc: number; snapshot: () => Snapshot } | string {
  if (bytes.length < HEADER_BYTES + TRAILER_BYTES) return `file of ${bytes.length} bytes is too short to be a snapshot`;
  // The magic's last two characters are the file format's version ("01").
  const isMagic = (upTo: number) => MAGIC.subarray(0, upTo).every((b, i) => bytes[i] === b);
  if (!isMagic(MAGIC.length)) {
    if (!isMagic(MAGIC.length - 2)) return 'bad magic (not a snapshot file)';
    const version = String.fromCharCode(bytes[MAGIC.length - 2], bytes[MAGIC.length - 1]).replace(/[^\x20-\x7e]/g, '?');
    return `snapshot file format version "${version}"; this build reads version "01" only`;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const index = getU64(view, 8);
  const term = getU64(view, 16);
  const dataLength = getU64(view, 24);
  if (Number.isNaN(index) || Number.isNaN(term) || Number.isNaN(dataLength)) return 'header number out of range';
  if (HEADER_BYTES + dataLength + TRAILER_BYTES !== bytes.length) return `header says ${dataLength} data bytes but the file has ${bytes.length - HEADER_BYTES - TRAILER_BYTES}`;
  const crcAt = HEADER_BYTES + dataLength;
  return {
    crcAt,
    crc: view.getUint32(crcAt),
    // A view of the caller's file buffer, not a copy: both are the file's size, and
    // copying 71 MiB held a leader reading its snapshot back for a follower
    // past an election timeout. Callers pass a buffer of their own (a file read).
    snapshot: () => ({ meta: { index, term }, data: new Uint8Array(bytes.buffer, bytes.byteOffset + HEADER_BYTES, crcAt - HEADER_BYTES) }),
  };
}
