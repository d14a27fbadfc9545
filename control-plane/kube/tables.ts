// control-plane/kube/tables.ts -- the server-side printing of `kubectl get`:
// a meta.k8s.io/v1 Table per kind, with the columns a real cluster prints
// (priority 1: only with `-o wide`), cells computed as the API server's
// printers compute them (pod STATUS from the container state, node ROLES
// from node-role labels, AGE as a short duration). Pure: `now` is given.

import type { KubeObject } from './convert.ts';

export interface Column {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

/** A column; Name columns have format "name" (kubectl prefixes them with the kind, as in `get all`). */
const col = (name: string, type = 'string', priority = 0, format = name === 'Name' ? 'name' : ''): Column => ({ name, type, format, description: name, priority });

/** Kubernetes' duration.HumanDuration. */
export function humanDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < -1) return '<invalid>';
  if (s < 0) return '0s';
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (h < 192) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (d < 730) return `${d}d`;
  return `${Math.floor(d / 365)}y`;
}

function age(ts: unknown, now: number): string {
  if (typeof ts !== 'string') return '<unknown>';
  return humanDuration(now - Date.parse(ts));
}

type Obj = Record<string, unknown>;
const o = (v: unknown): Obj => (v !== null && typeof v === 'object' ? (v as Obj) : {});
const a = (v: unknown): Obj[] => (Array.isArray(v) ? (v as Obj[]) : []);

function selectorText(sel: unknown): string {
  const ml = o(o(sel).matchLabels);
  const t = Object.entries(ml)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(',');
  return t === '' ? '<none>' : t;
}

function podStatus(p: KubeObject): string {
  const st = o(p.status);
  let reason = typeof st.reason === 'string' ? st.reason : String(st.phase ?? 'Unknown');
  for (const cs of a(st.containerStatuses)) {
    const state = o(cs.state);
    if (o(state.waiting).reason) reason = String(o(state.waiting).reason);
    else if (state.terminated) {
      const t = o(state.terminated);
      reason = t.reason ? String(t.reason) : t.signal ? `Signal:${String(t.signal)}` : `ExitCode:${String(t.exitCode)}`;
    }
  }
  if (o(p.metadata).deletionTimestamp) reason = st.reason === 'NodeLost' ? 'Unknown' : 'Terminating';
  return reason;
}

interface Printer {
  columns: Column[];
  cells: (obj: KubeObject, now: number) => unknown[];
}

/** kubectl's wide columns of a Deployment and a ReplicaSet: the pod template's containers and images, the selector. */
const WORKLOAD_WIDE_COLUMNS = [col('Containers', 'string', 1), col('Images', 'string', 1), col('Selector', 'string', 1)];

function workloadWideCells(spec: Record<string, unknown>): string[] {
  const cs = a(o(o(spec.template).spec).containers);
  return [cs.map((c) => c.name).join(','), cs.map((c) => c.image ?? '').join(','), selectorText(spec.selector)];
}

