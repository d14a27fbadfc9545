// test/unit/raft-store-snapshot-policy.test.ts -- when a replica takes a
// snapshot: once `snapshotEvery` entries were applied since the last one AND
// those entries hold at least SNAPSHOT_LOG_FRACTION (1: as many) of the
// last snapshot's bytes. A snapshot packs the whole state, so with the
// entry count alone a big state would be packed again every N small
// writes. Three RaftStores on the simulation's memory network and disks,
// one manual clock.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { StoreCommand } from '../../control-plane/store/desired-state.ts';
import { openSimStores, type SimStores } from '../helpers/sim-stores.ts';

const EVERY = 20;

/** Proposes every command at once on the leader and runs the clock until all are applied. */
async function write(sim: SimStores, cmds: StoreCommand[]): Promise<void> {
  const leader = sim.stores.find((s) => s.isLeader())!;
  let done = 0;
  for (const cmd of cmds)
    void leader.propose(cmd).then(
      () => done++,
      (e: Error) => assert.fail(`a write failed: ${e.message}`),
    );
  await sim.runUntil(`${cmds.length} writes applied`, () => done === cmds.length);
}

test('a big state is packed again only once the log since its last snapshot holds as many bytes, not every snapshotEvery entries', async () => {
  // the index of each snapshot, per replica, in the order taken (from the line each compaction logs)
  const compactions = new Map<string, number[]>();
  const sim = await openSimStores(21, () => 1, {
    snapshotEvery: EVERY,
    log: (id, line) => {
      const m = /^raft: snapshot at index (\d+); log compacted$/.exec(line);
      if (m) compactions.set(id, [...(compactions.get(id) ?? []), Number(m[1])]);
    },
  });
  try {
    await sim.runUntil('a leader caught up', () => sim.stores.some((s) => s.caughtUp()));
    const leader = sim.stores.find((s) => s.isLeader())!;
    const at = sim.clock.now();
    // A big state in few entries: 20 nodes with ~4 KiB of labels each. The
    // first snapshot has no earlier one to weigh against: the count decides.
    const labels = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`label-${i}`, 'x'.repeat(56)]));
    await write(
      sim,
      Array.from({ length: EVERY }, (_, i) => ({ type: 'node.register', at, node: { name: `node-${i}`, capacity: { cpu: 1000, memory: 1024 }, taints: [], labels } })),
    );
    await sim.runUntil('the first snapshot on every replica', () => sim.stores.every((s) => (compactions.get(s.id) ?? []).length === 1));
    const first = compactions.get(leader.id)![0];
    // Small writes: a cordon is ~60 bytes. The state packs to ~100 KiB, so
    // the next snapshot waits for ~100 KiB of them, about 1,700 entries.
    const cordon = (i: number): StoreCommand => ({ type: 'node.cordon', at, name: `node-${i % EVERY}`, unschedulable: i % 2 === 0 });
    await write(
      sim,
      Array.from({ length: 10 * EVERY }, (_, i) => cordon(i)),
    );
    for (const s of sim.stores)
      assert.deepEqual(compactions.get(s.id), [first], `${s.id} packed the whole state again after ${10 * EVERY} small entries (${EVERY} would do by count alone)`);
    // Enough small writes to log that fraction of it: the next snapshot comes.
    await write(
      sim,
      Array.from({ length: 120 * EVERY }, (_, i) => cordon(i)),
    );
    await sim.runUntil('a second snapshot on every replica', () => sim.stores.every((s) => (compactions.get(s.id) ?? []).length >= 2));
    for (const s of sim.stores) {
      const [, second] = compactions.get(s.id)!;
      // About 1,700 entries here; SNAPSHOT_LOG_FRACTION 0.5 took about 950.
      assert.ok(second - first > 65 * EVERY, `${s.id}'s second snapshot came ${second - first} entries after its first`);
    }
  } finally {
    await sim.close();
  }
});
