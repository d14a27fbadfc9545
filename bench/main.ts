// bench/main.ts -- `npm run bench`: every figure the README quotes, each
// printed beside its target. Run on an otherwise idle machine; `--only NAME`
// runs one group (scheduler, storage, apply, unit-kill, agent-kill, memory,
// failover, writes, catch-up, rollout, probes, crashloop, services, isolation, cli,
// fleet). The fleet group takes --agents N (5000), --units N (50000),
// --duration S (300: the steady-state window) and --workers N (2).

import { benchScheduler } from './scheduler.ts';
import { benchStorage } from './raft-storage.ts';
import { benchAgentKill, benchApply, benchIdleMemory, benchUnitKill } from './cluster.ts';
import { benchCatchUp, benchFailover, benchWrites } from './raft.ts';
import { benchCrashLoop, benchProbeCpu, benchRollout } from './workloads.ts';
import { benchServiceProxy } from './services.ts';
import { benchIsolation } from './isolation.ts';
import { benchCliStartup } from './cli.ts';
import { benchMetrics } from './metrics.ts';
import { benchFleet, formatFleet } from './fleet.ts';

const only = (() => {
  const i = process.argv.indexOf('--only');
  return i >= 0 ? process.argv[i + 1] : null;
})();
const flag = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const n = Number(process.argv[i + 1]);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`bench: --${name}: expected an integer >= 1, got ${JSON.stringify(process.argv[i + 1] ?? '')}`);
    process.exit(2);
  }
  return n;
};
const want = (name: string) => only === null || only === name;
const f = (n: number, d = 1) => n.toFixed(d);
const verdict = (ok: boolean) => (ok ? 'meets target' : 'MISSES target');
const summary: string[] = [];

if (want('scheduler')) {
  console.log('\n== scheduler: placements per second (one unit at a time, assume() between) ==');
  const rows = await benchScheduler();
  for (const r of rows) summary.push(`scheduler @ ${r.nodes} nodes: ${r.placementsPerSec} placements/s (${r.placementsPerCpuSec} per cpu-second); a full pass for every unit, same run: ${r.fullPassPerSec}/s (${r.fullPassPerCpuSec} per cpu-second)${r.nodes === 5000 ? ` (target >= 20000: ${verdict(r.placementsPerSec >= 20000)})` : ''}`);
}

if (want('storage')) {
  console.log('\n== raft storage: fsynced saves ==');
  await benchStorage();
}

if (want('apply')) {
  console.log('\n== apply N replicas of sleep until all Running vs N child_process.spawn from a fresh small Node process (measured first) ==');
  for (const r of await benchApply([200, 1000])) {
    const line = `apply ${r.replicas}: cluster ${f(r.clusterMs, 0)} ms, plain spawn ${f(r.plainMs, 0)} ms, ratio ${f(r.ratio, 2)} (target <= 1.5: ${verdict(r.ratio <= 1.5)}); replica RSS with ${r.replicas} units ${f(r.cpRssMiB)} MiB${r.replicas === 1000 ? ` (target < 150: ${verdict(r.cpRssMiB < 150)})` : ''}`;
    console.log(line);
    summary.push(line);
  }
}

if (want('unit-kill')) {
  console.log('\n== unit kill -9 until its replacement is Running ==');
  const r = await benchUnitKill(30);
  const line = `unit kill -9 -> replacement Running: median ${f(r.medianMs)} ms, p99 ${f(r.p99Ms)} ms over ${r.samples.length} rounds (target median <= 20 ms: ${verdict(r.medianMs <= 20)})`;
  console.log(line);
  summary.push(line);
}

if (want('agent-kill')) {
  console.log('\n== agent SIGKILL until all its units are Running elsewhere (NotReady 150 ms after its connection closes) ==');
  const r = await benchAgentKill(5);
  const line = `agent SIGKILL -> units Running elsewhere: median ${f(r.medianMs, 0)} ms over ${r.samples.length} rounds [${r.samples.map((s) => f(s, 0)).join(', ')}] (target <= 300 ms: ${verdict(r.medianMs <= 300)}; the closed connection is noticed, NotReady ${150} ms after it if no reconnect)`;
  console.log(line);
  summary.push(line);
}

