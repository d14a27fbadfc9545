// test/unit/raft-storage.test.ts -- DiskStorage on real files in a temp dir:
// round trips, conflict truncation (§5.3), hard state, torn tails cut off,
// corruption refused, snapshots with compaction (§7), crash points inside a
// compaction and group commit. A child process SIGKILLed while appending:
// test/e2e/raft-storage-crash.test.ts.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, copyFile, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DiskStorage, RaftStorageError } from '../../control-plane/raft-storage/index.ts';
import { scanSegment, zeroFrom } from '../../control-plane/raft-storage/segment-scan.ts';
import { DEFAULT_SEGMENT_MAX_BYTES, ENCODE_IN_ONE_GO_BYTES } from '../../control-plane/raft-storage/disk-storage.ts';
import { readStat } from '../../shared/proc.ts';
import type { Entry, Snapshot } from '../../control-plane/raft/types.ts';

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'raft-storage-test-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Entry data derived from index and term, so a misread entry cannot pass for a right one. */
function entry(index: number, term = 1, bytes = 32): Entry {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (index * 31 + term * 7 + i) & 0xff;
  return { term, index, kind: 'normal', data };
}

function range(from: number, to: number, term = 1): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(entry(i, term));
  return out;
}

function summary(entries: Entry[]): string {
  return entries.map((e) => `${e.index}@${e.term}`).join(' ');
}

/** Open, remembering the recovery log lines. Closed in t.after unless the test closes it first. */
async function openStorage(t: TestContext, dir: string, opts: { segmentMaxBytes?: number } = {}) {
  const lines: string[] = [];
  const storage = await DiskStorage.open(dir, { ...opts, log: (line) => lines.push(line) });
  t.after(() => storage.close());
  return { storage, lines };
}

async function walFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => n.startsWith('wal-')).sort();
}

async function lastWal(dir: string): Promise<string> {
  return join(dir, (await walFiles(dir)).at(-1)!);
}

test('entries and hard state saved before close are loaded back after reopening, byte for byte', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  assert.deepEqual(await storage.load(), { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] });
  const noop: Entry = { term: 1, index: 1, kind: 'noop', data: new Uint8Array(0) };
  await storage.save({ term: 1, vote: 'cp-1', commit: 0 }, [noop, ...range(2, 6)]);
  await storage.save({ hardState: { term: 1, vote: 'cp-1', commit: 6 }, entries: range(7, 9), snapshot: null });
  await storage.close();

  const { storage: again } = await openStorage(t, dir);
  const loaded = await again.load();
  assert.deepEqual(loaded.hardState, { term: 1, vote: 'cp-1', commit: 6 });
  assert.equal(loaded.snapshot, null);
  assert.deepEqual(loaded.entries, [noop, ...range(2, 9)]);
});

test('a save of more entry bytes than ENCODE_IN_ONE_GO_BYTES (framed in slices) is loaded back byte for byte, with the saves after it', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  const big: Entry[] = [];
  for (let i = 1; big.reduce((n, e) => n + e.data.length, 0) <= 2 * ENCODE_IN_ONE_GO_BYTES; i++) big.push(entry(i, 1, 1500));
  const last = big.length;
  await storage.save({ hardState: { term: 1, vote: 'cp-1', commit: 0 }, entries: big, snapshot: null });
  await storage.save({ hardState: { term: 1, vote: 'cp-1', commit: last }, entries: range(last + 1, last + 3), snapshot: null });
  await storage.close();

  const { storage: again } = await openStorage(t, dir);
  const loaded = await again.load();
  assert.deepEqual(loaded.hardState, { term: 1, vote: 'cp-1', commit: last });
  assert.deepEqual(loaded.entries, [...big, ...range(last + 1, last + 3)]);
});

test('an entry at index i replaces every stored entry from i on (conflict truncation, §5.3), also after reopening', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.save(null, range(1, 5, 1));
  await storage.save(null, range(3, 4, 2));
  assert.equal(summary((await storage.load()).entries), '1@1 2@1 3@2 4@2');
  await storage.close();
  const { storage: again } = await openStorage(t, dir);
  const loaded = await again.load();
  assert.equal(summary(loaded.entries), '1@1 2@1 3@2 4@2');
  assert.deepEqual(loaded.entries, [...range(1, 2, 1), ...range(3, 4, 2)]);
});

