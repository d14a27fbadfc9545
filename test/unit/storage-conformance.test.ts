// test/unit/storage-conformance.test.ts -- one suite, two implementations of
// the storage RaftStore drives (StoreStorage: load, save, saveCompaction,
// close): DiskStorage on real files in a temp dir, and the simulation's
// MemoryStorage (control-plane/sim/memory-storage.ts) on a MemoryDisk. Both
// must give back what was saved after a close and a reopen, truncate a
// conflicting suffix (§5.3), refuse a gap, keep the later entries on a
// compaction and discard every entry on an installed snapshot (§7), refuse a
// second open and any save after close. What a crash loses is the memory
// disk's own contract (the last test); the real disk's crash points are in
// raft-storage.test.ts and test/e2e/raft-storage-crash.test.ts.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../shared/clock.ts';
import { DiskStorage, RaftStorageError } from '../../control-plane/raft-storage/index.ts';
import { MemoryDisk, MemoryStorage } from '../../control-plane/sim/memory-storage.ts';
import type { StoreStorage } from '../../control-plane/store/raft-store.ts';
import type { Entry, Snapshot } from '../../control-plane/raft/types.ts';

/** A place that outlives the storage opened on it: a directory, or a MemoryDisk. */
interface Place {
  open(): Promise<StoreStorage>;
}

const IMPLEMENTATIONS: Array<{ name: string; place: (t: TestContext) => Promise<Place> }> = [
  {
    name: 'DiskStorage',
    place: async (t) => {
      const dir = await mkdtemp(join(tmpdir(), 'storage-conformance-'));
      t.after(() => rm(dir, { recursive: true, force: true }));
      return { open: () => DiskStorage.open(dir, { log: () => {} }) };
    },
  },
  {
    name: 'MemoryStorage',
    place: async () => {
      const disk = new MemoryDisk();
      return { open: () => MemoryStorage.open(disk) };
    },
  },
];

function entry(index: number, term = 1): Entry {
  const data = new Uint8Array(24);
  for (let i = 0; i < data.length; i++) data[i] = (index * 31 + term * 7 + i) & 0xff;
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

function bytes(entries: Entry[]): number[][] {
  return entries.map((e) => Array.from(e.data));
}

function snapshot(index: number, term: number): Snapshot {
  return { meta: { index, term }, data: new Uint8Array([index, term, 42]) };
}

async function rejectsWith(p: Promise<unknown>, code: string, what: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof RaftStorageError, `expected a RaftStorageError, got ${String(e)}`);
    assert.equal(e.code, code);
    assert.match(e.message, what);
    return true;
  });
}

