// chaos/main.ts -- `npm run chaos -- <scenario> [options]`: start a local
// cluster (or attach to one), run the live invariant checker beside a seeded
// fault schedule and a workload, heal, wait for convergence, stop the
// cluster, check that nothing it started survives, and print the report.
//
// Phases (times in the log are since the run began):
//   start      the cluster: 3 replicas + the four default nodes
//   setup      baseline deployments applied, wait until observed == desired
//   faults     --duration seconds of the scenario (+ workload writes)
//   heal       SIGCONT the stopped, restart the killed, heal partitions
//   converge   until observed == desired and stays so (or the bound passes)
//   final      read the final desired state, stop the cluster, orphan check
// Every process is stopped by pid at the end, also on errors and Ctrl-C.

import fs from 'node:fs';
import { SeededRandom } from '../shared/random.ts';
import { ChaosUsageError, CHAOS_USAGE, parseChaosArgs, type ChaosOptions } from './args.ts';
import { DEFAULT_BOUNDS, InvariantChecker, type DeploymentObservation } from './checker.ts';
import { NetnsPartitioner, SigstopPartitioner, type Partitioner } from './partition.ts';
import { markerOf, Poller } from './poller.ts';
import { formatReport } from './report.ts';
import { FaultInjector, runScenario, WORKLOAD_OF } from './scenarios.ts';
import { AttachedTarget, LauncherTarget, LocalTarget, type ChaosTarget } from './target.ts';
import { Workload } from './workload.ts';

/** Setup may take this long to converge before faults start anyway. */
const SETUP_CONVERGE_MS = 30000;
/** Observed == desired must hold this long to count as converged at the end. */
const STABLE_MS = 1500;
/** After the cluster stops, its processes get this long to disappear. */
const EXIT_WAIT_MS = 4000;