test('the latest term, vote and commit survive a restart, including a vote cleared by a new term', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.save({ term: 3, vote: 'cp-2', commit: 0 }, []);
  await storage.save({ term: 4, vote: null, commit: 0 }, []);
  await storage.close();
  const { storage: again } = await openStorage(t, dir);
  assert.deepEqual((await again.load()).hardState, { term: 4, vote: null, commit: 0 });
});

test('a save that would leave a gap in the log is refused, and the storage keeps working', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.save(null, range(1, 2));
  await assert.rejects(storage.save(null, range(4, 5)), (e: unknown) => e instanceof RaftStorageError && e.code === 'INVALID' && /gap/.test(e.message));
  await storage.save(null, range(3, 3));
  assert.equal(summary((await storage.load()).entries), '1@1 2@1 3@1');
});

// ------------------------------------------------------------ torn tails

/** Where a segment's data ends: after its last committed batch (a segment is preallocated, its rest zeros). */
async function dataEnd(file: string): Promise<number> {
  return scanSegment(await readFile(file)).batches.at(-1)?.end ?? 0;
}

/** `repaired`: the damage must be cut off, with a log line; zeros after the last batch are the preallocated rest and need nothing. */
const tornTails: Array<{ name: string; repaired: boolean; damage: (file: string, lastBatchStart: number) => Promise<void> }> = [
  {
    name: 'half a record',
    repaired: true,
    damage: async (file, lastBatchStart) => truncate(file, lastBatchStart + 20),
  },
  {
    name: 'garbage bytes',
    repaired: true,
    damage: async (file, lastBatchStart) => {
      await truncate(file, lastBatchStart);
      await appendFile(file, Buffer.from('this is not a record, it is what a dying disk wrote'));
    },
  },
  {
    name: 'zero-filled blocks',
    repaired: false,
    damage: async (file, lastBatchStart) => {
      await truncate(file, lastBatchStart);
      await appendFile(file, Buffer.alloc(8192));
    },
  },
  {
    name: 'a record with a flipped checksum byte',
    repaired: true,
    damage: async (file, lastBatchStart) => {
      const bytes = await readFile(file);
      bytes[lastBatchStart + 5] ^= 0x01; // inside the crc field of the last batch's first record
      await writeFile(file, bytes);
    },
  },
];

for (const { name, repaired, damage } of tornTails) {
  test(`a torn last write ending in ${name} is ${repaired ? 'cut off' : 'taken for the unwritten rest'} on open, load returns exactly the acknowledged prefix, and appending works after`, async (t) => {
    const dir = await tempDir(t);
    const { storage } = await openStorage(t, dir);
    await storage.save({ term: 1, vote: 'cp-1', commit: 2 }, range(1, 3));
    await storage.close();
    const file = await lastWal(dir);
    const goodBytes = await dataEnd(file);
    assert.equal((await stat(file)).size, DEFAULT_SEGMENT_MAX_BYTES, 'a segment is preallocated');
    // A second batch that we then damage: it stands for the write the crash interrupted.
    const { storage: writer } = await openStorage(t, dir);
    await writer.save({ term: 2, vote: null, commit: 3 }, range(4, 6, 2));
    await writer.close();
    await damage(file, goodBytes);

    const { storage: recovered, lines } = await openStorage(t, dir);
    const loaded = await recovered.load();
    assert.deepEqual(loaded.entries, range(1, 3));
    assert.deepEqual(loaded.hardState, { term: 1, vote: 'cp-1', commit: 2 });
    const bytes = await readFile(file);
    assert.equal(await dataEnd(file), goodBytes, 'the data ends with the last committed batch');
    assert.ok(zeroFrom(bytes, goodBytes), 'and nothing of the damage is left after it');
    assert.equal(bytes.length, DEFAULT_SEGMENT_MAX_BYTES, 'the segment is preallocated again');
    if (repaired) {
      assert.equal(lines.length, 1);
      assert.match(lines[0], /torn last write/);
      assert.ok(lines[0].includes(file), lines[0]);
    } else {
      assert.deepEqual(lines, []);
    }

    await recovered.save(null, range(4, 5, 3));
    await recovered.close();
    const { storage: third, lines: thirdLines } = await openStorage(t, dir);
    assert.equal(summary((await third.load()).entries), '1@1 2@1 3@1 4@3 5@3');
    assert.deepEqual(thirdLines, [], 'a clean file needs no repair');
  });
}

