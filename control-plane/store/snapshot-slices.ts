// control-plane/store/snapshot-slices.ts -- a snapshot of the desired state
// without stopping the event loop. Packing 10,000 deployments in one go is
// ~21 MiB of msgpack and 300-450 ms of CPU (measured on the 2-core machine):
// longer than the election timeout, so the leader that compacts loses its
// followers. Instead:
//   1. capture(): at the instant of the snapshot, a shallow copy of every
//      record (apply() only ever replaces a record's fields, never mutates
//      the objects they point to, so one level is a consistent view), a few
//      ms for 10,000 records;
//   2. packInSlices(): msgpack of that view, record by record, yielding to
//      the event loop whenever a slice has run for SLICE_MS. The bytes are
//      the store format of shared/codec.ts (its header, then msgpack of the
//      same object: a map of arrays of the records), so decodeStoreData() on
//      any replica reads them as it reads encodeStoreData(state.snapshot()).
//   3. unpackInSlices(): the other way, for a follower installing the
//      leader's snapshot: the same walk over the map of arrays, record by
//      record, yielding whenever a slice ran for SLICE_MS (decoding 12 MiB in
//      one go stopped a follower for 0.25-1.2 s, so it missed heartbeats and
//      campaigned).

import { decodeStoreData, packStorePartTransient, STORE_FORMAT_VERSION, StoreFormatError, storeFormatHeader, storeFormatVersion, unpackStorePart } from '../../shared/codec.ts';
import type { PodTemplate, UnitSpec } from '../../shared/model.ts';
import type { DeploymentRecord, DesiredSnapshot, DesiredState, RevisionRecord, UnitRecord } from './desired-state.ts';

/** Longest a slice of packing runs before it yields. */
export const SLICE_MS = 4;

/**
 * A view of the state at this instant that later applies do not change, in
 * the snapshot's shared form: a revision's unitSpec and template, when they
 * are the very objects its deployment holds as current (apply shares them),
 * and a unit's spec, when it is its revision's unitSpec, are written as null (each
 * would repeat ~600 bytes of the same manifest); DesiredState.restore() puts
 * the same object back in their place. That halves the snapshot of 10,000
 * deployments (2.2 to ~1.1 KiB each), and the restored state shares the
 * objects as the applied one does, instead of holding 3 copies of each.
 */
export function capture(state: DesiredState): DesiredSnapshot {
  const s = state.snapshot();
  return {
    ...s,
    deployments: s.deployments.map(shareDeployment),
    units: s.units.map((u) => shareUnit(u, state.deployments.get(u.deployment))),
    nodes: s.nodes.map((n) => ({ ...n })),
    services: (s.services ?? []).map((x) => ({ ...x })),
  };
}

// A shared field is written as null, not left out: its key keeps its place,
// so the restored record has its keys in the same order as the applied one
// (the replicas' states compare equal as JSON, and their snapshots byte for byte).
function shareDeployment(d: DeploymentRecord): DeploymentRecord {
  const template = d.manifest.spec.template;
  const revisions = d.revisions.map((r) => {
    if (r.unitSpec !== d.unitSpec && r.template !== template) return r;
    const shared = { ...r } as Omit<RevisionRecord, 'unitSpec' | 'template'> & { unitSpec: UnitSpec | null; template: PodTemplate | null };
    if (r.unitSpec === d.unitSpec) shared.unitSpec = null;
    if (r.template === template) shared.template = null;
    return shared as RevisionRecord;
  });
  return { ...d, revisions };
}

function shareUnit(u: UnitRecord, d: DeploymentRecord | undefined): UnitRecord {
  const rev = d?.revisions.find((r) => r.specHash === u.specHash);
  if (rev === undefined || rev.unitSpec !== u.spec) return { ...u };
  return { ...u, spec: null } as unknown as UnitRecord;
}

/**
 * Bytes appended to large chunks: a snapshot's parts are copied in as they
 * are packed, so packing leaves no buffer per part behind (msgpackr hands out
 * slices of 8 KiB buffers it then drops: a 12 MiB snapshot left 1,500 of them
 * as garbage outside the JS heap, on top of the concatenation). The first
 * chunk is as large as the bytes expected, so a snapshot the size of the last
 * one is one buffer and needs no concatenation.
 */
class ByteWriter {
  private readonly chunks: Buffer[] = [];
  private buf: Buffer;
  private at = 0;
  private total = 0;
  constructor(expected: number) {
    this.buf = Buffer.allocUnsafeSlow(Math.max(CHUNK_BYTES, Math.ceil(expected)));
  }
  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    this.chunks.push(this.buf.subarray(0, this.at));
    this.buf = Buffer.allocUnsafeSlow(Math.max(CHUNK_BYTES, n));
    this.at = 0;
  }
  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
    this.total += b.length;
  }
  /** A msgpack map (0x80, 0xde, 0xdf) or array (0x90, 0xdc, 0xdd) header for `n` items. */
  header(n: number, fix: number, b16: number, b32: number): void {
    if (n < 16) return this.bytes(Buffer.of(fix | n));
    const h = Buffer.allocUnsafe(n < 0x10000 ? 3 : 5);
    h[0] = n < 0x10000 ? b16 : b32;
    if (n < 0x10000) h.writeUInt16BE(n, 1);
    else h.writeUInt32BE(n, 1);
    this.bytes(h);
  }
  value(v: unknown): void {
    this.bytes(packStorePartTransient(v));
  }
  /** What was written: the first chunk's view when it held everything, else the chunks joined. */
  done(): Buffer {
    const last = this.buf.subarray(0, this.at);
    return this.chunks.length === 0 ? last : Buffer.concat([...this.chunks, last], this.total);
  }
}

