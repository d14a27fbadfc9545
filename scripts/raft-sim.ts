// scripts/raft-sim.ts -- command line for the deterministic Raft simulation
// (control-plane/raft/sim/). It lives outside that folder because it reads
// the clock, argv and stdout, and the simulation itself stays pure.
//   npx tsx scripts/raft-sim.ts --seeds 1000          run seeds 1..1000
//   npx tsx scripts/raft-sim.ts --seed 42 --verbose   replay one seed with a trace
// Options: --from N (first seed, default 1), --steps N (random steps per seed);
// read by node:util parseArgs through shared/flags.ts.
// Exit code 1 if any seed fails; each failure prints its seed and the replay command.
// `--host` runs the simulation of the production host instead (scripts/host-sim.ts).

import { runSimulation, type SimResult } from '../control-plane/raft/sim/simulation.ts';
import { flagIndexes, parseCommandLine, UsageError, wholeNumber } from '../shared/flags.ts';

interface Args {
  seeds: number;
  from: number;
  seed: number | null;
  steps: number | undefined;
  verbose: boolean;
}

const OPTIONS = {
  seeds: { type: 'string' },
  from: { type: 'string' },
  seed: { type: 'string' },
  steps: { type: 'string' },
  verbose: { type: 'boolean' },
  host: { type: 'boolean' },
} as const;

/** A non-negative integer, or the one-line reason. */
function count(name: string, v: string | undefined, dflt: number): number | string {
  if (v === undefined) return dflt;
  return wholeNumber(v) ?? `--${name} needs a non-negative integer, got '${v}'`;
}

function simArgs(argv: string[]): Args | string {
  let values;
  try {
    ({ values } = parseCommandLine(argv, OPTIONS, { wording: { unknown: (flag) => `unknown option '${flag}' (use --seeds N, --from N, --seed S, --steps N, --verbose, --host)` } }));
  } catch (err) {
    if (err instanceof UsageError) return err.message;
    throw err;
  }
  const seeds = count('seeds', values.seeds, 100);
  const from = count('from', values.from, 1);
  const seed = values.seed === undefined ? null : count('seed', values.seed, 0);
  const steps = values.steps === undefined ? undefined : count('steps', values.steps, 0);
  for (const v of [seeds, from, seed, steps]) if (typeof v === 'string') return v;
  return { seeds: seeds as number, from: from as number, seed: seed as number | null, steps: steps as number | undefined, verbose: values.verbose === true };
}

function replayCommand(r: SimResult, steps: number | undefined): string {
  return `npx tsx scripts/raft-sim.ts --seed ${r.seed}${steps !== undefined ? ` --steps ${steps}` : ''} --verbose`;
}

function main(): number {
  const args = simArgs(process.argv.slice(2));
  if (typeof args === 'string') {
    console.error(`sim: ${args}`);
    return 2;
  }
  const seeds = args.seed !== null ? [args.seed] : Array.from({ length: args.seeds }, (_, i) => args.from + i);
  const started = performance.now();
  let failed = 0;
  const totals = { acked: 0, leaderTerms: 0, crashes: 0, snapshotsInstalled: 0, readsServed: 0 };
  for (const seed of seeds) {
    const r = runSimulation(seed, { steps: args.steps, trace: args.verbose ? (l) => console.log(l) : undefined });
    totals.acked += r.stats.acked;
    totals.leaderTerms += r.stats.leaderTerms;
    totals.crashes += r.stats.crashes;
    totals.snapshotsInstalled += r.stats.snapshotsInstalled;
    totals.readsServed += r.stats.readsServed;
    if (!r.ok) {
      failed++;
      console.log(`FAIL seed ${seed} at step ${r.failedAtStep}: ${r.failure}`);
      console.log(`  config: ${r.config}`);
      console.log(`  replay: ${replayCommand(r, args.steps)}`);
    } else if (args.seed !== null) {
      console.log(`seed ${seed} ok: ${JSON.stringify(r.stats)}`);
    }
  }
  const ms = Math.round(performance.now() - started);
  console.log(
    `${seeds.length - failed}/${seeds.length} seeds passed in ${ms} ms ` +
      `(acknowledged writes ${totals.acked}, leader terms ${totals.leaderTerms}, crashes ${totals.crashes}, ` +
      `snapshots installed ${totals.snapshotsInstalled}, reads served ${totals.readsServed})`,
  );
  return failed > 0 ? 1 : 0;
}

// `--host` hands the whole run to the production host's simulation (scripts/host-sim.ts),
// which has flags of its own: found among parseArgs' tokens, not by matching argv.
const hostAt = flagIndexes(process.argv.slice(2), 'host');
if (hostAt.length > 0) {
  const { hostSimMain } = await import('./host-sim.ts');
  process.exitCode = await hostSimMain(process.argv.slice(2).filter((_, i) => !hostAt.includes(i)));
} else {
  process.exitCode = main();
}
