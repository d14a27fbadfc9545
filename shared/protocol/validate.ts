// shared/protocol/validate.ts -- the strict check every decoded frame passes
// before any code trusts it, on both sides of the agent <-> control-plane
// socket. Owns: the named size limits of every string and list in the
// protocol, and one schema per message of messages.ts, written with the
// combinators of shared/validate.ts (the same ones manifests and the nodes
// file use; their contracts are there).
//
// Contracts of the frames:
// * A validator never throws; the first problem is one line that starts with
//   the path of the field at fault: `hello.node.capacity.cpu: expected a
//   non-negative integer, got "x"`.
// * Unknown fields are refused (`spawn.unit.spec.foo: unknown field`): a
//   peer that speaks another shape must bump PROTOCOL_VERSION instead.
// * A field added to messages.ts or model.ts without a validator is a
//   compile error here (object<T>()'s field table names every field of T).
// Pure: no I/O, no clock, no node:* imports.

import type { ContainerPort, NodeCondition, NodeInfo, Probe, ProxyTable, Resources, Taint, Toleration, UnitPortStatus, UnitProbes, UnitReport, UnitSpec, EnvVar } from '../model.ts';
import { AGENT_SECONDS_BUCKETS, type HistogramCounts } from '../histogram.ts';
import { TAINT_EFFECTS } from '../notation.ts';
import { type Validator, array, boolean, describe, expected, fail, integer, isPlainObject, literal, nullable, object, oneOf, optional, string, stringMap } from '../validate.ts';
import {
  PROTOCOL_VERSION,
  type AgentMessage,
  type AgentStats,
  type CommandRefusedMessage,
  type ControlPlaneMessage,
  type ForgetCommand,
  type HeartbeatMessage,
  type HelloMessage,
  type LeaderMessage,
  type LogCloseMessage,
  type LogDataMessage,
  type LogEndMessage,
  type LogOpenMessage,
  type ServicesMessage,
  MAX_LOG_CHUNK_CHARS,
  type SpawnCommand,
  type TerminateCommand,
  type UnitGoneMessage,
  type UnitStatusMessage,
  type WelcomeMessage,
  type PingIntervalMessage,
} from './messages.ts';

// ---- named limits ---------------------------------------------------------
// Every string and list on the wire has a maximum. The manifest and nodes-file
// parsers use the same numbers, so whatever they accept also fits a frame.

/** Node, unit and deployment names (a DNS-1123 subdomain is at most 253). */
export const MAX_NAME_CHARS = 253;
/** commandId, replicaId, leaderId. */
export const MAX_ID_CHARS = 128;
/** Free-text reasons (command-refused, terminate, unit reason). */
export const MAX_REASON_CHARS = 1024;
/** Signal names such as 'SIGKILL'. */
export const MAX_SIGNAL_CHARS = 32;
/** Units one hello may report: an agent with more must not exist. */
export const MAX_UNITS_PER_HELLO = 4096;
export const MAX_TAINTS_PER_NODE = 64;
export const MAX_LABELS_PER_OBJECT = 64;
/** Kubernetes: prefix (253) + '/' + name (63). */
export const MAX_LABEL_KEY_CHARS = 317;
export const MAX_LABEL_VALUE_CHARS = 63;
export const MAX_TAINT_KEY_CHARS = 317;
export const MAX_TAINT_VALUE_CHARS = 63;
export const MAX_TOLERATIONS_PER_UNIT = 64;
/** argv entries of one unit (command + args). */
export const MAX_ARGV_ENTRIES = 256;
export const MAX_ARG_CHARS = 4096;
export const MAX_ENV_VARS_PER_UNIT = 256;
export const MAX_ENV_NAME_CHARS = 256;
export const MAX_ENV_VALUE_CHARS = 4096;
/** Largest cpu (millicores) or memory (MiB) figure anyone may claim: 2^40. */
export const MAX_RESOURCE_AMOUNT = 2 ** 40;
/** containers[].ports entries. */
export const MAX_PORTS_PER_UNIT = 64;
/** A probe's seconds fields (a day). */
export const MAX_PROBE_SECONDS = 86400;
/** A probe's thresholds. */
export const MAX_PROBE_THRESHOLD = 1000;
/** terminationGracePeriodSeconds, in ms: an hour. */
export const MAX_GRACE_PERIOD_MS = 3600 * 1000;
/** httpGet.path of a probe. */
export const MAX_PROBE_PATH_CHARS = 2048;
/** A spec hash: 16 hex digits. */
export const MAX_SPEC_HASH_CHARS = 64;
/** IPv4 or IPv6 literal. */
export const MAX_ADDRESS_CHARS = 64;
/** Services in one proxy table, ports per Service, endpoints per port. */
export const MAX_SERVICES = 1024;
export const MAX_SERVICE_PORTS = 64;
export const MAX_ENDPOINTS = 4096;
/** Replica connections one stats frame may report a round trip for. */
export const MAX_STATS_REPLICAS = 16;

