// control-plane/api/metrics.ts -- `GET /metrics` of one replica in the
// Prometheus text exposition format 0.0.4, written by prom-client. Every
// replica answers it itself (never forwarded to the leader):
//
// * Raft figures are this replica's own, measured by its Raft shell
//   (store/raft-store.ts reports through RaftStoreObserver; the pure core in
//   raft/ knows nothing of metrics).
// * Scheduler and reconcile figures come from the controller
//   (ControllerObserver), which only acts on the leader.
// * Cluster figures (nodes, units, deployments) are counted at scrape time
//   from this replica's copy of the replicated state joined with its own
//   observed view of the agents (views.ts), so a follower's can lag. They and
//   the agents' figures grow with the cluster, so exposition.ts counts and
//   writes them in slices; prom-client writes the rest.
// * Agents' figures ride on one heartbeat in every STATS_INTERVAL_MS (5 s)
//   that every agent sends every replica (node-agent/agent-figures.ts) and
//   are shown labelled by node, for the agents connected to this replica.
//
// Cheap by construction: fixed buckets, label values from fixed sets (routes
// are templates like /v1/units/:name, never raw paths), gauges computed only
// when scraped.

import type http from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { AGENT_SECONDS_BUCKETS, overwriteHistogram, type HistogramCounts } from '../../shared/histogram.ts';
import type { AgentStats } from '../../shared/protocol/messages.ts';
import { internStrings } from '../../shared/intern.ts';
import type { ControllerObserver } from '../controller/controller.ts';
import type { ProposalOutcome, RaftStoreObserver } from '../store/raft-store.ts';
import { isDashboardPath } from './dashboard.ts';
import { type ViewSource } from './views.ts';
import { Slicer } from './slicer.ts';
import { clusterFigures, renderFamilies, UNIT_PHASES, type ClusterFigures, type ScrapedFamily, type ValueRow } from './exposition.ts';

export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

const RESOURCES = new Set(['nodes', 'units', 'deployments', 'events', 'services', 'endpoints']);
const ROLLOUT_VERBS = new Set(['scale', 'revisions', 'undo', 'restart', 'pause', 'resume']);
const METHODS = new Set(['GET', 'PUT', 'POST', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']);
const STREAM_QUERY = { watch: /(?:^|&)watch=(?:1|true)(?:&|$)/, follow: /(?:^|&)follow=(?:1|true)(?:&|$)/ };

/**
 * The route template of a request URL, a label from a fixed set:
 * `/v1/units/:name`, `/v1/deployments?watch`, `/v1/units/:name/log?follow`,
 * `/ (dashboard)`, `other`. Watch and follow streams are marked by their
 * query, so their (long) durations stay out of the latency histogram.
 */
export function routeOf(url: string): string {
  const q = url.indexOf('?');
  const pathname = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q + 1);
  switch (pathname) {
    case '/healthz':
    case '/readyz':
    case '/metrics':
    case '/v1/replica':
    case '/v1/cluster':
      return pathname;
  }
  if (isDashboardPath(pathname)) return '/ (dashboard)';
  const parts = pathname.split('/');
  // ['', 'v1', resource, name?, verb?]
  if (parts[1] !== 'v1' || !RESOURCES.has(parts[2]) || parts.length > 5) return 'other';
  const resource = parts[2];
  if (parts.length === 3 || (parts.length === 4 && parts[3] === '')) return STREAM_QUERY.watch.test(query) ? `/v1/${resource}?watch` : `/v1/${resource}`;
  if (parts[3] === '') return 'other';
  if (parts.length === 4) return `/v1/${resource}/:name`;
  if (resource === 'units' && parts[4] === 'log') return STREAM_QUERY.follow.test(query) ? '/v1/units/:name/log?follow' : '/v1/units/:name/log';
  if (resource === 'deployments' && ROLLOUT_VERBS.has(parts[4])) return `/v1/deployments/:name/${parts[4]}`;
  return 'other';
}

/** A route whose requests are streams (open until the client leaves): counted, not timed. */
export function isStreamRoute(route: string): boolean {
  return route.endsWith('?watch') || route.endsWith('?follow');
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
  /** Open watch streams on this replica. */
  openWatches?: () => number;
  /** Proposals of this replica waiting to be applied. */
  pendingProposals?: () => number;
  /** Whether a node's agent is connected to this replica now (its figures are shown only then). */
  agentConnected?: (node: string) => boolean;
  /** Wall clock, ms (tests). */
  now?: () => number;
}

const PROPOSAL_OUTCOMES: ProposalOutcome[] = ['applied', 'not_leader', 'refused', 'overwritten', 'timeout'];
const ACTIONS = ['create', 'schedule', 'spawn', 'unbind', 'terminate', 'forget', 'backoff', 'backoff-reset'];
/** API latency (seconds). */
const API_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Disk and commit latency (seconds): an O_DSYNC write is 0.1 ms on tmpfs to tens of ms on a busy disk. */
const DISK_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** A snapshot (seconds): tens of ms for a small state, about a second at 20,000 deployments. */
const SNAPSHOT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** One scheduling decision (seconds): microseconds for a handful of nodes. */
const SCHEDULER_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];
/** A failover (seconds): election timeout 0.25-0.5 s plus a vote round. */
const FAILOVER_BUCKETS = [0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30];