const PRINTERS: Record<string, Printer> = {
  Pod: {
    columns: [
      col('Name'),
      col('Ready'),
      col('Status'),
      col('Restarts', 'integer'),
      col('Age'),
      col('IP', 'string', 1),
      col('Node', 'string', 1),
      col('Nominated Node', 'string', 1),
      col('Readiness Gates', 'string', 1),
    ],
    cells: (p, now) => {
      const st = o(p.status);
      const cs = a(st.containerStatuses);
      const ready = cs.filter((c) => c.ready === true).length;
      const total = a(o(p.spec).containers).length;
      return [
        p.metadata.name,
        `${ready}/${total}`,
        podStatus(p),
        cs.reduce((n, c) => n + Number(c.restartCount ?? 0), 0),
        age(p.metadata.creationTimestamp, now),
        st.podIP ?? '<none>',
        o(p.spec).nodeName ?? '<none>',
        '<none>',
        '<none>',
      ];
    },
  },
  Node: {
    columns: [
      col('Name'),
      col('Status'),
      col('Roles'),
      col('Age'),
      col('Version'),
      col('Internal-IP', 'string', 1),
      col('External-IP', 'string', 1),
      col('OS-Image', 'string', 1),
      col('Kernel-Version', 'string', 1),
      col('Container-Runtime', 'string', 1),
    ],
    cells: (n, now) => {
      const st = o(n.status);
      const ready = a(st.conditions).find((c) => c.type === 'Ready');
      let status = ready?.status === 'True' ? 'Ready' : ready ? 'NotReady' : 'Unknown';
      if (o(n.spec).unschedulable) status += ',SchedulingDisabled';
      const labels = o(n.metadata.labels);
      const roles = Object.keys(labels)
        .filter((k) => k.startsWith('node-role.kubernetes.io/'))
        .map((k) => k.slice('node-role.kubernetes.io/'.length));
      if (labels['kubernetes.io/role']) roles.push(String(labels['kubernetes.io/role']));
      const addr = (t: string) => a(st.addresses).find((x) => x.type === t)?.address ?? '<none>';
      const info = o(st.nodeInfo);
      return [
        n.metadata.name,
        status,
        roles.length > 0 ? roles.sort().join(',') : '<none>',
        age(n.metadata.creationTimestamp, now),
        info.kubeletVersion ?? '',
        addr('InternalIP'),
        addr('ExternalIP'),
        info.osImage ?? '<unknown>',
        info.kernelVersion || '<unknown>',
        info.containerRuntimeVersion ?? '<unknown>',
      ];
    },
  },
  Deployment: {
    columns: [col('Name'), col('Ready'), col('Up-to-date', 'integer'), col('Available', 'integer'), col('Age'), ...WORKLOAD_WIDE_COLUMNS],
    cells: (d, now) => {
      const st = o(d.status);
      const spec = o(d.spec);
      return [
        d.metadata.name,
        `${Number(st.readyReplicas ?? 0)}/${Number(spec.replicas ?? 0)}`,
        Number(st.updatedReplicas ?? 0),
        Number(st.availableReplicas ?? 0),
        age(d.metadata.creationTimestamp, now),
        ...workloadWideCells(spec),
      ];
    },
  },
  ReplicaSet: {
    columns: [col('Name'), col('Desired', 'integer'), col('Current', 'integer'), col('Ready', 'integer'), col('Age'), ...WORKLOAD_WIDE_COLUMNS],
    cells: (r, now) => {
      const st = o(r.status);
      const spec = o(r.spec);
      return [r.metadata.name, Number(spec.replicas ?? 0), Number(st.replicas ?? 0), Number(st.readyReplicas ?? 0), age(r.metadata.creationTimestamp, now), ...workloadWideCells(spec)];
    },
  },
  Event: {
    columns: [
      col('Last Seen'),
      col('Type'),
      col('Reason'),
      col('Object'),
      col('Subobject', 'string', 1),
      col('Source', 'string', 1),
      col('Message'),
      col('First Seen', 'string', 1),
      col('Count', 'integer', 1),
      col('Name', 'string', 1),
    ],
    cells: (e, now) => {
      const io = o(e.involvedObject);
      const src = o(e.source);
      return [
        age(e.lastTimestamp, now),
        e.type,
        e.reason,
        `${String(io.kind ?? '').toLowerCase()}/${String(io.name ?? '')}`,
        '',
        [src.component, src.host].filter(Boolean).join(', '),
        e.message,
        age(e.firstTimestamp, now),
        e.count,
        e.metadata.name,
      ];
    },
  },
  Service: {
    columns: [col('Name'), col('Type'), col('Cluster-IP'), col('External-IP'), col('Port(s)'), col('Age'), col('Selector', 'string', 1)],
    cells: (s, now) => {
      const spec = o(s.spec);
      const ports = a(spec.ports)
        .map((p) => `${String(p.port)}${p.nodePort ? `:${String(p.nodePort)}` : ''}/${String(p.protocol ?? 'TCP')}`)
        .join(',');
      const sel = Object.entries(o(spec.selector))
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(',');
      return [s.metadata.name, spec.type, spec.clusterIP ?? '<none>', '<none>', ports || '<none>', age(s.metadata.creationTimestamp, now), sel || '<none>'];
    },
  },
  Endpoints: {
    columns: [col('Name'), col('Endpoints'), col('Age')],
    cells: (e, now) => {
      const eps: string[] = [];
      for (const s of a(e.subsets)) for (const ad of a(s.addresses)) for (const p of a(s.ports)) eps.push(`${String(ad.ip)}:${String(p.port)}`);
      const shown = eps.length > 3 ? `${eps.slice(0, 3).join(',')} + ${eps.length - 3} more...` : eps.join(',');
      return [e.metadata.name, shown || '<none>', age(e.metadata.creationTimestamp, now)];
    },
  },
  Namespace: {
    columns: [col('Name'), col('Status'), col('Age')],
    cells: (n, now) => [n.metadata.name, o(n.status).phase ?? 'Active', age(n.metadata.creationTimestamp, now)],
  },
};

export type IncludeObject = 'None' | 'Object' | 'Metadata';

function rowObject(obj: KubeObject, include: IncludeObject): unknown {
  if (include === 'None') return undefined;
  if (include === 'Object') return obj;
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: obj.metadata };
}

/** The columns of a Table of `kind`. */
export function tableColumns(kind: string): unknown[] {
  const p = PRINTERS[kind];
  return p ? p.columns : [col('Name'), col('Age')];
}

/** One row of a Table of `kind`. */
export function tableRow(kind: string, it: KubeObject, now: number, include: IncludeObject = 'Metadata'): { cells: unknown[]; object?: unknown } {
  const p = PRINTERS[kind];
  const object = rowObject(it, include);
  return { cells: p ? p.cells(it, now) : [it.metadata.name, age(it.metadata.creationTimestamp, now)], ...(object !== undefined ? { object } : {}) };
}

/** A Table of `items` of `kind`; `meta` is the list's metadata (resourceVersion, continue). */
export function table(kind: string, items: KubeObject[], now: number, meta: Record<string, unknown>, include: IncludeObject = 'Metadata'): Record<string, unknown> {
  return tableOfRows(
    kind,
    meta,
    items.map((it) => tableRow(kind, it, now, include)),
  );
}

/** A Table of rows made by tableRow (its JSON without the rows: tableHead). */
function tableOfRows(kind: string, meta: Record<string, unknown>, rows: unknown[]): Record<string, unknown> {
  return { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: meta, columnDefinitions: tableColumns(kind), rows };
}

/**
 * The Table's JSON up to its rows' `[`: with each row's JSON after it,
 * joined by commas, and `]}`, it is JSON.stringify(table(...)), so a big
 * list's rows are made (and sent) in slices, never stringified at once.
 */
export function tableHead(kind: string, meta: Record<string, unknown>): string {
  return JSON.stringify(tableOfRows(kind, meta, [])).slice(0, -2);
}
