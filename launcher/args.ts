// launcher/args.ts -- the flags of `npm start -- ...` (docs/contract.md, "npm
// start: a local cluster on one machine"), read by node:util parseArgs through
// shared/flags.ts. Pure: argv in, options out, or a
// UsageError whose message is the one line main.ts prints before exit 2.

export interface LauncherOptions {
  /** All state: one sub-folder per replica, agents/<node>, token, config.json. */
  dataDir: string;
  /** Replica i serves on basePort + i. */
  basePort: number;
  replicas: 1 | 3 | 5;
  /** A YAML/JSON list of nodes; absent = the four default nodes. */
  nodesFile?: string;
  /** Restart a dead process this long after it dies; absent = never. */
  restartAfterMs?: number;
  /** Each process in its own network namespace (root only; see netns/plan.ts); absent = loopback. */
  netns?: true;
  help: boolean;
}

/** Bad usage: main.ts prints `launcher: <message>` and exits 2 (shared/usage.ts). */
import { decimal, parseCommandLine, UsageError, wholeNumber, type Wording } from '../shared/flags.ts';
export { UsageError };

export const DEFAULT_DATA_DIR = '.mo';
export const DEFAULT_BASE_PORT = 7000;
export const DEFAULT_REPLICAS = 3;
/** Above an hour a "restart" is no longer a restart policy anyone wants. */
export const MAX_RESTART_AFTER_S = 3600;
const HIGHEST_PORT = 65535;

export const LAUNCHER_USAGE = `Usage: npm start -- [options]

Starts a local cluster: control-plane replicas and node agents, each its own
process on 127.0.0.1, and streams their output. Ctrl-C stops everything.

Options:
  --data-dir DIR       all state: one sub-folder per replica, the token,
                       config.json (default ${DEFAULT_DATA_DIR})
  --base-port P        replica i serves on port P+i (default ${DEFAULT_BASE_PORT}: 7001, 7002, ...)
  --replicas N         control-plane replicas: 1, 3 or 5 (default ${DEFAULT_REPLICAS})
  --nodes FILE         YAML/JSON list of nodes (name, cpu, memory, taints, labels);
                       default: the four default nodes (see examples/nodes.yaml)
  --restart-after S    restart a process of the cluster S seconds after it dies
                       (default: off; the stream prints the command to restart it)
  --netns              root only: every process in its own network namespace,
                       joined by a bridge, so links between any two can be cut,
                       delayed or made lossy with \`npm run net -- ...\`
  -h, --help           this text
`;

const OPTIONS = {
  'data-dir': { type: 'string' },
  'base-port': { type: 'string' },
  replicas: { type: 'string' },
  nodes: { type: 'string' },
  'restart-after': { type: 'string' },
  netns: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const WORDING: Partial<Wording> = {
  positional: (word) => `unexpected argument "${word}" (options start with --; see --help)`,
};

/** Parses the arguments after `npm start --` (process.argv.slice(2)), tokenised by shared/flags.ts. */
export function parseLauncherArgs(argv: readonly string[]): LauncherOptions {
  const { values } = parseCommandLine(argv, OPTIONS, { wording: WORDING });
  const options: LauncherOptions = {
    dataDir: DEFAULT_DATA_DIR,
    basePort: DEFAULT_BASE_PORT,
    replicas: DEFAULT_REPLICAS,
    help: values.help === true,
  };
  if (values.netns === true) options.netns = true;
  if (values['data-dir'] !== undefined) {
    if (values['data-dir'].trim() === '') throw new UsageError('--data-dir must not be empty');
    options.dataDir = values['data-dir'];
  }
  if (values['base-port'] !== undefined) {
    const port = wholeNumber(values['base-port']);
    if (port === undefined) throw new UsageError(`--base-port wants a whole number, got "${values['base-port']}"`);
    if (port < 1 || port >= HIGHEST_PORT) throw new UsageError(`--base-port must be between 1 and ${HIGHEST_PORT - 1}, got ${port}`);
    options.basePort = port;
  }
  if (values.replicas !== undefined) {
    const n = wholeNumber(values.replicas);
    if (n === undefined) throw new UsageError(`--replicas wants a whole number, got "${values.replicas}"`);
    if (n !== 1 && n !== 3 && n !== 5) {
      throw new UsageError(`--replicas must be 1, 3 or 5 (an odd group a majority can survive in), got ${n}`);
    }
    options.replicas = n;
  }
  if (values.nodes !== undefined) {
    if (values.nodes.trim() === '') throw new UsageError('--nodes needs a file name');
    options.nodesFile = values.nodes;
  }
  const restart = values['restart-after'];
  if (restart !== undefined) {
    if (decimal(restart) === undefined) throw new UsageError(`--restart-after wants seconds (like 2 or 0.5), got "${restart}"`);
    const seconds = Number(restart);
    if (seconds <= 0 || seconds > MAX_RESTART_AFTER_S) {
      throw new UsageError(`--restart-after must be more than 0 and at most ${MAX_RESTART_AFTER_S} seconds, got ${restart}`);
    }
    options.restartAfterMs = Math.round(seconds * 1000);
  }
  if (options.basePort + options.replicas > HIGHEST_PORT) {
    throw new UsageError(`--base-port ${options.basePort} leaves no room for ${options.replicas} replicas (ports go up to ${HIGHEST_PORT})`);
  }
  return options;
}
