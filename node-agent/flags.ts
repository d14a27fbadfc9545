// node-agent/flags.ts -- the agent's command line and environment
// (docs/contract.md: "Each process can also be started on its own"), argv read
// by node:util parseArgs through shared/flags.ts. Pure: the
// caller passes argv, the environment and the machine-derived defaults, and
// gets a validated config or a one-line error naming the bad flag.
//
// Flags win over environment variables. Repeatable flags (--taint, --label,
// --control-plane) replace the matching variable when given at all.
//   --name N                      MO_NODE_NAME       required
//   --cpu MILLICORES              MO_CPU             default: the machine's cores * 1000
//   --memory MIB                  MO_MEMORY          default: the machine's memory
//   --taint KEY[=VALUE][:EFFECT]  MO_TAINTS (comma-separated), effect default NoSchedule
//   --label KEY=VALUE             MO_LABELS (comma-separated)
//   --control-plane URL[,URL...]  MO_CONTROL_PLANE   required (ws:// or wss://)
//   --token T                     MO_TOKEN
//   --heartbeat-interval-ms MS    MO_HEARTBEAT_INTERVAL_MS   default 200
//   --state-dir DIR               MO_STATE_DIR       default <tmp>/mo-agent-<name>
//   --address IP|auto             MO_ADDRESS         default 127.0.0.1: where Service proxies listen
//                                                    and units' ports are reached (the node's InternalIP);
//                                                    auto: the machine's first non-loopback IPv4 (containers)
//   --port-range LO-HI            MO_PORT_RANGE      default 20000-29999: host ports for units' declared ports

import type { Resources, Taint } from '../shared/model.ts';
import { isDnsSubdomain, isLabelKey, isLabelValue } from '../shared/notation.ts';
import { readTaint } from '../shared/taint.ts';
import { givenTwice, parseCommandLine, UsageError } from '../shared/flags.ts';

export const DEFAULT_HEARTBEAT_INTERVAL_MS = 200;
export const MIN_HEARTBEAT_INTERVAL_MS = 10;
export const MAX_HEARTBEAT_INTERVAL_MS = 60_000;
/** Most control-plane replicas one agent connects to. */
export const MAX_CONTROL_PLANE_URLS = 9;
export const MAX_TAINTS = 64;
export const MAX_LABELS = 64;

export interface AgentConfig {
  name: string;
  capacity: Resources;
  taints: Taint[];
  labels: Record<string, string>;
  /** Full WebSocket URLs of the replicas' agent endpoints (path /agent). */
  controlPlaneUrls: string[];
  token: string | null;
  heartbeatIntervalMs: number;
  stateDir: string;
  address: string;
  portRange: { min: number; max: number };
}

export const DEFAULT_ADDRESS = '127.0.0.1';
export const DEFAULT_PORT_RANGE = { min: 20000, max: 29999 };

export interface FlagDefaults {
  cpuMillicores: number;
  memoryMiB: number;
  tmpDir: string;
}

export type ParseResult = { ok: true; config: AgentConfig } | { ok: false; error: string } | { ok: 'help' };

export const USAGE = `usage: node-agent/main.ts --name NODE --control-plane ws://HOST:PORT[,ws://...] [--token T]
       [--cpu MILLICORES] [--memory MIB] [--taint KEY[=VALUE][:EFFECT]]... [--label KEY=VALUE]...
       [--heartbeat-interval-ms MS] [--state-dir DIR] [--address IP] [--port-range LO-HI]
environment: MO_NODE_NAME MO_CPU MO_MEMORY MO_TAINTS MO_LABELS MO_CONTROL_PLANE MO_TOKEN
             MO_HEARTBEAT_INTERVAL_MS MO_STATE_DIR MO_ADDRESS MO_PORT_RANGE`;

const SINGLE = ['name', 'cpu', 'memory', 'token', 'heartbeat-interval-ms', 'state-dir', 'address', 'port-range'] as const;
type Single = (typeof SINGLE)[number];
type Repeatable = 'taint' | 'label' | 'control-plane';

