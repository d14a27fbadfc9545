// shared/manifest.ts -- the Deployment manifest a user applies (a subset of
// Kubernetes apps/v1 Deployment, see docs/contract.md, "Manifests") and the
// UnitSpec derived from it. Used by the CLI (to refuse a bad file before it
// is sent) and by the API server (the authority: it validates every PUT).
// Pure: no I/O, no clock.
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
import { DNS_LABEL, DNS_SUBDOMAIN, TAINT_EFFECTS } from './notation.ts';
import {
  MAX_ARGV_ENTRIES,
  MAX_ARG_CHARS,
  MAX_ENV_NAME_CHARS,
  MAX_ENV_VALUE_CHARS,
  MAX_ENV_VARS_PER_UNIT,
  MAX_GRACE_PERIOD_MS,
  MAX_LABELS_PER_OBJECT,
  MAX_PORTS_PER_UNIT,
  MAX_PROBE_PATH_CHARS,
  MAX_PROBE_SECONDS,
  MAX_PROBE_THRESHOLD,
  MAX_TAINT_KEY_CHARS,
  MAX_TAINT_VALUE_CHARS,
  MAX_TOLERATIONS_PER_UNIT,
} from './protocol/validate.ts';
import { fieldPath, isPlainObject } from './validate.ts';

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

// ---- checking values ------------------------------------------------------

const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** True for a Kubernetes label key: `[prefix/]name`, prefix a DNS subdomain (<= 253), name <= 63. */
export function isLabelKey(key: string): boolean {
  const slash = key.lastIndexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && LABEL_NAME.test(name);
}

/** True for a Kubernetes label value: empty, or <= 63 of [-A-Za-z0-9_.] starting and ending alphanumeric. */
export function isLabelValue(value: string): boolean {
  return value === '' || (value.length <= 63 && LABEL_NAME.test(value));
}

function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (Array.isArray(value)) return `a list of ${value.length}`;
  return typeof value === 'object' ? 'an object' : typeof value;
}

/** `a.b` for identifier-like keys, `a["nvidia.com/gpu"]` otherwise (escaped, cut short). */
function child(path: string, key: string): string {
  return fieldPath(path, key);
}

/** The object at `path`, after refusing every key that is neither known nor deliberately ignored. */
function object(value: unknown, path: string, known: readonly string[], ignored: readonly string[] = []): Record<string, unknown> {
  if (!isPlainObject(value)) throw new ManifestError(path, `expected an object, got ${show(value)}`);
  for (const key of Object.keys(value)) {
    if (!known.includes(key) && !ignored.includes(key)) throw new ManifestError(child(path, key), 'not supported');
  }
  return value;
}

function has(obj: Record<string, unknown>, key: string): boolean {
  return Object.hasOwn(obj, key) && obj[key] !== undefined && obj[key] !== null;
}

function string(value: unknown, path: string, maxChars: number): string {
  if (typeof value !== 'string') {
    const hint = typeof value === 'number' || typeof value === 'boolean' ? ' (quote it in YAML)' : '';
    throw new ManifestError(path, `expected a string${hint}, got ${show(value)}`);
  }
  if (value.length > maxChars) throw new ManifestError(path, `at most ${maxChars} chars allowed, got ${value.length}`);
  if (value.includes('\u0000')) throw new ManifestError(path, 'NUL characters are not allowed');
  return value;
}

function list(value: unknown, path: string, maxItems: number): unknown[] {
  if (!Array.isArray(value)) throw new ManifestError(path, `expected a list, got ${show(value)}`);
  if (value.length > maxItems) throw new ManifestError(path, `at most ${maxItems} entries allowed, got ${value.length}`);
  return value;
}

function dnsLabel(value: unknown, path: string, maxChars: number): string {
  const s = string(value, path, Number.MAX_SAFE_INTEGER);
  if (s.length === 0 || s.length > maxChars || !DNS_LABEL.test(s)) {
    throw new ManifestError(
      path,
      `expected a DNS-1123 label of at most ${maxChars} chars (lower-case letters, digits and '-', starting and ending with a letter or digit), got ${show(value)}`,
    );
  }
  return s;
}