test('a crash while the very first checkpoint was being written opens as an empty log', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.close();
  const file = await lastWal(dir);
  await truncate(file, (await dataEnd(file)) - 3);
  const { storage: again, lines } = await openStorage(t, dir);
  assert.deepEqual(await again.load(), { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] });
  assert.equal(lines.length, 1);
  await again.save(null, range(1, 2));
  assert.equal(summary((await again.load()).entries), '1@1 2@1');
});

test('a damaged record in the middle of the log, followed by acknowledged ones, refuses to open and names the file and offset', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.save(null, range(1, 3));
  await storage.save(null, range(4, 6));
  await storage.save(null, range(7, 9));
  await storage.close();
  const file = await lastWal(dir);
  const bytes = await readFile(file);
  const batches = scanSegment(bytes).batches; // [checkpoint, 1-3, 4-6, 7-9]
  const damagedAt = batches[2].start;
  bytes[damagedAt + 30] ^= 0xff;
  await writeFile(file, bytes);

  await assert.rejects(DiskStorage.open(dir, { log: () => {} }), (e: unknown) => {
    assert.ok(e instanceof RaftStorageError);
    assert.equal(e.code, 'CORRUPT');
    assert.ok(e.message.includes('wal-0000000000000001.log'), e.message);
    assert.ok(e.message.includes(`offset ${damagedAt}`), e.message);
    return true;
  });
  assert.deepEqual(await readFile(file), bytes, 'a refused file is left untouched for the operator');
});

test('a torn batch in a segment that is not the last one is corruption, not a torn write', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir, { segmentMaxBytes: 300 });
  for (let i = 1; i <= 12; i++) await storage.save(null, [entry(i)]);
  await storage.close();
  const files = await walFiles(dir);
  assert.ok(files.length >= 3, `expected several segments, got ${files.join(' ')}`);
  const middle = join(dir, files[1]);
  await truncate(middle, (await stat(middle)).size - 5);
  await assert.rejects(DiskStorage.open(dir, { log: () => {} }), (e: unknown) => {
    assert.ok(e instanceof RaftStorageError && e.code === 'CORRUPT');
    assert.ok(e.message.includes(files[1]), e.message);
    return true;
  });
});

// ------------------------------------------------------------ snapshots and compaction

function snapshotAt(index: number, term: number): Snapshot {
  return { meta: { index, term }, data: new TextEncoder().encode(JSON.stringify({ appliedThrough: index })) };
}

test('a compaction writes the snapshot, deletes the segments and snapshot it supersedes, and load returns the snapshot plus the later entries', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir, { segmentMaxBytes: 1024 });
  for (let i = 1; i <= 60; i += 3) await storage.save({ term: 1, vote: 'cp-1', commit: i + 2 }, range(i, i + 2));
  const before = await walFiles(dir);
  assert.ok(before.length >= 3, `expected several segments, got ${before.length}`);

  await storage.saveCompaction(snapshotAt(40, 1));
  assert.deepEqual(storage.stats(), { segments: 1, walBytes: (await stat(await lastWal(dir))).size, snapshotIndex: 40, lastIndex: 60, entriesSinceSnapshot: 20 });
  let files = (await readdir(dir)).sort();
  assert.deepEqual(
    files.filter((f) => f.endsWith('.snap')),
    ['snap-0000000000000040-0000000000000001.snap'],
  );
  assert.equal((await walFiles(dir)).length, 1);
  assert.ok(!before.includes((await walFiles(dir))[0]), 'the checkpoint starts a new segment');

  await storage.save(null, range(61, 62));
  await storage.saveCompaction(snapshotAt(55, 1));
  files = (await readdir(dir)).sort();
  assert.deepEqual(
    files.filter((f) => f.endsWith('.snap')),
    ['snap-0000000000000055-0000000000000001.snap'],
    'the older snapshot file is gone',
  );
  await storage.close();

  const { storage: again } = await openStorage(t, dir);
  const loaded = await again.load();
  assert.deepEqual(loaded.snapshot, snapshotAt(55, 1));
  assert.deepEqual(loaded.entries, range(56, 62));
  assert.deepEqual(loaded.hardState, { term: 1, vote: 'cp-1', commit: 60 });
});

