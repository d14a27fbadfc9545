// shared/manifest.ts -- the Deployment manifest a user applies (a subset of
// Kubernetes apps/v1 Deployment, see docs/contract.md, "Manifests") and the
// UnitSpec derived from it. Used by the CLI (to refuse a bad file before it
// is sent) and by the API server (the authority: it validates every PUT).
// Checked with the combinators of shared/validate.ts, as frames and the nodes
// file are: one schema per part of the written manifest, then a build step
// that cannot fail. Pure: no I/O, no clock.
//
// The rule: a field is either understood, or refused with its path
// (`spec.template.spec.volumes: not supported`); never silently ignored.
// The only exceptions are fields that carry no meaning for a unit but must
// be present for the same file to work on a real Kubernetes cluster:
//   * containers[].image, containers[].imagePullPolicy: a unit runs
//     `command` directly on the node's host; there is no image to pull.
//   * metadata.annotations, template.metadata.annotations: free-form notes,
//     checked for shape, not kept in the stored manifest.
//   * spec.selector.matchLabels: checked (the template's labels must carry
//     every pair, as Kubernetes requires), not kept: a deployment owns its
//     units by name here, not by label query.
// A field written empty (YAML `key:`, null) is a field not given.
// Kubernetes defaults we follow: replicas 1 when absent, toleration operator
// Equal when absent, env value '' when absent. Our own defaults: requests of
// cpu 100m and memory 128Mi when the container names none (the scheduler
// needs a size for every unit; Kubernetes would treat it as best-effort).
// Differences from Kubernetes: `command` is required (there is no image
// entrypoint to fall back on), exactly one container (a unit is one
// process). `resources.limits` (cpu, memory) are enforced by the agent through
// cgroups where it can (docs/isolation.md); as in Kubernetes a request that is
// not given defaults to its limit, and a limit below its request is refused.
// `hostPID: true` keeps a unit in the node's PID namespace (UnitSpec.hostPID;
// false or absent: a PID namespace of its own where the agent can make one).
// Workload fields (rollouts, probes, ports, grace) follow Kubernetes' names
// and defaults: strategy RollingUpdate 25%/25%, revisionHistoryLimit 10,
// progressDeadlineSeconds 600, probes 0/10/1/3/1 s. A probe's named port is
// resolved to its number in the UnitSpec. The grace period, when absent, is
// the cluster's default (2 s, lesson 2's "terminate, wait, kill", docs/lessons.md) rather
// than Kubernetes' 30 s.

import { parseDocument } from 'yaml';
import type {
  ContainerPort,
  DeploymentManifest,
  DeploymentStrategy,
  EnvVar,
  IntOrPercent,
  ManifestProbe,
  PodTemplate,
  Probe,
  ServiceManifest,
  ServicePort,
  TaintEffect,
  Toleration,
  UnitProbes,
  UnitSpec,
} from './model.ts';
import { QuantityError, parseCpu, parseMemory } from './quantity.ts';
import { TAINT_EFFECTS, isDnsLabel, isLabelKey, isLabelValue } from './notation.ts';
import {
  MAX_ARGV_ENTRIES,
  MAX_ARG_CHARS,
  MAX_ENV_NAME_CHARS,
  MAX_ENV_VALUE_CHARS,
  MAX_ENV_VARS_PER_UNIT,
  MAX_GRACE_PERIOD_MS,
  MAX_LABELS_PER_OBJECT,
  MAX_NAME_CHARS,
  MAX_PORTS_PER_UNIT,
  MAX_PROBE_PATH_CHARS,
  MAX_PROBE_SECONDS,
  MAX_PROBE_THRESHOLD,
  MAX_TAINT_KEY_CHARS,
  MAX_TAINT_VALUE_CHARS,
  MAX_TOLERATIONS_PER_UNIT,
} from './protocol/validate.ts';
import {
  type FieldTable,
  type Validator,
  array,
  boolean,
  describe,
  dropNullFields,
  expected,
  fail,
  integer,
  literal,
  object,
  oneOf,
  optional,
  refine,
  string,
  stringMap,
  toldWhenMissing,
  union,
  withMissing,
} from './validate.ts';

/** Label keys and values are shared/notation.ts's; named here too for the callers that read them as manifest rules. */
export { isLabelKey, isLabelValue };

/** Most replicas one deployment may ask for. */
export const MAX_REPLICAS = 1000;
/**
 * Longest deployment name. Units are named `<deployment>-<n>` with n
 * increasing and never reused; 52 leaves room for '-' and a 10-digit n so a
 * unit name is still a DNS-1123 label (<= 63), as Kubernetes leaves for the
 * suffixes of CronJob names.
 */
export const MAX_DEPLOYMENT_NAME_CHARS = 52;
/** DNS-1123 label: container names. */
export const MAX_DNS_LABEL_CHARS = 63;
/** Largest manifest text parsed (it must also fit one replicated log entry). */
export const MAX_MANIFEST_CHARS = 256 * 1024;
export const MAX_ANNOTATION_VALUE_CHARS = 4096;