// ---- the model ------------------------------------------------------------

const name = string({ maxChars: MAX_NAME_CHARS, nonEmpty: true, printable: true });
const id = string({ maxChars: MAX_ID_CHARS, nonEmpty: true, printable: true });
const reason = string({ maxChars: MAX_REASON_CHARS, printable: true });
const count = integer({ min: 0 });
const timestampMs = integer({ min: 0 });
const term = integer({ min: 0 });
const amount = integer({ min: 0, max: MAX_RESOURCE_AMOUNT });

export const taintEffect = oneOf(TAINT_EFFECTS);

export const resources: Validator<Resources> = object<Resources>({ cpu: amount, memory: amount });

export const taint: Validator<Taint> = object<Taint>({
  key: string({ maxChars: MAX_TAINT_KEY_CHARS, nonEmpty: true, printable: true }),
  value: optional(string({ maxChars: MAX_TAINT_VALUE_CHARS, printable: true })),
  effect: taintEffect,
});

export const toleration: Validator<Toleration> = object<Toleration>({
  key: optional(string({ maxChars: MAX_TAINT_KEY_CHARS, printable: true })),
  operator: oneOf(['Exists', 'Equal'] as const),
  value: optional(string({ maxChars: MAX_TAINT_VALUE_CHARS, printable: true })),
  effect: optional(taintEffect),
});

export const labels = stringMap(
  string({ maxChars: MAX_LABEL_KEY_CHARS, nonEmpty: true, printable: true }),
  string({ maxChars: MAX_LABEL_VALUE_CHARS, printable: true }),
  MAX_LABELS_PER_OBJECT,
);

const envVar = object<EnvVar>({
  name: string({ maxChars: MAX_ENV_NAME_CHARS, nonEmpty: true, printable: true }),
  value: string({ maxChars: MAX_ENV_VALUE_CHARS }),
});

const argv: Validator<string[]> = (value, path) => {
  const problem = array(string({ maxChars: MAX_ARG_CHARS }), MAX_ARGV_ENTRIES)(value, path);
  if (problem !== null) return problem;
  if ((value as string[]).length === 0 || (value as string[])[0] === '') return fail(path, 'expected a non-empty argv (command[0] is the program)');
  return null;
};

const port = integer({ min: 1, max: 65535 });
const seconds = integer({ min: 0, max: MAX_PROBE_SECONDS });
const threshold = integer({ min: 1, max: MAX_PROBE_THRESHOLD });

export const containerPort: Validator<ContainerPort> = object<ContainerPort>({
  name: optional(string({ maxChars: 15, nonEmpty: true, printable: true })),
  containerPort: port,
  protocol: oneOf(['TCP', 'UDP'] as const),
});