function labelMap(value: unknown, path: string): Record<string, string> {
  if (!isPlainObject(value)) throw new ManifestError(path, `expected a map of strings, got ${show(value)}`);
  const keys = Object.keys(value);
  if (keys.length > MAX_LABELS_PER_OBJECT) throw new ManifestError(path, `at most ${MAX_LABELS_PER_OBJECT} labels allowed, got ${keys.length}`);
  const out: Record<string, string> = {};
  for (const key of keys) {
    if (!isLabelKey(key)) throw new ManifestError(child(path, key), 'not a valid label key ([prefix/]name, name at most 63 chars)');
    const v = string(value[key], child(path, key), Number.MAX_SAFE_INTEGER);
    if (!isLabelValue(v)) throw new ManifestError(child(path, key), `not a valid label value (at most 63 of [-A-Za-z0-9_.]), got ${show(v)}`);
    out[key] = v;
  }
  return out;
}

function annotations(value: unknown, path: string): void {
  if (!isPlainObject(value)) throw new ManifestError(path, `expected a map of strings, got ${show(value)}`);
  const keys = Object.keys(value);
  if (keys.length > MAX_LABELS_PER_OBJECT) throw new ManifestError(path, `at most ${MAX_LABELS_PER_OBJECT} annotations allowed, got ${keys.length}`);
  for (const key of keys) {
    if (!isLabelKey(key)) throw new ManifestError(child(path, key), 'not a valid annotation key');
    string(value[key], child(path, key), MAX_ANNOTATION_VALUE_CHARS);
  }
}

const EFFECTS: readonly TaintEffect[] = TAINT_EFFECTS;

/** One toleration, empty strings normalised to absent fields. */
function toleration(value: unknown, path: string): Toleration {
  const t = object(value, path, ['key', 'operator', 'value', 'effect']);
  const key = has(t, 'key') ? string(t.key, `${path}.key`, MAX_TAINT_KEY_CHARS) : '';
  const operator = has(t, 'operator') ? t.operator : 'Equal';
  if (operator !== 'Exists' && operator !== 'Equal') {
    throw new ManifestError(`${path}.operator`, `expected "Exists" or "Equal", got ${show(operator)}`);
  }
  const val = has(t, 'value') ? string(t.value, `${path}.value`, MAX_TAINT_VALUE_CHARS) : '';
  const effect = has(t, 'effect') ? t.effect : '';
  if (effect !== '' && !EFFECTS.includes(effect as TaintEffect)) {
    throw new ManifestError(`${path}.effect`, `expected one of ${EFFECTS.map((e) => `"${e}"`).join(', ')} (or none for all), got ${show(effect)}`);
  }
  if (key !== '' && !isLabelKey(key)) throw new ManifestError(`${path}.key`, `not a valid taint key ([prefix/]name, name at most 63 of [-A-Za-z0-9_.]), got ${show(key)}`);
  if (!isLabelValue(val)) throw new ManifestError(`${path}.value`, `not a valid taint value (at most 63 of [-A-Za-z0-9_.]), got ${show(val)}`);
  if (operator === 'Exists' && val !== '') throw new ManifestError(`${path}.value`, 'must be empty when operator is "Exists"');
  if (operator === 'Equal' && key === '') throw new ManifestError(`${path}.key`, 'required when operator is "Equal" (only "Exists" may leave it empty to tolerate every taint)');
  const out: Toleration = key === '' ? { operator } : { key, operator };
  if (operator === 'Equal') out.value = val;
  if (effect !== '') out.effect = effect as TaintEffect;
  return out;
}

function quantity(value: unknown, path: string, parse: (q: string | number) => number): number {
  if (typeof value !== 'string' && typeof value !== 'number') {
    throw new ManifestError(path, `expected a quantity such as ${path.endsWith('cpu') ? '500m or 1' : '512Mi or 2Gi'}, got ${show(value)}`);
  }
  try {
    return parse(value);
  } catch (err) {
    if (err instanceof QuantityError) throw new ManifestError(path, err.message);
    throw err;
  }
}

function wholeNumber(value: unknown, path: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ManifestError(path, `expected an integer in ${min}..${max}, got ${show(value)}`);
  }
  return value;
}

const PERCENT = /^(\d{1,3})%$/;

/** maxSurge / maxUnavailable: an integer >= 0 or 'N%'. */
function intOrPercent(value: unknown, path: string): IntOrPercent {
  if (typeof value === 'number') return wholeNumber(value, path, 0, 1_000_000);
  if (typeof value === 'string' && PERCENT.test(value)) return value;
  throw new ManifestError(path, `expected an integer >= 0 or a percentage such as "25%", got ${show(value)}`);
}

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

