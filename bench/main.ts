// bench/main.ts -- `npm run bench`: every figure the README quotes, each
// printed beside its target (docs/benchmarks.md: how each group measures).
// Run on an otherwise idle machine; `--only NAME` runs one group (scheduler,
// storage, apply, unit-kill, agent-kill, memory, failover, writes, big-state,
// unit-memory, catch-up, snapshot-catch-up, rollout, probes, crashloop, services,
// isolation, cli, metrics, kube, fleet). The fleet group runs only by name
// and takes --agents N (5000), --units N (50000), --duration S (300: the
// steady-state window) and --workers N (2).

import { oneOf, parseCommandLine, wholeNumber } from '../shared/flags.ts';
import { benchScheduler } from './scheduler.ts';
import { benchStorage } from './raft-storage.ts';
import { benchAgentKill, benchApply, benchIdleMemory, benchUnitKill, mean, median, pct } from './cluster.ts';
import { benchPm2Restart, PM2_VERSION } from './pm2.ts';
import { CLOSE_GRACE_MS } from '../control-plane/registry/node-registry.ts';
import { WARM_UP_MS, WINDOW_MAX_MS, WINDOW_WRITES, benchCatchUp, benchEtcdWrites, benchFailover, benchSnapshotCatchUp, benchWrites, type WriteFigure } from './raft.ts';
import { benchCrashLoop, benchProbeCpu, benchRollout } from './workloads.ts';
import { benchServiceProxy } from './services.ts';
import { benchIsolation } from './isolation.ts';
import { benchCliStartup } from './cli.ts';
import { benchMetrics } from './metrics.ts';
import { benchKubeViews } from './kube.ts';
import { LEADER_STOP_TARGET_MS, LoopWatch } from './loop-watch.ts';
import { benchBigState, type ReplicaPhase as BigStateReplica } from './big-state.ts';
import { benchFleet, formatFleet } from './fleet.ts';