const probeShape = object<Probe>({
  exec: optional(object<{ command: string[] }>({ command: argv })),
  httpGet: optional(object<{ path: string; port: number }>({ path: string({ maxChars: MAX_PROBE_PATH_CHARS, nonEmpty: true, printable: true }), port })),
  tcpSocket: optional(object<{ port: number }>({ port })),
  initialDelaySeconds: seconds,
  periodSeconds: integer({ min: 1, max: MAX_PROBE_SECONDS }),
  timeoutSeconds: integer({ min: 1, max: MAX_PROBE_SECONDS }),
  failureThreshold: threshold,
  successThreshold: threshold,
});

/** A probe with exactly one handler. */
export const probe: Validator<Probe> = (value, path) => {
  const problem = probeShape(value, path);
  if (problem !== null) return problem;
  const p = value as Probe;
  const handlers = [p.exec, p.httpGet, p.tcpSocket].filter((h) => h !== undefined).length;
  return handlers === 1 ? null : fail(path, `expected exactly one of exec, httpGet, tcpSocket, got ${handlers}`);
};

const unitProbes = object<UnitProbes>({ startup: optional(probe), readiness: optional(probe), liveness: optional(probe) });

export const unitSpec: Validator<UnitSpec> = object<UnitSpec>({
  containerName: name,
  command: argv,
  env: array(envVar, MAX_ENV_VARS_PER_UNIT),
  resources,
  tolerations: array(toleration, MAX_TOLERATIONS_PER_UNIT),
  labels: optional(labels),
  ports: optional(array(containerPort, MAX_PORTS_PER_UNIT)),
  probes: optional(unitProbes),
  gracePeriodMs: optional(integer({ min: 0, max: MAX_GRACE_PERIOD_MS })),
  restartedAt: optional(string({ maxChars: 64, nonEmpty: true, printable: true })),
  hostPID: optional(((value, path) => (value === true ? null : expected('true', value, path))) as Validator<true>),
  limits: optional(
    object<NonNullable<UnitSpec['limits']>>({ cpu: optional(integer({ min: 1, max: MAX_RESOURCE_AMOUNT })), memory: optional(integer({ min: 1, max: MAX_RESOURCE_AMOUNT })) }),
  ),
});

const address = string({ maxChars: MAX_ADDRESS_CHARS, nonEmpty: true, printable: true });

/** Conditions one node may report. */
export const MAX_NODE_CONDITIONS = 16;

export const nodeCondition: Validator<NodeCondition> = object<NodeCondition>({
  type: string({ maxChars: 64, nonEmpty: true, printable: true }),
  status: oneOf(['True', 'False', 'Unknown'] as const),
  reason: string({ maxChars: 64, nonEmpty: true, printable: true }),
  message: reason,
});

export const nodeInfo: Validator<NodeInfo> = object<NodeInfo>({
  name,
  capacity: resources,
  taints: array(taint, MAX_TAINTS_PER_NODE),
  labels,
  address: optional(address),
  conditions: optional(array(nodeCondition, MAX_NODE_CONDITIONS)),
});

const unitPortStatus = object<UnitPortStatus>({
  name: optional(string({ maxChars: 15, nonEmpty: true, printable: true })),
  containerPort: integer({ min: 1, max: 65535 }),
  hostPort: integer({ min: 1, max: 65535 }),
  hostIP: address,
});

type ProxyService = ProxyTable['services'][number];
type ProxyPort = ProxyService['ports'][number];
type ProxyEndpoint = ProxyPort['endpoints'][number];
export const proxyTable: Validator<ProxyTable> = object<ProxyTable>({
  services: array(
    object<ProxyService>({
      name,
      ports: array(
        object<ProxyPort>({
          name: optional(string({ maxChars: 15, nonEmpty: true, printable: true })),
          nodePort: integer({ min: 1, max: 65535 }),
          endpoints: array(object<ProxyEndpoint>({ ip: address, port: integer({ min: 1, max: 65535 }), unit: name }), MAX_ENDPOINTS),
        }),
        MAX_SERVICE_PORTS,
      ),
    }),
    MAX_SERVICES,
  ),
});