if (want('memory')) {
  console.log('\n== idle memory (RSS) ==');
  const r = await benchIdleMemory();
  const agentTotal = r.agentMiB + r.agentHelpersMiB;
  const line = `idle agent ${f(r.agentMiB)} MiB + helpers ${f(r.agentHelpersMiB)} MiB = ${f(agentTotal)} MiB (target < 60: ${verdict(agentTotal < 60)}); idle replica ${f(r.replicaMiB)} MiB`;
  console.log(line);
  summary.push(line);
}

if (want('failover')) {
  console.log('\n== leader failover: SIGKILL of the leader until the first acknowledged write (3 replicas) ==');
  const r = await benchFailover(12);
  const line = `leader failover: median ${f(r.medianMs, 0)} ms, p99 ${f(r.p99Ms, 0)} ms over ${r.samples.length} rounds, election timeout ${r.electionTimeoutMs} ms, followers campaign when the leader's connection closes (target median <= 100 ms: ${verdict(r.medianMs <= 100)})`;
  console.log(line);
  summary.push(line);
}

if (want('writes')) {
  console.log('\n== acknowledged writes per second through the API (3 replicas, fsync on, ~600-byte manifests) ==');
  // etcd 3.4's benchmark (put, new keys) measured on this machine kind; not run here (no etcd binary in the registries this project may use).
  const etcd: Record<number, number> = { 1: 594, 16: 2182 };
  for (const mode of ['new', 'overwrite'] as const) {
    for (const r of await benchWrites(5000, mode)) {
      const line = `writes (${mode === 'new' ? 'a new name every write, as etcd writes new keys' : 'overwriting 50 names per worker'}) at concurrency ${r.concurrency}: ${Math.round(r.writesPerSec)}/s (etcd 3.4 put of new keys on this machine kind: ~${etcd[r.concurrency]}/s: ${verdict(r.writesPerSec >= etcd[r.concurrency])})`;
      console.log(line);
      summary.push(line);
    }
  }
}

if (want('catch-up')) {
  console.log('\n== a restarted replica 10,000 entries behind catching up ==');
  const r = await benchCatchUp(10000);
  const line = `catch-up of ${r.entries} entries: ${f(r.catchUpMs, 0)} ms from restart to applied`;
  console.log(line);
  summary.push(line);
}

if (want('rollout')) {
  console.log('\n== rolling update of 100 units (25%/25%) vs applying 100 fresh units, same cluster ==');
  const r = await benchRollout(100);
  const line = `rollout of ${r.units} units: ${f(r.rolloutMs, 0)} ms until all run the new revision, ready, old ones gone; fresh apply of ${r.units}: ${f(r.freshMs, 0)} ms until all ready; ratio ${f(r.ratio, 2)} (a rollout is N creates plus N stops in steps of maxSurge/maxUnavailable)`;
  console.log(line);
  summary.push(line);
}

if (want('probes')) {
  console.log('\n== agent CPU with 100 units under 1 s exec readiness probes vs the same units without probes (10 s window) ==');
  const r = await benchProbeCpu(100);
  const line = `agent CPU with ${r.units} units: ${f(r.withProbesPct)}% of a core with 1 s exec probes (agent + its probe processes), ${f(r.withoutPct)}% without probes`;
  console.log(line);
  summary.push(line);
}

if (want('crashloop')) {
  console.log('\n== 60 s of crash loops (false x3, a typo x2) beside a healthy deployment ==');
  const r = await benchCrashLoop(60);
  const line = `crash loop for ${r.seconds} s: bad made ${r.badUnits} units, typo ${r.typoUnits} (back-off 1 s doubling to 60 s); leader CPU ${f(r.leaderCpuPct)}% of a core, RSS ${f(r.leaderRssMiB)} MiB, Raft data ${f(r.raftBytes / 1024, 0)} KiB, ${r.events} events kept; a healthy unit's kill -9 replaced in ${f(r.healMs, 0)} ms meanwhile`;
  console.log(line);
  summary.push(line);
}