function strategy(value: unknown, path: string): DeploymentStrategy {
  const s = object(value, path, ['type', 'rollingUpdate']);
  const type = has(s, 'type') ? s.type : 'RollingUpdate';
  if (type !== 'RollingUpdate' && type !== 'Recreate') {
    throw new ManifestError(`${path}.type`, `expected "RollingUpdate" or "Recreate", got ${show(type)}`);
  }
  if (type === 'Recreate') {
    if (has(s, 'rollingUpdate')) throw new ManifestError(`${path}.rollingUpdate`, 'may not be given when type is "Recreate"');
    return { type };
  }
  const out: DeploymentStrategy = { type };
  if (has(s, 'rollingUpdate')) {
    const ru = object(s.rollingUpdate, `${path}.rollingUpdate`, ['maxSurge', 'maxUnavailable']);
    const maxSurge = has(ru, 'maxSurge') ? intOrPercent(ru.maxSurge, `${path}.rollingUpdate.maxSurge`) : undefined;
    const maxUnavailable = has(ru, 'maxUnavailable') ? intOrPercent(ru.maxUnavailable, `${path}.rollingUpdate.maxUnavailable`) : undefined;
    if (typeof maxUnavailable === 'string' && Number(PERCENT.exec(maxUnavailable)![1]) > 100) {
      throw new ManifestError(`${path}.rollingUpdate.maxUnavailable`, `may not be more than 100%, got ${show(maxUnavailable)}`);
    }
    if (isZero(maxSurge ?? DEFAULT_MAX_SURGE) && isZero(maxUnavailable ?? DEFAULT_MAX_UNAVAILABLE)) {
      throw new ManifestError(`${path}.rollingUpdate.maxUnavailable`, 'may not be 0 when maxSurge is 0 (the rollout could never start)');
    }
    out.rollingUpdate = {};
    if (maxSurge !== undefined) out.rollingUpdate.maxSurge = maxSurge;
    if (maxUnavailable !== undefined) out.rollingUpdate.maxUnavailable = maxUnavailable;
  }
  return out;
}

/** IANA service name, as Kubernetes checks a port's name. */
const PORT_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

function portNumber(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) {
    throw new ManifestError(path, `expected a port number in 1..65535, got ${show(value)}`);
  }
  return value;
}

function containerPorts(value: unknown, path: string): ContainerPort[] {
  const seenNames = new Set<string>();
  const seenPorts = new Set<string>();
  return list(value, path, MAX_PORTS_PER_UNIT).map((p, i) => {
    const pPath = `${path}[${i}]`;
    const o = object(p, pPath, ['containerPort', 'name', 'protocol']);
    if (!has(o, 'containerPort')) throw new ManifestError(`${pPath}.containerPort`, 'missing');
    const containerPort = portNumber(o.containerPort, `${pPath}.containerPort`);
    const protocol = has(o, 'protocol') ? o.protocol : 'TCP';
    if (protocol !== 'TCP' && protocol !== 'UDP') throw new ManifestError(`${pPath}.protocol`, `expected "TCP" or "UDP", got ${show(protocol)}`);
    const out: ContainerPort = { containerPort, protocol };
    if (has(o, 'name')) {
      const n = string(o.name, `${pPath}.name`, 15);
      if (!PORT_NAME.test(n) || !/[a-z]/.test(n) || n.includes('--')) {
        throw new ManifestError(`${pPath}.name`, `expected at most 15 lower-case letters, digits and '-' with at least one letter, got ${show(n)}`);
      }
      if (seenNames.has(n)) throw new ManifestError(`${pPath}.name`, `duplicate port name ${show(n)}`);
      seenNames.add(n);
      out.name = n;
    }
    const key = `${containerPort}/${protocol}`;
    if (seenPorts.has(key)) throw new ManifestError(`${pPath}.containerPort`, `duplicate port ${key}`);
    seenPorts.add(key);
    return out;
  });
}

/** A probe's port: a number, or the name of one of the container's ports. */
function probePort(value: unknown, path: string, ports: readonly ContainerPort[]): { written: number | string; port: number } {
  if (typeof value === 'string') {
    const named = ports.find((p) => p.name === value);
    if (!named) throw new ManifestError(path, `no port named ${show(value)} in the container's ports`);
    return { written: value, port: named.containerPort };
  }
  const port = portNumber(value, path);
  return { written: port, port };
}

