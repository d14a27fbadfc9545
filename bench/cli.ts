// bench/cli.ts -- how long `mo` takes as a user runs it: wall time of
// `node cli/mo.js get nodes` (the package's bin, running the prebuilt
// dist/mo.mjs) against a running cluster, median of 20, beside the floor
// (`node -e ''`, a Node process that does nothing) and the same command
// through tsx (MO_NO_BUNDLE=1, what every call cost before the bundle).

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { Cluster, REPO } from '../test/helpers/cluster.ts';
import { median } from './cluster.ts';

const SHIM = path.join(REPO, 'cli', 'mo.js');

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

export async function benchCliStartup(rounds = 20): Promise<{ moMs: number; floorMs: number; tsxMs: number; rounds: number }> {
  const c = await Cluster.start({});
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, MO_SERVER: c.urls.join(','), MO_TOKEN: c.token };
    delete env.MO_NO_BUNDLE;
    const floorMs = median(sample(rounds, ['-e', ''], env));
    const moMs = median(sample(rounds, [SHIM, 'get', 'nodes'], env));
    const tsxMs = median(sample(Math.min(rounds, 5), [SHIM, 'get', 'nodes'], { ...env, MO_NO_BUNDLE: '1' }));
    return { moMs, floorMs, tsxMs, rounds };
  } finally {
    await c.stop();
  }
}
