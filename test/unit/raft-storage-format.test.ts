// test/unit/raft-storage-format.test.ts -- the pure byte formats of durable
// Raft storage: CRC-32C, WAL records and batches, the torn-tail verdict of
// scanSegment, and the snapshot file. Fed bytes, no files.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crc32c } from '../../control-plane/raft-storage/crc32c.ts';
import { decodeRecordAt, encodeBatch, encodeBatchInSlices, MAX_BATCH_BYTES, type WalRecord } from '../../control-plane/raft-storage/record.ts';
import { scanSegment } from '../../control-plane/raft-storage/segment-scan.ts';
import { decodeSnapshotFile, encodeSnapshotFile, snapshotFileInSlices } from '../../control-plane/raft-storage/snapshot-file.ts';
import type { Entry } from '../../control-plane/raft/types.ts';

function entry(index: number, term = 1, bytes = 40): Entry {
  return { term, index, kind: 'normal', data: new Uint8Array(bytes).fill(index & 0xff) };
}

function entryRecords(from: number, to: number): WalRecord[] {
  const out: WalRecord[] = [];
  for (let i = from; i <= to; i++) out.push({ kind: 'entry', entry: entry(i) });
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

test('crc32c gives the standard check value for "123456789" and can be computed in pieces', () => {
  const bytes = new TextEncoder().encode('123456789');
  assert.equal(crc32c(bytes), 0xe3069283);
  assert.equal(crc32c(bytes, 4, 9, crc32c(bytes, 0, 4)), 0xe3069283);
});

test("crc32c gives RFC 3720's 32-byte check values, and the byte-wise method's result at every length, offset and seed", () => {
  // iSCSI's test vectors (RFC 3720, B.4): long enough for the 8-bytes-a-step path.
  const of = (f: (i: number) => number) => Uint8Array.from({ length: 32 }, (_, i) => f(i));
  assert.equal(crc32c(of(() => 0)), 0x8a9136aa);
  assert.equal(crc32c(of(() => 0xff)), 0x62a8ab43);
  assert.equal(crc32c(of((i) => i)), 0x46dd794e);
  assert.equal(crc32c(of((i) => 31 - i)), 0x113fdb5c);
  // The plain table method, one byte at a time, as the reference.
  const table = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    return c >>> 0;
  });
  const byteWise = (b: Uint8Array, start: number, end: number, seed: number) => {
    let crc = ~seed >>> 0;
    for (let i = start; i < end; i++) crc = table[(crc ^ b[i]) & 0xff] ^ (crc >>> 8);
    return ~crc >>> 0;
  };
  let x = 12345;
  const next = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0);
  const data = Uint8Array.from({ length: 300 }, () => next() & 0xff);
  for (let start = 0; start < 20; start++) {
    for (let end = start; end <= data.length; end += 1 + (end % 7)) {
      const seed = next();
      assert.equal(crc32c(data, start, end, seed), byteWise(data, start, end, seed), `bytes [${start}, ${end}) from seed ${seed}`);
    }
  }
});

test('every record kind survives an encode/decode round trip, including a vote with non-ASCII characters', () => {
  const records: WalRecord[] = [
    { kind: 'checkpoint', snapshot: { index: 2 ** 40, term: 7 }, hardState: { term: 7, vote: null, commit: 2 ** 40 } },
    { kind: 'entry', entry: { term: 3, index: 9, kind: 'noop', data: new Uint8Array(0) } },
    { kind: 'entry', entry: entry(10, 3, 600) },
    { kind: 'hardState', hardState: { term: 3, vote: 'cp-é', commit: 9 } },
  ];
  const batch = encodeBatch(records);
  const got: WalRecord[] = [];
  let at = 0;
  while (at < batch.length) {
    const r = decodeRecordAt(batch, at);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    got.push(r.record);
    at = r.end;
  }
  assert.deepEqual(got.slice(0, -1), records);
  assert.deepEqual(got.at(-1), { kind: 'commit', batchBytes: batch.length - 13 });
});

