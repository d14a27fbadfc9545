// shared/codec.ts -- the one owner of every msgpack setting in the project.
// Nothing else imports msgpackr (test/unit/codec.test.ts checks it). Two
// uses, with two different promises:
//
//   * FRAMES on a socket (agent <-> control plane in shared/protocol/codec.ts,
//     replica <-> replica in control-plane/raft-transport/peer-transport.ts):
//     both ends run the same build, so the bytes need no version; they must
//     only be plain msgpack that decodes to plain trees.
//   * THE STORE FORMAT on disk: the data of every Raft log entry (a
//     StoreCommand) and of every snapshot (the desired state), written into
//     the WAL segments and snapshot files of control-plane/raft-storage/ and
//     read back by a later build, possibly a newer one. These bytes carry an
//     explicit format version, checked on every read.
//
// The settings, for both: useRecords: false -> plain msgpack maps (no
// msgpackr record extension), readable by any msgpack implementation, decoded
// to plain objects. structuredClone: false refuses msgpackr's back-reference
// extension, so a decoded value is a tree (no cycles, no shared nodes).
// skipValues: [undefined] leaves out absent optional fields instead of writing
// msgpackr's private "undefined" extension (msgpackr >= 1.10 reads the option;
// its typings do not list it yet). Byte arrays travel as msgpack bin and come
// back as Uint8Array (a Buffer).
//
// The store format, version 1 (STORE_FORMAT_VERSION):
//
//   offset 0  u8  0xc1   a byte msgpack never uses ("never used" in the spec),
//                        so versioned data cannot be mistaken for bare msgpack
//   offset 1  u8  version
//   offset 2  ... one msgpack value (the settings above)
//
// Version 0 is what builds before the version existed wrote: one bare msgpack
// value from msgpackr's default settings (maps, `undefined` as its extension),
// which the version-1 reader decodes the same way; it is read, never written.
// Any other version is refused with an error that names it, so a replica never
// applies bytes it does not understand.

import type { Options } from 'msgpackr';
// msgpackr's plain-JS build ('msgpackr/pack' resolves to it under Node), not
// its main entry, which loads the native string extractor: that one decodes a
// frame's strings as one latin1 string and hands out slices of it, so every
// string kept from a frame (a unit report's name, a record's spec hash or
// scheduling message) held the whole frame's text alive. A follower at 1,000
// agents / 10,000 units held 43.7 MiB of live heap instead of 51.3 (heap
// snapshots), and decoding costs the same (2.55 against 2.23 us for a
// unit-status frame, 4.27 against 4.18 us for a 1 KiB log entry).
import { Packr } from 'msgpackr/pack';
import { internStrings } from './intern.ts';

const options: Options & { skipValues: unknown[] } = {
  useRecords: false,
  mapsAsObjects: true,
  structuredClone: false,
  skipValues: [undefined],
};
const packr = new Packr(options);

/** One value as msgpack bytes, for a socket frame. */
export function packFrame(value: unknown): Buffer {
  return packr.pack(value);
}

/** The value of one msgpack frame. Throws on bytes that are not msgpack (callers turn that into a protocol error). */
export function unpackFrame(bytes: Uint8Array): unknown {
  return packr.unpack(bytes);
}

/** The marker byte that starts versioned store data (0xc1 is never used by msgpack). */
export const STORE_FORMAT_MARKER = 0xc1;
/** The store format this build writes. */
export const STORE_FORMAT_VERSION = 1;

/** Store data (a log entry's command, a snapshot's state) that this build cannot read. */
export class StoreFormatError extends Error {
  constructor(
    message: string,
    readonly version: number | null,
  ) {
    super(message);
    this.name = 'StoreFormatError';
  }
}

/**
 * The two bytes that open store data of the current version. With
 * packStorePartTransient, a large value can be written piece by piece (the
 * leader's snapshot, packed in slices: control-plane/store/snapshot-slices.ts):
 * the header, then the msgpack of the value's parts, is the same format
 * encodeStoreData writes.
 */
export function storeFormatHeader(): Buffer {
  return Buffer.from([STORE_FORMAT_MARKER, STORE_FORMAT_VERSION]);
}

/** msgpackr's RESET_BUFFER_MODE (pack.js; its `msgpackr/pack` types do not name it): the next pack writes over these bytes. */
const RESET_BUFFER_MODE = 1024;

/**
 * One part of a store value's msgpack, with the store format's settings, as
 * a view of the packer's own buffer that the next pack of any value writes
 * over: for a caller that copies it at once (a snapshot's parts into one
 * buffer), so no buffer is left behind per part (msgpackr hands out slices
 * of 8 KiB buffers it then drops).
 */
export function packStorePartTransient(value: unknown): Uint8Array {
  return packr.pack(value, RESET_BUFFER_MODE);
}

/**
 * The one msgpack value that starts at `at` in `bytes` (more may follow), with
 * the store format's settings, and the offset just past it: the reading side
 * of packStorePartTransient (control-plane/store/snapshot-slices.ts unpackInSlices).
 * Throws on bytes that are not msgpack.
 */
export function unpackStorePart(bytes: Uint8Array, at: number): { value: unknown; end: number } {
  let value: unknown;
  let end = -1;
  packr.unpackMultiple(bytes.subarray(at), (v: unknown, _start?: number, stop?: number) => {
    value = internStrings(v);
    end = at + (stop ?? Number.NaN);
    return false;
  });
  if (!(end > at)) throw new Error(`no msgpack value at offset ${at}`);
  return { value, end };
}

/** `value` in the current store format: marker, version, msgpack. */
export function encodeStoreData(value: unknown): Uint8Array {
  const body = packr.pack(value);
  const out = new Uint8Array(2 + body.length);
  out[0] = STORE_FORMAT_MARKER;
  out[1] = STORE_FORMAT_VERSION;
  out.set(body, 2);
  return out;
}

/** The format version of store data: 0 for bare msgpack written before versions existed. */
export function storeFormatVersion(bytes: Uint8Array): number {
  return bytes.length > 0 && bytes[0] === STORE_FORMAT_MARKER ? (bytes.length > 1 ? bytes[1] : -1) : 0;
}

/**
 * The value in store data of version 1 (or legacy version 0). Throws
 * StoreFormatError, with a one-line message naming `what` and the version,
 * for data of another version or bytes that do not decode.
 */
export function decodeStoreData(bytes: Uint8Array, what = 'store data'): unknown {
  if (bytes.length === 0) throw new StoreFormatError(`${what} is empty`, null);
  const version = storeFormatVersion(bytes);
  if (version === -1) throw new StoreFormatError(`${what} is truncated: a format marker without a version`, null);
  if (version !== 0 && version !== STORE_FORMAT_VERSION) {
    throw new StoreFormatError(
      `${what} is in store format version ${version}; this build reads versions 0 and ${STORE_FORMAT_VERSION} only (written by a newer mini-orchestrator?)`,
      version,
    );
  }
  try {
    // What a replica keeps: one instance of each short string (intern.ts), not one per record.
    return internStrings(packr.unpack(version === 0 ? bytes : bytes.subarray(2)));
  } catch (err) {
    const detail = err instanceof Error ? err.message.split('\n')[0].slice(0, 120) : 'unknown error';
    throw new StoreFormatError(`${what} (store format version ${version}) does not decode: ${detail}`, version);
  }
}