test('memory keeps no snapshot bytes: loadSnapshot (and load) read them back from the file, checksummed; a damaged or vanished file is an error, not another snapshot', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  assert.equal(await storage.loadSnapshot(), null, 'none yet');
  await storage.save({ term: 1, vote: 'cp-1', commit: 20 }, range(1, 20));
  const big: Snapshot = { meta: { index: 15, term: 1 }, data: new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 13) & 0xff) };
  await storage.saveCompaction(big);
  const back = await storage.loadSnapshot();
  assert.deepEqual(back?.meta, big.meta);
  assert.ok(back !== null && Buffer.from(back.data).equals(Buffer.from(big.data)), 'the same bytes, read from the file');
  const loaded = await storage.load();
  assert.ok(loaded.snapshot !== null && Buffer.from(loaded.snapshot.data).equals(Buffer.from(big.data)), 'load() on the same storage reads them back too');
  assert.deepEqual(summary(loaded.entries), summary(range(16, 20)));
  // One flipped byte in the data: the checksum says so.
  const file = join(dir, 'snap-0000000000000015-0000000000000001.snap');
  const bytes = await readFile(file);
  bytes[100] ^= 0xff;
  await writeFile(file, bytes);
  await assert.rejects(storage.loadSnapshot(), (e: unknown) => e instanceof RaftStorageError && e.code === 'CORRUPT' && /checksum mismatch/.test(e.message));
  await rm(file);
  await assert.rejects(storage.loadSnapshot(), /ENOENT/);
});

test('entries saved while a compaction writes its snapshot file are kept after it, also after reopening', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.save({ term: 1, vote: null, commit: 20 }, range(1, 20));
  const big: Snapshot = { meta: { index: 10, term: 1 }, data: new Uint8Array(3 * 1024 * 1024).fill(7) };
  // Not awaited in between: the saves queue while the compaction's file is checksummed and written.
  const compacted = storage.saveCompaction(big);
  const saves = [storage.save(null, range(21, 25)), storage.save({ term: 1, vote: null, commit: 25 }, range(26, 30))];
  await Promise.all([compacted, ...saves]);
  assert.deepEqual(storage.stats().snapshotIndex, 10);
  assert.equal(summary((await storage.load()).entries), summary(range(11, 30)));
  await storage.close();
  const { storage: again } = await openStorage(t, dir);
  const loaded = await again.load();
  assert.deepEqual(loaded.snapshot, big);
  assert.equal(summary(loaded.entries), summary(range(11, 30)));
  assert.deepEqual(loaded.hardState, { term: 1, vote: null, commit: 25 });
});

test('a compaction that does not match a stored entry is refused and changes nothing', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.save(null, range(1, 5, 2));
  await assert.rejects(storage.saveCompaction(snapshotAt(3, 1)), (e: unknown) => e instanceof RaftStorageError && e.code === 'INVALID');
  await assert.rejects(storage.saveCompaction(snapshotAt(9, 2)), (e: unknown) => e instanceof RaftStorageError && e.code === 'INVALID');
  assert.equal(summary((await storage.load()).entries), '1@2 2@2 3@2 4@2 5@2');
  assert.deepEqual(
    (await readdir(dir)).filter((f) => f.endsWith('.snap')),
    [],
  );
});

test('installing a snapshot from the leader discards every stored entry, then appends the Ready entries and hard state (§7)', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.save({ term: 1, vote: null, commit: 3 }, range(1, 8, 1)); // 4..8 are stale, from a deposed leader
  await storage.save({ snapshot: snapshotAt(6, 3), entries: range(7, 9, 3), hardState: { term: 3, vote: null, commit: 6 } });
  const expected = { hardState: { term: 3, vote: null, commit: 6 }, snapshot: snapshotAt(6, 3), entries: range(7, 9, 3) };
  assert.deepEqual(await storage.load(), expected);
  await storage.close();
  const { storage: again } = await openStorage(t, dir);
  assert.deepEqual(await again.load(), expected);
});

test('a crash after the snapshot file was renamed but before its checkpoint was written leaves the old state, and the orphan files are removed', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.save(null, range(1, 10));
  await storage.saveCompaction(snapshotAt(4, 1));
  await storage.close();
  // What saveCompaction(8) leaves behind if killed between the rename and the checkpoint segment.
  const { encodeSnapshotFile } = await import('../../control-plane/raft-storage/snapshot-file.ts');
  await writeFile(join(dir, 'snap-0000000000000008-0000000000000001.snap'), encodeSnapshotFile(snapshotAt(8, 1)));
  await writeFile(join(dir, 'snap-0000000000000009-0000000000000001.snap.tmp'), 'half a snap');
  const nextSeg = join(dir, 'wal-0000000000000003.log');
  await writeFile(nextSeg, Buffer.alloc(0));

  const { storage: again } = await openStorage(t, dir);
  const loaded = await again.load();
  assert.deepEqual(loaded.snapshot, snapshotAt(4, 1));
  assert.deepEqual(loaded.entries, range(5, 10));
  assert.deepEqual(
    (await readdir(dir)).filter((f) => f.includes('.snap')),
    ['snap-0000000000000004-0000000000000001.snap'],
  );
});