/** One probe: exactly one handler, Kubernetes' defaults filled in. */
function probe(value: unknown, path: string, ports: readonly ContainerPort[], successMustBeOne: boolean): { written: ManifestProbe; resolved: Probe } {
  const timing = ['initialDelaySeconds', 'periodSeconds', 'timeoutSeconds', 'failureThreshold', 'successThreshold'] as const;
  const o = object(value, path, ['exec', 'httpGet', 'tcpSocket', ...timing]);
  const handlers = (['exec', 'httpGet', 'tcpSocket'] as const).filter((h) => has(o, h));
  if (handlers.length !== 1) {
    throw new ManifestError(path, handlers.length === 0 ? 'needs a handler: one of exec, httpGet, tcpSocket' : `may have only one handler, got ${handlers.join(' and ')}`);
  }
  const written: ManifestProbe = {} as ManifestProbe;
  const resolved: Probe = { ...PROBE_DEFAULTS };
  if (has(o, 'exec')) {
    const e = object(o.exec, `${path}.exec`, ['command']);
    if (!has(e, 'command')) throw new ManifestError(`${path}.exec.command`, 'missing');
    const command = list(e.command, `${path}.exec.command`, MAX_ARGV_ENTRIES).map((a, i) => string(a, `${path}.exec.command[${i}]`, MAX_ARG_CHARS));
    if (command.length === 0 || command[0] === '') throw new ManifestError(`${path}.exec.command`, 'expected a non-empty list whose first entry is the program');
    written.exec = { command };
    resolved.exec = { command };
  } else if (has(o, 'httpGet')) {
    const h = object(o.httpGet, `${path}.httpGet`, ['path', 'port']);
    if (!has(h, 'port')) throw new ManifestError(`${path}.httpGet.port`, 'missing');
    const p = probePort(h.port, `${path}.httpGet.port`, ports);
    const urlPath = has(h, 'path') ? string(h.path, `${path}.httpGet.path`, MAX_PROBE_PATH_CHARS) : '/';
    if (!urlPath.startsWith('/') || /[\u0000-\u0020\u007f]/.test(urlPath)) {
      throw new ManifestError(`${path}.httpGet.path`, `expected an absolute path without spaces or control characters, got ${show(urlPath)}`);
    }
    written.httpGet = { path: urlPath, port: p.written };
    resolved.httpGet = { path: urlPath, port: p.port };
  } else {
    const t = object(o.tcpSocket, `${path}.tcpSocket`, ['port']);
    if (!has(t, 'port')) throw new ManifestError(`${path}.tcpSocket.port`, 'missing');
    const p = probePort(t.port, `${path}.tcpSocket.port`, ports);
    written.tcpSocket = { port: p.written };
    resolved.tcpSocket = { port: p.port };
  }
  for (const field of timing) {
    if (!has(o, field)) continue;
    const min = field === 'initialDelaySeconds' ? 0 : 1;
    const max = field.endsWith('Threshold') ? MAX_PROBE_THRESHOLD : MAX_PROBE_SECONDS;
    resolved[field] = wholeNumber(o[field], `${path}.${field}`, min, max);
  }
  if (successMustBeOne && resolved.successThreshold !== 1) {
    throw new ManifestError(`${path}.successThreshold`, `must be 1 for liveness and startup probes, got ${resolved.successThreshold}`);
  }
  for (const field of timing) written[field] = resolved[field];
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
  const root = object(obj, '', ['apiVersion', 'kind', 'metadata', 'spec']);
  if (root.apiVersion !== 'apps/v1') throw new ManifestError('apiVersion', `expected "apps/v1", got ${show(root.apiVersion)}`);
  if (root.kind !== 'Deployment') throw new ManifestError('kind', `expected "Deployment", got ${show(root.kind)}`);

  if (!has(root, 'metadata')) throw new ManifestError('metadata', 'missing');
  const metadata = object(root.metadata, 'metadata', ['name', 'labels', 'annotations']);
  if (!has(metadata, 'name')) throw new ManifestError('metadata.name', 'missing');
  const name = dnsLabel(metadata.name, 'metadata.name', MAX_DEPLOYMENT_NAME_CHARS);
  const labels = has(metadata, 'labels') ? labelMap(metadata.labels, 'metadata.labels') : undefined;
  if (has(metadata, 'annotations')) annotations(metadata.annotations, 'metadata.annotations');

  if (!has(root, 'spec')) throw new ManifestError('spec', 'missing');
  const spec = object(root.spec, 'spec', ['replicas', 'selector', 'template', 'strategy', 'minReadySeconds', 'revisionHistoryLimit', 'progressDeadlineSeconds', 'paused']);
  const replicas = has(spec, 'replicas') ? spec.replicas : DEFAULT_REPLICAS;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) {
    throw new ManifestError('spec.replicas', `expected an integer >= 0, got ${show(replicas)}`);
  }
  if (replicas > MAX_REPLICAS) throw new ManifestError('spec.replicas', `at most ${MAX_REPLICAS} allowed, got ${replicas}`);

  if (!has(spec, 'template')) throw new ManifestError('spec.template', 'missing');
  const template = object(spec.template, 'spec.template', ['metadata', 'spec']);
  let templateLabels: Record<string, string> | undefined;
  if (has(template, 'metadata')) {
    const tm = object(template.metadata, 'spec.template.metadata', ['labels', 'annotations']);
    if (has(tm, 'labels')) templateLabels = labelMap(tm.labels, 'spec.template.metadata.labels');
    if (has(tm, 'annotations')) annotations(tm.annotations, 'spec.template.metadata.annotations');
  }
  if (has(spec, 'selector')) {
    const selector = object(spec.selector, 'spec.selector', ['matchLabels']);
    const matchLabels = has(selector, 'matchLabels') ? labelMap(selector.matchLabels, 'spec.selector.matchLabels') : {};
    for (const [k, v] of Object.entries(matchLabels)) {
      if (templateLabels?.[k] !== v) {
        throw new ManifestError('spec.template.metadata.labels', `must carry every spec.selector.matchLabels pair, missing ${k}=${v}`);
      }
    }
  }

  if (!has(template, 'spec')) throw new ManifestError('spec.template.spec', 'missing');
  const podSpec = object(template.spec, 'spec.template.spec', ['containers', 'tolerations', 'terminationGracePeriodSeconds', 'hostPID']);
  if (has(podSpec, 'hostPID') && typeof podSpec.hostPID !== 'boolean') {
    throw new ManifestError('spec.template.spec.hostPID', `expected true or false, got ${show(podSpec.hostPID)}`);
  }
  const hostPID = podSpec.hostPID === true;
  if (!has(podSpec, 'containers')) throw new ManifestError('spec.template.spec.containers', 'missing');
  const containers = list(podSpec.containers, 'spec.template.spec.containers', Number.MAX_SAFE_INTEGER);
  if (containers.length !== 1) {
    throw new ManifestError('spec.template.spec.containers', `expected exactly one container (a unit is one process), got ${containers.length}`);
  }

  const cPath = 'spec.template.spec.containers[0]';
  const c = object(containers[0], cPath, ['name', 'command', 'args', 'env', 'resources', 'ports', 'readinessProbe', 'livenessProbe', 'startupProbe'], ['image', 'imagePullPolicy']);
  if (has(c, 'image')) string(c.image, `${cPath}.image`, MAX_ARG_CHARS);
  if (has(c, 'imagePullPolicy')) string(c.imagePullPolicy, `${cPath}.imagePullPolicy`, MAX_ARG_CHARS);
  if (!has(c, 'name')) throw new ManifestError(`${cPath}.name`, 'missing');
  const containerName = dnsLabel(c.name, `${cPath}.name`, MAX_DNS_LABEL_CHARS);

  if (!has(c, 'command')) {
    throw new ManifestError(`${cPath}.command`, 'missing (a unit runs this program on the node; there is no image entrypoint)');
  }
  const command = list(c.command, `${cPath}.command`, MAX_ARGV_ENTRIES).map((a, i) => string(a, `${cPath}.command[${i}]`, MAX_ARG_CHARS));
  if (command.length === 0 || command[0] === '') throw new ManifestError(`${cPath}.command`, 'expected a non-empty list whose first entry is the program');
  const args = has(c, 'args') ? list(c.args, `${cPath}.args`, MAX_ARGV_ENTRIES).map((a, i) => string(a, `${cPath}.args[${i}]`, MAX_ARG_CHARS)) : undefined;
  if (command.length + (args?.length ?? 0) > MAX_ARGV_ENTRIES) {
    throw new ManifestError(`${cPath}.args`, `command and args together may have at most ${MAX_ARGV_ENTRIES} entries`);
  }

  const env: EnvVar[] | undefined = has(c, 'env')
    ? list(c.env, `${cPath}.env`, MAX_ENV_VARS_PER_UNIT).map((e, i) => {
        const ePath = `${cPath}.env[${i}]`;
        const entry = object(e, ePath, ['name', 'value']);
        if (!has(entry, 'name')) throw new ManifestError(`${ePath}.name`, 'missing');
        const envName = string(entry.name, `${ePath}.name`, MAX_ENV_NAME_CHARS);
        if (envName === '' || envName.includes('=') || /[\u0000-\u001f\u007f]/.test(envName)) {
          throw new ManifestError(`${ePath}.name`, `expected a non-empty name without '=' or control characters, got ${show(envName)}`);
        }
        return { name: envName, value: has(entry, 'value') ? string(entry.value, `${ePath}.value`, MAX_ENV_VALUE_CHARS) : '' };
      })
    : undefined;

  let cpuRequest: string | number | undefined;
  let memoryRequest: string | number | undefined;
  let requestsGiven: { cpu?: string | number; memory?: string | number } | undefined;
  let limitsGiven: { cpu?: string | number; memory?: string | number } | undefined;
  if (has(c, 'resources')) {
    const resources = object(c.resources, `${cPath}.resources`, ['requests', 'limits']);
    if (has(resources, 'requests')) {
      const requests = object(resources.requests, `${cPath}.resources.requests`, ['cpu', 'memory']);
      requestsGiven = {};
      if (has(requests, 'cpu')) cpuRequest = requestsGiven.cpu = requests.cpu as string | number;
      if (has(requests, 'memory')) memoryRequest = requestsGiven.memory = requests.memory as string | number;
    }
    if (has(resources, 'limits')) {
      const lim = object(resources.limits, `${cPath}.resources.limits`, ['cpu', 'memory']);
      limitsGiven = {};
      if (has(lim, 'cpu')) limitsGiven.cpu = lim.cpu as string | number;
      if (has(lim, 'memory')) limitsGiven.memory = lim.memory as string | number;
    }
  }
  const limits: { cpu?: number; memory?: number } = {};
  if (limitsGiven?.cpu !== undefined) limits.cpu = quantity(limitsGiven.cpu, `${cPath}.resources.limits.cpu`, parseCpu);
  if (limitsGiven?.memory !== undefined) limits.memory = quantity(limitsGiven.memory, `${cPath}.resources.limits.memory`, parseMemory);
  if (limits.cpu === 0) throw new ManifestError(`${cPath}.resources.limits.cpu`, 'must be greater than 0');
  if (limits.memory === 0) throw new ManifestError(`${cPath}.resources.limits.memory`, 'must be greater than 0');
  // Kubernetes: a request not given defaults to its limit when there is one.
  const cpu =
    cpuRequest !== undefined
      ? quantity(cpuRequest, `${cPath}.resources.requests.cpu`, parseCpu)
      : (limits.cpu ?? quantity(DEFAULT_CPU_REQUEST, `${cPath}.resources.requests.cpu`, parseCpu));
  const memory =
    memoryRequest !== undefined
      ? quantity(memoryRequest, `${cPath}.resources.requests.memory`, parseMemory)
      : (limits.memory ?? quantity(DEFAULT_MEMORY_REQUEST, `${cPath}.resources.requests.memory`, parseMemory));
  if (limits.cpu !== undefined && limits.cpu < cpu) {
    throw new ManifestError(`${cPath}.resources.limits.cpu`, `${limits.cpu}m is below the request of ${cpu}m (resources.requests.cpu); a limit must be at least its request`);
  }
  if (limits.memory !== undefined && limits.memory < memory) {
    throw new ManifestError(
      `${cPath}.resources.limits.memory`,
      `${limits.memory}Mi is below the request of ${memory}Mi (resources.requests.memory); a limit must be at least its request`,
    );
  }

  const tolerations = has(podSpec, 'tolerations')
    ? list(podSpec.tolerations, 'spec.template.spec.tolerations', MAX_TOLERATIONS_PER_UNIT).map((t, i) => toleration(t, `spec.template.spec.tolerations[${i}]`))
    : undefined;

  const ports = has(c, 'ports') ? containerPorts(c.ports, `${cPath}.ports`) : undefined;
  const probes: UnitProbes = {};
  const probesOut: Partial<Record<'readinessProbe' | 'livenessProbe' | 'startupProbe', ManifestProbe>> = {};
  for (const [field, key] of [
    ['startupProbe', 'startup'],
    ['readinessProbe', 'readiness'],
    ['livenessProbe', 'liveness'],
  ] as const) {
    if (!has(c, field)) continue;
    const { written, resolved } = probe(c[field], `${cPath}.${field}`, ports ?? [], field !== 'readinessProbe');
    probes[key] = resolved;
    probesOut[field] = written;
  }
  const grace = has(podSpec, 'terminationGracePeriodSeconds')
    ? wholeNumber(podSpec.terminationGracePeriodSeconds, 'spec.template.spec.terminationGracePeriodSeconds', 0, MAX_GRACE_PERIOD_MS / 1000)
    : undefined;

  const container: PodTemplate['spec']['containers'][number] = { name: containerName, command };
  if (args !== undefined) container.args = args;
  if (env !== undefined) container.env = env;
  if (requestsGiven !== undefined || limitsGiven !== undefined) {
    container.resources = {};
    if (requestsGiven !== undefined) container.resources.requests = requestsGiven;
    if (limitsGiven !== undefined) container.resources.limits = limitsGiven;
  }
  if (ports !== undefined) container.ports = ports;
  Object.assign(container, probesOut);
  const templateOut: PodTemplate = { spec: { containers: [container] } };
  if (templateLabels !== undefined) templateOut.metadata = { labels: templateLabels };
  if (tolerations !== undefined) templateOut.spec.tolerations = tolerations;
  if (grace !== undefined) templateOut.spec.terminationGracePeriodSeconds = grace;
  if (has(podSpec, 'hostPID')) templateOut.spec.hostPID = hostPID;

  const specOut: DeploymentManifest['spec'] = { replicas, template: templateOut };
  if (has(spec, 'strategy')) specOut.strategy = strategy(spec.strategy, 'spec.strategy');
  if (has(spec, 'minReadySeconds')) specOut.minReadySeconds = wholeNumber(spec.minReadySeconds, 'spec.minReadySeconds', 0, MAX_DEPLOYMENT_SECONDS);
  if (has(spec, 'revisionHistoryLimit')) specOut.revisionHistoryLimit = wholeNumber(spec.revisionHistoryLimit, 'spec.revisionHistoryLimit', 0, 1000);
  if (has(spec, 'progressDeadlineSeconds')) {
    specOut.progressDeadlineSeconds = wholeNumber(spec.progressDeadlineSeconds, 'spec.progressDeadlineSeconds', 1, MAX_DEPLOYMENT_SECONDS);
    if (specOut.progressDeadlineSeconds <= (specOut.minReadySeconds ?? 0)) {
      throw new ManifestError('spec.progressDeadlineSeconds', `must be greater than spec.minReadySeconds (${specOut.minReadySeconds ?? 0})`);
    }
  }
  if (has(spec, 'paused')) {
    if (typeof spec.paused !== 'boolean') throw new ManifestError('spec.paused', `expected true or false, got ${show(spec.paused)}`);
    specOut.paused = spec.paused;
  }

  const manifest: DeploymentManifest = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: labels === undefined ? { name } : { name, labels },
    spec: specOut,
  };
  const unitSpec: UnitSpec = {
    containerName,
    command: [...command, ...(args ?? [])],
    env: env ?? [],
    resources: { cpu, memory },
    tolerations: tolerations ?? [],
  };
  // Optional fields only when used: a spec that uses none hashes as before.
  if (templateLabels !== undefined && Object.keys(templateLabels).length > 0) unitSpec.labels = templateLabels;
  if (ports !== undefined && ports.length > 0) unitSpec.ports = ports;
  if (Object.keys(probes).length > 0) unitSpec.probes = probes;
  if (grace !== undefined) unitSpec.gracePeriodMs = grace * 1000;
  if (limits.cpu !== undefined || limits.memory !== undefined) unitSpec.limits = limits;
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

