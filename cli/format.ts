// cli/format.ts -- everything `mo` prints as tables: kubectl-style ages,
// quantities, aligned columns, and the columns of each resource type
// (plain and `-o wide`). Pure: the current time is passed in as `nowMs`.

import type { ClusterStatus, DeploymentObject, EventObject, NodeObject, ResourceType, ServiceObject, EndpointsObject, Timestamp, UnitObject } from './resources.ts';

/** Spaces between columns, as kubectl's tabwriter pads them. */
export const COLUMN_GAP = 3;
export const NONE = '<none>';

/**
 * Natural order of names, so web-2 comes before web-10: runs of digits
 * compare as numbers, everything else character by character. For the names
 * objects have here (lowercase letters, digits, '-' and '.') this is the
 * order of localeCompare(b, 'en', { numeric: true }) (test/unit/cli-format.test.ts
 * checks it on random names) without loading ICU's collator, whose first use
 * was a tenth of a `mo get nodes` (a CPU profile).
 */
export function naturalCompare(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (isDigit(a.charCodeAt(i)) && isDigit(b.charCodeAt(j))) {
      const x = digitRun(a, i);
      const y = digitRun(b, j);
      // Leading zeros aside, the longer number is the larger; of two as long, the first digit that differs decides.
      if (x.end - x.start !== y.end - y.start) return x.end - x.start - (y.end - y.start);
      for (let k = 0; k < x.end - x.start; k++) {
        const d = a.charCodeAt(x.start + k) - b.charCodeAt(y.start + k);
        if (d !== 0) return d;
      }
      i = x.end;
      j = y.end;
      continue;
    }
    const d = a.charCodeAt(i) - b.charCodeAt(j);
    if (d !== 0) return d;
    i++;
    j++;
  }
  return a.length - i - (b.length - j);
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** The run of digits at `at`: where its significant digits start (leading zeros skipped, one kept) and where it ends. */
function digitRun(s: string, at: number): { start: number; end: number } {
  let end = at;
  while (end < s.length && isDigit(s.charCodeAt(end))) end++;
  let start = at;
  while (start < end - 1 && s.charCodeAt(start) === 48) start++;
  return { start, end };
}

/** kubectl's HumanDuration: 45s, 2m5s, 15m, 3h20m, 2d4h, 1y20d. */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${days}d` : `${days}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) {
    const d = days % 365;
    return d === 0 ? `${years}y` : `${years}y${d}d`;
  }
  return `${years}y`;
}

/** ms since epoch from an ISO string or a number (ms); undefined when absent or unreadable. */
export function parseTimestamp(ts: Timestamp): number | undefined {
  if (typeof ts === 'number' && Number.isFinite(ts)) return ts;
  if (typeof ts === 'string' && ts !== '') {
    const ms = Date.parse(ts);
    return Number.isNaN(ms) ? undefined : ms;
  }
  return undefined;
}

export function age(ts: Timestamp, nowMs: number): string {
  const ms = parseTimestamp(ts);
  return ms === undefined ? '<unknown>' : humanDuration(nowMs - ms);
}

export function cpu(millicores: number | undefined): string {
  return typeof millicores === 'number' ? `${millicores}m` : '?';
}

export function memory(mib: number | undefined): string {
  return typeof mib === 'number' ? `${mib}Mi` : '?';
}

function text(v: unknown): string {
  if (v === undefined || v === null || v === '') return NONE;
  return String(v);
}

/** Columns padded to the widest cell, COLUMN_GAP apart, no trailing blanks. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = columnWidths(headers, rows);
  return [headers, ...rows].map((r) => formatRow(r, widths)).join('\n') + '\n';
}

export function columnWidths(headers: readonly string[], rows: readonly (readonly string[])[]): number[] {
  return headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
}

export function formatRow(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((c, i) => (i === cells.length - 1 ? c : c.padEnd((widths[i] ?? 0) + COLUMN_GAP)))
    .join('')
    .trimEnd();
}

// ---- per resource -------------------------------------------------------

/** `key[=value]:Effect`, as kubectl shows a taint (shared/notation.ts). */
import { describeTaint as taintText } from '../shared/notation.ts';
export { taintText };

export function labelsText(labels: Record<string, string> | undefined): string {
  const entries = Object.entries(labels ?? {});
  return entries.length === 0 ? NONE : entries.map(([k, v]) => `${k}=${v}`).join(',');
}

/** A node's labels: the server sends them in metadata.labels (never in spec). */
export function nodeLabels(n: NodeObject): Record<string, string> | undefined {
  return n.metadata?.labels;
}

export function nodeStatus(n: NodeObject): string {
  const ready = n.status?.ready === true ? 'Ready' : 'NotReady';
  return n.spec?.unschedulable ? `${ready},SchedulingDisabled` : ready;
}