test('a zero-filled region is never read as a record', () => {
  const r = decodeRecordAt(new Uint8Array(64), 0);
  assert.equal(r.ok, false);
});

test('a segment of whole batches scans clean with every batch in order', () => {
  const bytes = concat(encodeBatch(entryRecords(1, 3)), encodeBatch(entryRecords(4, 4)));
  const scan = scanSegment(bytes);
  assert.deepEqual(scan.tail, { state: 'clean' });
  assert.deepEqual(
    scan.batches.map((b) => b.records.map((r) => (r.record.kind === 'entry' ? r.record.entry.index : -1))),
    [[1, 2, 3], [4]],
  );
});

test('a last batch cut short at any byte is torn and cut at the start of that batch (or, cut within its leading zero bytes, reads as nothing written)', () => {
  const first = encodeBatch(entryRecords(1, 3));
  const last = encodeBatch(entryRecords(4, 6));
  for (let cut = 1; cut < last.length; cut++) {
    const scan = scanSegment(concat(first, last.subarray(0, cut)));
    if (last.subarray(0, cut).every((b) => b === 0)) {
      // The first bytes of a batch are its first record's length, high bytes zero: all that
      // reached the disk is zeros, as in a preallocated segment's unwritten rest.
      assert.equal(scan.tail.state, 'clean', `cut at ${cut}`);
      assert.equal(scan.batches.length, 1);
      continue;
    }
    assert.equal(scan.tail.state, 'torn', `cut at ${cut}`);
    assert.equal(scan.tail.state === 'torn' && scan.tail.truncateAt, first.length, `cut at ${cut}`);
    assert.equal(scan.batches.length, 1);
  }
});

test('zero bytes after the last committed batch are the unwritten rest of a preallocated segment: clean', () => {
  const first = encodeBatch(entryRecords(1, 3));
  const scan = scanSegment(concat(first, new Uint8Array(100_000)));
  assert.deepEqual(scan.tail, { state: 'clean' });
  assert.equal(scan.batches.length, 1);
  assert.equal(scan.batches[0].end, first.length);
  assert.deepEqual(scanSegment(new Uint8Array(4096)), { batches: [], tail: { state: 'clean' } }, 'a new segment, nothing written yet');
});

test('zero bytes followed by anything else are damage, not the unwritten rest', () => {
  const first = encodeBatch(entryRecords(1, 3));
  const tail = new Uint8Array(100_000);
  tail[70_000] = 1; // beyond the first 64 KiB block compared
  const scan = scanSegment(concat(first, tail));
  assert.equal(scan.tail.state, 'torn');
  assert.equal(scan.tail.state === 'torn' && scan.tail.truncateAt, first.length);
});

test('a last batch whose middle page was never written but whose commit record was (power loss) is torn, not corrupt', () => {
  const first = encodeBatch(entryRecords(1, 2));
  const last = encodeBatch(entryRecords(3, 12));
  last.fill(0, 100, 300); // a hole inside the batch; its later records and commit survive
  const scan = scanSegment(concat(first, last));
  assert.equal(scan.tail.state, 'torn');
  assert.equal(scan.tail.state === 'torn' && scan.tail.truncateAt, first.length);
});

test('damage followed by a later committed batch is corruption, reported at the damaged offset', () => {
  const a = encodeBatch(entryRecords(1, 2));
  const b = encodeBatch(entryRecords(3, 4));
  const c = encodeBatch(entryRecords(5, 6));
  const bytes = concat(a, b, c);
  bytes[a.length + 20] ^= 0xff; // inside the first record of batch b
  const scan = scanSegment(bytes);
  assert.equal(scan.tail.state, 'corrupt');
  assert.equal(scan.tail.state === 'corrupt' && scan.tail.offset, a.length);
  assert.equal(scan.batches.length, 1);
});

