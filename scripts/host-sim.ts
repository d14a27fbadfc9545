// scripts/host-sim.ts -- command line for the simulation of the production
// host (control-plane/sim/host-sim.ts), reached as `npm run sim -- --host ...`
// (scripts/raft-sim.ts hands `--host` runs to it). It lives outside the
// simulation's folder because it reads the clock, argv and stdout.
//   npm run sim -- --host --seeds 1000               seeds 1..1000
//   npm run sim -- --host --seed 42 --verbose        replay one seed with its trace
//   npm run sim -- --host --seeds 200 --mutation skip-vote-fsync   show that a bug is caught
// Options: --from N (first seed), --fault-ms N (simulated ms of faults per seed),
// --progress N (a line every N seeds). Exit code 1 if any seed fails (with
// --mutation: if none does); each failure prints its seed and the replay command.

import { DEFAULT_FAULT_MS, runHostSimulation, type HostSimResult } from '../control-plane/sim/host-sim.ts';
import { MUTATIONS } from '../control-plane/mutations.ts';
import { oneOf, parseCommandLine, wholeNumber } from '../shared/flags.ts';

function count(name: string, v: string | undefined, dflt: number): number | string {
  if (v === undefined) return dflt;
  return wholeNumber(v) ?? `--${name} needs a non-negative integer, got '${v}'`;
}

export async function hostSimMain(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseCommandLine(
      argv,
      {
        seeds: { type: 'string' },
        from: { type: 'string' },
        seed: { type: 'string' },
        'fault-ms': { type: 'string' },
        mutation: { type: 'string' },
        progress: { type: 'string' },
        verbose: { type: 'boolean' },
      },
      { wording: { unknown: (flag) => `unknown option '${flag}' (use --seeds N, --from N, --seed S, --fault-ms N, --mutation M, --progress N, --verbose)` } },
    ));
  } catch (e) {
    console.error(`sim --host: ${(e as Error).message}`);
    return 2;
  }
  const seeds = count('seeds', values.seeds, 100);
  const from = count('from', values.from, 1);
  const one = values.seed === undefined ? null : count('seed', values.seed, 0);
  const faultMs = count('fault-ms', values['fault-ms'], DEFAULT_FAULT_MS);
  const progress = count('progress', values.progress, 0);
  for (const v of [seeds, from, one, faultMs, progress]) {
    if (typeof v === 'string') {
      console.error(`sim --host: ${v}`);
      return 2;
    }
  }
  const mutation = values.mutation === undefined ? undefined : oneOf(values.mutation, MUTATIONS);
  if (values.mutation !== undefined && mutation === undefined) {
    console.error(`sim --host: unknown --mutation '${values.mutation}' (one of ${MUTATIONS.join(', ')})`);
    return 2;
  }
  const list = one !== null ? [one as number] : Array.from({ length: seeds as number }, (_, i) => (from as number) + i);
  const replay = (seed: number) =>
    `npm run sim -- --host --seed ${seed}${faultMs !== DEFAULT_FAULT_MS ? ` --fault-ms ${faultMs}` : ''}${mutation ? ` --mutation ${mutation}` : ''} --verbose`;
  const started = performance.now();
  let failed = 0;
  let ran = 0;
  const totals = { events: 0, simMs: 0, leaderTerms: 0, writesAcked: 0, replicaCrashes: 0, agentCrashes: 0, unitCrashes: 0, spawnsObeyed: 0, commandsRefused: 0 };
  for (let k = 0; k < list.length; k++) {
    const seed = list[k];
    const r: HostSimResult = await runHostSimulation(seed, {
      faultMs: faultMs as number,
      mutation,
      trace: values.verbose ? (l) => console.log(l) : undefined,
    });
    ran++;
    for (const key of Object.keys(totals) as Array<keyof typeof totals>) totals[key] += r.stats[key];
    if (!r.ok) {
      failed++;
      console.log(`FAIL seed ${seed} at ${r.failedAtMs} simulated ms: ${r.failure}`);
      console.log(`  replay: ${replay(seed)}`);
      if (mutation) break; // caught: that is all a mutation run asks
    } else if (one !== null) {
      console.log(`seed ${seed} ok: ${JSON.stringify(r.stats)}`);
    }
    if (progress && (k + 1) % (progress as number) === 0) {
      console.log(`... ${k + 1}/${list.length} seeds, ${failed} failed, ${Math.round((performance.now() - started) / 1000)} s`);
    }
  }
  const ms = Math.round(performance.now() - started);
  console.log(
    `${ran - failed}/${ran} seeds passed in ${ms} ms (${(totals.simMs / 1000).toFixed(0)} simulated s, ${totals.events} events, ` +
      `leader terms ${totals.leaderTerms}, acknowledged writes ${totals.writesAcked}, replica crashes ${totals.replicaCrashes}, ` +
      `agent crashes ${totals.agentCrashes}, unit crashes ${totals.unitCrashes}, spawns obeyed ${totals.spawnsObeyed}, stale commands refused ${totals.commandsRefused})`,
  );
  if (mutation) {
    console.log(failed > 0 ? `mutation ${mutation} was caught` : `mutation ${mutation} was NOT caught in ${list.length} seeds`);
    return failed > 0 ? 0 : 1;
  }
  return failed > 0 ? 1 : 0;
}