export const DEFAULT_CPU_REQUEST = '100m';
export const DEFAULT_MEMORY_REQUEST = '128Mi';
export const DEFAULT_REPLICAS = 1;
/** Kubernetes' Deployment defaults. */
export const DEFAULT_MAX_SURGE = '25%';
export const DEFAULT_MAX_UNAVAILABLE = '25%';
export const DEFAULT_REVISION_HISTORY_LIMIT = 10;
export const DEFAULT_PROGRESS_DEADLINE_SECONDS = 600;
/** Kubernetes' probe defaults. */
export const PROBE_DEFAULTS = { initialDelaySeconds: 0, periodSeconds: 10, timeoutSeconds: 1, failureThreshold: 3, successThreshold: 1 } as const;
/** Largest minReadySeconds / progressDeadlineSeconds / terminationGracePeriodSeconds accepted. */
export const MAX_DEPLOYMENT_SECONDS = 86400;

/** A manifest that cannot be accepted; `field` is the path at fault ('' for the whole text). */
export class ManifestError extends Error {
  override readonly name = 'ManifestError';
  readonly code = 'INVALID_MANIFEST';
  constructor(
    readonly field: string,
    detail: string,
  ) {
    super(`invalid manifest: ${field === '' ? '' : `${field}: `}${detail}`);
  }
}

// ---- parsing text ---------------------------------------------------------

/**
 * YAML or JSON text to a plain value (JSON is parsed as YAML 1.2, of which it
 * is a subset). Syntax errors become one line with the position:
 * `invalid manifest: YAML syntax error at line 3, column 1: ...`.
 */
