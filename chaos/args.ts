// chaos/args.ts -- the command line of `npm run chaos -- <scenario> [...]`,
// read by node:util parseArgs through shared/flags.ts. Pure: parses argv into options or throws ChaosUsageError (exit 2).

import { SCENARIOS, type ScenarioName } from './scenarios.ts';

export const CHAOS_USAGE = `Usage: npm run chaos -- <scenario> [options]

Scenarios:
  kill-agents   SIGKILL random node agents, restart them 2-4 s later
  kill-leader   SIGKILL (then restart) or SIGSTOP/SIGCONT the current leader
  crash-units   kill -9 random unit pids, --iterations times (lesson 1's exercise, docs/lessons.md)
  partition     isolate the leader, or split agents from the majority, then heal
  soak          all of the above at random while a workload applies, scales and deletes

Options:
  --duration S      seconds of faults (default 30); then heal, converge, check
  --seed N          seed of the fault schedule (default: random, printed)
  --replicas N      control-plane replicas of the cluster this run starts (default 3)
  --iterations N    crash-units rounds (default 100)
  --cluster C       attach to a running cluster instead: a config.json path or
                    comma-separated URLs (token from MO_TOKEN). Restarts are
                    impossible then (skipped) unless --compose is given
  --compose         with --cluster: faults through docker compose kill/pause/start
  --compose-file F  the docker-compose.yml to use
  --netns           (root) start the cluster with \`npm start -- --netns\` so the
                    partition scenario cuts real network links
  --converge-bound S  seconds allowed to converge after the last fault (default 10)
  --json FILE       also write the verdict as JSON
  -q, --quiet       do not print the workload's writes
  -h, --help        this text

Exit status: 0 every invariant held; 1 a violation (the report says which);
2 bad usage; 3 the run could not be made (cluster did not start).`;

/** Bad usage of `npm run chaos`: exit 2 (shared/usage.ts's UsageError, the one class for every command line). */
import { decimal, parseCommandLine, UsageError as ChaosUsageError, wholeNumber } from '../shared/flags.ts';
export { ChaosUsageError };

export interface ChaosOptions {
  scenario: ScenarioName;
  durationS: number;
  seed: number | null;
  replicas: number;
  iterations: number;
  cluster: string | null;
  compose: boolean;
  composeFile: string | null;
  netns: boolean;
  convergeBoundS: number;
  json: string | null;
  quiet: boolean;
  help: boolean;
}

const OPTIONS = {
  duration: { type: 'string' },
  seed: { type: 'string' },
  replicas: { type: 'string' },
  iterations: { type: 'string' },
  cluster: { type: 'string' },
  compose: { type: 'boolean' },
  'compose-file': { type: 'string' },
  netns: { type: 'boolean' },
  'converge-bound': { type: 'string' },
  json: { type: 'string' },
  quiet: { type: 'boolean', short: 'q' },
  help: { type: 'boolean', short: 'h' },
} as const;

function num(flag: string, text: string | undefined, dflt: number, o: { min: number; max: number; integer: boolean }): number {
  if (text === undefined) return dflt;
  const n = o.integer ? wholeNumber(text, o.min, o.max) : decimal(text, o.min, o.max);
  if (n === undefined) throw new ChaosUsageError(`${flag}: expected ${o.integer ? 'an integer' : 'a number'} ${o.min}..${o.max}, got "${text}"`);
  return n;
}

/** Parses the arguments after `npm run chaos --`, tokenised by shared/flags.ts. */
export function parseChaosArgs(argv: readonly string[]): ChaosOptions {
  const { values, positionals: positional } = parseCommandLine(argv, OPTIONS, { positionals: true });
  if (values.help === true) return { ...parseChaosArgs(['soak']), help: true };
  const o: ChaosOptions = {
    scenario: 'soak',
    durationS: num('--duration', values.duration, 30, { min: 1, max: 86400, integer: false }),
    seed: values.seed === undefined ? null : num('--seed', values.seed, 0, { min: 0, max: 2 ** 32 - 1, integer: true }),
    replicas: num('--replicas', values.replicas, 3, { min: 1, max: 5, integer: true }),
    iterations: num('--iterations', values.iterations, 100, { min: 1, max: 100000, integer: true }),
    cluster: values.cluster ?? null,
    compose: values.compose === true,
    composeFile: values['compose-file'] ?? null,
    netns: values.netns === true,
    convergeBoundS: num('--converge-bound', values['converge-bound'], 10, { min: 1, max: 3600, integer: false }),
    json: values.json ?? null,
    quiet: values.quiet === true,
    help: false,
  };
  if (![1, 3, 5].includes(o.replicas)) throw new ChaosUsageError(`--replicas: expected 1, 3 or 5, got ${o.replicas}`);
  if (positional.length === 0) throw new ChaosUsageError(`a scenario is missing: ${SCENARIOS.join(', ')}`);
  if (positional.length > 1) throw new ChaosUsageError(`one scenario at a time, got ${positional.join(' ')}`);
  if (!(SCENARIOS as readonly string[]).includes(positional[0])) throw new ChaosUsageError(`unknown scenario "${positional[0]}" (${SCENARIOS.join(', ')})`);
  o.scenario = positional[0] as ScenarioName;
  if (o.compose && !o.cluster) throw new ChaosUsageError('--compose needs --cluster (the URLs of the compose cluster, e.g. http://127.0.0.1:7001,...)');
  if (o.netns && o.cluster) throw new ChaosUsageError('--netns starts its own cluster; it cannot be combined with --cluster');
  return o;
}