/** A pre-counted cumulative histogram (shared/histogram.ts) as Prometheus rows. */
function histogramRows(name: string, labels: Record<string, string>, h: HistogramCounts, bounds: readonly number[] = AGENT_SECONDS_BUCKETS): ValueRow[] {
  const rows: ValueRow[] = bounds.map((b, i) => ({ metricName: `${name}_bucket`, labels: { ...labels, le: String(b) }, value: h.buckets[i] }));
  rows.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: h.count });
  rows.push({ metricName: `${name}_sum`, labels, value: h.sum });
  rows.push({ metricName: `${name}_count`, labels, value: h.count });
  return rows;
}

/**
 * Write `from`'s figures over `into`'s when both have the same shape (true),
 * else change nothing (false). Every histogram has one count per bound of
 * AGENT_SECONDS_BUCKETS (the protocol's check refuses any other), so the
 * shape is the lists' entries.
 */
function overwriteStats(into: AgentStats, from: AgentStats): boolean {
  const same =
    into.heartbeatRtt.length === from.heartbeatRtt.length &&
    into.heartbeatRtt.every((r, i) => r.replica === from.heartbeatRtt[i].replica) &&
    into.probes.length === from.probes.length &&
    into.probes.every((p, i) => p.probe === from.probes[i].probe && p.result === from.probes[i].result) &&
    into.units.length === from.units.length &&
    into.units.every((u, i) => u.phase === from.units[i].phase);
  if (!same) return false;
  overwriteHistogram(into.spawnSeconds, from.spawnSeconds);
  for (let i = 0; i < from.heartbeatRtt.length; i++) {
    overwriteHistogram(into.heartbeatRtt[i].seconds, from.heartbeatRtt[i].seconds);
    into.heartbeatRtt[i].lastSeconds = from.heartbeatRtt[i].lastSeconds;
  }
  for (let i = 0; i < from.probes.length; i++) into.probes[i].count = from.probes[i].count;
  for (let i = 0; i < from.units.length; i++) into.units[i].count = from.units[i].count;
  return true;
}

/** One replica's metrics: prom-client's registry, fed by the API server, the Raft shell, the controller and the figures agents send on their heartbeats. */
export class ReplicaMetrics {
  readonly registry = new Registry();
  /** Hand to RaftStore.open({ observer }). */
  readonly raftObserver: RaftStoreObserver;
  /** Hand to the Controller ({ observer }). */
  readonly controllerObserver: ControllerObserver;
  private readonly requests: Counter<'method' | 'route' | 'code'>;
  private readonly durations: Histogram<'method' | 'route'>;
  private readonly agents = new Map<string, { stats: AgentStats; at: number }>();
  private readonly now: () => number;
  private readonly source: () => ViewSource;
  /** The families that grow with the cluster, rendered in slices by exposition.ts (`figures`: this scrape's counts). */
  private readonly scraped: Array<(figures: ClusterFigures) => ScrapedFamily> = [];