const t0 = Date.now();
const now = () => Date.now() - t0;
const at = (t: number) => `+${(t / 1000).toFixed(3)}s`;
const print = (line: string) => process.stdout.write(line + '\n');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function main(): Promise<number> {
  let opts: ChaosOptions;
  try {
    opts = parseChaosArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof ChaosUsageError) {
      process.stderr.write(`chaos: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (opts.help) {
    print(CHAOS_USAGE);
    return 0;
  }
  const seed = opts.seed ?? Math.floor(Math.random() * 2 ** 32);
  const rng = new SeededRandom(seed);
  print(`${at(now())} chaos ${opts.scenario}: seed ${seed}, ${opts.durationS}s of faults (replay with --seed ${seed})`);

  // ---- start or attach
  let target: ChaosTarget;
  let partitioner: Partitioner | null = null;
  try {
    if (opts.cluster) {
      target = await AttachedTarget.attach({ cluster: opts.cluster, compose: opts.compose, composeFile: opts.composeFile ?? undefined });
    } else if (opts.netns) {
      if (process.getuid?.() !== 0) {
        print(`${at(now())} note: --netns needs root; starting a loopback cluster and partitioning by SIGSTOP/SIGCONT instead`);
        target = await LocalTarget.start(opts.replicas);
      } else {
        print(`${at(now())} starting a --netns cluster through the launcher ...`);
        const lt = await LauncherTarget.start(opts.replicas, 2);
        target = lt;
        try {
          const api = new (await import('./api-client.ts')).ApiClient(lt.urls, lt.token);
          partitioner = await NetnsPartitioner.load(
            lt.dataDir,
            () => lt.replicaIds(),
            async () => (await api.read('/v1/cluster'))?.json?.leader || null,
          );
        } catch (e) {
          print(`${at(now())} note: netns links unavailable (${(e as Error).message}); partitioning by SIGSTOP/SIGCONT`);
        }
      }
    } else {
      print(`${at(now())} starting a local cluster: ${opts.replicas} replica(s), nodes node-a..node-d ...`);
      target = await LocalTarget.start(opts.replicas);
    }
  } catch (e) {
    process.stderr.write(`chaos: the cluster could not be started or reached: ${(e as Error).message}\n`);
    return 3;
  }
  partitioner ??= new SigstopPartitioner(target);
  print(`${at(now())} cluster: ${target.describe()}`);
  if (opts.scenario === 'partition' || opts.scenario === 'soak') print(`${at(now())} partitions: ${partitioner.describe}`);

  const core = new InvariantChecker({ ...DEFAULT_BOUNDS, convergeBoundMs: opts.convergeBoundS * 1000 }, t0);
  const poller = new Poller({ urls: target.urls, token: target.token, core, now, procChecks: target.procChecks });
  const workload = new Workload(poller.api, core, now, rng, opts.quiet ? () => {} : (l) => print(`${at(now())} ${l}`));
  let stopping = false;
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    poller.stop();
    await partitioner!.healAll().catch(() => undefined);
    await target.stop().catch(() => undefined);
  };
  const onSignal = (sig: string) => {
    if (stopping) return;
    stopping = true;
    print(`${at(now())} ${sig}: healing and stopping the cluster`);
    void cleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));

  const inj = new FaultInjector({
    target,
    rng,
    core,
    api: poller.api,
    poller,
    partitioner,
    now,
    deadline: Infinity,
    iterations: opts.iterations,
    replicas: target.replicaIds().length,
    print,
  });
  let quietAt = 0;
  let finalDeployments: DeploymentObservation[] | null = null;
  let orphansChecked = false;
  try {
    poller.start();
    // ---- setup
    await workload.setup(now() + SETUP_CONVERGE_MS);
    const setupDeadline = now() + SETUP_CONVERGE_MS;
    while (!core.isConverged() && now() < setupDeadline) await sleep(100);
    print(`${at(now())} setup ${core.isConverged() ? 'converged' : 'NOT converged (faults start anyway)'}; faults for ${opts.durationS}s`);

    // ---- faults (+ workload)
    const deadline = now() + opts.durationS * 1000;
    inj.ctx.deadline = deadline;
    await Promise.all([runScenario(opts.scenario, inj), workload.run(WORKLOAD_OF[opts.scenario], deadline, () => stopping)]);

    // ---- heal
    await inj.healAll();
    await partitioner.healAll();
    quietAt = now();
    print(`${at(quietAt)} faults over (${inj.faultCount} injected); waiting for observed == desired (bound ${opts.convergeBoundS}s)`);

    // ---- converge
    const convergeDeadline = quietAt + opts.convergeBoundS * 1000 + 3000;
    let stableSince: number | null = null;
    while (now() < convergeDeadline) {
      await sleep(100);
      const c = core.lastConvergedAt();
      if (core.isConverged() && c !== null && c >= quietAt) {
        stableSince ??= now();
        if (now() - stableSince >= STABLE_MS) break;
      } else stableSince = null;
    }
    await poller.snapshot();

    // ---- final state
    for (let i = 0; i < 20 && !finalDeployments; i++) {
      const d = await poller.api.read('/v1/deployments', 2000);
      if (d) finalDeployments = (d.json?.items ?? []).map((x) => ({ name: x.metadata.name, replicas: x.spec.replicas, marker: markerOf(x) }));
      else await sleep(500);
    }
    await poller.pollAllReplicas();
    poller.stop();
    if (!target.ownsCluster) await workload.cleanup();

    // ---- stop and look for orphans
    if (target.ownsCluster) {
      print(`${at(now())} stopping the cluster`);
      await cleanup();
      if (target.procChecks) {
        const until = now() + EXIT_WAIT_MS;
        while (poller.checkTracked().length && now() < until) await sleep(100);
        poller.checkTracked(true);
        orphansChecked = true;
      }
    }
  } catch (e) {
    print(`${at(now())} chaos: run failed: ${(e as Error).stack ?? e}`);
    await cleanup();
    return 3;
  } finally {
    await cleanup();
  }

  const verdict = core.finish({
    t: now(),
    quietAt,
    finalDeployments,
    orphansChecked,
    notes: target.procChecks ? {} : { 6: 'API view only: pids are not on this machine', 8: 'not checked: pids are not on this machine' },
  });
  const report = formatReport(verdict, {
    scenario: opts.scenario,
    seed,
    durationS: opts.durationS,
    cluster: target.describe(),
    partitions: opts.scenario === 'partition' || opts.scenario === 'soak' ? partitioner.describe : undefined,
    elapsedS: now() / 1000,
  });
  print('');
  print(report);
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify({ seed, scenario: opts.scenario, ...verdict }, null, 2));
  return verdict.violations ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`chaos: fatal: ${(err as Error).stack ?? err}\n`);
    process.exit(3);
  },
);