test('damage in a committed batch followed by a whole record of a later batch is corruption, but a fragment there is not', () => {
  const a = encodeBatch(entryRecords(1, 2));
  const b = encodeBatch(entryRecords(3, 4));
  const c = encodeBatch(entryRecords(5, 6));
  // b damaged; c's records complete but its commit missing: c could only be written after b's fsync.
  const wholeRecords = concat(a, b, c.subarray(0, c.length - 13));
  wholeRecords[a.length + 20] ^= 0xff;
  assert.equal(scanSegment(wholeRecords).tail.state, 'corrupt');
  // Only a fragment of c's first record: nothing valid proves b was acknowledged; cut from b.
  const fragment = concat(a, b, c.subarray(0, 30));
  fragment[a.length + 20] ^= 0xff;
  const scan = scanSegment(fragment);
  assert.equal(scan.tail.state, 'torn');
  assert.equal(scan.tail.state === 'torn' && scan.tail.truncateAt, a.length);
});

test('the snapshot file round-trips and any flipped bit is refused with a reason', () => {
  const snap = { meta: { index: 1234, term: 5 }, data: new TextEncoder().encode('desired state') };
  const bytes = encodeSnapshotFile(snap);
  assert.deepEqual(decodeSnapshotFile(bytes), snap);
  for (let i = 0; i < bytes.length; i++) {
    const damaged = bytes.slice();
    damaged[i] ^= 0x10;
    assert.equal(typeof decodeSnapshotFile(damaged), 'string', `flip at ${i}`);
  }
});

test('a snapshot file of another format version is refused naming the version, a foreign file as not a snapshot', () => {
  const bytes = encodeSnapshotFile({ meta: { index: 1, term: 1 }, data: new Uint8Array([1]) });
  const newer = bytes.slice();
  newer.set(new TextEncoder().encode('02'), 6);
  assert.equal(decodeSnapshotFile(newer), 'snapshot file format version "02"; this build reads version "01" only');
  const foreign = bytes.slice();
  foreign.set(new TextEncoder().encode('PNG'), 0);
  assert.equal(decodeSnapshotFile(foreign), 'bad magic (not a snapshot file)');
});

test('a snapshot file checksummed in slices is the same bytes in three pieces, the data not copied, yielding between slices', async () => {
  const data = new Uint8Array(10_000).map((_, i) => (i * 31) & 0xff);
  const snap = { meta: { index: 70, term: 3 }, data };
  let yields = 0;
  const pieces = await snapshotFileInSlices(snap, async () => void yields++, 1024);
  assert.equal(pieces.length, 3);
  assert.equal(pieces[1], data, 'the data piece is the snapshot data itself');
  const sliced = Buffer.concat(pieces);
  assert.deepEqual(new Uint8Array(sliced), encodeSnapshotFile(snap));
  assert.equal(yields, Math.ceil(data.length / 1024) - 1);
  assert.deepEqual(decodeSnapshotFile(sliced), snap);
});

test('a batch encoded in slices is the very bytes of one encoded at once, yielding once per slice of records written', async () => {
  const records: WalRecord[] = [{ kind: 'checkpoint', snapshot: { index: 9, term: 2 }, hardState: { term: 2, vote: 'cp-1', commit: 9 } }, ...entryRecords(10, 400)];
  const whole = encodeBatch(records);
  for (const sliceBytes of [1, 100, 4096, 1 << 20]) {
    let yields = 0;
    const sliced = await encodeBatchInSlices(records, async () => void yields++, sliceBytes);
    assert.deepEqual(sliced, whole, `slices of ${sliceBytes} bytes`);
    if (sliceBytes === 1) assert.equal(yields, records.length, 'a yield after every record');
    else if (sliceBytes > whole.length) assert.equal(yields, 0, 'one slice: no yield');
    else assert.ok(yields > 0 && yields < records.length, `${yields} yields for slices of ${sliceBytes} bytes`);
  }
  // Too big for a batch: refused before anything is written or awaited.
  let yielded = false;
  const huge: WalRecord[] = [{ kind: 'entry', entry: { term: 1, index: 1, kind: 'normal', data: new Uint8Array(MAX_BATCH_BYTES) } }];
  await assert.rejects(
    encodeBatchInSlices(huge, async () => void (yielded = true)),
    /exceeds MAX_BATCH_BYTES/,
  );
  assert.equal(yielded, false);
});