export function parseManifestObject(text: string, format?: 'yaml' | 'json'): unknown {
  const label = format === 'json' ? 'JSON' : 'YAML';
  if (text.length > MAX_MANIFEST_CHARS) {
    throw new ManifestError('', `${text.length} chars exceeds the limit of ${MAX_MANIFEST_CHARS}`);
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  const error = doc.errors[0];
  if (error !== undefined) {
    const where = error.linePos ? ` at line ${error.linePos[0].line}, column ${error.linePos[0].col}` : '';
    const what = error.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
    throw new ManifestError('', `${label} syntax error${where}: ${what}`);
  }
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new ManifestError('', `${label} error: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
}

/** Text to a validated manifest (see validateManifest). Throws ManifestError. */
export function parseManifest(text: string, format?: 'yaml' | 'json'): DeploymentManifest {
  return validateManifest(parseManifestObject(text, format)).manifest;
}

// ---- the written manifest -------------------------------------------------
// What a user may write, as types, and one validator per part made of the
// combinators of shared/validate.ts (as the frames are). Every rule is a
// validator: the shape first, then refine() for the rules across fields, so
// that once `deploymentSchema` passes, building the stored manifest and the
// UnitSpec cannot fail.

/** A Kubernetes quantity as written: `500m`, `1`, `2Gi`, 512. */
type Quantity = string | number;
type WrittenRequests = { cpu?: Quantity; memory?: Quantity };
type WrittenToleration = { key?: string; operator?: 'Exists' | 'Equal'; value?: string; effect?: TaintEffect | '' };
type WrittenPort = { containerPort: number; name?: string; protocol?: 'TCP' | 'UDP' };
type WrittenContainer = {
  name: string;
  command: string[];
  args?: string[];
  env?: Array<{ name: string; value?: string }>;
  resources?: { requests?: WrittenRequests; limits?: WrittenRequests };
  ports?: WrittenPort[];
  readinessProbe?: ManifestProbe;
  livenessProbe?: ManifestProbe;
  startupProbe?: ManifestProbe;
  /** Ignored: a unit runs `command` on the node's host (see the header). */
  image?: string;
  imagePullPolicy?: string;
};
type WrittenMetadata = { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
type WrittenStrategy = { type?: 'RollingUpdate' | 'Recreate'; rollingUpdate?: { maxSurge?: IntOrPercent; maxUnavailable?: IntOrPercent } };
type WrittenDeployment = {
  apiVersion: 'apps/v1';
  kind: 'Deployment';
  metadata: WrittenMetadata;
  spec: {
    replicas?: number;
    selector?: { matchLabels?: Record<string, string> };
    template: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec: { containers: [WrittenContainer]; tolerations?: WrittenToleration[]; terminationGracePeriodSeconds?: number; hostPID?: boolean };
    };
    strategy?: WrittenStrategy;
    minReadySeconds?: number;
    revisionHistoryLimit?: number;
    progressDeadlineSeconds?: number;
    paused?: boolean;
  };
};

/**
 * Manifests say "not supported" for a field we do not know (it may well be
 * valid Kubernetes), and read `key:` (null) as a field not given.
 */
function fields<T>(table: FieldTable<T>, what?: string): Validator<T> {
  return object<T>(table, { unknownField: 'not supported', nullIsAbsent: true, what });
}

/** A string as people write it (`expected a string (quote it in YAML), got 5`). */
function text(maxChars: number): Validator<string> {
  return string({ maxChars, written: true });
}

/** A list (`expected a list, got "sleep 5"`). */
function list<T>(item: Validator<T>, maxItems: number, what = 'a list'): Validator<T[]> {
  return array(item, maxItems, what);
}

/** `expected "TCP" or "UDP", got ...`. */
function either<const L extends string>(...choices: L[]): Validator<L> {
  const shown = choices.map((c) => JSON.stringify(c));
  return oneOf(choices, `${shown.slice(0, -1).join(', ')} or ${shown[shown.length - 1]}`);
}

function count(min: number, max: number): Validator<number> {
  return integer({ min, max });
}

function dnsLabel(maxChars: number): Validator<string> {
  return refine(text(Number.MAX_SAFE_INTEGER), (s, path) =>
    isDnsLabel(s, maxChars) ? null : expected(`a DNS-1123 label of at most ${maxChars} chars (lower-case letters, digits and '-', starting and ending with a letter or digit)`, s, path),
  );
}

const labelMap: Validator<Record<string, string>> = stringMap(
  refine(text(Number.MAX_SAFE_INTEGER), (k, path) => (isLabelKey(k) ? null : fail(path, 'not a valid label key ([prefix/]name, name at most 63 chars)'))),
  refine(text(Number.MAX_SAFE_INTEGER), (v, path) => (isLabelValue(v) ? null : fail(path, `not a valid label value (at most 63 of [-A-Za-z0-9_.]), got ${describe(v)}`))),
  MAX_LABELS_PER_OBJECT,
);

/** The rules of a document people write, for the nodes file too (shared/nodes-file.ts). */
export { fields as writtenFields, text as writtenText, list as writtenList, labelMap as writtenLabels };

const annotations: Validator<Record<string, string>> = stringMap(
  refine(text(Number.MAX_SAFE_INTEGER), (k, path) => (isLabelKey(k) ? null : fail(path, 'not a valid annotation key'))),
  text(MAX_ANNOTATION_VALUE_CHARS),
  MAX_LABELS_PER_OBJECT,
);

const metadata = (nameMaxChars: number): Validator<WrittenMetadata> =>
  fields<WrittenMetadata>({ name: dnsLabel(nameMaxChars), labels: optional(labelMap), annotations: optional(annotations) });

const argv: Validator<string[]> = refine(list(text(MAX_ARG_CHARS), MAX_ARGV_ENTRIES), (command, path) =>
  command.length === 0 || command[0] === '' ? fail(path, 'expected a non-empty list whose first entry is the program') : null,
);

const TAINT_CHOICES = TAINT_EFFECTS.map((e) => `"${e}"`).join(', ');

/** One toleration; the rules Kubernetes has for operator, key and value. */
const toleration: Validator<WrittenToleration> = refine(
  fields<WrittenToleration>({
    key: optional(text(MAX_TAINT_KEY_CHARS)),
    operator: optional(either('Exists', 'Equal')),
    value: optional(text(MAX_TAINT_VALUE_CHARS)),
    effect: optional(oneOf(['', ...TAINT_EFFECTS], `one of ${TAINT_CHOICES} (or none for all)`)),
  }),
  (t, path) => {
    const key = t.key ?? '';
    const value = t.value ?? '';
    const operator = t.operator ?? 'Equal';
    if (key !== '' && !isLabelKey(key)) return fail(`${path}.key`, `not a valid taint key ([prefix/]name, name at most 63 of [-A-Za-z0-9_.]), got ${describe(key)}`);
    if (!isLabelValue(value)) return fail(`${path}.value`, `not a valid taint value (at most 63 of [-A-Za-z0-9_.]), got ${describe(value)}`);
    if (operator === 'Exists' && value !== '') return fail(`${path}.value`, 'must be empty when operator is "Exists"');
    if (operator === 'Equal' && key === '') return fail(`${path}.key`, 'required when operator is "Equal" (only "Exists" may leave it empty to tolerate every taint)');
    return null;
  },
);

/** A quantity that parses: `expected a quantity such as 500m or 1`, or the parser's own message. */
function quantity(parse: (q: string | number) => number, example: string): Validator<Quantity> {
  return (value, path) => {
    if (typeof value !== 'string' && typeof value !== 'number') return expected(`a quantity such as ${example}`, value, path);
    try {
      parse(value);
      return null;
    } catch (err) {
      if (err instanceof QuantityError) return fail(path, err.message);
      throw err;
    }
  };
}

const requests = fields<WrittenRequests>({ cpu: optional(quantity(parseCpu, '500m or 1')), memory: optional(quantity(parseMemory, '512Mi or 2Gi')) });
const limits = refine(requests, (l, path) => {
  if (l.cpu !== undefined && parseCpu(l.cpu) === 0) return fail(`${path}.cpu`, 'must be greater than 0');
  if (l.memory !== undefined && parseMemory(l.memory) === 0) return fail(`${path}.memory`, 'must be greater than 0');
  return null;
});

/** The cpu and memory written, as written (a request or a limit). */
function given(r: WrittenRequests): WrittenRequests {
  const out: WrittenRequests = {};
  if (r.cpu !== undefined) out.cpu = r.cpu;
  if (r.memory !== undefined) out.memory = r.memory;
  return out;
}

/** The requests a container asks the scheduler for, and its limits, as Kubernetes resolves them. */
function resolveResources(r: WrittenContainer['resources']): { cpu: number; memory: number; limits: { cpu?: number; memory?: number } } {
  const limitsOut: { cpu?: number; memory?: number } = {};
  if (r?.limits?.cpu !== undefined) limitsOut.cpu = parseCpu(r.limits.cpu);
  if (r?.limits?.memory !== undefined) limitsOut.memory = parseMemory(r.limits.memory);
  // Kubernetes: a request not given defaults to its limit when there is one.
  const cpu = r?.requests?.cpu !== undefined ? parseCpu(r.requests.cpu) : (limitsOut.cpu ?? parseCpu(DEFAULT_CPU_REQUEST));
  const memory = r?.requests?.memory !== undefined ? parseMemory(r.requests.memory) : (limitsOut.memory ?? parseMemory(DEFAULT_MEMORY_REQUEST));
  return { cpu, memory, limits: limitsOut };
}

const resources = refine(fields<NonNullable<WrittenContainer['resources']>>({ requests: optional(requests), limits: optional(limits) }), (r, path) => {
  const { cpu, memory, limits: l } = resolveResources(r);
  if (l.cpu !== undefined && l.cpu < cpu) return fail(`${path}.limits.cpu`, `${l.cpu}m is below the request of ${cpu}m (resources.requests.cpu); a limit must be at least its request`);
  if (l.memory !== undefined && l.memory < memory) {
    return fail(`${path}.limits.memory`, `${l.memory}Mi is below the request of ${memory}Mi (resources.requests.memory); a limit must be at least its request`);
  }
  return null;
});

const PERCENT = /^(\d{1,3})%$/;

/** maxSurge / maxUnavailable: an integer >= 0 or 'N%'. */
const intOrPercent: Validator<IntOrPercent> = union<IntOrPercent>(
  'an integer >= 0 or a percentage such as "25%"',
  { accepts: (v) => typeof v === 'number', check: count(0, 1_000_000) },
  { accepts: (v) => typeof v === 'string' && PERCENT.test(v), check: text(5) },
);

/** True for 0 and '0%'. */
function isZero(v: IntOrPercent): boolean {
  return v === 0 || v === '0%';
}

/**
 * The count an IntOrPercent stands for, as Kubernetes resolves it: a
 * percentage of replicas rounded up for maxSurge, down for maxUnavailable.
 */
export function resolveIntOrPercent(v: IntOrPercent, replicas: number, roundUp: boolean): number {
  if (typeof v === 'number') return v;
  const pct = Number(PERCENT.exec(v)?.[1] ?? 0);
  const exact = (pct * replicas) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

const strategy: Validator<WrittenStrategy> = refine(
  fields<WrittenStrategy>({
    type: optional(either('RollingUpdate', 'Recreate')),
    rollingUpdate: optional(fields<NonNullable<WrittenStrategy['rollingUpdate']>>({ maxSurge: optional(intOrPercent), maxUnavailable: optional(intOrPercent) })),
  }),
  (s, path) => {
    if (s.type === 'Recreate') return s.rollingUpdate !== undefined ? fail(`${path}.rollingUpdate`, 'may not be given when type is "Recreate"') : null;
    if (s.rollingUpdate === undefined) return null;
    const { maxSurge, maxUnavailable } = s.rollingUpdate;
    if (typeof maxUnavailable === 'string' && Number(PERCENT.exec(maxUnavailable)![1]) > 100) {
      return fail(`${path}.rollingUpdate.maxUnavailable`, `may not be more than 100%, got ${describe(maxUnavailable)}`);
    }
    if (isZero(maxSurge ?? DEFAULT_MAX_SURGE) && isZero(maxUnavailable ?? DEFAULT_MAX_UNAVAILABLE)) {
      return fail(`${path}.rollingUpdate.maxUnavailable`, 'may not be 0 when maxSurge is 0 (the rollout could never start)');
    }
    return null;
  },
);

/** IANA service name, as Kubernetes checks a port's name. */
const PORT_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

const portNumber = integer({ min: 1, max: 65535, what: 'a port number in 1..65535' });

const containerPortName = refine(text(15), (n, path) =>
  PORT_NAME.test(n) && /[a-z]/.test(n) && !n.includes('--') ? null : expected("at most 15 lower-case letters, digits and '-' with at least one letter", n, path),
);

/** A container's ports: names and number/protocol pairs unique. */
const containerPorts: Validator<WrittenPort[]> = refine(
  list(fields<WrittenPort>({ containerPort: portNumber, name: optional(containerPortName), protocol: optional(either('TCP', 'UDP')) }), MAX_PORTS_PER_UNIT),
  (ports, path) => {
    const seenNames = new Set<string>();
    const seenPorts = new Set<string>();
    for (let i = 0; i < ports.length; i++) {
      const p = ports[i];
      if (p.name !== undefined) {
        if (seenNames.has(p.name)) return fail(`${path}[${i}].name`, `duplicate port name ${describe(p.name)}`);
        seenNames.add(p.name);
      }
      const key = `${p.containerPort}/${p.protocol ?? 'TCP'}`;
      if (seenPorts.has(key)) return fail(`${path}[${i}].containerPort`, `duplicate port ${key}`);
      seenPorts.add(key);
    }
    return null;
  },
);

/** A probe's port: a number, or the name of one of the container's ports (resolved by the container's rule). */
const probePort: Validator<number | string> = (value, path) => (typeof value === 'string' ? text(MAX_NAME_CHARS)(value, path) : portNumber(value, path));

const urlPath = refine(text(MAX_PROBE_PATH_CHARS), (p, path) =>
  // eslint-disable-next-line no-control-regex
  p.startsWith('/') && !/[\u0000-\u0020\u007f]/.test(p) ? null : expected('an absolute path without spaces or control characters', p, path),
);

const PROBE_TIMING = ['initialDelaySeconds', 'periodSeconds', 'timeoutSeconds', 'failureThreshold', 'successThreshold'] as const;

/** One probe: exactly one handler; liveness and startup probes succeed once. */
function probe(successMustBeOne: boolean): Validator<ManifestProbe> {
  return refine(
    fields<ManifestProbe>({
      exec: optional(fields<{ command: string[] }>({ command: argv })),
      httpGet: optional(fields<NonNullable<ManifestProbe['httpGet']>>({ path: optional(urlPath), port: probePort })),
      tcpSocket: optional(fields<NonNullable<ManifestProbe['tcpSocket']>>({ port: probePort })),
      initialDelaySeconds: optional(count(0, MAX_PROBE_SECONDS)),
      periodSeconds: optional(count(1, MAX_PROBE_SECONDS)),
      timeoutSeconds: optional(count(1, MAX_PROBE_SECONDS)),
      failureThreshold: optional(count(1, MAX_PROBE_THRESHOLD)),
      successThreshold: optional(count(1, MAX_PROBE_THRESHOLD)),
    }),
    (p, path) => {
      const handlers = (['exec', 'httpGet', 'tcpSocket'] as const).filter((h) => p[h] !== undefined);
      if (handlers.length !== 1)
        return fail(path, handlers.length === 0 ? 'needs a handler: one of exec, httpGet, tcpSocket' : `may have only one handler, got ${handlers.join(' and ')}`);
      if (successMustBeOne && p.successThreshold !== undefined && p.successThreshold !== 1) {
        return fail(`${path}.successThreshold`, `must be 1 for liveness and startup probes, got ${p.successThreshold}`);
      }
      return null;
    },
  );
}

const PROBE_FIELDS = [
  ['startupProbe', 'startup'],
  ['readinessProbe', 'readiness'],
  ['livenessProbe', 'liveness'],
] as const;

const envName = refine(text(MAX_ENV_NAME_CHARS), (n, path) =>
  // eslint-disable-next-line no-control-regex
  n === '' || n.includes('=') || /[\u0000-\u001f\u007f]/.test(n) ? expected("a non-empty name without '=' or control characters", n, path) : null,
);

/** The one container: argv within its limit, probes naming ports it has. */
const container: Validator<WrittenContainer> = refine(
  fields<WrittenContainer>({
    name: dnsLabel(MAX_DNS_LABEL_CHARS),
    command: withMissing(argv, '(a unit runs this program on the node; there is no image entrypoint)'),
    args: optional(list(text(MAX_ARG_CHARS), MAX_ARGV_ENTRIES)),
    env: optional(list(fields<{ name: string; value?: string }>({ name: envName, value: optional(text(MAX_ENV_VALUE_CHARS)) }), MAX_ENV_VARS_PER_UNIT)),
    resources: optional(resources),
    ports: optional(containerPorts),
    readinessProbe: optional(probe(false)),
    livenessProbe: optional(probe(true)),
    startupProbe: optional(probe(true)),
    image: optional(text(MAX_ARG_CHARS)),
    imagePullPolicy: optional(text(MAX_ARG_CHARS)),
  }),
  (c, path) => {
    if (c.command.length + (c.args?.length ?? 0) > MAX_ARGV_ENTRIES) return fail(`${path}.args`, `command and args together may have at most ${MAX_ARGV_ENTRIES} entries`);
    for (const [field] of PROBE_FIELDS) {
      const p = c[field];
      const handler = p?.httpGet !== undefined ? 'httpGet' : 'tcpSocket';
      const port = p?.[handler]?.port;
      if (typeof port === 'string' && !c.ports?.some((cp) => cp.name === port)) {
        return fail(`${path}.${field}.${handler}.port`, `no port named ${describe(port)} in the container's ports`);
      }
    }
    return null;
  },
);

