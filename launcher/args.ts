// launcher/args.ts -- the flags of `npm start -- ...` (docs/contract.md, "npm
// start: a local cluster on one machine"). Pure: argv in, options out, or a
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
import { UsageError } from '../shared/usage.ts';
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

type ValueFlag = '--data-dir' | '--base-port' | '--replicas' | '--nodes' | '--restart-after';
const VALUE_FLAGS: readonly ValueFlag[] = ['--data-dir', '--base-port', '--replicas', '--nodes', '--restart-after'];

function isValueFlag(s: string): s is ValueFlag {
  return (VALUE_FLAGS as readonly string[]).includes(s);
}

function parseInteger(flag: string, raw: string): number {
  if (!/^\d+$/.test(raw)) throw new UsageError(`${flag} wants a whole number, got "${raw}"`);
  return Number(raw);
}

/** Parses the arguments after `npm start --` (process.argv.slice(2)). */
export function parseLauncherArgs(argv: readonly string[]): LauncherOptions {
  const options: LauncherOptions = {
    dataDir: DEFAULT_DATA_DIR,
    basePort: DEFAULT_BASE_PORT,
    replicas: DEFAULT_REPLICAS,
    help: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') {
      options.help = true;
      continue;
    }
    if (arg === '--netns') {
      options.netns = true;
      continue;
    }
    if (arg.startsWith('--netns=')) throw new UsageError('--netns takes no value');
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    if (!isValueFlag(flag)) {
      if (arg.startsWith('-')) throw new UsageError(`unknown option ${flag} (see --help)`);
      throw new UsageError(`unexpected argument "${arg}" (options start with --; see --help)`);
    }
    let value: string;
    if (eq > 0) {
      value = arg.slice(eq + 1);
    } else {
      const next = argv[i + 1];
      if (next === undefined || (next.startsWith('--') && next.length > 2)) {
        throw new UsageError(`${flag} needs a value`);
      }
      value = next;
      i++;
    }
    applyFlag(options, flag, value);
  }
  if (options.basePort + options.replicas > HIGHEST_PORT) {
    throw new UsageError(`--base-port ${options.basePort} leaves no room for ${options.replicas} replicas (ports go up to ${HIGHEST_PORT})`);
  }
  return options;
}

function applyFlag(options: LauncherOptions, flag: ValueFlag, value: string): void {
  switch (flag) {
    case '--data-dir':
      if (value.trim() === '') throw new UsageError('--data-dir must not be empty');
      options.dataDir = value;
      return;
    case '--base-port': {
      const port = parseInteger(flag, value);
      if (port < 1 || port >= HIGHEST_PORT) throw new UsageError(`--base-port must be between 1 and ${HIGHEST_PORT - 1}, got ${port}`);
      options.basePort = port;
      return;
    }
    case '--replicas': {
      const n = parseInteger(flag, value);
      if (n !== 1 && n !== 3 && n !== 5) {
        throw new UsageError(`--replicas must be 1, 3 or 5 (an odd group a majority can survive in), got ${n}`);
      }
      options.replicas = n;
      return;
    }
    case '--nodes':
      if (value.trim() === '') throw new UsageError('--nodes needs a file name');
      options.nodesFile = value;
      return;
    case '--restart-after': {
      if (!/^\d+(\.\d+)?$/.test(value)) throw new UsageError(`--restart-after wants seconds (like 2 or 0.5), got "${value}"`);
      const seconds = Number(value);
      if (seconds <= 0 || seconds > MAX_RESTART_AFTER_S) {
        throw new UsageError(`--restart-after must be more than 0 and at most ${MAX_RESTART_AFTER_S} seconds, got ${value}`);
      }
      options.restartAfterMs = Math.round(seconds * 1000);
      return;
    }
    default: {
      const unreachable: never = flag;
      throw new UsageError(`unknown option ${String(unreachable)}`);
    }
  }
}
