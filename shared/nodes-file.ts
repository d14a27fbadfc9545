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
// Checked with the combinators of shared/validate.ts and the manifests' rules
// for written documents (a field left empty is not given, an unknown one is
// "not supported", labels as Kubernetes has them).

import { parseDocument } from 'yaml';
import type { NodeInfo, Taint } from './model.ts';
import { writtenFields, writtenLabels, writtenList, writtenText } from './manifest.ts';
import { QuantityError, parseCpu, parseMemory } from './quantity.ts';
import { DEFAULT_TAINT_EFFECT, TAINT_EFFECTS, isDnsSubdomain, isLabelKey, isLabelValue } from './notation.ts';
import { MAX_NAME_CHARS, MAX_RESOURCE_AMOUNT, MAX_TAINTS_PER_NODE, MAX_TAINT_KEY_CHARS, MAX_TAINT_VALUE_CHARS } from './protocol/validate.ts';
import { EFFECT_CHOICES, readTaint, taintRules } from './taint.ts';
import { type Problem, type Validator, describe, dropNullFields, expected, fail, oneOf, optional, refine, toldWhenMissing, union } from './validate.ts';

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

/** A NodeSpecError from the first problem a validator found. */
function refused(problem: Problem): NodeSpecError {
  return new NodeSpecError(problem.path, problem.detail);
}

/** A taint in the kubectl notation, as a flag or a nodes file writes it. */
const taintText: Validator<string> = (value, path) => {
  if (typeof value !== 'string') return expected('a taint such as "gpu-only" or "key=value:NoExecute"', value, path);
  const taint = readTaint(value, path);
  return 'effect' in taint ? null : taint;
};

type WrittenTaint = { key: string; value?: string; effect?: Taint['effect'] };

/** A taint written as {key, value, effect}. */
const taintObject: Validator<WrittenTaint> = refine(
  writtenFields<WrittenTaint>({
    key: writtenText(MAX_TAINT_KEY_CHARS),
    value: optional(writtenText(MAX_TAINT_VALUE_CHARS)),
    effect: optional(oneOf(TAINT_EFFECTS, EFFECT_CHOICES)),
  }),
  (t, path) => {
    const taint = taintOf(t);
    return taintRules(taint, path, `${taint.key}${taint.value === undefined ? '' : `=${taint.value}`}:${taint.effect}`);
  },
);

function taintOf(written: string | WrittenTaint): Taint {
  if (typeof written === 'string') return readTaint(written, '') as Taint;
  const effect = written.effect ?? DEFAULT_TAINT_EFFECT;
  return written.value !== undefined && written.value !== '' ? { key: written.key, value: written.value, effect } : { key: written.key, effect };
}

const taintEntry: Validator<string | WrittenTaint> = union<string | WrittenTaint>(
  '"key[=value][:Effect]" or {key, value, effect}',
  { accepts: (v) => typeof v === 'string', check: taintText },
  { accepts: (v) => typeof v === 'object' && v !== null && !Array.isArray(v), check: taintObject },
);

/** A node's taints: Kubernetes allows one per key and effect. */
const taints: Validator<Array<string | WrittenTaint>> = refine(writtenList(taintEntry, MAX_TAINTS_PER_NODE), (list, path) => {
  const seen = new Set<string>();
  for (let i = 0; i < list.length; i++) {
    const t = taintOf(list[i]);
    const key = `${t.key}:${t.effect}`;
    if (seen.has(key)) return fail(`${path}[${i}]`, `duplicate taint ${key}`);
    seen.add(key);
  }
  return null;
});

