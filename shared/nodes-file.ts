// shared/nodes-file.ts -- the nodes a local cluster runs: the `--nodes FILE`
// of `npm start` (a YAML or JSON list), the four default nodes used when there
// is no file, and the taint/capacity notation shared with the agent's flags
// (`--taint gpu-only`, `--cpu 4000`, `--memory 8Gi`). Pure: parses text it
// is given, reads no files.
//
// File format, one entry per node:
//   - name: node-a          # DNS-1123 subdomain, unique in the file
//     cpu: 4000             # millicores; or a Kubernetes quantity: 4000m
//     memory: 8192          # MiB; or a Kubernetes quantity: 8Gi, 8192Mi
//     taints: [gpu-only, "zone=b:PreferNoSchedule", {key: k, value: v, effect: NoExecute}]
//     labels: {zone: b}
// Capacity notation: a bare whole number (8192, or the string "8192") is in
// this project's units, millicores and MiB, as docs/contract.md's tables say.
// Anything with a suffix is a Kubernetes quantity (4000m, 8Gi, 8192Mi); a
// bare fraction such as 1.5 is refused (write 1500m). Beware that Kubernetes reads a bare cpu "4" as
// 4 cores and a bare memory "8192" as bytes; here a bare number always means
// millicores / MiB. 4000m and 8Gi mean the same in both worlds.

import { parseDocument } from 'yaml';
import type { NodeInfo, Taint, TaintEffect } from './model.ts';
import { isLabelKey, isLabelValue } from './manifest.ts';
import { QuantityError, parseCpu, parseMemory } from './quantity.ts';
import { DEFAULT_TAINT_EFFECT, DNS_SUBDOMAIN, TAINT_EFFECTS } from './notation.ts';
import { MAX_LABELS_PER_OBJECT, MAX_NAME_CHARS, MAX_RESOURCE_AMOUNT, MAX_TAINTS_PER_NODE } from './protocol/validate.ts';
import { fieldPath, isPlainObject } from './validate.ts';

/** Most nodes one file may list: each one is an agent process on this machine. */
export const MAX_NODES_IN_FILE = 256;
/** Largest nodes file read. */
export const MAX_NODES_FILE_CHARS = 256 * 1024;

/** A bad nodes file entry, taint or capacity; `field` is the path at fault (`nodes[2].cpu`). */
export class NodeSpecError extends Error {
  override readonly name = 'NodeSpecError';
  readonly code = 'INVALID_NODE_SPEC';
  constructor(
    readonly field: string,
    detail: string,
  ) {
    super(field === '' ? detail : `${field}: ${detail}`);
  }
}

const EFFECTS = TAINT_EFFECTS;
/** A number without a unit suffix, written as a string. */
const BARE_NUMBER = /^\+?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** The four default nodes (docs/lessons.md, step 1). Frozen: clone before changing. */
export const LESSON_NODES: NodeInfo[] = deepFreeze([
  { name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} },
  { name: 'node-b', capacity: { cpu: 8000, memory: 16384 }, taints: [], labels: {} },
  { name: 'node-c', capacity: { cpu: 4000, memory: 8192 }, taints: [{ key: 'gpu-only', effect: 'NoSchedule' }], labels: {} },
  { name: 'node-d', capacity: { cpu: 8000, memory: 16384 }, taints: [], labels: {} },
]);

function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (Array.isArray(value)) return `a list of ${value.length}`;
  return typeof value === 'object' ? 'an object' : typeof value;
}

function effectOf(value: unknown, field: string, taintText?: string): TaintEffect {
  if (typeof value === 'string' && (EFFECTS as readonly string[]).includes(value)) return value as TaintEffect;
  const choices = `one of ${EFFECTS.join(', ')}, got ${show(value)}`;
  throw new NodeSpecError(field, taintText === undefined ? `expected ${choices}` : `invalid taint ${show(taintText)}: effect must be ${choices}`);
}

function checkTaint(taint: Taint, field: string, taintText: string): Taint {
  if (!isLabelKey(taint.key)) {
    throw new NodeSpecError(field, `invalid taint ${show(taintText)}: key ${show(taint.key)} is not a valid key ([prefix/]name, name at most 63 of [-A-Za-z0-9_.])`);
  }
  if (taint.value !== undefined && !isLabelValue(taint.value)) {
    throw new NodeSpecError(field, `invalid taint ${show(taintText)}: value ${show(taint.value)} is not a valid value (at most 63 of [-A-Za-z0-9_.])`);
  }
  return taint;
}

