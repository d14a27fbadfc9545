// test/unit/raft-store-apply-slices.test.ts -- a replica applies a backlog
// of committed entries in slices, yielding to its event loop whenever one
// stretch of work has run for SLICE_MS: a follower back from a partition
// does not hold its loop (heartbeats, clients, timers) for the whole
// backlog. Three RaftStores on the simulation's memory network and disks;
// the follower's clock moves on a little at every reading, as a real
// clock does while a CPU works, so its slices do run out.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Clock } from '../../shared/clock.ts';
import type { StoreCommand } from '../../control-plane/store/desired-state.ts';
import { openSimStores } from '../helpers/sim-stores.ts';

const ENTRIES = 2000;

test('a follower back from a partition applies its 2,000-entry backlog in slices: other tasks run between them and see its state grow entry by entry', async () => {
  const working = new Set<string>();
  // A replica in `working` spends 0.5 ms between any two readings of its clock.
  const clockFor = (id: string, clock: Clock): Clock => {
    let spent = 0;
    return {
      now: () => clock.now() + (working.has(id) ? (spent += 0.5) : spent),
      timeout: (fn, ms) => clock.timeout(fn, ms),
      interval: (fn, ms) => clock.interval(fn, ms),
      cancel: (t) => clock.cancel(t),
      immediate: (fn) => clock.immediate(fn),
    };
  };
  const sim = await openSimStores(31, () => 1, { clockFor });
  try {
    await sim.runUntil('a leader caught up', () => sim.stores.some((s) => s.caughtUp()));
    const leader = sim.stores.find((s) => s.isLeader())!;
    const follower = sim.stores.find((s) => s !== leader)!;
    const others = sim.stores.filter((s) => s !== follower).map((s) => s.id);
    sim.net.partition([[follower.id], others]);
    const at = sim.clock.now();
    let done = 0;
    for (let i = 0; i < ENTRIES; i++) {
      const cmd: StoreCommand = { type: 'node.register', at, node: { name: `node-${i}`, capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} } };
      void leader.propose(cmd).then(
        () => done++,
        (e: Error) => assert.fail(`a write failed: ${e.message}`),
      );
    }
    await sim.runUntil(`${ENTRIES} writes applied on the majority`, () => done === ENTRIES);
    const from = follower.state.appliedIndex;
    const to = leader.state.appliedIndex;
    assert.ok(to - from >= ENTRIES, `the follower is ${to - from} entries behind`);

    working.add(follower.id);
    sim.net.heal();
    // Every check below runs as a task of its own (sim-stores' runUntil), between the follower's slices.
    const seen = new Set<number>();
    await sim.runUntil('the follower caught up', () => {
      seen.add(follower.state.appliedIndex);
      return follower.state.appliedIndex >= to;
    });
    assert.equal(follower.state.nodes.size, ENTRIES);
    // In one go per Ready (at most 512 committed entries each) it would be seen a handful of times.
    assert.ok(seen.size > ENTRIES / 10, `the follower's applied index was seen at ${seen.size} points while it applied ${to - from} entries`);
  } finally {
    await sim.close();
  }
});
