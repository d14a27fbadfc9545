// test/unit/raft-sim.test.ts -- runs the deterministic Raft simulation
// (control-plane/raft/sim) over many seeds: 3 replicas, crashes losing
// unpersisted state, restarts, partitions, dropped/duplicated/reordered
// messages, client writes and read-index reads. The checker asserts Election
// Safety, Log Matching, Leader Completeness, State Machine Safety and
// linearizable reads after every step, then liveness and "no acknowledged
// write lost" after healing. A failure names the seed and its replay command.
//
// RAFT_SIM_SEEDS and RAFT_SIM_FROM widen the run (e.g. nightly): the default
// is 500 seeds, a few seconds on a 2-core machine.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runSimulation } from '../../control-plane/raft/sim/simulation.ts';

const SEEDS = Number(process.env.RAFT_SIM_SEEDS ?? 500);
const FROM = Number(process.env.RAFT_SIM_FROM ?? 1);
const STEPS_PER_SEED = 1500;

test(`${SEEDS} simulated seeds keep every Raft safety property and lose no acknowledged write`, () => {
  const failures: string[] = [];
  let acked = 0;
  let snapshots = 0;
  let reads = 0;
  let crashes = 0;
  for (let seed = FROM; seed < FROM + SEEDS; seed++) {
    const r = runSimulation(seed, { steps: STEPS_PER_SEED });
    acked += r.stats.acked;
    snapshots += r.stats.snapshotsInstalled;
    reads += r.stats.readsServed;
    crashes += r.stats.crashes;
    if (!r.ok) {
      failures.push(
        `seed ${seed} failed at step ${r.failedAtStep}: ${r.failure}\n  config: ${r.config}\n` +
          `  replay: npx tsx scripts/raft-sim.ts --seed ${seed} --steps ${STEPS_PER_SEED} --verbose`,
      );
    }
  }
  assert.deepEqual(failures, [], failures.join('\n'));
  // The schedule must actually exercise the interesting paths, or passing means little.
  assert.ok(acked > SEEDS * 10, `only ${acked} writes were acknowledged over ${SEEDS} seeds`);
  assert.ok(crashes > SEEDS, `only ${crashes} crashes over ${SEEDS} seeds`);
  assert.ok(snapshots > SEEDS / 5, `only ${snapshots} InstallSnapshots over ${SEEDS} seeds`);
  assert.ok(reads > SEEDS, `only ${reads} read-index reads served over ${SEEDS} seeds`);
});

test('the same seed replays to exactly the same run', () => {
  const lines1: string[] = [];
  const lines2: string[] = [];
  const a = runSimulation(12345, { steps: 400, trace: (l) => lines1.push(l) });
  const b = runSimulation(12345, { steps: 400, trace: (l) => lines2.push(l) });
  assert.equal(a.ok, true, a.failure);
  assert.deepEqual(a.stats, b.stats);
  assert.deepEqual(lines1, lines2);
  assert.ok(lines1.length > 100, `only ${lines1.length} trace lines`);
});
