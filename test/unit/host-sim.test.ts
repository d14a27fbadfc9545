// test/unit/host-sim.test.ts -- the production host under the seeded
// simulation (control-plane/sim/host-sim.ts): three RaftStores with their
// desired-state machines, registries, agent servers and controllers, and
// simulated agents on the real protocol, under crashes, restarts, partitions,
// connection resets, agent and unit crashes. Every seed must keep the
// architecture's invariants after every event and converge once healed;
// a failure names its seed and the command that replays it.
//
// HOST_SIM_SEEDS and HOST_SIM_FROM widen the run; the default is a few
// seconds. The long runs are `npm run sim -- --host --seeds N`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runHostSimulation } from '../../control-plane/sim/host-sim.ts';

const SEEDS = Number(process.env.HOST_SIM_SEEDS ?? 20);
const FROM = Number(process.env.HOST_SIM_FROM ?? 1);

test(`${SEEDS} seeds of the production host keep every invariant and converge after the faults heal`, async () => {
  const failures: string[] = [];
  const total = { acked: 0, crashes: 0, agentCrashes: 0, spawns: 0, terms: 0, unitCrashes: 0 };
  for (let seed = FROM; seed < FROM + SEEDS; seed++) {
    const r = await runHostSimulation(seed);
    total.acked += r.stats.writesAcked;
    total.crashes += r.stats.replicaCrashes;
    total.agentCrashes += r.stats.agentCrashes;
    total.spawns += r.stats.spawnsObeyed;
    total.terms += r.stats.leaderTerms;
    total.unitCrashes += r.stats.unitCrashes;
    if (!r.ok) failures.push(`seed ${seed} failed at ${r.failedAtMs} simulated ms: ${r.failure}\n  replay: npm run sim -- --host --seed ${seed} --verbose`);
  }
  assert.deepEqual(failures, [], failures.join('\n'));
  // The schedule must reach the interesting paths, or passing means little.
  assert.ok(total.acked >= SEEDS * 2, `only ${total.acked} acknowledged writes over ${SEEDS} seeds`);
  assert.ok(total.crashes >= SEEDS / 2, `only ${total.crashes} replica crashes over ${SEEDS} seeds`);
  assert.ok(total.terms > SEEDS, `only ${total.terms} leader terms over ${SEEDS} seeds`);
  assert.ok(total.spawns >= SEEDS * 3, `only ${total.spawns} spawns obeyed over ${SEEDS} seeds`);
  assert.ok(total.agentCrashes > 0 && total.unitCrashes > 0, `agent crashes ${total.agentCrashes}, unit crashes ${total.unitCrashes}`);
});

test('a seed of the production host replays to exactly the same run', async () => {
  const a: string[] = [];
  const b: string[] = [];
  const ra = await runHostSimulation(7, { trace: (l) => a.push(l) });
  const rb = await runHostSimulation(7, { trace: (l) => b.push(l) });
  assert.equal(ra.ok, true, ra.failure);
  assert.deepEqual(ra.stats, rb.stats);
  assert.deepEqual(a, b);
  assert.ok(a.length > 20, `only ${a.length} trace lines`);
  assert.ok(a.some((l) => l.includes('FAULT')) && a.some((l) => l.includes('scheduler:')), 'the trace shows faults and scheduling');
});
