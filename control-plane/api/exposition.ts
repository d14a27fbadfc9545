// control-plane/api/exposition.ts -- the part of `GET /metrics` that grows
// with the cluster (a series per deployment, a histogram per agent), written
// here in the Prometheus text format 0.0.4, in slices that yield to the
// event loop. prom-client renders each family in one synchronous step; with
// 10,000 deployments its per-deployment gauges held a replica 300-390 ms per
// scrape, longer than an election timeout (a scrape every 15 s cost the
// cluster its leader). The fixed-size families stay with prom-client.
//
// The figures a scrape reads (clusterFigures) are gathered in slices too, so
// a scrape is not one instant: what lands between two slices may be counted
// in one family and not yet in another. A follower's figures lag anyway.

import type { UnitReport } from '../../shared/model.ts';
import type { ObservedNodeState } from '../registry/node-registry.ts';
import type { Slicer } from './slicer.ts';
import { deploymentCounts, deploymentIndex, observedUnitIndex, orphanUnitState, unitState, type ViewSource } from './views.ts';

export type ValueRow = { metricName?: string; labels: Record<string, string>; value: number };

export interface ScrapedFamily {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  /** Pulled row by row while the text is written (a generator: its work is sliced with the writing). */
  rows: () => Iterable<ValueRow>;
}

const escapeHelp = (s: string): string => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
const escapeLabel = (s: string): string => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
/** As prom-client writes values (and Prometheus reads them). */
const valueText = (v: number): string => (Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v));

function sampleLine(family: string, row: ValueRow): string {
  const keys = Object.keys(row.labels);
  const labels = keys.length === 0 ? '' : `{${keys.map((k) => `${k}="${escapeLabel(row.labels[k])}"`).join(',')}}`;
  return `${row.metricName ?? family}${labels} ${valueText(row.value)}`;
}

/** The families as exposition text (each HELP, TYPE, then its samples; a blank line between families, as prom-client writes them). */
export async function renderFamilies(families: ScrapedFamily[], slicer: Slicer): Promise<string> {
  const out: string[] = [];
  for (const f of families) {
    const lines = [`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`];
    for (const row of f.rows()) {
      lines.push(sampleLine(f.name, row));
      if (slicer.due()) await slicer.pause();
    }
    out.push(lines.join('\n'));
  }
  return out.length === 0 ? '' : `${out.join('\n\n')}\n`;
}

export interface ClusterFigures {
  nodes: { ready: number; notReady: number };
  /** Every phase the API shows, zeros included. */
  unitPhases: Map<string, number>;
  /** Only the phase/reason pairs that exist (reason 'none': none given). */
  unitReasons: Map<string, { phase: string; reason: string; n: number }>;
  unscheduled: number;
  deployments: Array<{ name: string; desired: number; ready: number; available: number; updated: number }>;
}

export const UNIT_PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Lost', 'Terminating'];

/**
 * What the cluster families show, counted as the API's views tell it
 * (views.ts: a unit's phase and reason as `GET /v1/units` shows them, a
 * deployment's counts as its status does) without building the views.
 */
export async function clusterFigures(src: ViewSource, slicer: Slicer): Promise<ClusterFigures> {
  const now = src.now ?? Date.now();
  const { state, observed } = src;
  let ready = 0;
  let all = 0;
  for (const name of state.nodes.keys()) {
    all++;
    if (observed.get(name)?.ready) ready++;
  }
  for (const [name, obs] of observed) {
    if (state.nodes.has(name)) continue;
    all++;
    if (obs.ready) ready++;
  }

  const unitPhases = new Map<string, number>(UNIT_PHASES.map((p) => [p, 0]));
  const unitReasons = new Map<string, { phase: string; reason: string; n: number }>();
  const count = (phase: string, reason: string | null): void => {
    unitPhases.set(phase, (unitPhases.get(phase) ?? 0) + 1);
    const r = reason ?? 'none';
    const key = `${phase}/${r}`;
    const known = unitReasons.get(key);
    if (known) known.n++;
    else unitReasons.set(key, { phase, reason: r, n: 1 });
  };
  const idx: Map<string, { node: ObservedNodeState; report: UnitReport }> = observedUnitIndex(observed);
  let unscheduled = 0;
  for (const u of state.units.values()) {
    if (!u.nodeName) unscheduled++;
    const s = unitState(u, idx.get(u.name), observed, state.deployments.get(u.deployment), now);
    count(s.phase, s.reason);
    if (slicer.due()) await slicer.pause();
  }
  for (const [name, seen] of idx) {
    if (state.units.get(name)?.nodeName === seen.node.name) continue;
    const s = orphanUnitState(seen.report, seen.node.name, seen.node.ready);
    count(s.phase, s.reason);
    if (slicer.due()) await slicer.pause();
  }

  const di = deploymentIndex(src);
  const deployments: ClusterFigures['deployments'] = [];
  for (const d of state.deployments.values()) {
    const c = deploymentCounts(d, src, di);
    deployments.push({ name: d.name, desired: d.replicas, ready: c.ready, available: c.available, updated: c.updated });
    if (slicer.due()) await slicer.pause();
  }
  return { nodes: { ready, notReady: all - ready }, unitPhases, unitReasons, unscheduled, deployments };
}
