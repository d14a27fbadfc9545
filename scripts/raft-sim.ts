// scripts/raft-sim.ts -- command line for the deterministic Raft simulation
// (control-plane/raft/sim/). It lives outside that folder because it reads
// the clock, argv and stdout, and the simulation itself stays pure.
//   npx tsx scripts/raft-sim.ts --seeds 1000          run seeds 1..1000
//   npx tsx scripts/raft-sim.ts --seed 42 --verbose   replay one seed with a trace
// Options: --from N (first seed, default 1), --steps N (random steps per seed).
// Exit code 1 if any seed fails; each failure prints its seed and the replay command.
// `--host` runs the simulation of the production host instead (scripts/host-sim.ts).

import { runSimulation, type SimResult } from '../control-plane/raft/sim/simulation.ts';

interface Args {
  seeds: number;
  from: number;
  seed: number | null;
  steps: number | undefined;
  verbose: boolean;
}

function parseArgs(argv: string[]): Args | string {
  const args: Args = { seeds: 100, from: 1, seed: null, steps: undefined, verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const num = (): number | string => {
      const v = Number(argv[++i]);
      return Number.isInteger(v) && v >= 0 ? v : `${a} needs a non-negative integer, got '${argv[i] ?? ''}'`;
    };
    let v: number | string;
    switch (a) {
      case '--seeds':
        v = num();
        if (typeof v === 'string') return v;
        args.seeds = v;
        break;
      case '--from':
        v = num();
        if (typeof v === 'string') return v;
        args.from = v;
        break;
      case '--seed':
        v = num();
        if (typeof v === 'string') return v;
        args.seed = v;
        break;
      case '--steps':
        v = num();
        if (typeof v === 'string') return v;
        args.steps = v;
        break;
      case '--verbose':
        args.verbose = true;
        break;
      default:
        return `unknown option '${a}' (use --seeds N, --from N, --seed S, --steps N, --verbose)`;
    }
  }
  return args;
}

function replayCommand(r: SimResult, steps: number | undefined): string {
  return `npx tsx scripts/raft-sim.ts --seed ${r.seed}${steps !== undefined ? ` --steps ${steps}` : ''} --verbose`;
}

function main(): number {
  const args = parseArgs(process.argv.slice(2));
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

if (process.argv.slice(2).includes('--host')) {
  // The production host under the simulation: scripts/host-sim.ts.
  const { hostSimMain } = await import('./host-sim.ts');
  process.exitCode = await hostSimMain(process.argv.slice(2).filter((a) => a !== '--host'));
} else {
  process.exitCode = main();
}