export const unitReport: Validator<UnitReport> = object<UnitReport>({
  name,
  deployment: name,
  phase: oneOf(['Pending', 'Running', 'Terminating', 'Succeeded', 'Failed'] as const),
  pid: optional(integer({ min: 1 })),
  // Exit codes are 0..255 on POSIX, but Windows reports 32-bit values.
  exitCode: optional(integer({ min: -(2 ** 31), max: 2 ** 32 - 1 })),
  signal: optional(string({ maxChars: MAX_SIGNAL_CHARS, nonEmpty: true, printable: true })),
  reason: optional(reason),
  message: optional(reason),
  startedAt: optional(timestampMs),
  finishedAt: optional(timestampMs),
  resources,
  term,
  ready: optional(boolean),
  readySince: optional(timestampMs),
  specHash: optional(string({ maxChars: MAX_SPEC_HASH_CHARS, nonEmpty: true, printable: true })),
  revision: optional(integer({ min: 0 })),
  ports: optional(array(unitPortStatus, MAX_PORTS_PER_UNIT)),
});

/** A finite number >= 0 (a sum of seconds). */
const nonNegative: Validator<number> = (value, path) => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? null : expected('a finite number >= 0', value, path));

/** A cumulative histogram over AGENT_SECONDS_BUCKETS: one count per bound, non-decreasing, none above the total. */
const histogramShape = object<HistogramCounts>({ buckets: array(count, AGENT_SECONDS_BUCKETS.length), count, sum: nonNegative });
const histogramCounts: Validator<HistogramCounts> = (value, path) => {
  const shape = histogramShape(value, path);
  if (shape !== null) return shape;
  const h = value as HistogramCounts;
  if (h.buckets.length !== AGENT_SECONDS_BUCKETS.length) return fail(`${path}.buckets`, `expected ${AGENT_SECONDS_BUCKETS.length} counts (one per bound), got ${h.buckets.length}`);
  for (let i = 0; i < h.buckets.length; i++) {
    if ((i > 0 && h.buckets[i] < h.buckets[i - 1]) || h.buckets[i] > h.count)
      return fail(`${path}.buckets[${i}]`, `cumulative counts must not decrease nor exceed count ${h.count}, got ${h.buckets[i]}`);
  }
  return null;
};

/** The figures a heartbeat carries every STATS_INTERVAL_MS. */
const agentStats = object<AgentStats>({
  spawnSeconds: histogramCounts,
  heartbeatRtt: array(object<AgentStats['heartbeatRtt'][number]>({ replica: id, seconds: histogramCounts, lastSeconds: nonNegative }), MAX_STATS_REPLICAS),
  probes: array(object<AgentStats['probes'][number]>({ probe: oneOf(['startup', 'readiness', 'liveness'] as const), result: oneOf(['success', 'failure'] as const), count }), 6),
  units: array(object<AgentStats['units'][number]>({ phase: oneOf(['Pending', 'Running', 'Terminating', 'Succeeded', 'Failed'] as const), count }), 5),
});

// ---- the messages ---------------------------------------------------------

const v = literal(PROTOCOL_VERSION as 1);

const agentSchemas: { [K in AgentMessage['type']]: Validator<Extract<AgentMessage, { type: K }>> } = {
  hello: object<HelloMessage>({
    v,
    type: literal('hello'),
    node: nodeInfo,
    agentPid: integer({ min: 1 }),
    units: array(unitReport, MAX_UNITS_PER_HELLO),
    highestTerm: term,
  }),
  heartbeat: object<HeartbeatMessage>({ v, type: literal('heartbeat'), seq: count, sentAt: timestampMs, stats: optional(agentStats) }),
  'unit-status': object<UnitStatusMessage>({ v, type: literal('unit-status'), unit: unitReport }),
  'unit-gone': object<UnitGoneMessage>({ v, type: literal('unit-gone'), name }),
  'command-refused': object<CommandRefusedMessage>({
    v,
    type: literal('command-refused'),
    commandId: id,
    reason,
  }),
  'log-data': object<LogDataMessage>({
    v,
    type: literal('log-data'),
    requestId: id,
    data: string({ maxChars: MAX_LOG_CHUNK_CHARS }),
  }),
  'log-end': object<LogEndMessage>({ v, type: literal('log-end'), requestId: id, error: optional(reason) }),
};