function nodeRow(n: NodeObject, nowMs: number, wide: boolean): string[] {
  const cap = n.status?.capacity;
  const alloc = n.status?.allocated;
  const row = [
    text(n.metadata?.name),
    nodeStatus(n),
    `${cpu(alloc?.cpu ?? 0)}/${cpu(cap?.cpu)}`,
    `${memory(alloc?.memory ?? 0)}/${memory(cap?.memory)}`,
    age(n.metadata?.creationTimestamp, nowMs),
  ];
  if (wide) {
    const taints = n.spec?.taints ?? [];
    row.push(taints.length === 0 ? NONE : taints.map(taintText).join(','), labelsText(nodeLabels(n)), text(n.status?.agent?.pid));
  }
  return row;
}

/**
 * A unit's STATUS as kubectl prints a pod's: the phase, or why it waits or
 * ended when that says more (CrashLoopBackOff, StartError, Error, OOMKilled).
 */
export function unitStatus(u: UnitObject): string {
  const phase = u.status?.phase ?? 'Pending';
  const reason = u.status?.reason;
  if (reason === 'CrashLoopBackOff') return reason;
  if ((phase === 'Failed' || phase === 'Succeeded') && reason && reason !== 'Terminated') return reason;
  return phase;
}

function unitRow(u: UnitObject, nowMs: number, wide: boolean): string[] {
  const row = [
    text(u.metadata?.name),
    text(u.spec?.deployment),
    u.status?.ready ? '1/1' : '0/1',
    unitStatus(u),
    text(u.spec?.nodeName),
    text(u.status?.pid),
    age(u.metadata?.creationTimestamp, nowMs),
  ];
  if (wide) {
    row.push(
      text(u.spec?.revision),
      cpu(u.spec?.resources?.cpu),
      memory(u.spec?.resources?.memory),
      text(u.status?.exitCode ?? u.status?.signal),
      oneLine(u.status?.message ?? u.status?.reason ?? NONE),
    );
  }
  return row;
}

/** One word for where a deployment stands (kubectl has none; the dashboards do). */
export function deploymentStatus(d: DeploymentObject): string {
  const st = d.status ?? {};
  const progressing = st.conditions?.find((c) => c.type === 'Progressing');
  if (st.crashLoopBackOff) return 'CrashLoopBackOff';
  if (progressing?.reason === 'ProgressDeadlineExceeded') return 'ProgressDeadlineExceeded';
  if (d.spec?.paused) return 'Paused';
  const revision = d.metadata?.annotations?.['deployment.kubernetes.io/revision'];
  if ((st.oldReplicas ?? 0) > 0 || (st.updatedReplicas ?? st.replicas ?? 0) < (d.spec?.replicas ?? 0)) return `RollingOut${revision ? ` to ${revision}` : ''}`;
  return (st.availableReplicas ?? 0) >= (d.spec?.replicas ?? 0) ? 'Available' : 'Progressing';
}

export function containerCommand(d: DeploymentObject): string[] {
  const c = d.spec?.template?.spec?.containers?.[0];
  return [...(c?.command ?? []), ...(c?.args ?? [])];
}

function deploymentRow(d: DeploymentObject, nowMs: number, wide: boolean): string[] {
  const desired = d.spec?.replicas ?? 0;
  const ready = d.status?.readyReplicas ?? 0;
  const row = [
    text(d.metadata?.name),
    `${ready}/${desired}`,
    String(d.status?.updatedReplicas ?? d.status?.replicas ?? 0),
    String(d.status?.availableReplicas ?? ready),
    deploymentStatus(d),
    age(d.metadata?.creationTimestamp, nowMs),
  ];
  if (wide) {
    const c = d.spec?.template?.spec?.containers?.[0];
    const req = c?.resources?.requests;
    row.push(text(c?.name), containerCommand(d).join(' ') || NONE, req?.cpu !== undefined || req?.memory !== undefined ? `cpu=${req?.cpu ?? '-'},memory=${req?.memory ?? '-'}` : NONE);
  }
  return row;
}

function serviceRow(svc: ServiceObject, nowMs: number, wide: boolean): string[] {
  const ports = (svc.spec?.ports ?? []).map((p) => `${p.port}:${p.nodePort}/TCP`).join(',') || NONE;
  const eps = svc.status?.endpoints ?? [];
  const ready = eps.filter((e) => e.ready).length;
  const row = [
    text(svc.metadata?.name),
    text(svc.spec?.type ?? 'NodePort'),
    ports,
    labelsText(svc.spec?.selector),
    // A selector that matches no running unit (yet) is accepted; say so
    // rather than print a bare 0/0.
    eps.length === 0 ? 'none: no running unit matches' : `${ready}/${eps.length} ready`,
    age(svc.metadata?.creationTimestamp, nowMs),
  ];
  if (wide) row.push((svc.status?.nodeAddresses ?? []).map((n) => `${n.node}=${n.address}`).join(',') || NONE);
  return row;
}