/** Exactly one container, told before its fields are looked at. */
const containers: Validator<[WrittenContainer]> = (value, path) => {
  if (!Array.isArray(value)) return expected('a list', value, path);
  if (value.length !== 1) return fail(path, `expected exactly one container (a unit is one process), got ${value.length}`);
  return container(value[0], `${path}[0]`);
};

type WrittenSpec = WrittenDeployment['spec'];
type WrittenTemplate = WrittenSpec['template'];

const deploymentSpec: Validator<WrittenSpec> = refine(
  fields<WrittenSpec>({
    replicas: optional(refine(integer({ min: 0, what: 'an integer >= 0' }), (n, path) => (n > MAX_REPLICAS ? fail(path, `at most ${MAX_REPLICAS} allowed, got ${n}`) : null))),
    selector: optional(fields<NonNullable<WrittenSpec['selector']>>({ matchLabels: optional(labelMap) })),
    template: fields<WrittenTemplate>({
      metadata: optional(fields<NonNullable<WrittenTemplate['metadata']>>({ labels: optional(labelMap), annotations: optional(annotations) })),
      spec: fields<WrittenTemplate['spec']>({
        containers,
        tolerations: optional(list(toleration, MAX_TOLERATIONS_PER_UNIT)),
        terminationGracePeriodSeconds: optional(count(0, MAX_GRACE_PERIOD_MS / 1000)),
        hostPID: optional(boolean),
      }),
    }),
    strategy: optional(strategy),
    minReadySeconds: optional(count(0, MAX_DEPLOYMENT_SECONDS)),
    revisionHistoryLimit: optional(count(0, 1000)),
    progressDeadlineSeconds: optional(count(1, MAX_DEPLOYMENT_SECONDS)),
    paused: optional(boolean),
  }),
  (spec, path) => {
    const templateLabels = spec.template.metadata?.labels;
    for (const [k, v] of Object.entries(spec.selector?.matchLabels ?? {})) {
      if (templateLabels?.[k] !== v) return fail(`${path}.template.metadata.labels`, `must carry every spec.selector.matchLabels pair, missing ${k}=${v}`);
    }
    if (spec.progressDeadlineSeconds !== undefined && spec.progressDeadlineSeconds <= (spec.minReadySeconds ?? 0)) {
      return fail(`${path}.progressDeadlineSeconds`, `must be greater than spec.minReadySeconds (${spec.minReadySeconds ?? 0})`);
    }
    return null;
  },
);