const controlPlaneSchemas: {
  [K in ControlPlaneMessage['type']]: Validator<Extract<ControlPlaneMessage, { type: K }>>;
} = {
  welcome: object<WelcomeMessage>({
    v,
    type: literal('welcome'),
    replicaId: id,
    term,
    leaderId: nullable(id),
    heartbeatIntervalMs: integer({ min: 1 }),
    pingIntervalMs: integer({ min: 1 }),
  }),
  'ping-interval': object<PingIntervalMessage>({ v, type: literal('ping-interval'), pingIntervalMs: integer({ min: 1 }) }),
  spawn: object<SpawnCommand>({
    v,
    type: literal('spawn'),
    commandId: id,
    term,
    leaderId: id,
    unit: object<SpawnCommand['unit']>({
      name,
      deployment: name,
      spec: unitSpec,
      revision: integer({ min: 0 }),
      specHash: string({ maxChars: MAX_SPEC_HASH_CHARS, nonEmpty: true, printable: true }),
    }),
  }),
  terminate: object<TerminateCommand>({
    v,
    type: literal('terminate'),
    commandId: id,
    term,
    leaderId: id,
    name,
    gracePeriodMs: integer({ min: 0 }),
    reason,
  }),
  forget: object<ForgetCommand>({ v, type: literal('forget'), commandId: id, term, leaderId: id, name }),
  leader: object<LeaderMessage>({ v, type: literal('leader'), term, leaderId: nullable(id) }),
  'log-open': object<LogOpenMessage>({
    v,
    type: literal('log-open'),
    requestId: id,
    name,
    follow: boolean,
    tailLines: optional(integer({ min: 0 })),
    sinceMs: optional(timestampMs),
    timestamps: boolean,
  }),
  'log-close': object<LogCloseMessage>({ v, type: literal('log-close'), requestId: id }),
  services: object<ServicesMessage>({ v, type: literal('services'), term, leaderId: id, table: proxyTable }),
};

export type Validated<M> = { ok: true; msg: M } | { ok: false; error: string };

function validateEnvelope<M>(value: unknown, schemas: Record<string, Validator<unknown>>, otherSide: Record<string, unknown>, sender: string): Validated<M> {
  if (!isPlainObject(value)) return { ok: false, error: `frame is not a map, got ${describe(value)}` };
  if (!Object.hasOwn(value, 'v') || value.v === undefined) return { ok: false, error: 'frame has no protocol version "v"' };
  if (value.v !== PROTOCOL_VERSION) return { ok: false, error: `unsupported protocol version ${describe(value.v)}` };
  const type = Object.hasOwn(value, 'type') ? value.type : undefined;
  if (typeof type !== 'string') return { ok: false, error: `frame has no message type, got ${describe(type)}` };
  if (!Object.hasOwn(schemas, type)) {
    const hint = Object.hasOwn(otherSide, type) ? ` (not a message ${sender} sends)` : '';
    return { ok: false, error: `unknown message type ${describe(type)}${hint}` };
  }
  const problem = schemas[type](value, type);
  return problem === null ? { ok: true, msg: value as M } : { ok: false, error: problem.line };
}

/** Checks a decoded value is an AgentMessage; never throws. */
export function validateAgentMessage(value: unknown): Validated<AgentMessage> {
  return validateEnvelope<AgentMessage>(value, agentSchemas, controlPlaneSchemas, 'an agent');
}

/** Checks a decoded value is a ControlPlaneMessage; never throws. */
export function validateControlPlaneMessage(value: unknown): Validated<ControlPlaneMessage> {
  return validateEnvelope<ControlPlaneMessage>(value, controlPlaneSchemas, agentSchemas, 'the control plane');
}