test('a crash after the checkpoint was written but before old segments were deleted opens from the checkpoint and deletes them', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir, { segmentMaxBytes: 400 });
  for (let i = 1; i <= 20; i++) await storage.save(null, [entry(i)]);
  const oldFiles = await walFiles(dir);
  const saved = await mkdtemp(join(tmpdir(), 'raft-storage-old-'));
  t.after(() => rm(saved, { recursive: true, force: true }));
  for (const f of oldFiles) await copyFile(join(dir, f), join(saved, f));
  await storage.saveCompaction(snapshotAt(15, 1));
  await storage.close();
  for (const f of oldFiles) await copyFile(join(saved, f), join(dir, f)); // as if the unlinks never reached the disk

  const { storage: again } = await openStorage(t, dir);
  const loaded = await again.load();
  assert.deepEqual(loaded.snapshot, snapshotAt(15, 1));
  assert.deepEqual(loaded.entries, range(16, 20));
  assert.equal((await walFiles(dir)).length, 1);
});

// ------------------------------------------------------------ group commit

test('concurrent saves are group-committed into fewer fsynced batches, in call order, and all resolve', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  const saves: Array<Promise<void>> = [];
  for (let i = 1; i <= 100; i++) saves.push(storage.save({ term: 1, vote: null, commit: i }, [entry(i)]));
  await Promise.all(saves);
  await storage.close();
  const batches = scanSegment(await readFile(await lastWal(dir))).batches.length - 1; // minus the first checkpoint
  assert.ok(batches < 100, `100 saves took ${batches} batches`);
  const { storage: again } = await openStorage(t, dir);
  const loaded = await again.load();
  assert.deepEqual(loaded.entries, range(1, 100));
  assert.equal(loaded.hardState.commit, 100);
});

test('a second open of a directory already open is refused with LOCKED, and succeeds once the first is closed', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await assert.rejects(DiskStorage.open(dir), (e: unknown) => e instanceof RaftStorageError && e.code === 'LOCKED');
  await storage.close();
  const { storage: again } = await openStorage(t, dir);
  assert.deepEqual((await again.load()).entries, []);
});

test("a LOCK left by a dead replica is taken over when its pid is ours, one of our threads, or another process's now; a live owner's is refused", async (t) => {
  const dir = await tempDir(t);
  const lock = join(dir, 'LOCK');
  const started = (pid: number) => readStat(pid)!.startTicks;
  // A restarted container numbers from 1 again: the dead owner's pid may be a thread of this process now.
  const thread = readdirSync('/proc/self/task')
    .map(Number)
    .find((tid) => tid !== process.pid)!;
  assert.ok(thread > 0, 'this process has a thread other than its main one');
  const takesOver = async (content: string, what: string) => {
    await writeFile(lock, content);
    const { storage } = await openStorage(t, dir);
    assert.equal((await readFile(lock, 'utf8')).trim(), `${process.pid} ${started(process.pid)}`, what);
    await storage.close();
  };
  await takesOver(`${thread}\n`, 'an old-format lock naming one of our threads');
  await takesOver(`${thread} 1\n`, 'a lock naming one of our threads');
  await takesOver(`${process.pid}\n`, 'our own pid');
  // The parent (the test runner) is alive: with another start time it is not the process that wrote the lock.
  await takesOver(`${process.ppid} 1\n`, 'a live pid whose start time differs');
  // The same parent with its real start time, or in the old format, holds the lock.
  for (const content of [`${process.ppid} ${started(process.ppid)}\n`, `${process.ppid}\n`]) {
    await writeFile(lock, content);
    await assert.rejects(DiskStorage.open(dir), (e: unknown) => e instanceof RaftStorageError && e.code === 'LOCKED' && e.message.includes(`process ${process.ppid}`), content);
  }
});

test('saves after close are refused with a CLOSED error', async (t) => {
  const dir = await tempDir(t);
  const { storage } = await openStorage(t, dir);
  await storage.close();
  await assert.rejects(storage.save(null, [entry(1)]), (e: unknown) => e instanceof RaftStorageError && e.code === 'CLOSED');
});