function endpointsRow(e: EndpointsObject): string[] {
  const list = (key: 'addresses' | 'notReadyAddresses') => (e.subsets ?? []).flatMap((s) => (s[key] ?? []).map((a) => `${a.ip}:${a.port}`)).join(',') || NONE;
  return [text(e.metadata?.name), list('addresses'), list('notReadyAddresses')];
}

export function involvedText(e: EventObject): string {
  const kind = e.involvedObject?.kind ? e.involvedObject.kind.toLowerCase() : 'object';
  return `${kind}/${e.involvedObject?.name ?? '?'}`;
}

/** The replica that recorded an event (the server sends its id as a string). */
export function sourceText(e: EventObject): string {
  return e.source || NONE;
}

/** `30s`, or for an event that happened several times `30s (x7 over 2m)`, as kubectl describe says it. */
export function eventAge(e: EventObject, nowMs: number): string {
  const last = age(e.timestamp ?? e.metadata?.creationTimestamp, nowMs);
  if (!e.count || e.count <= 1 || e.firstTimestamp === undefined) return last;
  return `${last} (x${e.count} over ${age(e.firstTimestamp, nowMs)})`;
}

function eventRow(e: EventObject, nowMs: number, wide: boolean): string[] {
  const row = [eventAge(e, nowMs), text(e.type), text(e.reason), involvedText(e)];
  if (wide) row.push(sourceText(e));
  row.push(oneLine(e.message ?? ''));
  return row;
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ');
}

export interface Columns {
  headers(wide: boolean): string[];
  row(obj: unknown, nowMs: number, wide: boolean): string[];
}

export const COLUMNS: Record<ResourceType, Columns> = {
  nodes: {
    headers: (wide) => ['NAME', 'STATUS', 'CPU', 'MEMORY', 'AGE', ...(wide ? ['TAINTS', 'LABELS', 'AGENT-PID'] : [])],
    row: (o, now, wide) => nodeRow(o as NodeObject, now, wide),
  },
  units: {
    headers: (wide) => ['NAME', 'DEPLOYMENT', 'READY', 'STATUS', 'NODE', 'PID', 'AGE', ...(wide ? ['REVISION', 'CPU', 'MEMORY', 'EXIT', 'MESSAGE'] : [])],
    row: (o, now, wide) => unitRow(o as UnitObject, now, wide),
  },
  deployments: {
    headers: (wide) => ['NAME', 'READY', 'UP-TO-DATE', 'AVAILABLE', 'STATUS', 'AGE', ...(wide ? ['CONTAINER', 'COMMAND', 'REQUESTS'] : [])],
    row: (o, now, wide) => deploymentRow(o as DeploymentObject, now, wide),
  },
  services: {
    headers: (wide) => ['NAME', 'TYPE', 'PORT(S)', 'SELECTOR', 'ENDPOINTS', 'AGE', ...(wide ? ['NODE ADDRESSES'] : [])],
    row: (o, now, wide) => serviceRow(o as ServiceObject, now, wide),
  },
  endpoints: {
    headers: () => ['NAME', 'ENDPOINTS', 'NOT READY'],
    row: (o) => endpointsRow(o as EndpointsObject),
  },
  events: {
    headers: (wide) => ['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', ...(wide ? ['SOURCE'] : []), 'MESSAGE'],
    row: (o, now, wide) => eventRow(o as EventObject, now, wide),
  },
};

/** Events oldest first, as kubectl users read them; stable for equal times. */
export function sortEvents<T extends EventObject>(events: readonly T[]): T[] {
  return events
    .map((e, i) => ({ e, i, t: parseTimestamp(e.timestamp ?? e.metadata?.creationTimestamp) ?? 0 }))
    .sort((a, b) => a.t - b.t || a.i - b.i)
    .map((x) => x.e);
}

export function clusterTable(status: ClusterStatus): string {
  const rows = (status.replicas ?? []).map((r) => [
    r.id !== undefined && r.id === status.leader ? '*' : '',
    text(r.id),
    text(r.url),
    r.reachable === false && (r.role === undefined || r.role === 'unknown') ? 'unknown (unreachable)' : text(r.role),
    text(r.term),
    text(r.commitIndex),
    text(r.pid),
  ]);
  const out = table(['LEADER', 'ID', 'URL', 'ROLE', 'TERM', 'COMMIT', 'PID'], rows);
  return out + (status.leader ? '' : 'no leader: the replicas have not elected one (no quorum?)\n');
}
