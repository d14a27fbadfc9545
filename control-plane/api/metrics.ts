// control-plane/api/metrics.ts -- `GET /metrics` of one replica in the
// Prometheus text exposition format 0.0.4. Every replica answers it itself
// (never forwarded to the leader): Raft figures are this replica's own; the
// cluster figures (nodes, units, deployments) are rendered from this
// replica's copy of the replicated state joined with its own observed view of
// the agents (the same views the API serves), so a follower's figures can lag
// the leader's by the commit latency. No dependency: a small writer below.

import type http from 'node:http';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { allDeploymentViews, allNodeViews, allUnitViews, type ViewSource } from './views.ts';

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
export type Labels = Record<string, string>;

export interface Sample {
  /** Suffix after the family name (`_bucket`, `_sum`, `_count`), '' for none. */
  suffix?: string;
  labels?: Labels;
  value: number;
}

export interface MetricFamily {
  name: string;
  help: string;
  type: MetricType;
  samples: Sample[];
}

/** A label value as the format wants it: backslash, double quote and newline escaped. */
export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** HELP text: backslash and newline escaped (quotes stay). */
export function escapeHelp(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Number.POSITIVE_INFINITY) return '+Inf';
  if (v === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(v);
}

/** The exposition text of some families (each name once, HELP and TYPE first). */
export function formatMetrics(families: MetricFamily[]): string {
  const out: string[] = [];
  for (const f of families) {
    if (!NAME.test(f.name)) throw new Error(`invalid metric name ${JSON.stringify(f.name)}`);
    out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`);
    out.push(`# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const labels = Object.entries(s.labels ?? {});
      for (const [k] of labels) if (!LABEL.test(k) || k.startsWith('__')) throw new Error(`invalid label name ${JSON.stringify(k)} on ${f.name}`);
      const l = labels.length ? `{${labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',')}}` : '';
      out.push(`${f.name}${s.suffix ?? ''}${l} ${formatValue(s.value)}`);
    }
  }
  return out.join('\n') + '\n';
}

/** A cumulative histogram with fixed upper bounds (seconds), per label set. */
export class Histogram {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(readonly bounds: number[]) {}

  observe(labels: Labels, v: number): void {
    const key = JSON.stringify(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { labels, counts: this.bounds.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]) s.counts[i]++;
    s.sum += v;
    s.count++;
  }

  samples(): Sample[] {
    const out: Sample[] = [];
    for (const s of this.series.values()) {
      this.bounds.forEach((b, i) => out.push({ suffix: '_bucket', labels: { ...s.labels, le: formatValue(b) }, value: s.counts[i] }));
      out.push({ suffix: '_bucket', labels: { ...s.labels, le: '+Inf' }, value: s.count });
      out.push({ suffix: '_sum', labels: s.labels, value: s.sum });
      out.push({ suffix: '_count', labels: s.labels, value: s.count });
    }
    return out;
  }
}

/** Counters by label set. */
export class Counter {
  private readonly series = new Map<string, { labels: Labels; value: number }>();
  inc(labels: Labels = {}, by = 1): void {
    const key = JSON.stringify(labels);
    const s = this.series.get(key);
    if (s) s.value += by;
    else this.series.set(key, { labels, value: by });
  }
  samples(): Sample[] {
    return [...this.series.values()].map((s) => ({ labels: s.labels, value: s.value }));
  }
}

export interface RaftFigures {
  role: string;
  term: number;
  commitIndex: number;
  appliedIndex: number;
}

export interface MetricsDeps {
  replicaId: string;
  raft: () => RaftFigures;
  /** This replica's replicated state and observed view (views.ts). */
  source: () => ViewSource;
  /** Reconcile plans computed by this replica's loop so far (the loop plans only on the leader). */
  reconcilePasses: () => number;
  /** Open watch streams on this replica (optional). */
  openWatches?: () => number;
}

const UNIT_PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Lost', 'Terminating'];
const DURATION_BOUNDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** One replica's metrics: counters fed by the API server and the role watcher, gauges read at scrape time. */
export class ReplicaMetrics {
  readonly requests = new Counter();
  readonly durations = new Histogram(DURATION_BOUNDS);
  private leaderChanges = 0;
  private lastRole: string | null = null;
  private lastLeaderSeen: boolean | null = null;
  private readonly loop: IntervalHistogram;
  private readonly started = Date.now();

  constructor(private readonly deps: MetricsDeps) {
    this.loop = monitorEventLoopDelay({ resolution: 10 });
    this.loop.enable();
  }

  /** Call on every role change of this replica (store.onRoleChange). */
  roleChanged(role: string): void {
    if (this.lastRole !== null && role !== this.lastRole) this.leaderChanges++;
    this.lastRole = role;
    this.lastLeaderSeen = role === 'leader';
  }