// Ctrl-C or a SIGTERM mid-run: exit through process.exit, so that the
// 'exit' hooks of the clusters and etcd members this run started kill them
// by pid and remove their temp dirs (test/helpers/cluster.ts, etcd.ts). A
// group with a handler of its own (fleet) is left to it.
for (const [sig, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  process.on(sig, () => {
    if (process.listenerCount(sig) === 1) process.exit(code);
  });
}

const GROUPS = [
  'scheduler',
  'storage',
  'apply',
  'unit-kill',
  'agent-kill',
  'memory',
  'failover',
  'writes',
  'big-state',
  'unit-memory',
  'catch-up',
  'snapshot-catch-up',
  'rollout',
  'probes',
  'crashloop',
  'services',
  'isolation',
  'cli',
  'metrics',
  'kube',
  'fleet',
] as const;
const argv = (() => {
  try {
    return parseCommandLine(
      process.argv.slice(2),
      {
        only: { type: 'string' },
        agents: { type: 'string' },
        units: { type: 'string' },
        duration: { type: 'string' },
        workers: { type: 'string' },
      },
      { wording: { unknown: (flag) => `unknown option ${flag} (it takes --only GROUP, and for fleet --agents, --units, --duration, --workers)` } },
    ).values;
  } catch (err) {
    console.error(`bench: ${(err as Error).message}`);
    process.exit(2);
  }
})();
const only = argv.only ?? null;
if (only !== null && oneOf(only, GROUPS) === undefined) {
  console.error(`bench: --only: unknown group "${only}" (one of ${GROUPS.join(', ')})`);
  process.exit(2);
}
// Every replica's event-loop stops and terms, per benchmark (bench/loop-watch.ts).
const loops = new LoopWatch();
loops.install();
const want = (name: string) => {
  const yes = only === null || only === name;
  if (yes) loops.group = name; // groups run one after another: the clusters started now are this group's
  return yes;
};
const flag = (name: 'agents' | 'units' | 'duration' | 'workers', dflt: number): number => {
  const text = argv[name];
  if (text === undefined) return dflt;
  const n = wholeNumber(text, 1);
  if (n === undefined) {
    console.error(`bench: --${name}: expected an integer >= 1, got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return n;
};
const f = (n: number, d = 1) => n.toFixed(d);
const verdict = (ok: boolean) => (ok ? 'meets target' : 'MISSES target');
const summary: string[] = [];

if (want('scheduler')) {
  console.log('\n== scheduler: placements per second (one unit at a time, assume() between) ==');
  const rows = await benchScheduler();
  for (const r of rows)
    summary.push(
      `scheduler @ ${r.nodes} nodes: ${r.placementsPerSec} placements/s (${r.placementsPerCpuSec} per cpu-second); a full pass for every unit, same run: ${r.fullPassPerSec}/s (${r.fullPassPerCpuSec} per cpu-second)${r.nodes === 5000 ? ` (target >= 20000: ${verdict(r.placementsPerSec >= 20000)})` : ''}`,
    );
}

if (want('storage')) {
  console.log('\n== raft storage: fsynced saves ==');
  for (const r of await benchStorage()) summary.push(`raft storage, ${r.name}: ${r.savesPerSec} saves/s, ${r.entriesPerSec} entries/s, mean ${r.meanSaveMs} ms per save`);
}

if (want('apply')) {
  console.log(
    '\n== apply N replicas of sleep until all Running vs N child_process.spawn from a fresh small Node process, and vs the same isolation (cgroups, namespaces, pipes) made by a fresh small Node process: two passes in mirrored order (plain, isolated, cluster; then cluster, isolated, plain), each side on fresh processes, a figure the mean of the passes ==',
  );
  const ms = (xs: number[]) => xs.map((x) => f(x, 0)).join(' and ');
  for (const r of await benchApply([200, 1000])) {
    const cluster = r.passes.map((p) => p.clusterMs);
    const plain = r.passes.map((p) => p.plainMs);
    const ratio = mean(cluster) / mean(plain);
    const iso = r.passes.map((p) => p.isolatedMs);
    const isolated = iso.some((x) => x === null)
      ? 'the same isolation without the cluster: not measured (needs root, cgroups and mo-init)'
      : `the same isolation without the cluster (cgroups, mo-init namespaces, output pipes) ${f(mean(iso as number[]), 0)} ms (passes ${ms(iso as number[])}): cluster / isolated ${f(mean(cluster) / mean(iso as number[]), 2)}, isolated / plain ${f(mean(iso as number[]) / mean(plain), 2)}`;
    const rss = Math.max(...r.passes.map((p) => p.cpRssMiB));
    const line = `apply ${r.replicas}: cluster ${f(mean(cluster), 0)} ms, plain spawn ${f(mean(plain), 0)} ms, ratio ${f(ratio, 2)} (passes ${r.passes.map((p) => f(p.clusterMs / p.plainMs, 2)).join(' and ')}: cluster ${ms(cluster)} ms, plain ${ms(plain)} ms) (target <= 1.5: ${verdict(ratio <= 1.5)}); ${isolated}; replica RSS with ${r.replicas} units ${f(rss)} MiB, the larger of the passes${r.replicas === 1000 ? ` (target < 150: ${verdict(rss < 150)})` : ''}`;
    console.log(line);
    summary.push(line);
  }
}

/** Kills each side of the unit-kill comparison takes before the counted ones, in each pass. */
const KILL_WARMUPS = 10;
/** Counted kills per side and pass (two passes: 30 per side in all, as before the passes). */
const KILLS_PER_PASS = 15;

if (want('unit-kill')) {
  console.log(
    "\n== unit kill -9 until its replacement is Running, vs PM2 restarting a kill -9'd process: two passes in mirrored order (PM2 then ours, then ours then PM2), each on a fresh process tree, the medians over both passes' kills ==",
  );
  // Both sides first take KILL_WARMUPS kills that are not counted, in each pass: the first kills of a fresh
  // process tree run cold code on either side (a trace of 30 kills of ours: 9-12 ms for the
  // first eight, 5-7 ms after). Their medians are printed too. Two passes in mirrored order, as apply and
  // writes run, so that the machine's drift during the run falls on both sides alike.
  type Kills = { samples: number[]; warmup: number[] };
  const ours: Kills[] = [];
  const pm2: Kills[] = [];
  for (const order of [
    ['pm2', 'ours'],
    ['ours', 'pm2'],
  ] as const) {
    for (const side of order) {
      if (side === 'pm2') pm2.push(await benchPm2Restart(KILLS_PER_PASS, KILL_WARMUPS));
      else ours.push(await benchUnitKill(KILLS_PER_PASS, KILL_WARMUPS));
    }
  }
  const oursAll = ours.flatMap((r) => r.samples);
  const pm2All = pm2.flatMap((r) => r.samples);
  const oursMedian = median(oursAll);
  const pm2Median = median(pm2All);
  const perPass = (rs: Kills[]) => rs.map((r) => f(median(r.samples))).join(' and ');
  const line = `unit kill -9 -> replacement Running: median ${f(oursMedian)} ms, p99 ${f(pct(oursAll, 99))} ms over ${oursAll.length} kills (passes ${perPass(ours)}); PM2 ${PM2_VERSION} kill -9 -> its 'online' event: median ${f(pm2Median)} ms, p99 ${f(pct(pm2All, 99))} ms over ${pm2All.length} kills (passes ${perPass(pm2)}); ratio ${f(oursMedian / pm2Median, 2)} (target median <= PM2's: ${verdict(oursMedian <= pm2Median)}); each side's first ${KILL_WARMUPS} kills in each pass not counted (their median: ours ${f(median(ours.flatMap((r) => r.warmup)))} ms, PM2 ${f(median(pm2.flatMap((r) => r.warmup)))} ms)`;
  console.log(line);
  summary.push(line);
}

if (want('agent-kill')) {
  console.log(`\n== agent SIGKILL until all its units are Running elsewhere (NotReady ${CLOSE_GRACE_MS} ms after its connection closes) ==`);
  const r = await benchAgentKill(5);
  const line = `agent SIGKILL -> units Running elsewhere: median ${f(r.medianMs, 0)} ms over ${r.samples.length} rounds [${r.samples.map((s) => f(s, 0)).join(', ')}] (target <= 300 ms: ${verdict(r.medianMs <= 300)}; the closed connection is noticed, NotReady ${CLOSE_GRACE_MS} ms after it if no reconnect)`;
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
  console.log(
    '\n== acknowledged writes per second through the API (3 replicas, fsync on, ~600-byte manifests) vs etcd 3.4 (3 members, fsync on) in the same run, same load generator ==',
  );
  // Two passes in mirrored order (A B B A), each side on fresh servers each
  // time: writes/s on this shared machine drifts by a third over minutes, and
  // one pass in one order put that drift on one side only. Each figure below
  // is the mean of the two passes; both passes are printed beside it.
  type Etcd = NonNullable<Awaited<ReturnType<typeof benchEtcdWrites>>>;
  const ours: Array<Record<string, Record<number, WriteFigure>>> = [];
  const warm: Array<Record<string, number>> = [];
  const etcds: Etcd[] = [];
  let etcdMissing = false;
  for (const pass of [0, 1]) {
    ours.push({ new: {}, overwrite: {} });
    warm.push({});
    const cluster = async () => {
      for (const mode of pass === 0 ? (['new', 'overwrite'] as const) : (['overwrite', 'new'] as const)) {
        const r = await benchWrites(mode);
        warm[pass][mode] = r.warmUpPerSec;
        for (const row of r.rows) ours[pass][mode][row.concurrency] = row;
      }
    };
    const etcd = async () => {
      const e = await benchEtcdWrites(pass === 0 ? ['gateway', 'grpc'] : ['grpc', 'gateway']);
      if (e) etcds.push(e);
      else etcdMissing = true;
    };
    if (pass === 0) {
      await cluster();
      await etcd();
    } else {
      await etcd();
      await cluster();
    }
  }
  const passes = (xs: number[]) => `passes ${xs.map((x) => Math.round(x)).join(' and ')}`;
  const windows = (rs: WriteFigure[]) => rs.map((r) => `${r.writes} in ${f(r.seconds, 1)} s`).join(' and ');
  {
    const e = etcds
      .map(
        (x, i) => `etcd pass ${i + 1} ${Math.round(x.warmUpPerSec.gateway)}/s (gateway) and ${x.warmUpPerSec.grpc === null ? 'failed' : `${Math.round(x.warmUpPerSec.grpc)}/s`} (gRPC)`,
      )
      .join(', ');
    const line = `writes: measured in two passes, mirrored (pass 1: the cluster with new names, with overwrites, then etcd with its gateway, its gRPC client; pass 2 the reverse), each on fresh servers, so the machine's drift falls on both sides alike; a figure is the mean of the passes. A window is ${WINDOW_WRITES.toLocaleString('en-US')} writes (the replicas' snapshot period, so snapshots fall into the windows at their own rate: up to one per replica per window, fewer once the state packs to more bytes than a window logs, 0-2 in any one by phase) or ${WINDOW_MAX_MS / 1000} s if that comes first. Every side first takes a ${WARM_UP_MS / 1000} s warm-up at concurrency 16 (new names, not counted; Node's JIT compiles the write path over its first thousands of calls): the cluster's ran at ${warm.map((w, i) => `pass ${i + 1} ${Math.round(w.new)}/s and ${Math.round(w.overwrite)}/s`).join(', ')}${e ? `; ${e}` : ''}`;
    console.log(line);
    summary.push(line);
  }
  if (etcdMissing) console.log("etcd: not measured: no etcd binary (install Debian's etcd-server: apt-get install etcd-server, or set MO_ETCD=/path/to/etcd)");
  const cpu = (rs: WriteFigure[]) => `${f(mean(rs.map((r) => r.cpuMsPerWrite)), 2)} ms CPU/write`;
  // A snapshot packs the whole state on every replica at about the same index: a window of the snapshot period holds about one per replica (0-2, by phase).
  const snaps = (rs: WriteFigure[]) => {
    const n = rs.map((r) => r.snapshots);
    return n.some((x) => x === undefined) ? '' : `, ${n.join(' and ')} snapshots completed in the passes' windows (summed over the replicas)`;
  };
  for (const concurrency of [1, 16]) {
    const o = ours.map((p) => p.new[concurrency]);
    const rate = mean(o.map((r) => r.writesPerSec));
    const rows = etcds.map((x) => x.rows.find((r) => r.concurrency === concurrency)!);
    const gw = rows.map((r) => r.gateway);
    const grpc = rows.map((r) => r.grpc).filter((r): r is WriteFigure => r !== null);
    const grpcError = rows.find((r) => r.grpcError)?.grpcError;
    const gwRate = gw.length > 0 ? mean(gw.map((r) => r.writesPerSec)) : 0;
    const grpcRate = grpc.length === rows.length && grpc.length > 0 ? mean(grpc.map((r) => r.writesPerSec)) : 0;
    const best = Math.max(gwRate, grpcRate);
    const how =
      rows.length > 0
        ? `etcd ${etcds[0].version} put of new keys, same run: JSON gateway ${Math.round(gwRate)}/s (${passes(gw.map((r) => r.writesPerSec))}: ${windows(gw)}; ${cpu(gw)}), etcd3 gRPC client ${grpcError !== undefined || grpc.length < rows.length ? `failed (${grpcError ?? 'in a pass'})` : `${Math.round(grpcRate)}/s (${passes(grpc.map((r) => r.writesPerSec))}: ${windows(grpc)}; ${cpu(grpc)})`}; baseline the faster, ${Math.round(best)}/s`
        : 'etcd not measured';
    const line = `writes (a new name every write, as etcd writes new keys) at concurrency ${concurrency}: ${Math.round(rate)}/s (${passes(o.map((r) => r.writesPerSec))}: ${windows(o)}), ${cpu(o)} over the 3 replicas${snaps(o)} (${how}${rows.length > 0 ? `: ratio ${f(rate / best, 2)}, ${verdict(rate >= best)}` : ''})`;
    console.log(line);
    summary.push(line);
  }
  for (const concurrency of [1, 16]) {
    const o = ours.map((p) => p.overwrite[concurrency]);
    const line = `writes (overwriting 50 names per worker) at concurrency ${concurrency}: ${Math.round(mean(o.map((r) => r.writesPerSec)))}/s (${passes(o.map((r) => r.writesPerSec))}: ${windows(o)}), ${cpu(o)} over the 3 replicas${snaps(o)}`;
    console.log(line);
    summary.push(line);
  }
}

if (want('big-state')) {
  const n = Number(process.env.MO_BENCH_DEPLOYMENTS ?? 10000);
  const units = Number(process.env.MO_BENCH_UNITS ?? 1000);
  console.log(`\n== a big state: ${n} deployments of 0 replicas written (16 writers, new names), then one deployment of ${units} units applied (3 replicas, 4 agents) ==`);
  const loop = (p: BigStateReplica[]) =>
    p
      .map((x) => `${x.id}${x.leader ? ' (leader)' : ''} max ${f(x.loop.maxMs, 0)} ms, p99 ${f(x.loop.medianP99Ms, 1)} ms (worst second ${f(x.loop.worstP99Ms, 0)} ms), term ${x.term}`)
      .join('; ');
  const rss = (p: Array<{ id: string; rssMiB: number }>) => p.map((x) => `${x.id} ${f(x.rssMiB)} MiB`).join(', ');
  const maxRss = (p: Array<{ id: string; rssMiB: number }>) => Math.max(...p.map((x) => x.rssMiB));
  const maxStop = (p: BigStateReplica[]) => Math.max(...p.map((x) => x.loop.maxMs));
  const maxTerm = (p: BigStateReplica[]) => Math.max(...p.map((x) => x.term));
  // Goal 5 bounds the leader's stops; the followers' are reported beside it. A phase with an
  // election (or no single leader read) is judged on every replica's.
  const stops = (p: BigStateReplica[], elections: number, target = `target < ${LEADER_STOP_TARGET_MS} ms`) => {
    const leaders = p.filter((x) => x.leader);
    const judged = elections !== 0 || leaders.length !== 1 ? p : leaders;
    const verdictOf = `${target}: ${verdict(maxStop(judged) < LEADER_STOP_TARGET_MS)}`;
    if (judged === p) return `longest stop ${f(maxStop(p), 0)} ms over every replica (${elections !== 0 ? 'an election in the phase' : 'no single leader read'}); ${verdictOf}`;
    return `the leader ${leaders[0].id}'s longest stop ${f(maxStop(leaders), 0)} ms; ${verdictOf}; the followers' ${f(maxStop(p.filter((x) => !x.leader)), 0)} ms, reported`;
  };
  const say = (line: string) => {
    console.log(line);
    summary.push(line);
  };
  const r = await benchBigState(n, units, (fill) => {
    const terms = maxTerm(fill.fill) - fill.firstTerm;
    say(
      `big state: ${fill.deployments} deployments written at ${Math.round(fill.fillWritesPerSec)}/s, ${fill.failedWrites === 0 ? 'no write failed' : `${fill.failedWrites} WRITES FAILED and were sent again (first: ${fill.firstFailure})`}; RSS 2 s after the fill ${rss(fill.fill)}, after 30 s at rest ${rss(fill.rest)} (target < 150 MiB at rest: ${verdict(maxRss(fill.rest) < 150)})`,
    );
    say(
      `big state: event loop while filling: ${loop(fill.fill)} (${stops(fill.fill, terms, `target < ${LEADER_STOP_TARGET_MS} ms, half the election timeout`)}; ${terms === 0 ? 'no election' : `${terms} ELECTIONS`})`,
    );
    const restTerms = maxTerm(fill.rest) - maxTerm(fill.fill);
    say(
      `big state: event loop over the 30 s at rest: ${loop(fill.rest)} (${stops(fill.rest, restTerms)}; ${restTerms === 0 ? 'no election' : `${restTerms} ELECTIONS`}); collections at rest, as each replica logged them: ${fill.restCollections.map((x) => `${x.id} ${x.pausesMs.length === 0 ? 'none' : x.pausesMs.map((ms) => `${ms} ms`).join(', ')}`).join('; ')}`,
    );
  });
  const scrapeTerms = maxTerm(r.scrape.loop) - maxTerm(r.rest);
  say(
    `big state: GET /metrics of each replica in turn (${r.scrape.bytes.map((b) => `${f(b / 1048576, 1)} MiB`).join(', ')}): ${r.scrape.ms.map((ms) => `${f(ms, 0)} ms`).join(', ')}; event loop meanwhile: ${loop(r.scrape.loop)} (${stops(r.scrape.loop, scrapeTerms)}; ${scrapeTerms === 0 ? 'no election' : `${scrapeTerms} ELECTIONS`})`,
  );
  const applyTerms = maxTerm(r.apply) - maxTerm(r.scrape.loop);
  say(`big state: apply of ${r.units} units on top: ${r.applyMs !== null ? `all Running after ${f(r.applyMs, 0)} ms` : `NOT all Running: ${r.applyError}`}; RSS ${rss(r.apply)}`);
  say(`big state: event loop during the apply: ${loop(r.apply)} (${stops(r.apply, applyTerms)}; ${applyTerms === 0 ? 'no election' : `${applyTerms} ELECTIONS`})`);
}

if (want('unit-memory')) {
  // A replica with 10,000 units, under 250 MiB (the goal beside big-state's
  // 10,000 deployments). A replica holds the same records and reports
  // whether the units are processes or the fleet simulator's (bench/fleet.ts:
  // the real protocol, codec and agent core), and 10,000 real units would
  // be 10,000 process trees and namespaces on this 2-core machine: the
  // simulator's 1,000 agents run them, and each replica's RSS is read at
  // the end of 30 s of steady state (heartbeats and all); then comes the
  // failover, as in the fleet group.
  const opts = { agents: 1000, units: 10000, durationS: 30, workers: 2 };
  console.log(
    `\n== a replica's memory with ${opts.units} units: ${opts.agents} simulated agents (the fleet simulator) against 3 real replicas, RSS after ${opts.durationS} s of steady state ==`,
  );
  const r = await benchFleet(opts);
  for (const line of formatFleet(r)) console.log(line);
  const most = Math.max(...r.replicas.map((x) => x.rssSteadyMiB));
  const line = `unit memory: RSS with ${r.units} units on ${r.agents} nodes after ${r.durationS} s of steady state ${r.replicas.map((x) => `${x.id} (${x.role}) ${f(x.rssSteadyMiB)} MiB`).join(', ')} (target < 250 MiB: ${verdict(most < 250)}); 3 s after every unit was ready ${r.replicas.map((x) => f(x.rssUnitsMiB)).join(' / ')} MiB, with no agent ${r.replicas.map((x) => f(x.rssIdleMiB)).join(' / ')} MiB; units ready ${f(r.unitsMs / 1000)} s after the apply, NotReady ${r.notReady}`;
  console.log(line);
  summary.push(line);
}

if (want('catch-up')) {
  console.log('\n== a restarted replica 10,000 entries behind catching up ==');
  const r = await benchCatchUp(10000);
  const line = `catch-up of ${r.entries} entries: ${f(r.catchUpMs, 0)} ms from restart to applied`;
  console.log(line);
  summary.push(line);
}

if (want('snapshot-catch-up')) {
  console.log('\n== a restarted replica behind a large snapshot catching up (a follower down while 85,000 deployments are written) ==');
  const r = await benchSnapshotCatchUp(85000);
  const size = r.snapshotBytes !== null ? `${f(r.snapshotBytes / 1048576, 1)} MiB` : 'size not logged';
  const line =
    r.catchUpMs !== null
      ? `snapshot catch-up after ${r.deployments} deployments (written in ${f(r.writeSeconds, 1)} s): ${f(r.catchUpMs, 0)} ms from restart to applied; the snapshot (${size}) sent ${r.sends} time(s)`
      : `snapshot catch-up after ${r.deployments} deployments: NOT caught up within 120 s; the snapshot (${size}) sent ${r.sends} time(s)`;
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
  console.log(
    "\n== unit isolation: start() until Running and stop() until gone (cgroup removed), the agent's supervisor bare / with cgroups / namespaces / both, beside a plain spawn of the same `sleep` (same run, 40 units each, one at a time) ==",
  );
  const rows = await benchIsolation(40);
  const bare = rows.find((r) => r.mode === 'agent, no isolation');
  for (const r of rows) {
    const added = bare && r !== bare && r.mode.startsWith('agent') ? ` (adds ${f(r.startP50 - bare.startP50)} ms to start, ${f(r.stopP50 - bare.stopP50)} ms to stop, p50)` : '';
    const line = r.skipped
      ? `isolation ${r.mode}: not measured: ${r.skipped}`
      : `isolation ${r.mode}: start p50 ${f(r.startP50)} ms, p99 ${f(r.startP99)} ms; stop p50 ${f(r.stopP50)} ms, p99 ${f(r.stopP99)} ms${added}`;
    console.log(line);
    summary.push(line);
  }
}

if (want('cli')) {
  console.log("\n== mo startup: wall time of `mo get nodes` against a running cluster, median of 20, beside `node -e ''` run in turns with it ==");
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

if (want('kube')) {
  console.log(
    "\n== the Kubernetes API's pods and the /v1 units, in process: one pod's get and a watch refresh (a stop of the leader's loop) after one report, vs after one unit created (every unit walked), 500 nodes, medians of 20 ==",
  );
  for (const r of benchKubeViews()) {
    const line = `kube views @ ${r.units} units: one pod's get ${f(r.getMs.unchanged, 3)} ms (${f(r.getMs.changed, 3)} ms changed since the last rendering); a Kubernetes pods watch refresh after one report ${f(r.podsRefreshMs.report, 1)} ms, after one unit created ${f(r.podsRefreshMs.created, 1)} ms; a /v1 units watch refresh ${f(r.unitsRefreshMs.report, 1)} ms and ${f(r.unitsRefreshMs.created, 1)} ms`;
    console.log(line);
    summary.push(line);
  }
}

if (only === 'fleet') {
  // Not in a plain `npm run bench`: 5,000 agents and 50,000 units take minutes and most of the machine.
  const opts = { agents: flag('agents', 5000), units: flag('units', 50000), durationS: flag('duration', 300), workers: flag('workers', 2) };
  loops.group = 'fleet'; // (want() is not asked: the fleet runs only by name)
  console.log(`\n== fleet: ${opts.agents} simulated agents (real protocol) against 3 real replicas, ${opts.units} units, ${opts.durationS} s steady state ==`);
  const r = await benchFleet(opts);
  for (const line of formatFleet(r)) {
    console.log(line);
    summary.push(line);
  }
}

console.log('\n== summary ==');
for (const s of summary) console.log(s);
console.log('\n== event loop of every replica during each benchmark (1 s windows of monitorEventLoopDelay at 5 ms resolution; election timeout 250-500 ms) ==');
for (const s of loops.lines()) console.log(s);
