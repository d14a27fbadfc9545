// control-plane/kube/strategic-merge.ts -- Kubernetes' strategic merge patch
// (`application/strategic-merge-patch+json`), what `kubectl apply` (client
// side), `rollout restart`, `cordon` and `edit` send. Like a JSON merge
// patch, except that lists of objects with a merge key are merged item by
// item (containers and env by `name`, container ports by `containerPort`,
// service ports by `port`), and the patch may carry directives:
//   $patch: replace | delete        (on a map or a list item)
//   $setElementOrder/<list>: [...]  (the order of a merged list)
//   $deleteFromPrimitiveList/<list> (values to drop from a merged list of scalars)
//   $retainKeys: [...]              (keys a map keeps; Deployment spec.strategy)
// Which lists merge, and by what key, is the schema below (the patchMergeKey
// tags of the Kubernetes types we serve); other lists are replaced. Pure.

import { PatchError, clone, isObject } from './patch.ts';

/** A list of scalars merged as a set (patchStrategy: merge without a key). */
const SET = '';

/** Path of a list (list items written `[]`) -> its merge key. */
export type MergeSchema = Readonly<Record<string, string>>;

const POD_SPEC: Record<string, string> = {
  containers: 'name',
  'containers[].env': 'name',
  'containers[].ports': 'containerPort',
  'containers[].volumeMounts': 'mountPath',
  initContainers: 'name',
  volumes: 'name',
  imagePullSecrets: 'name',
};
const META: Record<string, string> = { 'metadata.ownerReferences': 'uid', 'metadata.finalizers': SET };

function prefixed(prefix: string, m: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [`${prefix}${k}`, v]));
}

/** The merge keys of the kinds we serve. */
export const SCHEMAS: Readonly<Record<string, MergeSchema>> = {
  Deployment: { ...META, ...prefixed('spec.template.spec.', POD_SPEC), 'spec.template.metadata.finalizers': SET, 'status.conditions': 'type' },
  Pod: { ...META, ...prefixed('spec.', POD_SPEC), 'status.conditions': 'type', 'status.containerStatuses': 'name' },
  Service: { ...META, 'spec.ports': 'port' },
  Node: { ...META, 'status.conditions': 'type', 'status.addresses': 'type' },
  Scale: { ...META },
};

const join = (path: string, key: string) => (path === '' ? key : `${path}.${key}`);

/** Applies strategic merge `patch` to (a copy of) `original` for a kind's schema. */
export function strategicMerge(original: unknown, patch: unknown, schema: MergeSchema): unknown {
  if (!isObject(patch)) throw new PatchError('a strategic merge patch must be a JSON object');
  const out = mergeMap(isObject(original) ? original : {}, patch, '', schema);
  return out ?? {};
}

/** A map patch without its directives (for keys that are new). */
function strip(v: unknown, path: string, schema: MergeSchema): unknown {
  if (Array.isArray(v)) {
    return v.filter((x) => !(isObject(x) && x.$patch !== undefined && Object.keys(x).length === 1)).map((x) => strip(x, `${path}[]`, schema));
  }
  if (!isObject(v)) return v;
  return mergeMap({}, v, path, schema);
}

function mergeMap(original: Record<string, unknown>, patch: Record<string, unknown>, path: string, schema: MergeSchema): Record<string, unknown> | undefined {
  const directive = patch.$patch;
  if (directive === 'delete') return undefined;
  if (directive !== undefined && directive !== 'replace' && directive !== 'merge')
    throw new PatchError(`${path || 'the patch'}: unknown $patch directive ${JSON.stringify(directive)} (replace, delete, merge)`);
  const out: Record<string, unknown> = directive === 'replace' ? {} : clone(original);
  const orders: Array<[string, unknown]> = [];
  const dropped: Array<[string, unknown]> = [];
  for (const [key, value] of Object.entries(patch)) {
    if (key === '$patch' || key === '$retainKeys') continue;
    if (key.startsWith('$setElementOrder/')) {
      orders.push([key.slice('$setElementOrder/'.length), value]);
      continue;
    }
    if (key.startsWith('$deleteFromPrimitiveList/')) {
      dropped.push([key.slice('$deleteFromPrimitiveList/'.length), value]);
      continue;
    }
    if (key.startsWith('$')) throw new PatchError(`${join(path, key)}: unknown directive`);
    const p = join(path, key);
    if (value === null) delete out[key];
    else if (isObject(value)) {
      const merged = mergeMap(isObject(out[key]) ? (out[key] as Record<string, unknown>) : {}, value, p, schema);
      if (merged === undefined) delete out[key];
      else out[key] = merged;
    } else if (Array.isArray(value)) {
      out[key] = mergeList(Array.isArray(out[key]) ? (out[key] as unknown[]) : [], value, p, schema);
    } else out[key] = value;
  }
  for (const [list, values] of dropped) {
    if (!Array.isArray(values)) throw new PatchError(`${join(path, `$deleteFromPrimitiveList/${list}`)}: expected a list`);
    if (Array.isArray(out[list])) out[list] = (out[list] as unknown[]).filter((x) => !values.some((v) => v === x));
  }
  for (const [list, order] of orders) {
    if (!Array.isArray(order)) throw new PatchError(`${join(path, `$setElementOrder/${list}`)}: expected a list`);
    const cur = out[list];
    if (!Array.isArray(cur)) continue;
    const key = schema[join(path, list)];
    const id = (x: unknown): string => JSON.stringify(key && isObject(x) ? x[key] : x);
    const rank = new Map(order.map((o, i) => [JSON.stringify(key && isObject(o) ? o[key] : o), i]));
    const listed = cur.filter((x) => rank.has(id(x))).sort((a, b) => rank.get(id(a))! - rank.get(id(b))!);
    out[list] = [...listed, ...cur.filter((x) => !rank.has(id(x)))];
  }
  if (patch.$retainKeys !== undefined) {
    const keep = patch.$retainKeys;
    if (!Array.isArray(keep)) throw new PatchError(`${join(path, '$retainKeys')}: expected a list of keys`);
    for (const k of Object.keys(out)) if (!keep.includes(k)) delete out[k];
  }
  return out;
}

function mergeList(original: unknown[], patch: unknown[], path: string, schema: MergeSchema): unknown[] {
  const key = schema[path];
  const replaceMarker = patch.findIndex((x) => isObject(x) && x.$patch === 'replace' && Object.keys(x).length === 1);
  if (key === undefined || replaceMarker >= 0) return patch.filter((_, i) => i !== replaceMarker).map((x) => strip(x, `${path}[]`, schema));
  if (key === SET) {
    const out = [...original];
    for (const v of patch) if (!out.some((x) => JSON.stringify(x) === JSON.stringify(v))) out.push(v);
    return out;
  }
  const out = clone(original);
  for (const item of patch) {
    if (!isObject(item)) throw new PatchError(`${path}: expected objects with a "${key}" (a merge key), got ${JSON.stringify(item)}`);
    if (!(key in item)) throw new PatchError(`${path}: an item has no merge key "${key}"`);
    const at = out.findIndex((x) => isObject(x) && JSON.stringify(x[key]) === JSON.stringify(item[key]));
    if (item.$patch === 'delete') {
      if (at >= 0) out.splice(at, 1);
      continue;
    }
    const merged = mergeMap(at >= 0 && isObject(out[at]) ? (out[at] as Record<string, unknown>) : {}, item, `${path}[]`, schema);
    if (merged === undefined) continue;
    if (at >= 0) out[at] = merged;
    else out.push(merged);
  }
  return out;
}