/**
 * A Service (v1) as we accept it: `type: NodePort` (the default here, since
 * a cluster address would need a virtual network), TCP, a selector over
 * the units' template labels, ports with `port`, `targetPort` (a
 * containerPort number or a port name; default: `port`) and an optional
 * `nodePort` in NODE_PORT_MIN..NODE_PORT_MAX. Throws ManifestError naming
 * the field, like validateManifest.
 */
export function validateService(obj: unknown): ServiceManifest {
  const root = object(obj, '', ['apiVersion', 'kind', 'metadata', 'spec']);
  if (root.apiVersion !== 'v1') throw new ManifestError('apiVersion', `expected "v1", got ${show(root.apiVersion)}`);
  if (root.kind !== 'Service') throw new ManifestError('kind', `expected "Service", got ${show(root.kind)}`);
  if (!has(root, 'metadata')) throw new ManifestError('metadata', 'missing');
  const metadata = object(root.metadata, 'metadata', ['name', 'labels', 'annotations']);
  if (!has(metadata, 'name')) throw new ManifestError('metadata.name', 'missing');
  const name = dnsLabel(metadata.name, 'metadata.name', MAX_DNS_LABEL_CHARS);
  const labels = has(metadata, 'labels') ? labelMap(metadata.labels, 'metadata.labels') : undefined;
  if (has(metadata, 'annotations')) annotations(metadata.annotations, 'metadata.annotations');
  if (!has(root, 'spec')) throw new ManifestError('spec', 'missing');
  const spec = object(root.spec, 'spec', ['type', 'selector', 'ports']);
  const type = has(spec, 'type') ? spec.type : 'NodePort';
  if (type !== 'NodePort') {
    throw new ManifestError('spec.type', `only "NodePort" is supported (every node's proxy listens on its nodePort), got ${show(type)}`);
  }
  if (!has(spec, 'selector')) throw new ManifestError('spec.selector', 'missing (a Service picks its units by their template labels)');
  const selector = labelMap(spec.selector, 'spec.selector');
  if (Object.keys(selector).length === 0) throw new ManifestError('spec.selector', 'needs at least one label');
  if (!has(spec, 'ports')) throw new ManifestError('spec.ports', 'missing');
  const raw = list(spec.ports, 'spec.ports', MAX_PORTS_PER_UNIT);
  if (raw.length === 0) throw new ManifestError('spec.ports', 'needs at least one port');
  const seenNames = new Set<string>();
  const seenPorts = new Set<number>();
  const seenNodePorts = new Set<number>();
  const ports = raw.map((p, i): ServicePort => {
    const pPath = `spec.ports[${i}]`;
    const o = object(p, pPath, ['name', 'protocol', 'port', 'targetPort', 'nodePort']);
    if (has(o, 'protocol') && o.protocol !== 'TCP') throw new ManifestError(`${pPath}.protocol`, `only "TCP" is supported, got ${show(o.protocol)}`);
    if (!has(o, 'port')) throw new ManifestError(`${pPath}.port`, 'missing');
    const port = portNumber(o.port, `${pPath}.port`);
    if (seenPorts.has(port)) throw new ManifestError(`${pPath}.port`, `duplicate port ${port}`);
    seenPorts.add(port);
    const out: ServicePort = { protocol: 'TCP', port, targetPort: port };
    if (has(o, 'name')) {
      const n = string(o.name, `${pPath}.name`, 15);
      if (!PORT_NAME.test(n)) throw new ManifestError(`${pPath}.name`, `expected at most 15 lower-case letters, digits and '-', got ${show(n)}`);
      if (seenNames.has(n)) throw new ManifestError(`${pPath}.name`, `duplicate port name ${show(n)}`);
      seenNames.add(n);
      out.name = n;
    } else if (raw.length > 1) {
      throw new ManifestError(`${pPath}.name`, 'required when a Service has more than one port');
    }
    if (has(o, 'targetPort')) {
      if (typeof o.targetPort === 'string') {
        if (!PORT_NAME.test(o.targetPort) || !/[a-z]/.test(o.targetPort))
          throw new ManifestError(`${pPath}.targetPort`, `expected a port number or a container port's name, got ${show(o.targetPort)}`);
        out.targetPort = o.targetPort;
      } else {
        out.targetPort = portNumber(o.targetPort, `${pPath}.targetPort`);
      }
    }
    if (has(o, 'nodePort')) {
      const np = o.nodePort;
      if (typeof np !== 'number' || !Number.isInteger(np) || np < NODE_PORT_MIN || np > NODE_PORT_MAX) {
        throw new ManifestError(`${pPath}.nodePort`, `expected a port in ${NODE_PORT_MIN}..${NODE_PORT_MAX}, got ${show(np)}`);
      }
      if (seenNodePorts.has(np)) throw new ManifestError(`${pPath}.nodePort`, `duplicate nodePort ${np}`);
      seenNodePorts.add(np);
      out.nodePort = np;
    }
    return out;
  });
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: labels === undefined ? { name } : { name, labels },
    spec: { type: 'NodePort', selector, ports },
  };
}