const deploymentSchema: Validator<WrittenDeployment> = fields<WrittenDeployment>({
  apiVersion: toldWhenMissing(literal('apps/v1')),
  kind: toldWhenMissing(literal('Deployment')),
  metadata: metadata(MAX_DEPLOYMENT_NAME_CHARS),
  spec: deploymentSpec,
});

/** Runs a schema over a parsed document; throws ManifestError naming the field. Returns a copy without the null (absent) fields. */
function check<T>(schema: Validator<T>, obj: unknown): T {
  const problem = schema(obj, '');
  if (problem !== null) throw new ManifestError(problem.path, problem.detail);
  return dropNullFields(obj) as T;
}

/** A probe as stored (Kubernetes' defaults written out) and as the agent runs it (named ports resolved). */
function resolveProbe(p: ManifestProbe, ports: readonly ContainerPort[]): { written: ManifestProbe; resolved: Probe } {
  const portOf = (port: number | string): number => (typeof port === 'number' ? port : ports.find((cp) => cp.name === port)!.containerPort);
  const written: ManifestProbe = {} as ManifestProbe;
  const resolved: Probe = { ...PROBE_DEFAULTS };
  if (p.exec !== undefined) {
    written.exec = { command: p.exec.command };
    resolved.exec = { command: p.exec.command };
  } else if (p.httpGet !== undefined) {
    const urlPath = p.httpGet.path ?? '/';
    written.httpGet = { path: urlPath, port: p.httpGet.port };
    resolved.httpGet = { path: urlPath, port: portOf(p.httpGet.port) };
  } else {
    written.tcpSocket = { port: p.tcpSocket!.port };
    resolved.tcpSocket = { port: portOf(p.tcpSocket!.port) };
  }
  for (const field of PROBE_TIMING) {
    if (p[field] !== undefined) resolved[field] = p[field];
  }
  for (const field of PROBE_TIMING) written[field] = resolved[field];
  return { written, resolved };
}