for (const impl of IMPLEMENTATIONS) {
  test(`${impl.name}: a first open is an empty log`, async (t) => {
    const s = await (await impl.place(t)).open();
    t.after(() => s.close());
    assert.deepEqual(await s.load(), { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] });
  });

  test(`${impl.name}: entries and hard state saved before close come back after a reopen, byte for byte`, async (t) => {
    const place = await impl.place(t);
    const s = await place.open();
    await s.save({ hardState: { term: 2, vote: 'cp-1', commit: 3 }, entries: range(1, 5, 2), snapshot: null });
    await s.close();
    const again = await place.open();
    t.after(() => again.close());
    const got = await again.load();
    assert.deepEqual(got.hardState, { term: 2, vote: 'cp-1', commit: 3 });
    assert.equal(summary(got.entries), '1@2 2@2 3@2 4@2 5@2');
    assert.deepEqual(bytes(got.entries), bytes(range(1, 5, 2)));
  });

  test(`${impl.name}: an entry at index i replaces the stored entries from i on (§5.3)`, async (t) => {
    const place = await impl.place(t);
    const s = await place.open();
    await s.save({ hardState: null, entries: range(1, 5, 1), snapshot: null });
    await s.save({ hardState: { term: 2, vote: null, commit: 0 }, entries: range(3, 4, 2), snapshot: null });
    await s.close();
    const again = await place.open();
    t.after(() => again.close());
    assert.equal(summary((await again.load()).entries), '1@1 2@1 3@2 4@2');
  });

  test(`${impl.name}: a save that would leave a gap is refused with INVALID, and the storage keeps working`, async (t) => {
    const s = await (await impl.place(t)).open();
    t.after(() => s.close());
    await s.save({ hardState: null, entries: range(1, 2), snapshot: null });
    await rejectsWith(s.save({ hardState: null, entries: range(4, 5), snapshot: null }), 'INVALID', /gap/);
    await s.save({ hardState: null, entries: range(3, 3), snapshot: null });
    assert.equal(summary((await s.load()).entries), '1@1 2@1 3@1');
  });

  test(`${impl.name}: a compaction keeps the later entries; one that matches no stored entry is refused`, async (t) => {
    const place = await impl.place(t);
    const s = await place.open();
    await s.save({ hardState: { term: 1, vote: 'cp-2', commit: 5 }, entries: range(1, 5), snapshot: null });
    await rejectsWith(s.saveCompaction(snapshot(3, 9)), 'INVALID', /compaction to 3\/9 refused/);
    await s.saveCompaction(snapshot(3, 1));
    await s.close();
    const again = await place.open();
    t.after(() => again.close());
    const got = await again.load();
    assert.deepEqual(got.snapshot?.meta, { index: 3, term: 1 });
    assert.deepEqual(Array.from(got.snapshot?.data ?? []), [3, 1, 42]);
    assert.equal(summary(got.entries), '4@1 5@1');
    assert.deepEqual(got.hardState, { term: 1, vote: 'cp-2', commit: 5 });
  });

  test(`${impl.name}: an installed snapshot discards every stored entry, then the Ready's entries and hard state follow (§7)`, async (t) => {
    const place = await impl.place(t);
    const s = await place.open();
    await s.save({ hardState: null, entries: range(1, 4), snapshot: null });
    await s.save({ hardState: { term: 3, vote: null, commit: 10 }, entries: range(11, 12, 3), snapshot: snapshot(10, 2) });
    await rejectsWith(s.save({ hardState: null, entries: [], snapshot: snapshot(8, 2) }), 'INVALID', /not newer/);
    await s.close();
    const again = await place.open();
    t.after(() => again.close());
    const got = await again.load();
    assert.deepEqual(got.snapshot?.meta, { index: 10, term: 2 });
    assert.equal(summary(got.entries), '11@3 12@3');
    assert.deepEqual(got.hardState, { term: 3, vote: null, commit: 10 });
  });

  test(`${impl.name}: saves handed in together all resolve, in call order`, async (t) => {
    const place = await impl.place(t);
    const s = await place.open();
    await Promise.all([1, 2, 3, 4].map((i) => s.save({ hardState: { term: i, vote: `cp-${i}`, commit: 0 }, entries: [entry(i, i)], snapshot: null })));
    await s.close();
    const again = await place.open();
    t.after(() => again.close());
    const got = await again.load();
    assert.equal(summary(got.entries), '1@1 2@2 3@3 4@4');
    assert.deepEqual(got.hardState, { term: 4, vote: 'cp-4', commit: 0 });
  });

  test(`${impl.name}: a second open while the first is open is refused with LOCKED; saves after close with CLOSED`, async (t) => {
    const place = await impl.place(t);
    const s = await place.open();
    await assert.rejects(place.open(), (e: unknown) => e instanceof RaftStorageError && e.code === 'LOCKED');
    await s.close();
    await rejectsWith(s.save({ hardState: null, entries: range(1, 1), snapshot: null }), 'CLOSED', /closed/);
    const again = await place.open();
    await again.close();
  });
}

test('MemoryStorage on a clock: a crash loses every save not yet durable, or keeps a prefix of them', async () => {
  const clock = new ManualClock();
  const disk = new MemoryDisk();
  const s = await MemoryStorage.open(disk, { clock, writeDelayMs: () => 5 });
  let done = 0;
  for (let i = 1; i <= 3; i++) void s.save({ hardState: null, entries: [entry(i)], snapshot: null }).then(() => done++);
  clock.runNext(); // the first save is durable at t=5; the others are due at the same time, in order
  await Promise.resolve();
  assert.equal(done, 1);
  assert.equal(summary(disk.entries), '1@1');
  s.crash(1); // the second save reached the disk as the process died; the third never will
  assert.equal(summary(disk.entries), '1@1 2@1');
  while (clock.runNext()) {
    /* nothing left should touch the disk */
  }
  assert.equal(summary(disk.entries), '1@1 2@1');
  const again = await MemoryStorage.open(disk);
  assert.equal(summary((await again.load()).entries), '1@1 2@1');
  await again.close();
});
