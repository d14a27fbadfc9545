// bench/workloads.ts -- what Deployments cost on a real cluster (3 replicas'
// worth of work on one, 4 agents, units as real processes):
//   * a rolling update of N units (default strategy 25%/25%, no probes)
//     until every unit runs the new revision and the old are gone, against
//     applying N fresh units in the same run (the same cluster, the same
//     template size): a rollout is N creates plus N stops, paced by
//     maxSurge/maxUnavailable;
//   * the agent's CPU (its own plus its reaped children's: probe processes)
//     over a 10 s window with 100 units each under a 1 s exec readiness
//     probe, against the same 100 units without probes;
//   * a crash loop: `false` (3 replicas) and a typo (2 replicas) for 60 s
//     beside a healthy deployment: units created, the leader's CPU and RSS,
//     the Raft log on disk, and the healthy unit's kill -9 replacement time.
// CPU is read from /proc/PID/stat (utime+stime, and cutime+cstime for
// reaped children), in clock ticks of 10 ms.

import fs from 'node:fs';
import path from 'node:path';
import { cpuMs, rssMiB } from '../shared/proc.ts';
import { Cluster, sleep, waitFor, webManifest } from '../test/helpers/cluster.ts';
import { BIG_NODES, UnitWatch } from './cluster.ts';

/** Bytes a directory's files take on disk, as `du` counts them: a preallocated WAL segment (sparse) counts what was written, not its 8 MiB size. */
function duBytes(dir: string): number {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += duBytes(p);
    else if (e.isFile()) total += fs.statSync(p).blocks * 512;
  }
  return total;
}

function manifest(name: string, replicas: number, env: string, probe?: unknown): unknown {
  const m = webManifest(name, replicas, { cpu: '10m', memory: '8Mi', env: [{ name: 'V', value: env }] }) as {
    spec: { template: { spec: { containers: Array<Record<string, unknown>> } } };
  };
  if (probe) m.spec.template.spec.containers[0].readinessProbe = probe;
  return m;
}

export async function benchRollout(n = 100): Promise<{ units: number; freshMs: number; rolloutMs: number; ratio: number }> {
  const c = await Cluster.start({ nodes: BIG_NODES });
  const w = new UnitWatch(c);
  try {
    await w.start();
    let t0 = performance.now();
    await c.api('PUT', '/v1/deployments/roll', manifest('roll', n, 'one'));
    const freshMs = (await w.until(() => w.running('roll').filter((u) => u.status.ready).length === n, 120000)) - t0;
    t0 = performance.now();
    await c.api('PUT', '/v1/deployments/roll', manifest('roll', n, 'two'));
    const done = () => {
      const units = [...w.units.values()].filter((u) => u.spec.deployment === 'roll');
      return units.length === n && units.every((u) => u.spec.revision === 2 && u.status.phase === 'Running' && u.status.ready);
    };
    const rolloutMs = (await w.until(done, 300000)) - t0;
    return { units: n, freshMs, rolloutMs, ratio: rolloutMs / freshMs };
  } finally {
    w.stop();
    await c.stop();
  }
}

export async function benchProbeCpu(units = 100, windowMs = 10000): Promise<{ units: number; withProbesPct: number; withoutPct: number }> {
  const node = [{ name: 'node-a', capacity: { cpu: 64000, memory: 65536 }, taints: [], labels: {} }];
  const measure = async (probe: unknown): Promise<number> => {
    const c = await Cluster.start({ nodes: node });
    try {
      await c.api('PUT', '/v1/deployments/p', manifest('p', units, 'x', probe));
      await waitFor(`${units} ready units`, async () => (await c.running('p')).filter((u) => u.status.ready).length === units, 60000, 200);
      await sleep(2000); // past the first probe of every unit
      const agent = c.agents.get('node-a')!.pid;
      const before = cpuMs(agent, true);
      await sleep(windowMs);
      return ((cpuMs(agent, true) - before) / windowMs) * 100;
    } finally {
      await c.stop();
    }
  };
  const withProbesPct = await measure({ exec: { command: ['true'] }, periodSeconds: 1 });
  const withoutPct = await measure(undefined);
  return { units, withProbesPct, withoutPct };
}

export async function benchCrashLoop(seconds = 60): Promise<{
  seconds: number;
  badUnits: number;
  typoUnits: number;
  leaderCpuPct: number;
  leaderRssMiB: number;
  raftBytes: number;
  healMs: number;
  events: number;
}> {
  const c = await Cluster.start();
  try {
    const small = (name: string, replicas: number, command: string[]) => ({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name },
      spec: { replicas, template: { spec: { containers: [{ name, command, resources: { requests: { cpu: '100m', memory: '64Mi' } } }] } } },
    });
    await c.api('PUT', '/v1/deployments/good', small('good', 2, ['sleep', '3600']));
    await waitFor('good running', async () => (await c.running('good')).length === 2, 15000);
    const leader = c.cps[0].pid;
    const cpu0 = cpuMs(leader);
    const t0 = performance.now();
    await c.api('PUT', '/v1/deployments/bad', small('bad', 3, ['false']));
    await c.api('PUT', '/v1/deployments/typo', small('typo', 2, ['sleeeep', '10']));
    await sleep(seconds * 1000 - 2000);
    const victim = (await c.running('good'))[0];
    const k0 = performance.now();
    process.kill(victim.status.pid, 'SIGKILL');
    const healMs = await waitFor(
      'the healthy unit replaced',
      async () => {
        const now = await c.running('good');
        return now.length === 2 && !now.some((u: { metadata: { name: string } }) => u.metadata.name === victim.metadata.name) ? performance.now() - k0 : 0;
      },
      10000,
      2,
    );
    await sleep(Math.max(0, seconds * 1000 - (performance.now() - t0)));
    const elapsed = performance.now() - t0;
    const units: Array<{ metadata: { name: string }; spec: { deployment: string } }> = (await c.api('GET', '/v1/units')).json.items;
    const highest = (d: string) => Math.max(0, ...units.filter((u) => u.spec.deployment === d).map((u) => Number(u.metadata.name.split('-').pop())));
    const events = (await c.api('GET', '/v1/events')).json.items.length;
    return {
      seconds,
      badUnits: highest('bad'),
      typoUnits: highest('typo'),
      leaderCpuPct: ((cpuMs(leader) - cpu0) / elapsed) * 100,
      leaderRssMiB: rssMiB(leader),
      raftBytes: duBytes(path.join(c.dir, 'cp-1')),
      healMs,
      events,
    };
  } finally {
    await c.stop();
  }
}