// ---- the manifest ---------------------------------------------------------

/**
 * Checks a parsed manifest against the supported subset. Returns the
 * manifest rebuilt from the understood fields only (nothing from the input is
 * passed through unchecked) and the UnitSpec every replica runs. Throws
 * ManifestError naming the first field at fault.
 */
export function validateManifest(obj: unknown): { manifest: DeploymentManifest; unitSpec: UnitSpec } {
  const { metadata: meta, spec } = check(deploymentSchema, obj);
  const podSpec = spec.template.spec;
  const c = podSpec.containers[0];
  const templateLabels = spec.template.metadata?.labels;
  const { cpu, memory, limits: limitsOut } = resolveResources(c.resources);
  const env: EnvVar[] | undefined = c.env?.map((e) => ({ name: e.name, value: e.value ?? '' }));
  const tolerations: Toleration[] | undefined = podSpec.tolerations?.map((t) => {
    // Kubernetes' defaults: operator Equal; empty strings are absent fields.
    const operator = t.operator ?? 'Equal';
    const out: Toleration = t.key === undefined || t.key === '' ? { operator } : { key: t.key, operator };
    if (operator === 'Equal') out.value = t.value ?? '';
    if (t.effect !== undefined && t.effect !== '') out.effect = t.effect;
    return out;
  });
  const ports: ContainerPort[] | undefined = c.ports?.map((p) => {
    const out: ContainerPort = { containerPort: p.containerPort, protocol: p.protocol ?? 'TCP' };
    if (p.name !== undefined) out.name = p.name;
    return out;
  });
  const probes: UnitProbes = {};
  const probesOut: Partial<Record<(typeof PROBE_FIELDS)[number][0], ManifestProbe>> = {};
  for (const [field, key] of PROBE_FIELDS) {
    const p = c[field];
    if (p === undefined) continue;
    const { written, resolved } = resolveProbe(p, ports ?? []);
    probes[key] = resolved;
    probesOut[field] = written;
  }
  const grace = podSpec.terminationGracePeriodSeconds;
  const hostPID = podSpec.hostPID === true;

  const containerOut: PodTemplate['spec']['containers'][number] = { name: c.name, command: c.command };
  if (c.args !== undefined) containerOut.args = c.args;
  if (env !== undefined) containerOut.env = env;
  if (c.resources?.requests !== undefined || c.resources?.limits !== undefined) {
    containerOut.resources = {};
    if (c.resources.requests !== undefined) containerOut.resources.requests = given(c.resources.requests);
    if (c.resources.limits !== undefined) containerOut.resources.limits = given(c.resources.limits);
  }
  if (ports !== undefined) containerOut.ports = ports;
  Object.assign(containerOut, probesOut);
  const templateOut: PodTemplate = { spec: { containers: [containerOut] } };
  if (templateLabels !== undefined) templateOut.metadata = { labels: templateLabels };
  if (tolerations !== undefined) templateOut.spec.tolerations = tolerations;
  if (grace !== undefined) templateOut.spec.terminationGracePeriodSeconds = grace;
  if (podSpec.hostPID !== undefined) templateOut.spec.hostPID = hostPID;

  const specOut: DeploymentManifest['spec'] = { replicas: spec.replicas ?? DEFAULT_REPLICAS, template: templateOut };
  if (spec.strategy !== undefined) {
    const type = spec.strategy.type ?? 'RollingUpdate';
    const ru = spec.strategy.rollingUpdate;
    specOut.strategy = { type };
    if (type === 'RollingUpdate' && ru !== undefined) {
      specOut.strategy.rollingUpdate = {};
      if (ru.maxSurge !== undefined) specOut.strategy.rollingUpdate.maxSurge = ru.maxSurge;
      if (ru.maxUnavailable !== undefined) specOut.strategy.rollingUpdate.maxUnavailable = ru.maxUnavailable;
    }
  }
  if (spec.minReadySeconds !== undefined) specOut.minReadySeconds = spec.minReadySeconds;
  if (spec.revisionHistoryLimit !== undefined) specOut.revisionHistoryLimit = spec.revisionHistoryLimit;
  if (spec.progressDeadlineSeconds !== undefined) specOut.progressDeadlineSeconds = spec.progressDeadlineSeconds;
  if (spec.paused !== undefined) specOut.paused = spec.paused;

  const manifest: DeploymentManifest = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta.labels === undefined ? { name: meta.name } : { name: meta.name, labels: meta.labels },
    spec: specOut,
  };
  const unitSpec: UnitSpec = {
    containerName: c.name,
    command: [...c.command, ...(c.args ?? [])],
    env: env ?? [],
    resources: { cpu, memory },
    tolerations: tolerations ?? [],
  };
  // Optional fields only when used: a spec that uses none hashes as before.
  if (templateLabels !== undefined && Object.keys(templateLabels).length > 0) unitSpec.labels = templateLabels;
  if (ports !== undefined && ports.length > 0) unitSpec.ports = ports;
  if (Object.keys(probes).length > 0) unitSpec.probes = probes;
  if (grace !== undefined) unitSpec.gracePeriodMs = grace * 1000;
  if (limitsOut.cpu !== undefined || limitsOut.memory !== undefined) unitSpec.limits = limitsOut;
  if (hostPID) unitSpec.hostPID = true;
  return { manifest, unitSpec };
}

