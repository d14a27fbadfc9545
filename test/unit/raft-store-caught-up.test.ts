// test/unit/raft-store-caught-up.test.ts -- RaftStore.caughtUp(), on which a
// reconcile pass skips its read barrier (controller.ts): three RaftStores on
// the simulation's memory network and disks, one manual clock. A replica is
// caught up only while it leads, after an entry of its own term committed
// (before that, entries its predecessor committed may be in its log but not
// known committed, so not applied), with everything committed applied.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../shared/clock.ts';
import { SeededRandom } from '../../shared/random.ts';
import { MemoryNetwork, type MemoryTransport } from '../../control-plane/sim/memory-network.ts';
import { MemoryDisk, MemoryStorage } from '../../control-plane/sim/memory-storage.ts';
import { RaftStore } from '../../control-plane/store/raft-store.ts';

test('caughtUp: false on followers and on a new leader until an entry of its term commits; true once it has, with every commit applied', async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const random = new SeededRandom(7);
  const net = new MemoryNetwork({ clock, random, latencyMs: () => 0.5 });
  const ids = ['cp-1', 'cp-2', 'cp-3'];
  // Step the clock one timer at a time, letting each one's promises settle, until `until` holds.
  const runUntil = async (what: string, until: () => boolean) => {
    for (let i = 0; i < 100_000 && !until(); i++) {
      await new Promise((r) => setImmediate(r));
      if (until()) return;
      if (!clock.runNext()) clock.skip(1);
    }
    assert.ok(until(), what);
  };
  let opened: RaftStore<MemoryTransport>[] | null = null;
  void Promise.all(
    ids.map(async (id) => {
      const storage = await MemoryStorage.open(new MemoryDisk(), { clock, writeDelayMs: () => 1 });
      return RaftStore.open({
        id,
        peers: new Map(ids.map((p) => [p, `sim://${p}`])),
        dataDir: `sim://${id}`,
        token: 'sim',
        log: () => {},
        timing: { tickMs: 10, electionTimeoutTicks: 25, heartbeatTicks: 5 },
        clock,
        random,
        storage: async () => storage,
        transport: net.transport(id, ids),
      });
    }),
  ).then((s) => (opened = s));
  await runUntil('three stores open', () => opened !== null);
  const stores = opened!;
  try {
    const leader = () => stores.find((s) => s.isLeader());
    // The moment one leads: its term's first entry (the empty entry a new leader appends) is not committed yet.
    await runUntil('a leader elected', () => leader() !== undefined);
    const l = leader()!;
    assert.equal(l.caughtUp(), false, 'a new leader before its first entry commits');
    await runUntil('the new leader caught up', () => l.caughtUp());
    assert.equal(l.status().appliedIndex, l.status().commitIndex);
    for (const f of stores.filter((s) => s !== l)) assert.equal(f.caughtUp(), false, `${f.id} follows`);
    // A write: once applied, still caught up.
    let applied = false;
    const before = l.status().appliedIndex;
    void l.propose({ type: 'node.register', at: clock.now(), node: { name: 'node-a', capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} } }).then(() => (applied = true));
    await runUntil('the write applied', () => applied);
    assert.ok(l.status().appliedIndex > before);
    assert.equal(l.caughtUp(), true);
  } finally {
    let closed = false;
    void Promise.all(stores.map((s) => s.close())).then(() => (closed = true));
    await runUntil('the stores closed', () => closed);
  }
});