/**
 * A taint in the kubectl notation `key[=value][:Effect]`: 'gpu-only' is
 * {key: 'gpu-only', effect: 'NoSchedule'}, 'zone=b:NoExecute' carries a
 * value. The effect defaults to NoSchedule. Throws NodeSpecError.
 */
export function parseTaint(text: string, field = 'taint'): Taint {
  if (typeof text !== 'string') throw new NodeSpecError(field, `expected a taint such as "gpu-only" or "key=value:NoExecute", got ${show(text)}`);
  const colon = text.lastIndexOf(':');
  const keyValue = colon === -1 ? text : text.slice(0, colon);
  const effect = colon === -1 ? DEFAULT_TAINT_EFFECT : effectOf(text.slice(colon + 1), field, text);
  const eq = keyValue.indexOf('=');
  const taint: Taint = eq === -1 ? { key: keyValue, effect } : { key: keyValue.slice(0, eq), value: keyValue.slice(eq + 1), effect };
  if (taint.value === '') delete taint.value;
  return checkTaint(taint, field, text);
}

function taintFromObject(value: Record<string, unknown>, field: string): Taint {
  for (const key of Object.keys(value)) {
    if (key !== 'key' && key !== 'value' && key !== 'effect') throw new NodeSpecError(fieldPath(field, key), 'not supported');
  }
  if (typeof value.key !== 'string') throw new NodeSpecError(`${field}.key`, `expected a string, got ${show(value.key)}`);
  if (value.value !== undefined && value.value !== null && typeof value.value !== 'string') {
    throw new NodeSpecError(`${field}.value`, `expected a string (quote it in YAML), got ${show(value.value)}`);
  }
  const effect = value.effect === undefined || value.effect === null ? DEFAULT_TAINT_EFFECT : effectOf(value.effect, `${field}.effect`);
  const taint: Taint = typeof value.value === 'string' && value.value !== '' ? { key: value.key, value: value.value, effect } : { key: value.key, effect };
  return checkTaint(taint, field, `${taint.key}${taint.value === undefined ? '' : `=${taint.value}`}:${effect}`);
}

function capacity(input: unknown, field: string, what: 'cpu' | 'memory'): number {
  const unit = what === 'cpu' ? 'millicores' : 'MiB';
  let amount: number;
  if (typeof input === 'number' || (typeof input === 'string' && BARE_NUMBER.test(input))) {
    amount = Number(input);
    if (!Number.isSafeInteger(amount) || amount < 0) {
      throw new NodeSpecError(field, `expected a whole number of ${unit} or a quantity such as ${what === 'cpu' ? '4000m' : '8Gi'}, got ${show(input)}`);
    }
  } else if (typeof input === 'string') {
    try {
      amount = what === 'cpu' ? parseCpu(input) : parseMemory(input);
    } catch (err) {
      if (err instanceof QuantityError) throw new NodeSpecError(field, err.message);
      throw err;
    }
  } else {
    throw new NodeSpecError(field, `expected ${unit} or a quantity such as ${what === 'cpu' ? '4000m' : '8Gi'}, got ${show(input)}`);
  }
  if (amount === 0) throw new NodeSpecError(field, `a node needs some ${what}, got ${show(input)}`);
  if (amount > MAX_RESOURCE_AMOUNT) throw new NodeSpecError(field, `more than ${MAX_RESOURCE_AMOUNT} ${unit}`);
  return amount;
}

/** Node cpu capacity in millicores: 4000, '4000' and '4000m' all mean 4000m; '4' means 4m. Throws NodeSpecError. */
export function parseCapacityCpu(input: string | number, field = 'cpu'): number {
  return capacity(input, field, 'cpu');
}

/** Node memory capacity in MiB: 8192, '8192', '8Gi', '8192Mi'. Throws NodeSpecError. */
export function parseCapacityMemory(input: string | number, field = 'memory'): number {
  return capacity(input, field, 'memory');
}