  constructor(private readonly deps: MetricsDeps) {
    this.now = deps.now ?? Date.now;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    const scope = " (this replica's copy of the replicated state joined with its own view of the agents; a follower may lag the leader)";

    new Gauge({
      name: 'mo_replica_info',
      help: 'This replica (value 1).',
      labelNames: ['replica'],
      registers,
      collect() {
        this.set({ replica: deps.replicaId }, 1);
      },
    });

    // ---- Raft
    const raft = () => deps.raft();
    new Gauge({
      name: 'mo_raft_term',
      help: 'Current Raft term of this replica.',
      registers,
      collect() {
        this.set(raft().term);
      },
    });
    new Gauge({
      name: 'mo_raft_commit_index',
      help: 'Highest log index this replica knows committed.',
      registers,
      collect() {
        this.set(raft().commitIndex);
      },
    });
    new Gauge({
      name: 'mo_raft_applied_index',
      help: "Highest log index applied to this replica's state machine.",
      registers,
      collect() {
        this.set(raft().appliedIndex);
      },
    });
    new Gauge({
      name: 'mo_raft_is_leader',
      help: '1 if this replica is the Raft leader, else 0.',
      registers,
      collect() {
        this.set(raft().role === 'leader' ? 1 : 0);
      },
    });
    new Gauge({
      name: 'mo_raft_role',
      help: "This replica's Raft role (1 on the current one).",
      labelNames: ['role'],
      registers,
      collect() {
        const role = raft().role;
        for (const r of ['follower', 'candidate', 'leader']) this.set({ role: r }, role === r ? 1 : 0);
      },
    });
    if (deps.pendingProposals) {
      const pending = deps.pendingProposals;
      new Gauge({
        name: 'mo_raft_proposals_pending',
        help: "This replica's proposals not yet committed and applied.",
        registers,
        collect() {
          this.set(pending());
        },
      });
    }
    const proposals = new Counter({
      name: 'mo_raft_proposals_total',
      help: "Proposals made on this replica by outcome: applied, not_leader, refused (no quorum), overwritten (a new leader's entry took its index), timeout (outcome unknown).",
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of PROPOSAL_OUTCOMES) proposals.inc({ outcome }, 0);
    const elections = new Counter({ name: 'mo_raft_elections_total', help: 'Elections this replica started (asked for votes in a new term, after a won pre-vote).', registers });
    const won = new Counter({ name: 'mo_raft_elections_won_total', help: 'Elections this replica won.', registers });
    const leaderChanges = new Counter({ name: 'mo_raft_leader_changes_total', help: "Leaders this replica has seen: each new term's leader, the first one included.", registers });
    const fsync = new Histogram({
      name: 'mo_raft_fsync_duration_seconds',
      help: "Time for one Raft save (log entries and/or term and vote) to be durable on this replica's disk (an O_DSYNC write; saves waiting meanwhile share the next).",
      buckets: DISK_BUCKETS,
      registers,
    });
    const commit = new Histogram({
      name: 'mo_raft_commit_duration_seconds',
      help: 'Time from a proposal on this leader until it was committed by a majority and applied here.',
      buckets: DISK_BUCKETS,
      registers,
    });
    const failover = new Histogram({
      name: 'mo_raft_failover_seconds',
      help: 'Time this replica was without a leader at each leader change: from the last message of the previous leader (or its own step-down) until the new leader was known.',
      buckets: FAILOVER_BUCKETS,
      registers,
    });
    const lastFailover = new Gauge({
      name: 'mo_raft_last_failover_seconds',
      help: 'mo_raft_failover_seconds of the latest leader change this replica saw (0 before its first failover).',
      registers,
    });
    const lastChange = new Gauge({
      name: 'mo_raft_last_leader_change_timestamp_seconds',
      help: 'When this replica last learnt of a new leader (unix seconds; 0 before the first).',
      registers,
    });
    const snapshots = new Counter({
      name: 'mo_raft_snapshots_total',
      help: 'Snapshots in place on this replica, by kind: taken (packed here, written, the log before it dropped) or installed (sent by the leader to a follower behind its log).',
      labelNames: ['kind'],
      registers,
    });
    for (const kind of ['taken', 'installed']) snapshots.inc({ kind }, 0);
    const snapshotBytes = new Gauge({ name: 'mo_raft_snapshot_bytes', help: 'Size of the latest snapshot this replica took or installed (0 before the first).', registers });
    const snapshotSeconds = new Histogram({
      name: 'mo_raft_snapshot_duration_seconds',
      help: 'For a snapshot taken: from its capture to its log compaction (packing in slices, the file written and fsynced); for one installed: decoding and restoring it.',
      labelNames: ['kind'],
      buckets: SNAPSHOT_BUCKETS,
      registers,
    });
    const now = this.now;
    this.raftObserver = {
      persisted: (s) => fsync.observe(s),
      proposal: (outcome) => proposals.inc({ outcome }),
      committed: (s) => commit.observe(s),
      election: () => elections.inc(),
      electionWon: () => won.inc(),
      snapshot: (kind, bytes, seconds) => {
        snapshots.inc({ kind });
        snapshotBytes.set(bytes);
        snapshotSeconds.observe({ kind }, seconds);
      },
      leaderChanged: (_leader, _term, failoverSeconds) => {
        leaderChanges.inc();
        lastChange.set(now() / 1000);
        if (failoverSeconds !== null) {
          failover.observe(failoverSeconds);
          lastFailover.set(failoverSeconds);
        }
      },
    };

    // ---- scheduler and reconcile (the controller acts only on the leader)
    const placements = new Counter({ name: 'mo_scheduler_placements_total', help: 'Units bound to a node by this replica (counted once the binding is committed).', registers });
    const unschedulable = new Counter({
      name: 'mo_scheduler_unschedulable_total',
      help: 'Scheduling attempts that found no feasible node (a Pending unit is tried again each pass).',
      registers,
    });
    const schedulerTime = new Histogram({
      name: 'mo_scheduler_duration_seconds',
      help: 'Time of one scheduling decision (filter and score over all nodes).',
      buckets: SCHEDULER_BUCKETS,
      registers,
    });
    const passes = new Counter({ name: 'mo_reconcile_passes_total', help: 'Reconcile passes run by this replica (only the leader reconciles).', registers });
    const passTime = new Histogram({
      name: 'mo_reconcile_pass_duration_seconds',
      help: 'Time of one reconcile pass, from planning until its writes were committed.',
      buckets: API_BUCKETS,
      registers,
    });
    const actions = new Counter({ name: 'mo_reconcile_actions_total', help: 'Actions the reconcile passes took, by action.', labelNames: ['action'], registers });
    for (const action of ACTIONS) actions.inc({ action }, 0);
    const BACKLOG_KINDS = ['deferred', 'spawns_in_flight', 'terminates_in_flight'];
    const backlog = new Gauge({
      name: 'mo_reconcile_backlog',
      help: 'Work left after the last pass: deferred (operations cut by the per-pass rate limit), spawns_in_flight and terminates_in_flight (sent, not yet answered by the agent); 0 on a follower.',
      labelNames: ['kind'],
      registers,
      collect() {
        // A follower has no loop running: what it left when it last led is not a backlog.
        if (raft().role !== 'leader') for (const kind of BACKLOG_KINDS) this.set({ kind }, 0);
      },
    });
    for (const kind of BACKLOG_KINDS) backlog.set({ kind }, 0);
    this.controllerObserver = {
      pass: (seconds, acted, left) => {
        passes.inc();
        passTime.observe(seconds);
        for (const a of acted) actions.inc({ action: a.type });
        backlog.set({ kind: 'deferred' }, left.deferred);
        backlog.set({ kind: 'spawns_in_flight' }, left.spawns);
        backlog.set({ kind: 'terminates_in_flight' }, left.terminates);
      },
      scheduled: (seconds, placed) => {
        schedulerTime.observe(seconds);
        if (!placed) unschedulable.inc();
      },
      placed: () => placements.inc(),
    };

    // ---- API
    this.requests = new Counter({
      name: 'mo_api_requests_total',
      help: 'HTTP requests answered by this replica (forwarded ones included), by method, route template and status code.',
      labelNames: ['method', 'route', 'code'],
      registers,
    });
    this.durations = new Histogram({
      name: 'mo_api_request_duration_seconds',
      help: 'Time to answer an HTTP request on this replica, by method and route (watch and log-follow streams are not timed).',
      labelNames: ['method', 'route'],
      buckets: API_BUCKETS,
      registers,
    });
    if (deps.openWatches) {
      const open = deps.openWatches;
      new Gauge({
        name: 'mo_api_open_watches',
        help: 'Watch streams open on this replica.',
        registers,
        collect() {
          this.set(open());
        },
      });
    }

    // ---- the cluster, from this replica's state and view (exposition.ts: counted and written in slices)
    const src = () => deps.source();
    this.source = src;
    new Gauge({
      name: 'mo_deployments',
      help: `Deployments${scope}.`,
      registers,
      collect() {
        this.set(src().state.deployments.size);
      },
    });
    const cluster = (name: string, help: string, rows: (f: ClusterFigures) => Iterable<ValueRow>) => this.scraped.push((f) => ({ name, help, type: 'gauge', rows: () => rows(f) }));
    cluster('mo_nodes', `Nodes by readiness${scope}.`, (f) => [
      { labels: { ready: 'true' }, value: f.nodes.ready },
      { labels: { ready: 'false' }, value: f.nodes.notReady },
    ]);
    cluster(`mo_units`, `Units by phase${scope}.`, function* (f) {
      for (const phase of UNIT_PHASES) yield { labels: { phase }, value: f.unitPhases.get(phase) ?? 0 };
      for (const [phase, n] of f.unitPhases) if (!UNIT_PHASES.includes(phase)) yield { labels: { phase }, value: n };
    });
    cluster('mo_units_by_reason', `Units by phase and reason (none: no reason given), only combinations that exist${scope}.`, function* (f) {
      for (const r of f.unitReasons.values()) yield { labels: { phase: r.phase, reason: r.reason }, value: r.n };
    });
    cluster('mo_units_unscheduled', `Units with no node yet (Pending, unschedulable)${scope}.`, (f) => [{ labels: {}, value: f.unscheduled }]);
    const perDeployment = (name: string, help: string, field: 'desired' | 'ready' | 'available' | 'updated') =>
      cluster(name, help, function* (f) {
        for (const d of f.deployments) yield { labels: { deployment: d.name }, value: d[field] };
      });
    perDeployment('mo_deployment_replicas_desired', `Replicas a deployment asks for${scope}.`, 'desired');
    perDeployment('mo_deployment_replicas_ready', `A deployment's ready units${scope}.`, 'ready');
    perDeployment('mo_deployment_replicas_available', `A deployment's available units${scope}.`, 'available');
    perDeployment('mo_deployment_replicas_updated', `A deployment's units of its current revision${scope}.`, 'updated');

    // ---- the agents' own figures (on a heartbeat every STATS_INTERVAL_MS), per node connected here
    const agentHelp = " (the agent's own figure, sent to this replica on a heartbeat every 5 s)";
    const family = (name: string, help: string, type: 'counter' | 'gauge' | 'histogram', rows: (node: string, s: AgentStats, at: number) => ValueRow[]) => {
      const agents = this.liveAgents.bind(this);
      this.scraped.push(() => ({
        name,
        help,
        type,
        *rows() {
          for (const [node, a] of agents()) yield* rows(node, a.stats, a.at);
        },
      }));
    };
    family('mo_agent_spawn_duration_seconds', `Time from a spawn command's arrival at the agent until the unit's process runs${agentHelp}.`, 'histogram', (node, s) =>
      histogramRows('mo_agent_spawn_duration_seconds', { node }, s.spawnSeconds),
    );
    family(
      'mo_agent_heartbeat_rtt_seconds',
      `Round trip from the agent to each replica: a WebSocket ping sent with a heartbeat (at most once per the interval the replica names), answered by the replica's event loop${agentHelp}.`,
      'histogram',
      (node, s) => s.heartbeatRtt.flatMap((r) => histogramRows('mo_agent_heartbeat_rtt_seconds', { node, replica: r.replica }, r.seconds)),
    );
    family('mo_agent_heartbeat_rtt_last_seconds', `The latest heartbeat round trip from the agent to each replica${agentHelp}.`, 'gauge', (node, s) =>
      s.heartbeatRtt.map((r) => ({ labels: { node, replica: r.replica }, value: r.lastSeconds })),
    );
    family(
      'mo_agent_probe_results_total',
      `Probe results on the node by probe (startup, readiness, liveness) and result (success, failure), since the agent started${agentHelp}.`,
      'counter',
      (node, s) => s.probes.map((p) => ({ labels: { node, probe: p.probe, result: p.result }, value: p.count })),
    );
    family('mo_agent_units', `Units the agent holds, by phase${agentHelp}.`, 'gauge', (node, s) => s.units.map((u) => ({ labels: { node, phase: u.phase }, value: u.count })));
    family('mo_agent_stats_age_seconds', "Seconds since this replica received the agent's last figures (at most about 5 when all is well).", 'gauge', (node, _s, at) => [
      { labels: { node }, value: Math.max(0, (this.now() - at) / 1000) },
    ]);
  }

  /** Agents whose figures are shown: those connected to this replica now. */
  private liveAgents(): Array<[string, { stats: AgentStats; at: number }]> {
    const connected = this.deps.agentConnected;
    const out: Array<[string, { stats: AgentStats; at: number }]> = [];
    for (const [node, a] of this.agents) {
      if (connected && !connected(node)) this.agents.delete(node);
      else out.push([node, a]);
    }
    return out.sort((a, b) => (a[0] < b[0] ? -1 : 1));
  }

  /**
   * An agent's figures (a heartbeat carries them: AgentServer onStats); the
   * last ones per node are kept. They are written over the figures kept for
   * the node when both have the same shape (the rule: the same replicas,
   * probes and phases as 5 s before), so the decoded frame dies young instead
   * of living 5 s: at 5,000 agents the kept frames were nine tenths of what
   * a replica's young-generation collections promoted (a sampling heap
   * profile of a replica in the fleet bench's steady state).
   */
  agentStats(node: string, stats: AgentStats): void {
    const kept = this.agents.get(node);
    const at = this.now();
    if (kept && overwriteStats(kept.stats, stats)) kept.at = at;
    else this.agents.set(node, { stats: internStrings(stats), at }); // kept: its replica names and phases shared, not per node
  }

  /** One answered HTTP request: method, request URL (its route template is the label), status code, seconds taken. */
  observeRequest(method: string, url: string, code: number, seconds: number): void {
    const m = METHODS.has(method) ? method : 'other';
    const route = routeOf(url);
    this.requests.inc({ method: m, route, code: String(code) });
    if (!isStreamRoute(route)) this.durations.observe({ method: m, route }, seconds);
  }

  /** The exposition text. */
  async text(): Promise<string> {
    const own = await this.registry.metrics();
    const slicer = new Slicer();
    const figures = await clusterFigures(this.source(), slicer);
    return (
      own +
      '\n' +
      (await renderFamilies(
        this.scraped.map((f) => f(figures)),
        slicer,
      ))
    );
  }

  /** GET /metrics (the caller checked the token). */
  async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const text = JSON.stringify({ error: `${req.method} is not supported on /metrics (GET)` });
      res.writeHead(405, { 'content-type': 'application/json', allow: 'GET, HEAD' });
      res.end(text);
      return;
    }
    const text = await this.text();
    res.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : text);
  }
}