// ---- spec identity --------------------------------------------------------

/** JSON with object keys sorted at every level and undefined fields left out. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * A stable 16-hex-digit identity of a UnitSpec: FNV-1a 64 over the UTF-8
 * bytes of its canonical JSON. Equal specs hash equal whatever their key
 * order; the reconciler compares hashes to see that a unit runs an old
 * template. Not cryptographic, and need not be: it guards against change,
 * not against an adversary. Order of env and tolerations counts.
 */
export function canonicalSpecJson(spec: UnitSpec): string {
  return canonicalJson(spec);
}

export function unitSpecHash(spec: UnitSpec): string {
  const bytes = new TextEncoder().encode(canonicalJson(spec));
  // 64-bit FNV-1a in four 16-bit limbs (h0 least significant): the same
  // value as BigInt arithmetic, without a BigInt per byte (that cost ~5% of
  // the leader's CPU per write). prime = 2^40 + 0x1b3, so h * prime is
  // h * 0x1b3 plus h shifted left by 40 bits (limb 2 gets h0 * 0x100).
  let h0 = 0x2325;
  let h1 = 0x8422;
  let h2 = 0x9ce4;
  let h3 = 0xcbf2;
  for (let i = 0; i < bytes.length; i++) {
    h0 ^= bytes[i];
    const t0 = h0 * 0x1b3;
    let t1 = h1 * 0x1b3;
    let t2 = h2 * 0x1b3 + h0 * 0x100;
    const t3 = h3 * 0x1b3 + h1 * 0x100;
    t1 += t0 >>> 16;
    t2 += t1 >>> 16;
    h0 = t0 & 0xffff;
    h1 = t1 & 0xffff;
    h2 = t2 & 0xffff;
    h3 = (t3 + Math.floor(t2 / 0x10000)) & 0xffff;
  }
  const hex = (n: number) => n.toString(16).padStart(4, '0');
  return hex(h3) + hex(h2) + hex(h1) + hex(h0);
}