function nodeEntry(value: unknown, field: string): NodeInfo {
  if (!isPlainObject(value)) throw new NodeSpecError(field, `expected an object with name, cpu and memory, got ${show(value)}`);
  for (const key of Object.keys(value)) {
    if (!['name', 'cpu', 'memory', 'taints', 'labels'].includes(key)) throw new NodeSpecError(fieldPath(field, key), 'not supported');
  }
  const name = value.name;
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME_CHARS || !DNS_SUBDOMAIN.test(name)) {
    throw new NodeSpecError(`${field}.name`, `expected a DNS-1123 name (lower-case letters, digits, '-' and '.'), got ${show(name)}`);
  }
  if (value.cpu === undefined) throw new NodeSpecError(`${field}.cpu`, 'missing');
  if (value.memory === undefined) throw new NodeSpecError(`${field}.memory`, 'missing');
  const node: NodeInfo = {
    name,
    capacity: { cpu: capacity(value.cpu, `${field}.cpu`, 'cpu'), memory: capacity(value.memory, `${field}.memory`, 'memory') },
    taints: [],
    labels: {},
  };
  if (value.taints !== undefined && value.taints !== null) {
    if (!Array.isArray(value.taints)) throw new NodeSpecError(`${field}.taints`, `expected a list, got ${show(value.taints)}`);
    if (value.taints.length > MAX_TAINTS_PER_NODE) throw new NodeSpecError(`${field}.taints`, `at most ${MAX_TAINTS_PER_NODE} taints allowed, got ${value.taints.length}`);
    value.taints.forEach((t: unknown, i: number) => {
      const tField = `${field}.taints[${i}]`;
      const taint = typeof t === 'string' ? parseTaint(t, tField) : isPlainObject(t) ? taintFromObject(t, tField) : undefined;
      if (taint === undefined) throw new NodeSpecError(tField, `expected "key[=value][:Effect]" or {key, value, effect}, got ${show(t)}`);
      // Kubernetes allows one taint per key and effect.
      if (node.taints.some((o) => o.key === taint.key && o.effect === taint.effect)) {
        throw new NodeSpecError(tField, `duplicate taint ${taint.key}:${taint.effect}`);
      }
      node.taints.push(taint);
    });
  }
  if (value.labels !== undefined && value.labels !== null) {
    const labels = value.labels;
    if (!isPlainObject(labels)) throw new NodeSpecError(`${field}.labels`, `expected a map of strings, got ${show(labels)}`);
    const keys = Object.keys(labels);
    if (keys.length > MAX_LABELS_PER_OBJECT) throw new NodeSpecError(`${field}.labels`, `at most ${MAX_LABELS_PER_OBJECT} labels allowed, got ${keys.length}`);
    for (const key of keys) {
      const v = labels[key];
      if (!isLabelKey(key)) throw new NodeSpecError(`${field}.labels`, `${show(key)} is not a valid label key`);
      if (typeof v !== 'string') throw new NodeSpecError(fieldPath(`${field}.labels`, key), `expected a string (quote it in YAML), got ${show(v)}`);
      if (!isLabelValue(v)) throw new NodeSpecError(fieldPath(`${field}.labels`, key), `not a valid label value (at most 63 of [-A-Za-z0-9_.]), got ${show(v)}`);
      node.labels[key] = v;
    }
  }
  return node;
}

/**
 * The content of a `--nodes FILE` (YAML or JSON) to NodeInfo[]. Throws
 * NodeSpecError naming the entry and field at fault (`nodes[2].cpu: ...`),
 * or the line of a syntax error.
 */
export function parseNodesFile(text: string): NodeInfo[] {
  if (text.length > MAX_NODES_FILE_CHARS) throw new NodeSpecError('', `file of ${text.length} chars exceeds the limit of ${MAX_NODES_FILE_CHARS}`);
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  const error = doc.errors[0];
  if (error !== undefined) {
    const where = error.linePos ? ` at line ${error.linePos[0].line}, column ${error.linePos[0].col}` : '';
    const what = error.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
    throw new NodeSpecError('', `syntax error${where}: ${what}`);
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new NodeSpecError('', `YAML error: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
  if (!Array.isArray(value)) throw new NodeSpecError('nodes', `expected a list of nodes, got ${show(value)}`);
  if (value.length === 0) throw new NodeSpecError('nodes', 'the list has no nodes');
  if (value.length > MAX_NODES_IN_FILE) throw new NodeSpecError('nodes', `at most ${MAX_NODES_IN_FILE} nodes allowed, got ${value.length}`);
  const nodes: NodeInfo[] = [];
  value.forEach((entry, i) => {
    const node = nodeEntry(entry, `nodes[${i}]`);
    const first = nodes.findIndex((n) => n.name === node.name);
    if (first !== -1) throw new NodeSpecError(`nodes[${i}].name`, `"${node.name}" is already the name of nodes[${first}]`);
    nodes.push(node);
  });
  return nodes;
}