/** The smallest chunk a snapshot is packed into (ByteWriter). */
const CHUNK_BYTES = 1024 * 1024;

/**
 * `value`, a plain object, in the store format: its array fields item by item, the
 * others whole; `yieldNow` is awaited whenever a slice ran for `sliceMs`.
 * `sizeHint`: the bytes expected (RaftStore gives the last snapshot's size and
 * the entries' since), so the bytes are one buffer, not chunks joined.
 */
export async function packInSlices(
  value: object,
  yieldNow: () => Promise<void> = () => new Promise((r) => setImmediate(r)),
  sliceMs = SLICE_MS,
  clock: () => number = () => performance.now(),
  sizeHint = 0,
): Promise<Buffer> {
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  const out = new ByteWriter(sizeHint);
  out.bytes(storeFormatHeader());
  out.header(entries.length, 0x80, 0xde, 0xdf);
  let sliceStart = clock();
  const maybeYield = async () => {
    if (clock() - sliceStart >= sliceMs) {
      await yieldNow();
      sliceStart = clock();
    }
  };
  for (const [key, v] of entries) {
    out.value(key);
    if (Array.isArray(v)) {
      out.header(v.length, 0x90, 0xdc, 0xdd);
      for (const item of v) {
        out.value(item);
        await maybeYield();
      }
    } else {
      out.value(v);
      await maybeYield();
    }
  }
  return out.done();
}

/** A msgpack map or array header at `at`: its length and where its first item starts; null for any other value. */
function header(bytes: Uint8Array, at: number, kind: 'map' | 'array'): { n: number; next: number } | null {
  const b = bytes[at];
  const [fix, fixMask, b16, b32] = kind === 'map' ? [0x80, 0xf0, 0xde, 0xdf] : [0x90, 0xf0, 0xdc, 0xdd];
  if ((b & fixMask) === fix) return { n: b & 0x0f, next: at + 1 };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b === b16 && at + 3 <= bytes.length) return { n: view.getUint16(at + 1), next: at + 3 };
  if (b === b32 && at + 5 <= bytes.length) return { n: view.getUint32(at + 1), next: at + 5 };
  return null;
}

/**
 * Store data (as packInSlices or encodeStoreData wrote it) decoded to the
 * same value as decodeStoreData, without a long stop: a top-level map's
 * array fields item by item, `yieldNow` awaited whenever a slice ran for
 * `sliceMs`. Data of another shape (legacy version 0, a value that is not a
 * map) is decoded in one go by decodeStoreData. Throws StoreFormatError
 * naming `what` for bytes that do not decode.
 */
export async function unpackInSlices(
  bytes: Uint8Array,
  what = 'store data',
  yieldNow: () => Promise<void> = () => new Promise((r) => setImmediate(r)),
  sliceMs = SLICE_MS,
  clock: () => number = () => performance.now(),
): Promise<unknown> {
  const top = storeFormatVersion(bytes) === STORE_FORMAT_VERSION ? header(bytes, 2, 'map') : null;
  if (top === null) return decodeStoreData(bytes, what);
  let sliceStart = clock();
  let at = top.next;
  const read = (): unknown => {
    try {
      const r = unpackStorePart(bytes, at);
      at = r.end;
      return r.value;
    } catch (err) {
      const detail = err instanceof Error ? err.message.split('\n')[0].slice(0, 120) : 'unknown error';
      throw new StoreFormatError(`${what} (store format version ${STORE_FORMAT_VERSION}) does not decode at byte ${at}: ${detail}`, STORE_FORMAT_VERSION);
    }
  };
  const out: Record<string, unknown> = {};
  for (let k = 0; k < top.n; k++) {
    const key = read();
    if (typeof key !== 'string') throw new StoreFormatError(`${what}: key ${k} of the top-level map is not a string`, STORE_FORMAT_VERSION);
    const arr = header(bytes, at, 'array');
    if (arr === null) {
      out[key] = read();
    } else {
      if (arr.n > bytes.length - arr.next) throw new StoreFormatError(`${what}: field ${key} says ${arr.n} items in ${bytes.length - arr.next} bytes`, STORE_FORMAT_VERSION);
      at = arr.next;
      const items: unknown[] = new Array(arr.n);
      for (let i = 0; i < arr.n; i++) {
        items[i] = read();
        if (clock() - sliceStart >= sliceMs) {
          await yieldNow();
          sliceStart = clock();
        }
      }
      out[key] = items;
    }
  }
  if (at !== bytes.length) throw new StoreFormatError(`${what}: ${bytes.length - at} bytes after the end of its value`, STORE_FORMAT_VERSION);
  return out;
}
