// test/unit/raft-store-caught-up.test.ts -- RaftStore.caughtUp(), on which a
// reconcile pass skips its read barrier (controller.ts): three RaftStores on
// the simulation's memory network and disks, one manual clock. A replica is
// caught up only while it leads, after an entry of its own term committed
// (before that, entries its predecessor committed may be in its log but not
// known committed, so not applied), with everything committed applied.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openSimStores } from '../helpers/sim-stores.ts';

test('caughtUp: false on followers and on a new leader until an entry of its term commits; true once it has, with every commit applied', async () => {
  const { clock, stores, runUntil, close } = await openSimStores(7);
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
    await close();
  }
});