const OPTIONS = {
  name: { type: 'string' },
  cpu: { type: 'string' },
  memory: { type: 'string' },
  token: { type: 'string' },
  'heartbeat-interval-ms': { type: 'string' },
  'state-dir': { type: 'string' },
  address: { type: 'string' },
  'port-range': { type: 'string' },
  taint: { type: 'string', multiple: true },
  label: { type: 'string', multiple: true },
  'control-plane': { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
} as const;

export function parseAgentFlags(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, defaults: FlagDefaults): ParseResult {
  let line: ReturnType<typeof parseCommandLine<typeof OPTIONS>>;
  try {
    line = parseCommandLine(argv, OPTIONS, { wording: { unknown: (flag) => `unknown flag ${flag}` } });
  } catch (err) {
    if (err instanceof UsageError) return { ok: false, error: err.message };
    throw err;
  }
  if (line.values.help === true) return { ok: 'help' };
  const twice = givenTwice(line.tokens, SINGLE);
  if (twice !== undefined) return { ok: false, error: `--${twice} given twice` };
  const single = new Map<Single, string>();
  for (const flag of SINGLE) {
    const value = line.values[flag];
    if (value !== undefined) single.set(flag, value);
  }
  const repeated = new Map<Repeatable, string[]>();
  for (const flag of ['taint', 'label', 'control-plane'] as const) {
    const list = line.values[flag];
    if (list !== undefined) repeated.set(flag, list);
  }

  const pick = (flag: Single, envName: string): { value: string; source: string } | null => {
    const fromFlag = single.get(flag);
    if (fromFlag !== undefined) return { value: fromFlag, source: `--${flag}` };
    const fromEnv = env[envName];
    if (fromEnv !== undefined && fromEnv !== '') return { value: fromEnv, source: envName };
    return null;
  };
  const pickList = (flag: Repeatable, envName: string): { values: string[]; source: string } => {
    const fromFlags = repeated.get(flag);
    if (fromFlags) return { values: fromFlags.flatMap(splitList), source: `--${flag}` };
    return { values: splitList(env[envName] ?? ''), source: envName };
  };

  const nameArg = pick('name', 'MO_NODE_NAME');
  if (!nameArg) return { ok: false, error: 'missing --name (or MO_NODE_NAME): the node name' };
  if (!isDnsSubdomain(nameArg.value)) {
    return { ok: false, error: `${nameArg.source}: invalid node name ${JSON.stringify(nameArg.value)} (lower-case letters, digits, '-' and '.')` };
  }

  let cpu = defaults.cpuMillicores;
  const cpuArg = pick('cpu', 'MO_CPU');
  if (cpuArg) {
    const m = /^(\d{1,9})m?$/.exec(cpuArg.value);
    if (!m || Number(m[1]) < 1) return { ok: false, error: `${cpuArg.source}: want millicores like 4000 or 4000m, got ${JSON.stringify(cpuArg.value)}` };
    cpu = Number(m[1]);
  }

  let memory = defaults.memoryMiB;
  const memArg = pick('memory', 'MO_MEMORY');
  if (memArg) {
    const m = /^(\d{1,9})(Mi|Gi)?$/.exec(memArg.value);
    const mib = m ? Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1) : 0;
    if (!m || mib < 1) return { ok: false, error: `${memArg.source}: want MiB like 8192, 8192Mi or 8Gi, got ${JSON.stringify(memArg.value)}` };
    memory = mib;
  }

  const taintArgs = pickList('taint', 'MO_TAINTS');
  if (taintArgs.values.length > MAX_TAINTS) return { ok: false, error: `${taintArgs.source}: more than ${MAX_TAINTS} taints` };
  const taints: Taint[] = [];
  for (const text of taintArgs.values) {
    const t = readTaint(text, taintArgs.source);
    if (!('effect' in t)) return { ok: false, error: t.line };
    taints.push(t);
  }

  const labelArgs = pickList('label', 'MO_LABELS');
  if (labelArgs.values.length > MAX_LABELS) return { ok: false, error: `${labelArgs.source}: more than ${MAX_LABELS} labels` };
  const labels: Record<string, string> = {};
  for (const text of labelArgs.values) {
    const eq = text.indexOf('=');
    const key = eq >= 0 ? text.slice(0, eq) : text;
    const value = eq >= 0 ? text.slice(eq + 1) : '';
    if (eq < 0 || !isLabelKey(key) || !isLabelValue(value)) {
      return { ok: false, error: `${labelArgs.source}: invalid label ${JSON.stringify(text)} (want KEY=VALUE)` };
    }
    labels[key] = value;
  }

  const cpArgs = pickList('control-plane', 'MO_CONTROL_PLANE');
  if (cpArgs.values.length === 0) return { ok: false, error: 'missing --control-plane (or MO_CONTROL_PLANE): ws://HOST:PORT of each replica' };
  if (cpArgs.values.length > MAX_CONTROL_PLANE_URLS) return { ok: false, error: `${cpArgs.source}: more than ${MAX_CONTROL_PLANE_URLS} replicas` };
  const controlPlaneUrls: string[] = [];
  for (const text of cpArgs.values) {
    const url = agentUrl(text);
    if (url === null) return { ok: false, error: `${cpArgs.source}: invalid URL ${JSON.stringify(text)} (want ws://HOST:PORT or wss://HOST:PORT)` };
    if (!controlPlaneUrls.includes(url)) controlPlaneUrls.push(url);
  }

  const tokenArg = pick('token', 'MO_TOKEN');

  let heartbeatIntervalMs = DEFAULT_HEARTBEAT_INTERVAL_MS;
  const hbArg = pick('heartbeat-interval-ms', 'MO_HEARTBEAT_INTERVAL_MS');
  if (hbArg) {
    const n = /^\d{1,6}$/.test(hbArg.value) ? Number(hbArg.value) : NaN;
    if (!(n >= MIN_HEARTBEAT_INTERVAL_MS && n <= MAX_HEARTBEAT_INTERVAL_MS)) {
      return { ok: false, error: `${hbArg.source}: want ${MIN_HEARTBEAT_INTERVAL_MS}..${MAX_HEARTBEAT_INTERVAL_MS} ms, got ${JSON.stringify(hbArg.value)}` };
    }
    heartbeatIntervalMs = n;
  }

  const stateArg = pick('state-dir', 'MO_STATE_DIR');
  const stateDir = stateArg ? stateArg.value : `${defaults.tmpDir.replace(/\/+$/, '')}/mo-agent-${nameArg.value}`;

  const addressArg = pick('address', 'MO_ADDRESS');
  const address = addressArg ? addressArg.value : DEFAULT_ADDRESS;
  if (address !== 'auto' && (!/^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.test(address) || address.split('.').some((o) => Number(o) > 255))) {
    return {
      ok: false,
      error: `${addressArg?.source ?? '--address'}: want an IPv4 address such as 127.0.1.1 (or "auto": this machine's first non-loopback IPv4), got ${JSON.stringify(address)}`,
    };
  }
  let portRange = DEFAULT_PORT_RANGE;
  const rangeArg = pick('port-range', 'MO_PORT_RANGE');
  if (rangeArg) {
    const m = /^(\d{1,5})-(\d{1,5})$/.exec(rangeArg.value);
    const lo = m ? Number(m[1]) : NaN;
    const hi = m ? Number(m[2]) : NaN;
    if (!(lo >= 1024 && hi <= 65535 && lo <= hi)) return { ok: false, error: `${rangeArg.source}: want LO-HI within 1024-65535, got ${JSON.stringify(rangeArg.value)}` };
    portRange = { min: lo, max: hi };
  }

  return {
    ok: true,
    config: {
      name: nameArg.value,
      capacity: { cpu, memory },
      taints,
      labels,
      controlPlaneUrls,
      token: tokenArg ? tokenArg.value : null,
      heartbeatIntervalMs,
      stateDir,
      address,
      portRange,
    },
  };
}

/** `KEY[=VALUE][:EFFECT]`; returns the reason as a string when invalid. */
export function parseTaint(text: string): Taint | string {
  const t = readTaint(text, '');
  return 'effect' in t ? t : t.line;
}

/** ws://h:p -> ws://h:p/agent; an explicit path is kept. Null when not a ws(s) URL. */
export function agentUrl(text: string): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') return null;
  if (url.pathname === '' || url.pathname === '/') url.pathname = '/agent';
  return url.toString();
}

function splitList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}
