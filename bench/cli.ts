// bench/cli.ts -- how long `mo` takes as a user runs it: wall time of
// `node cli/mo.cjs get nodes` (the package's bin, running the prebuilt
// dist/mo.cjs) against a running cluster, median of 20, beside the floor
// (`node -e ''`, a Node process that does nothing, run in turns with it) and the same command
// through tsx (MO_NO_BUNDLE=1, what every call cost before the bundle).

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { Cluster, REPO } from '../test/helpers/cluster.ts';
import { median } from './cluster.ts';

const SHIM = path.join(REPO, 'cli', 'mo.cjs');

function timeRun(args: string[], env: NodeJS.ProcessEnv): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'], cwd: REPO });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${String(r.stderr).trim()}`);
  return ms;
}

function sample(n: number, args: string[], env: NodeJS.ProcessEnv): number[] {
  timeRun(args, env); // warm the page cache (and build the bundle if it is stale)
  return Array.from({ length: n }, () => timeRun(args, env));
}

/**
 * n runs of each command, taken in turns (a then b, then b then a, ...), so
 * that both medians span the same minutes: the floor drifts with the
 * machine's load by tens of milliseconds within a run.
 */
function sampleInTurns(n: number, a: string[], b: string[], env: NodeJS.ProcessEnv): [number[], number[]] {
  // Uncounted: warms the page cache, and mo's first run writes its bundle's code cache.
  timeRun(a, env);
  timeRun(b, env);
  const as: number[] = [];
  const bs: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i % 2 === 0) {
      as.push(timeRun(a, env));
      bs.push(timeRun(b, env));
    } else {
      bs.push(timeRun(b, env));
      as.push(timeRun(a, env));
    }
  }
  return [as, bs];
}

export async function benchCliStartup(rounds = 20): Promise<{ moMs: number; floorMs: number; tsxMs: number; rounds: number }> {
  const c = await Cluster.start({});
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, MO_SERVER: c.urls.join(','), MO_TOKEN: c.token };
    delete env.MO_NO_BUNDLE;
    const [floor, mo] = sampleInTurns(rounds, ['-e', ''], [SHIM, 'get', 'nodes'], env);
    const floorMs = median(floor);
    const moMs = median(mo);
    const tsxMs = median(sample(Math.min(rounds, 5), [SHIM, 'get', 'nodes'], { ...env, MO_NO_BUNDLE: '1' }));
    return { moMs, floorMs, tsxMs, rounds };
  } finally {
    await c.stop();
  }
}