if (want('services')) {
  console.log('\n== a Service proxy: a new connection per request, straight to the unit vs through a node proxy (same run) ==');
  for (const r of await benchServiceProxy(3000)) {
    const line = `service proxy at concurrency ${r.concurrency}: direct ${Math.round(r.direct.rps)} req/s (p50 ${f(r.direct.p50, 2)} ms, p99 ${f(r.direct.p99, 2)} ms), through the proxy ${Math.round(r.proxied.rps)} req/s (p50 ${f(r.proxied.p50, 2)} ms, p99 ${f(r.proxied.p99, 2)} ms): added p50 ${f(r.proxied.p50 - r.direct.p50, 2)} ms, p99 ${f(r.proxied.p99 - r.direct.p99, 2)} ms`;
    console.log(line);
    summary.push(line);
  }
}

if (want('isolation')) {
  console.log('\n== unit isolation: start() until Running and stop() until gone (cgroup removed), the agent\'s supervisor bare / with cgroups / namespaces / both, beside a plain spawn of the same `sleep` (same run, 40 units each, one at a time) ==');
  const rows = await benchIsolation(40);
  const bare = rows.find((r) => r.mode === 'agent, no isolation');
  for (const r of rows) {
    const added = bare && r !== bare && r.mode.startsWith('agent') ? ` (adds ${f(r.startP50 - bare.startP50)} ms to start, ${f(r.stopP50 - bare.stopP50)} ms to stop, p50)` : '';
    const line = r.skipped ? `isolation ${r.mode}: not measured: ${r.skipped}` : `isolation ${r.mode}: start p50 ${f(r.startP50)} ms, p99 ${f(r.startP99)} ms; stop p50 ${f(r.stopP50)} ms, p99 ${f(r.stopP99)} ms${added}`;
    console.log(line);
    summary.push(line);
  }
}

if (want('cli')) {
  console.log("\n== mo startup: wall time of `mo get nodes` against a running cluster, median of 20, beside `node -e ''` ==");
  const r = await benchCliStartup(20);
  const line = `mo get nodes: median ${f(r.moMs, 0)} ms over ${r.rounds} runs (target < 150 ms: ${verdict(r.moMs < 150)}); node -e '' floor ${f(r.floorMs, 0)} ms, so mo adds ${f(r.moMs - r.floorMs, 0)} ms; through tsx (MO_NO_BUNDLE=1, before the bundle) ${f(r.tsxMs, 0)} ms`;
  console.log(line);
  summary.push(line);
}

if (want('metrics')) {
  console.log('\n== /metrics: CPU per recorded request and Raft save, one scrape with 1,000 units and 4 agents (in process) ==');
  const r = await benchMetrics(1000);
  const line = `metrics: ${f(r.requestNs / 1000, 2)} us CPU per recorded API request, ${f(r.saveNs / 1000, 2)} us per recorded Raft save; a scrape with ${r.units} units and 4 agents ${f(r.scrapeMs, 1)} ms, ${f(r.scrapeBytes / 1024, 0)} KiB`;
  console.log(line);
  summary.push(line);
}

if (only === 'fleet') {
  // Not in a plain `npm run bench`: 5,000 agents and 50,000 units take minutes and most of the machine.
  const opts = { agents: flag('agents', 5000), units: flag('units', 50000), durationS: flag('duration', 300), workers: flag('workers', 2) };
  console.log(`\n== fleet: ${opts.agents} simulated agents (real protocol) against 3 real replicas, ${opts.units} units, ${opts.durationS} s steady state ==`);
  const r = await benchFleet(opts);
  for (const line of formatFleet(r)) {
    console.log(line);
    summary.push(line);
  }
}

console.log('\n== summary ==');
for (const s of summary) console.log(s);
