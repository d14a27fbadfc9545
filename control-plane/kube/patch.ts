// control-plane/kube/patch.ts -- the patch types of the Kubernetes API other
// than the strategic merge patch (strategic-merge.ts): JSON merge patch
// (RFC 7386, `application/merge-patch+json`: kubectl scale, client-node's
// default) and JSON patch (RFC 6902, `application/json-patch+json`: kubectl
// 1.20's `rollout undo`). Pure: values in, a new value out (inputs are never
// changed); a patch that cannot apply throws PatchError naming the cause.

export class PatchError extends Error {
  override readonly name = 'PatchError';
}

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function clone<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

/** RFC 7386: objects merge, `null` deletes a key, anything else (lists too) replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const out: Record<string, unknown> = isObject(target) ? clone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** RFC 6901: "/a/b~1c/0" -> ['a', 'b/c', '0']. */
function pointer(p: unknown, op: number): string[] {
  if (typeof p !== 'string' || (p !== '' && !p.startsWith('/'))) throw new PatchError(`operation ${op}: path must be a JSON pointer starting with "/", got ${JSON.stringify(p)}`);
  return p === ''
    ? []
    : p
        .slice(1)
        .split('/')
        .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function parentOf(doc: unknown, tokens: string[], op: number, path: string): { parent: Record<string, unknown> | unknown[]; key: string } {
  let cur: unknown = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isObject(cur)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw new PatchError(`operation ${op}: path ${path} does not exist`);
  }
  if (!Array.isArray(cur) && !isObject(cur)) throw new PatchError(`operation ${op}: path ${path} does not exist`);
  return { parent: cur, key: tokens[tokens.length - 1] };
}

function index(arr: unknown[], key: string, op: number, path: string, forAdd: boolean): number {
  if (forAdd && key === '-') return arr.length;
  const n = Number(key);
  if (!/^(0|[1-9]\d*)$/.test(key) || n > arr.length || (!forAdd && n === arr.length)) throw new PatchError(`operation ${op}: index ${key} out of range in ${path}`);
  return n;
}

function get(doc: unknown, tokens: string[], op: number, path: string): unknown {
  if (tokens.length === 0) return doc;
  const { parent, key } = parentOf(doc, tokens, op, path);
  const v = Array.isArray(parent) ? parent[index(parent, key, op, path, false)] : parent[key];
  if (v === undefined) throw new PatchError(`operation ${op}: path ${path} does not exist`);
  return v;
}

function remove(doc: unknown, tokens: string[], op: number, path: string): unknown {
  if (tokens.length === 0) throw new PatchError(`operation ${op}: cannot remove the whole document`);
  const { parent, key } = parentOf(doc, tokens, op, path);
  if (Array.isArray(parent)) return parent.splice(index(parent, key, op, path, false), 1)[0];
  if (!(key in parent)) throw new PatchError(`operation ${op}: path ${path} does not exist`);
  const v = parent[key];
  delete parent[key];
  return v;
}

function add(doc: unknown, tokens: string[], value: unknown, op: number, path: string, replace: boolean): unknown {
  if (tokens.length === 0) return value;
  const { parent, key } = parentOf(doc, tokens, op, path);
  if (Array.isArray(parent)) {
    const i = index(parent, key, op, path, !replace);
    if (replace) parent[i] = value;
    else parent.splice(i, 0, value);
  } else {
    if (replace && !(key in parent)) throw new PatchError(`operation ${op}: path ${path} does not exist`);
    parent[key] = value;
  }
  return doc;
}

/** RFC 6902 on a copy of `target`. */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw new PatchError('a JSON patch must be a list of operations');
  let doc = clone(target);
  ops.forEach((o, i) => {
    if (!isObject(o)) throw new PatchError(`operation ${i}: expected an object`);
    const path = o.path as string;
    const tokens = pointer(o.path, i);
    switch (o.op) {
      case 'add':
      case 'replace':
        if (!('value' in o)) throw new PatchError(`operation ${i}: ${o.op} needs a value`);
        doc = add(doc, tokens, clone(o.value), i, path, o.op === 'replace');
        break;
      case 'remove':
        remove(doc, tokens, i, path);
        break;
      case 'move':
      case 'copy': {
        const fromTokens = pointer(o.from, i);
        const v = o.op === 'move' ? remove(doc, fromTokens, i, String(o.from)) : clone(get(doc, fromTokens, i, String(o.from)));
        doc = add(doc, tokens, v, i, path, false);
        break;
      }
      case 'test':
        if (JSON.stringify(get(doc, tokens, i, path)) !== JSON.stringify(o.value)) throw new PatchError(`operation ${i}: test failed at ${path}`);
        break;
      default:
        throw new PatchError(`operation ${i}: unknown op ${JSON.stringify(o.op)} (add, remove, replace, move, copy, test)`);
    }
  });
  return doc;
}
