// control-plane/kube/selectors.ts -- the `labelSelector` and `fieldSelector`
// query parameters of a Kubernetes list or watch. Label selectors: `k=v`,
// `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by
// commas. Field selectors: `path=v`, `path==v`, `path!=v` on the fields each
// kind supports (metadata.name and metadata.namespace everywhere,
// spec.nodeName and status.phase on pods, involvedObject.* and reason/type
// on events, spec.unschedulable on nodes); any other field is refused, as a
// real API server does. Pure.

export class SelectorError extends Error {
  override readonly name = 'SelectorError';
}

type Requirement = { key: string; op: 'eq' | 'ne'; value: string } | { key: string; op: 'in' | 'notin'; values: string[] } | { key: string; op: 'exists' | 'absent' };

export type LabelSelector = Requirement[];

/** Splits on commas outside parentheses. */
function terms(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((t) => t.trim()).filter((t) => t !== '');
}

const KEY = /^([A-Za-z0-9][-A-Za-z0-9_./]*)?[A-Za-z0-9]$/;

export function parseLabelSelector(text: string | null): LabelSelector {
  if (text === null || text.trim() === '') return [];
  return terms(text).map((t): Requirement => {
    let m = /^(\S+?)\s*(==|!=|=)\s*(\S*)$/.exec(t);
    if (m) {
      if (!KEY.test(m[1])) throw new SelectorError(`labelSelector: invalid label key ${JSON.stringify(m[1])}`);
      return { key: m[1], op: m[2] === '!=' ? 'ne' : 'eq', value: m[3] };
    }
    m = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(t);
    if (m) return { key: m[1], op: m[2] as 'in' | 'notin', values: m[3].split(',').map((v) => v.trim()) };
    m = /^(!?)(\S+)$/.exec(t);
    if (m && KEY.test(m[2])) return { key: m[2], op: m[1] ? 'absent' : 'exists' };
    throw new SelectorError(`labelSelector: cannot parse ${JSON.stringify(t)} (expected k=v, k!=v, k in (a,b), k notin (a,b), k or !k)`);
  });
}

export function matchesLabels(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  return sel.every((r) => {
    const has = Object.hasOwn(l, r.key);
    switch (r.op) {
      case 'eq':
        return has && l[r.key] === r.value;
      case 'ne':
        return !has || l[r.key] !== r.value;
      case 'in':
        return has && r.values.includes(l[r.key]);
      case 'notin':
        return !has || !r.values.includes(l[r.key]);
      case 'exists':
        return has;
      case 'absent':
        return !has;
    }
  });
}

export type FieldSelector = Array<{ path: string; op: 'eq' | 'ne'; value: string }>;

/** Fields a kind can be selected by, beyond metadata.name and metadata.namespace. */
export const SELECTABLE_FIELDS: Readonly<Record<string, readonly string[]>> = {
  Pod: ['spec.nodeName', 'status.phase', 'spec.restartPolicy', 'spec.schedulerName', 'spec.serviceAccountName', 'status.podIP', 'status.nominatedNodeName'],
  Event: [
    'involvedObject.kind',
    'involvedObject.namespace',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'source',
    'type',
  ],
  Node: ['spec.unschedulable'],
  Namespace: ['status.phase'],
};

export function parseFieldSelector(text: string | null, kind: string): FieldSelector {
  if (text === null || text.trim() === '') return [];
  const allowed = ['metadata.name', 'metadata.namespace', ...(SELECTABLE_FIELDS[kind] ?? [])];
  return terms(text).map((t) => {
    const m = /^([^=!]+?)\s*(==|!=|=)\s*(.*)$/.exec(t);
    if (!m) throw new SelectorError(`fieldSelector: cannot parse ${JSON.stringify(t)} (expected field=value or field!=value)`);
    if (!allowed.includes(m[1])) throw new SelectorError(`fieldSelector: "${m[1]}" is not a supported field selector for ${kind} (supported: ${allowed.join(', ')})`);
    return { path: m[1], op: m[2] === '!=' ? 'ne' : 'eq', value: m[3] };
  });
}

function fieldValue(obj: unknown, path: string): string {
  let cur: unknown = obj;
  for (const part of path.split('.')) cur = cur !== null && typeof cur === 'object' ? (cur as Record<string, unknown>)[part] : undefined;
  if (path === 'source' && cur !== null && typeof cur === 'object') cur = (cur as { component?: string }).component;
  if (cur === undefined || cur === null) return '';
  return typeof cur === 'object' ? JSON.stringify(cur) : String(cur);
}

export function matchesFields(sel: FieldSelector, obj: unknown): boolean {
  return sel.every((r) => (fieldValue(obj, r.path) === r.value) === (r.op === 'eq'));
}