// ---- Services ---------------------------------------------------------------

/** NodePorts the cluster hands out, as Kubernetes' default range. */
export const NODE_PORT_MIN = 30000;
export const NODE_PORT_MAX = 32767;

type WrittenServicePort = { name?: string; protocol?: 'TCP'; port: number; targetPort?: number | string; nodePort?: number };
type WrittenService = {
  apiVersion: 'v1';
  kind: 'Service';
  metadata: WrittenMetadata;
  spec: { type?: 'NodePort'; selector: Record<string, string>; ports: WrittenServicePort[] };
};

const servicePortName = refine(text(15), (n, path) => (PORT_NAME.test(n) ? null : expected("at most 15 lower-case letters, digits and '-'", n, path)));

const targetPort: Validator<number | string> = (value, path) => {
  if (typeof value !== 'string') return portNumber(value, path);
  return PORT_NAME.test(value) && /[a-z]/.test(value) ? null : expected("a port number or a container port's name", value, path);
};

const servicePorts: Validator<WrittenServicePort[]> = refine(
  list(
    fields<WrittenServicePort>({
      name: optional(servicePortName),
      protocol: optional(((value, path) => (value === 'TCP' ? null : fail(path, `only "TCP" is supported, got ${describe(value)}`))) as Validator<'TCP'>),
      port: portNumber,
      targetPort: optional(targetPort),
      nodePort: optional(integer({ min: NODE_PORT_MIN, max: NODE_PORT_MAX, what: `a port in ${NODE_PORT_MIN}..${NODE_PORT_MAX}` })),
    }),
    MAX_PORTS_PER_UNIT,
  ),
  (ports, path) => {
    if (ports.length === 0) return fail(path, 'needs at least one port');
    const seenNames = new Set<string>();
    const seenPorts = new Set<number>();
    const seenNodePorts = new Set<number>();
    for (let i = 0; i < ports.length; i++) {
      const p = ports[i];
      if (seenPorts.has(p.port)) return fail(`${path}[${i}].port`, `duplicate port ${p.port}`);
      seenPorts.add(p.port);
      if (p.name !== undefined) {
        if (seenNames.has(p.name)) return fail(`${path}[${i}].name`, `duplicate port name ${describe(p.name)}`);
        seenNames.add(p.name);
      } else if (ports.length > 1) {
        return fail(`${path}[${i}].name`, 'required when a Service has more than one port');
      }
      if (p.nodePort !== undefined) {
        if (seenNodePorts.has(p.nodePort)) return fail(`${path}[${i}].nodePort`, `duplicate nodePort ${p.nodePort}`);
        seenNodePorts.add(p.nodePort);
      }
    }
    return null;
  },
);

const serviceSchema: Validator<WrittenService> = fields<WrittenService>({
  apiVersion: toldWhenMissing(literal('v1')),
  kind: toldWhenMissing(literal('Service')),
  metadata: metadata(MAX_DNS_LABEL_CHARS),
  spec: fields<WrittenService['spec']>({
    type: optional(((value, path) =>
      value === 'NodePort' ? null : fail(path, `only "NodePort" is supported (every node's proxy listens on its nodePort), got ${describe(value)}`)) as Validator<'NodePort'>),
    selector: withMissing(
      refine(labelMap, (s, path) => (Object.keys(s).length === 0 ? fail(path, 'needs at least one label') : null)),
      '(a Service picks its units by their template labels)',
    ),
    ports: servicePorts,
  }),
});

/**
 * A Service (v1) as we accept it: `type: NodePort` (the default here, since
 * a cluster address would need a virtual network), TCP, a selector over
 * the units' template labels, ports with `port`, `targetPort` (a
 * containerPort number or a port name; default: `port`) and an optional
 * `nodePort` in NODE_PORT_MIN..NODE_PORT_MAX. Throws ManifestError naming
 * the field, like validateManifest.
 */
export function validateService(obj: unknown): ServiceManifest {
  const { metadata: meta, spec } = check(serviceSchema, obj);
  const ports = spec.ports.map((p): ServicePort => {
    const out: ServicePort = { protocol: 'TCP', port: p.port, targetPort: p.targetPort ?? p.port };
    if (p.name !== undefined) out.name = p.name;
    if (p.nodePort !== undefined) out.nodePort = p.nodePort;
    return out;
  });
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta.labels === undefined ? { name: meta.name } : { name: meta.name, labels: meta.labels },
    spec: { type: 'NodePort', selector: spec.selector, ports },
  };
}