  /** One answered API request (method, status code, seconds taken). Watch streams count when they end. */
  observeRequest(method: string, code: number, seconds: number): void {
    const m = ['GET', 'PUT', 'POST', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'].includes(method) ? method : 'other';
    this.requests.inc({ method: m, code: String(code) });
    this.durations.observe({ method: m }, seconds);
  }

  families(): MetricFamily[] {
    const r = this.deps.raft();
    if (this.lastRole === null) this.roleChanged(r.role);
    const src = this.deps.source();
    const nodes = allNodeViews(src);
    const units = allUnitViews(src);
    const deployments = allDeploymentViews(src);
    const scope = ' (from this replica\'s copy of the replicated state and its own observed view of the agents; a follower may lag the leader)';

    const nodeReady = { true: 0, false: 0 };
    for (const n of nodes) nodeReady[(n.status as { ready: boolean }).ready ? 'true' : 'false']++;
    const phases = new Map<string, number>(UNIT_PHASES.map((p) => [p, 0]));
    for (const u of units) {
      const p = String((u.status as { phase: string }).phase);
      phases.set(p, (phases.get(p) ?? 0) + 1);
    }
    const dep = (field: string) =>
      deployments.map((d) => ({ labels: { deployment: d.metadata.name }, value: Number(field === 'desired' ? (d.spec as { replicas: number }).replicas : (d.status as Record<string, number>)[field] ?? 0) }));

    const mem = process.memoryUsage();
    const cpu = process.cpuUsage();
    const ns = (v: number) => (Number.isFinite(v) ? v / 1e9 : 0);
    const fams: MetricFamily[] = [
      { name: 'mo_replica_info', help: 'This replica (value 1).', type: 'gauge', samples: [{ labels: { replica: this.deps.replicaId }, value: 1 }] },
      { name: 'mo_raft_term', help: 'Current Raft term of this replica.', type: 'gauge', samples: [{ value: r.term }] },
      { name: 'mo_raft_commit_index', help: 'Highest log index this replica knows committed.', type: 'gauge', samples: [{ value: r.commitIndex }] },
      { name: 'mo_raft_applied_index', help: 'Highest log index applied to this replica\'s state machine.', type: 'gauge', samples: [{ value: r.appliedIndex }] },
      { name: 'mo_raft_is_leader', help: '1 if this replica is the Raft leader, else 0.', type: 'gauge', samples: [{ value: r.role === 'leader' ? 1 : 0 }] },
      { name: 'mo_raft_role', help: 'This replica\'s Raft role (1 on the current one).', type: 'gauge', samples: ['follower', 'candidate', 'leader'].map((role) => ({ labels: { role }, value: r.role === role ? 1 : 0 })) },
      { name: 'mo_raft_leader_changes_total', help: 'Role changes of this replica (follower/candidate/leader) since it started.', type: 'counter', samples: [{ value: this.leaderChanges }] },
      { name: 'mo_nodes', help: `Nodes by readiness${scope}.`, type: 'gauge', samples: [{ labels: { ready: 'true' }, value: nodeReady.true }, { labels: { ready: 'false' }, value: nodeReady.false }] },
      { name: 'mo_units', help: `Units by phase${scope}.`, type: 'gauge', samples: [...phases].map(([phase, value]) => ({ labels: { phase }, value })) },
      { name: 'mo_deployments', help: `Deployments${scope}.`, type: 'gauge', samples: [{ value: deployments.length }] },
      { name: 'mo_deployment_replicas_desired', help: `Replicas a deployment asks for${scope}.`, type: 'gauge', samples: dep('desired') },
      { name: 'mo_deployment_replicas_ready', help: `A deployment's ready units${scope}.`, type: 'gauge', samples: dep('readyReplicas') },
      { name: 'mo_deployment_replicas_available', help: `A deployment's available units${scope}.`, type: 'gauge', samples: dep('availableReplicas') },
      { name: 'mo_deployment_replicas_updated', help: `A deployment's units of its current revision${scope}.`, type: 'gauge', samples: dep('updatedReplicas') },
      { name: 'mo_reconcile_passes_total', help: 'Reconcile plans computed by this replica (only the leader reconciles).', type: 'counter', samples: [{ value: this.deps.reconcilePasses() }] },
      { name: 'mo_api_requests_total', help: 'HTTP API requests answered by this replica (forwarded ones included), by method and status code.', type: 'counter', samples: this.requests.samples() },
      { name: 'mo_api_request_duration_seconds', help: 'Time to answer an HTTP API request on this replica (watch streams: until they close).', type: 'histogram', samples: this.durations.samples() },
    ];
    if (this.deps.openWatches) fams.push({ name: 'mo_api_open_watches', help: 'Watch streams open on this replica.', type: 'gauge', samples: [{ value: this.deps.openWatches() }] });
    fams.push(
      { name: 'process_resident_memory_bytes', help: 'Resident memory size in bytes.', type: 'gauge', samples: [{ value: mem.rss }] },
      { name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', type: 'counter', samples: [{ value: (cpu.user + cpu.system) / 1e6 }] },
      { name: 'process_start_time_seconds', help: 'Start time of the process since unix epoch in seconds.', type: 'gauge', samples: [{ value: Math.floor(this.started / 1000) }] },
      { name: 'nodejs_heap_used_bytes', help: 'V8 heap used in bytes.', type: 'gauge', samples: [{ value: mem.heapUsed }] },
      {
        name: 'nodejs_eventloop_delay_seconds',
        help: 'Event loop delay since the previous scrape (perf_hooks.monitorEventLoopDelay), by quantile; reset at each scrape.',
        type: 'gauge',
        samples: [
          { labels: { quantile: '0.5' }, value: ns(this.loop.percentile(50)) },
          { labels: { quantile: '0.99' }, value: ns(this.loop.percentile(99)) },
          { labels: { quantile: 'max' }, value: ns(this.loop.max) },
        ],
      },
    );
    this.loop.reset();
    return fams;
  }

  /** GET /metrics (the caller checked the token). */
  serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const text = JSON.stringify({ error: `${req.method} is not supported on /metrics (GET)` });
      res.writeHead(405, { 'content-type': 'application/json', allow: 'GET, HEAD' });
      res.end(text);
      return;
    }
    const text = formatMetrics(this.families());
    res.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : text);
  }

  stop(): void {
    this.loop.disable();
  }
}
