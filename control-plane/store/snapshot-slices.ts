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

import { packStorePart as pack, storeFormatHeader } from '../../shared/codec.ts';
import type { DeploymentRecord, DesiredSnapshot, DesiredState, RevisionRecord, UnitRecord } from './desired-state.ts';

/** Longest a slice of packing runs before it yields. */
export const SLICE_MS = 4;

/**
 * A view of the state at this instant that later applies do not change, in
 * the snapshot's shared form: a revision's unitSpec and template, when they
 * are the very objects its deployment holds as current (apply shares them),
 * and a unit's spec, when it is its revision's unitSpec, are left out (each
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

function shareDeployment(d: DeploymentRecord): DeploymentRecord {
  const template = d.manifest.spec.template;
  const revisions = d.revisions.map((r) => {
    if (r.unitSpec !== d.unitSpec && r.template !== template) return r;
    const shared: Partial<RevisionRecord> = { ...r };
    if (r.unitSpec === d.unitSpec) delete shared.unitSpec;
    if (r.template === template) delete shared.template;
    return shared as RevisionRecord;
  });
  return { ...d, revisions };
}

function shareUnit(u: UnitRecord, d: DeploymentRecord | undefined): UnitRecord {
  const rev = d?.revisions.find((r) => r.specHash === u.specHash);
  if (rev === undefined || rev.unitSpec !== u.spec) return { ...u };
  const shared: Partial<UnitRecord> = { ...u };
  delete shared.spec;
  return shared as UnitRecord;
}

function mapHeader(n: number): Buffer {
  if (n < 16) return Buffer.from([0x80 | n]);
  if (n < 0x10000) return Buffer.from([0xde, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = 0xdf;
  b.writeUInt32BE(n, 1);
  return b;
}

function arrayHeader(n: number): Buffer {
  if (n < 16) return Buffer.from([0x90 | n]);
  if (n < 0x10000) return Buffer.from([0xdc, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = 0xdd;
  b.writeUInt32BE(n, 1);
  return b;
}

/**
 * `value`, a plain object, in the store format: its array fields item by item, the
 * others whole; `yieldNow` is awaited whenever a slice ran for `sliceMs`.
 * (`pack` copies what it writes, so each part is its own buffer.)
 */
export async function packInSlices(
  value: object,
  yieldNow: () => Promise<void> = () => new Promise((r) => setImmediate(r)),
  sliceMs = SLICE_MS,
  clock: () => number = () => performance.now(),
): Promise<Buffer> {
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  const parts: Buffer[] = [storeFormatHeader(), mapHeader(entries.length)];
  let sliceStart = clock();
  const maybeYield = async () => {
    if (clock() - sliceStart >= sliceMs) {
      await yieldNow();
      sliceStart = clock();
    }
  };
  for (const [key, v] of entries) {
    parts.push(pack(key));
    if (Array.isArray(v)) {
      parts.push(arrayHeader(v.length));
      for (const item of v) {
        parts.push(pack(item));
        await maybeYield();
      }
    } else {
      parts.push(pack(v));
      await maybeYield();
    }
  }
  return Buffer.concat(parts);
}