/** A capacity figure in this project's units (a bare whole number) or a Kubernetes quantity; or the reason it is none. */
function capacityAmount(input: unknown, what: 'cpu' | 'memory'): number | string {
  const unit = what === 'cpu' ? 'millicores' : 'MiB';
  const example = what === 'cpu' ? '4000m' : '8Gi';
  let amount: number;
  if (typeof input === 'number' || (typeof input === 'string' && BARE_NUMBER.test(input))) {
    amount = Number(input);
    if (!Number.isSafeInteger(amount) || amount < 0) return `expected a whole number of ${unit} or a quantity such as ${example}, got ${describe(input)}`;
  } else if (typeof input === 'string') {
    try {
      amount = what === 'cpu' ? parseCpu(input) : parseMemory(input);
    } catch (err) {
      if (err instanceof QuantityError) return err.message;
      throw err;
    }
  } else {
    return `expected ${unit} or a quantity such as ${example}, got ${describe(input)}`;
  }
  if (amount === 0) return `a node needs some ${what}, got ${describe(input)}`;
  if (amount > MAX_RESOURCE_AMOUNT) return `more than ${MAX_RESOURCE_AMOUNT} ${unit}`;
  return amount;
}

function capacity(what: 'cpu' | 'memory'): Validator<string | number> {
  return (value, path) => {
    const amount = capacityAmount(value, what);
    return typeof amount === 'string' ? fail(path, amount) : null;
  };
}

function parseCapacity(input: string | number, field: string, what: 'cpu' | 'memory'): number {
  const amount = capacityAmount(input, what);
  if (typeof amount === 'string') throw new NodeSpecError(field, amount);
  return amount;
}

/**
 * A taint in the kubectl notation `key[=value][:Effect]`: 'gpu-only' is
 * {key: 'gpu-only', effect: 'NoSchedule'}, 'zone=b:NoExecute' carries a
 * value. The effect defaults to NoSchedule. Throws NodeSpecError.
 */
export function parseTaint(text: string, field = 'taint'): Taint {
  const problem = taintText(text, field);
  if (problem !== null) throw refused(problem);
  return taintOf(text);
}

/** Node cpu capacity in millicores: 4000, '4000' and '4000m' all mean 4000m; '4' means 4m. Throws NodeSpecError. */
export function parseCapacityCpu(input: string | number, field = 'cpu'): number {
  return parseCapacity(input, field, 'cpu');
}

/** Node memory capacity in MiB: 8192, '8192', '8Gi', '8192Mi'. Throws NodeSpecError. */
export function parseCapacityMemory(input: string | number, field = 'memory'): number {
  return parseCapacity(input, field, 'memory');
}

type WrittenNode = { name: string; cpu: string | number; memory: string | number; taints?: Array<string | WrittenTaint>; labels?: Record<string, string> };

const nodeName: Validator<string> = (value, path) =>
  typeof value === 'string' && isDnsSubdomain(value, MAX_NAME_CHARS) ? null : expected("a DNS-1123 name (lower-case letters, digits, '-' and '.')", value, path);

const nodeEntry: Validator<WrittenNode> = writtenFields<WrittenNode>(
  {
    name: toldWhenMissing(nodeName),
    cpu: capacity('cpu'),
    memory: capacity('memory'),
    taints: optional(taints),
    labels: optional(writtenLabels),
  },
  'an object with name, cpu and memory',
);

const nodesSchema: Validator<WrittenNode[]> = refine(writtenList(nodeEntry, MAX_NODES_IN_FILE, 'a list of nodes'), (nodes, path) => {
  if (nodes.length === 0) return fail(path, 'the list has no nodes');
  const first = new Map<string, number>();
  for (let i = 0; i < nodes.length; i++) {
    const seen = first.get(nodes[i].name);
    if (seen !== undefined) return fail(`${path}[${i}].name`, `"${nodes[i].name}" is already the name of nodes[${seen}]`);
    first.set(nodes[i].name, i);
  }
  return null;
});

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
  const problem = nodesSchema(value, 'nodes');
  if (problem !== null) throw refused(problem);
  return (dropNullFields(value) as WrittenNode[]).map((n): NodeInfo => ({
    name: n.name,
    capacity: { cpu: parseCapacityCpu(n.cpu), memory: parseCapacityMemory(n.memory) },
    taints: (n.taints ?? []).map(taintOf),
    labels: n.labels ?? {},
  }));
}
