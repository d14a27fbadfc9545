// test/unit/metrics.test.ts -- /metrics without processes: the exposition
// (prom-client's text format 0.0.4) checked line by line by a strict reader
// below (every sample under a declared TYPE, label syntax and escaping,
// histogram buckets cumulative with +Inf equal to _count, no duplicate
// series); route templates instead of raw paths; the Raft, controller, API
// and agent figures each moving when their event happens; the agent's own
// counting (agent-figures.ts) and its stats frame crossing the real codec;
// malformed stats frames refused.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ReplicaMetrics, routeOf, isStreamRoute } from '../../control-plane/api/metrics.ts';
import { DesiredState } from '../../control-plane/store/desired-state.ts';
import { allDeploymentViews, allUnitViews } from '../../control-plane/api/views.ts';
import type { ObservedNodeState } from '../../control-plane/registry/node-registry.ts';
import { unitSpecHash, validateManifest } from '../../shared/manifest.ts';
import { AgentFigures, MAX_PENDING_SPAWNS } from '../../node-agent/agent-figures.ts';
import { AGENT_SECONDS_BUCKETS, emptyHistogram, observe } from '../../shared/histogram.ts';
import { decodeAgentMessage, encodeMessage } from '../../shared/protocol/codec.ts';
import { stringCopies } from '../helpers/heap-strings.ts';

// ---- a strict reader of the text format --------------------------------

interface Series {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parse an exposition; throws on anything the format does not allow. Returns the samples and each family's type. */
function parseExposition(text: string): { samples: Series[]; types: Map<string, string> } {
  assert.ok(text.endsWith('\n'), 'ends with a newline');
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const samples: Series[] = [];
  const seen = new Set<string>();
  const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m = new RegExp(`^# HELP (${NAME}) (.*)$`).exec(line);
    if (m) {
      assert.ok(!helps.has(m[1]), `HELP twice for ${m[1]}`);
      helps.add(m[1]);
      assert.ok(!/(^|[^\\])\\[^\\n]/.test(m[2]), `HELP escapes only \\\\ and \\n: ${line}`);
      continue;
    }
    m = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`).exec(line);
    if (m) {
      assert.ok(!types.has(m[1]), `TYPE twice for ${m[1]}`);
      types.set(m[1], m[2]);
      continue;
    }
    assert.ok(!line.startsWith('#'), `a comment that is neither HELP nor TYPE: ${line}`);
    m = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)$`).exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const [, name, labelText = '', valueText] = m;
    const labels: Record<string, string> = {};
    let rest = labelText;
    while (rest.length > 0) {
      const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/.exec(rest);
      assert.ok(lm, `bad labels in: ${line}`);
      assert.ok(!(lm[1] in labels), `label ${lm[1]} twice in: ${line}`);
      labels[lm[1]] = lm[2].replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
      rest = rest.slice(lm[0].length);
    }
    // Values are what Go's strconv.ParseFloat reads (Prometheus parses them so): NaN in any case (prom-client writes 'Nan'), +Inf, -Inf.
    const isNaNText = /^nan$/i.test(valueText);
    const value = valueText === '+Inf' ? Infinity : valueText === '-Inf' ? -Infinity : Number(valueText);
    assert.ok(isNaNText || (!Number.isNaN(value) && /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$|^[-+]Inf$/i.test(valueText)), `bad value in: ${line}`);
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    const type = types.get(family);
    assert.ok(type, `sample before its TYPE: ${line}`);
    if (family !== name) assert.ok(type === 'histogram' || type === 'summary', `suffix on a ${type}: ${line}`);
    if (name.endsWith('_bucket') && type === 'histogram') assert.ok('le' in labels, `bucket without le: ${line}`);
    const key = `${name}{${Object.entries(labels)
      .sort()
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(',')}}`;
    assert.ok(!seen.has(key), `duplicate series ${key}`);
    seen.add(key);
    samples.push({ name, labels, value });
  }
  // Histograms: per label set, buckets non-decreasing in le, +Inf present and equal to _count.
  for (const [family, type] of types) {
    if (type !== 'histogram') continue;
    const groups = new Map<string, Array<{ le: number; v: number }>>();
    for (const s of samples.filter((x) => x.name === `${family}_bucket`)) {
      const { le, ...rest } = s.labels;
      const k = JSON.stringify(Object.entries(rest).sort());
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k)!.push({ le: le === '+Inf' ? Infinity : Number(le), v: s.value });
    }
    for (const [k, buckets] of groups) {
      buckets.sort((a, b) => a.le - b.le);
      for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i].v >= buckets[i - 1].v, `${family}${k}: buckets decrease`);
      assert.equal(buckets.at(-1)!.le, Infinity, `${family}${k}: no +Inf bucket`);
      const count = samples.find((x) => x.name === `${family}_count` && JSON.stringify(Object.entries(x.labels).sort()) === k);
      assert.ok(count, `${family}${k}: no _count`);
      assert.equal(count.value, buckets.at(-1)!.v, `${family}${k}: +Inf bucket != _count`);
      assert.ok(
        samples.some((x) => x.name === `${family}_sum` && JSON.stringify(Object.entries(x.labels).sort()) === k),
        `${family}${k}: no _sum`,
      );
    }
  }
  return { samples, types };
}

function value(samples: Series[], name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels);
  const found = samples.filter((s) => s.name === name && want.every(([k, v]) => s.labels[k] === v) && (want.length > 0 || Object.keys(s.labels).length === 0));
  if (found.length > 1 && want.length > 0) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} series`);
  return found[0]?.value;
}

test('the strict reader itself refuses what the format forbids', () => {
  assert.throws(() => parseExposition('x 1\n'), /before its TYPE/);
  assert.throws(() => parseExposition('# TYPE x gauge\nx{a="1} 1\n'), /bad labels/);
  assert.throws(() => parseExposition('# TYPE x gauge\nx 1\nx 2\n'), /duplicate/);
  assert.throws(() => parseExposition('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'), /decrease/);
  assert.throws(() => parseExposition('# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n'), /!= _count/);
  assert.doesNotThrow(() => parseExposition('# HELP x A "q" \\\\ \\n.\n# TYPE x gauge\nx{a="\\"\\\\\\n"} 1\n'));
});

test('routes are templates from a fixed set, never raw names; streams are marked', () => {
  const cases: Array<[string, string]> = [
    ['/v1/units', '/v1/units'],
    ['/v1/units/', '/v1/units'],
    ['/v1/units?watch=1&resourceVersion=3', '/v1/units?watch'],
    ['/v1/deployments?watch=true', '/v1/deployments?watch'],
    ['/v1/units?watch=0', '/v1/units'],
    ['/v1/units/web-1', '/v1/units/:name'],
    ['/v1/deployments/web/scale', '/v1/deployments/:name/scale'],
    ['/v1/deployments/web/undo', '/v1/deployments/:name/undo'],
    ['/v1/deployments/web/explode', 'other'],
    ['/v1/units/web-1/log?tailLines=5', '/v1/units/:name/log'],
    ['/v1/units/web-1/log?follow=true', '/v1/units/:name/log?follow'],
    ['/v1/cluster', '/v1/cluster'],
    ['/v1/replica', '/v1/replica'],
    ['/metrics', '/metrics'],
    ['/healthz', '/healthz'],
    ['/', '/ (dashboard)'],
    ['/ui/app.js', '/ (dashboard)'],
    ['/v1/secrets/x', 'other'],
    ['/v1/units/a/b/c/d', 'other'],
    ['/%00%0a', 'other'],
    ['/' + 'x'.repeat(5000), 'other'],
  ];
  for (const [url, route] of cases) assert.equal(routeOf(url), route, url);
  assert.equal(isStreamRoute('/v1/units?watch'), true);
  assert.equal(isStreamRoute('/v1/units/:name/log?follow'), true);
  assert.equal(isStreamRoute('/v1/units'), false);
});

function stateWithUnits(): DesiredState {
  const state = new DesiredState();
  const { manifest, unitSpec } = validateManifest({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: { replicas: 2, template: { spec: { containers: [{ name: 'web', command: ['sleep', '3600'], resources: { requests: { cpu: '100m', memory: '64Mi' } } }] } } },
  });
  let i = 0;
  const ok = (r: { ok: boolean }) => assert.equal(r.ok, true, JSON.stringify(r));
  ok(state.apply(++i, { type: 'node.register', at: 1, node: { name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} } }));
  ok(state.apply(++i, { type: 'deployment.apply', at: 1, uid: 'u1', manifest, unitSpec, specHash: unitSpecHash(unitSpec) }));
  ok(state.apply(++i, { type: 'unit.create', at: 1, uid: 'a', deployment: 'web', nodeName: null, scheduling: null }));
  ok(state.apply(++i, { type: 'unit.create', at: 1, uid: 'b', deployment: 'web', nodeName: 'node-a', scheduling: null }));
  return state;
}

function metricsFor(state: DesiredState, extra: { connected?: Set<string>; role?: () => string } = {}): ReplicaMetrics {
  let t = 1_000_000;
  return new ReplicaMetrics({
    replicaId: 'cp-1',
    raft: () => ({ role: extra.role?.() ?? 'leader', term: 3, commitIndex: 10, appliedIndex: 9 }),
    source: () => ({ state, observed: new Map<string, ObservedNodeState>(), now: 0 }),
    openWatches: () => 2,
    pendingProposals: () => 1,
    agentConnected: extra.connected ? (n) => extra.connected!.has(n) : undefined,
    now: () => (t += 500),
  });
}

test('a replica exposes every family the issue asks for, valid, with the cluster read from its state', async () => {
  const m = metricsFor(stateWithUnits());
  const { samples, types } = parseExposition(await m.text());
  const want: Record<string, string> = {
    mo_raft_term: 'gauge',
    mo_raft_commit_index: 'gauge',
    mo_raft_applied_index: 'gauge',
    mo_raft_is_leader: 'gauge',
    mo_raft_role: 'gauge',
    mo_raft_proposals_total: 'counter',
    mo_raft_proposals_pending: 'gauge',
    mo_raft_elections_total: 'counter',
    mo_raft_elections_won_total: 'counter',
    mo_raft_leader_changes_total: 'counter',
    mo_raft_fsync_duration_seconds: 'histogram',
    mo_raft_commit_duration_seconds: 'histogram',
    mo_raft_failover_seconds: 'histogram',
    mo_raft_last_failover_seconds: 'gauge',
    mo_raft_snapshots_total: 'counter',
    mo_raft_snapshot_bytes: 'gauge',
    mo_raft_snapshot_duration_seconds: 'histogram',
    mo_api_requests_total: 'counter',
    mo_api_request_duration_seconds: 'histogram',
    mo_api_open_watches: 'gauge',
    mo_scheduler_placements_total: 'counter',
    mo_scheduler_unschedulable_total: 'counter',
    mo_scheduler_duration_seconds: 'histogram',
    mo_reconcile_passes_total: 'counter',
    mo_reconcile_actions_total: 'counter',
    mo_reconcile_backlog: 'gauge',
    mo_reconcile_pass_duration_seconds: 'histogram',
    mo_nodes: 'gauge',
    mo_units: 'gauge',
    mo_units_by_reason: 'gauge',
    mo_units_unscheduled: 'gauge',
    mo_deployments: 'gauge',
    mo_agent_spawn_duration_seconds: 'histogram',
    mo_agent_heartbeat_rtt_seconds: 'histogram',
    mo_agent_probe_results_total: 'counter',
    mo_agent_units: 'gauge',
    process_resident_memory_bytes: 'gauge',
    process_cpu_seconds_total: 'counter',
    nodejs_eventloop_lag_p99_seconds: 'gauge',
  };
  for (const [name, type] of Object.entries(want)) assert.equal(types.get(name), type, name);
  assert.equal(value(samples, 'mo_raft_term'), 3);
  assert.equal(value(samples, 'mo_raft_is_leader'), 1);
  assert.equal(value(samples, 'mo_raft_role', { role: 'leader' }), 1);
  assert.equal(value(samples, 'mo_raft_role', { role: 'follower' }), 0);
  assert.equal(value(samples, 'mo_api_open_watches'), 2);
  assert.equal(value(samples, 'mo_replica_info', { replica: 'cp-1' }), 1);
  // Outcomes and actions exist at 0 from the start, so rate() has a start.
  assert.equal(value(samples, 'mo_raft_proposals_total', { outcome: 'timeout' }), 0);
  assert.equal(value(samples, 'mo_reconcile_actions_total', { action: 'spawn' }), 0);
  // The state: node-a registered but no agent seen (not ready); web-1 unscheduled, web-2 on node-a, lost.
  assert.equal(value(samples, 'mo_nodes', { ready: 'false' }), 1);
  assert.equal(value(samples, 'mo_nodes', { ready: 'true' }), 0);
  assert.equal(value(samples, 'mo_units', { phase: 'Pending' }), 1);
  assert.equal(value(samples, 'mo_units', { phase: 'Lost' }), 1);
  assert.equal(value(samples, 'mo_units', { phase: 'Running' }), 0);
  assert.equal(value(samples, 'mo_units_by_reason', { phase: 'Pending', reason: 'Unschedulable' }), 1);
  assert.equal(value(samples, 'mo_units_by_reason', { phase: 'Lost', reason: 'NodeLost' }), 1);
  assert.equal(samples.filter((s) => s.name === 'mo_units_by_reason').length, 2, 'only combinations that exist');
  assert.equal(value(samples, 'mo_units_unscheduled'), 1);
  assert.equal(value(samples, 'mo_deployments'), 1);
  assert.equal(value(samples, 'mo_deployment_replicas_desired', { deployment: 'web' }), 2);
});

test('a scrape of a big state yields to the event loop, and counts what the views show', async () => {
  // 3,000 deployments of 1 replica: their units bound to node-a (ready),
  // reported Running, Failed or not at all, one report nobody binds, and
  // every 7th unit left unscheduled.
  const state = new DesiredState();
  let i = 0;
  const ok = (r: { ok: boolean }) => assert.equal(r.ok, true, JSON.stringify(r));
  ok(state.apply(++i, { type: 'node.register', at: 1, node: { name: 'node-a', capacity: { cpu: 1e9, memory: 1e9 }, taints: [], labels: {} } }));
  const N = 3000;
  const reports = new Map<string, import('../../shared/model.ts').UnitReport>();
  for (let k = 0; k < N; k++) {
    const name = `d${k}`;
    const { manifest, unitSpec } = validateManifest({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name },
      spec: { replicas: 1, template: { spec: { containers: [{ name: 'c', command: ['sleep', '3600'], resources: { requests: { cpu: '1m', memory: '1Mi' } } }] } } },
    });
    const specHash = unitSpecHash(unitSpec);
    ok(state.apply(++i, { type: 'deployment.apply', at: 1, uid: `u${k}`, manifest, unitSpec, specHash }));
    ok(state.apply(++i, { type: 'unit.create', at: 1, uid: `x${k}`, deployment: name, nodeName: k % 7 === 0 ? null : 'node-a', scheduling: null }));
    const unit = `${name}-1`;
    if (k % 7 === 0) continue;
    const base = { name: unit, deployment: name, resources: { cpu: 1, memory: 1 }, term: 1, specHash, startedAt: 1 };
    if (k % 3 === 0) reports.set(unit, { ...base, phase: 'Running', ready: true, readySince: 1 });
    else if (k % 3 === 1) reports.set(unit, { ...base, phase: 'Failed', reason: 'Error', exitCode: 1, finishedAt: 100_000 });
  }
  reports.set('gone-0', { name: 'gone-0', deployment: 'gone', phase: 'Running', resources: { cpu: 1, memory: 1 }, term: 1 });
  const info = { name: 'node-a', capacity: { cpu: 1e9, memory: 1e9 }, taints: [], labels: {} };
  const observed = new Map<string, ObservedNodeState>([
    ['node-a', { name: 'node-a', info, agentPid: 1, connected: true, ready: true, lastHeartbeatMs: 0, notReadySinceMs: null, units: reports, highestTerm: 1 }],
  ]);
  const src = { state, observed, now: 200_000 };
  const m = new ReplicaMetrics({ replicaId: 'cp-1', raft: () => ({ role: 'leader', term: 1, commitIndex: 1, appliedIndex: 1 }), source: () => src });
  // The loop turns while the scrape is written: a scrape never holds a replica for its whole length.
  let turns = 0;
  let counting = true;
  const spin = (): void => {
    turns++;
    if (counting) setImmediate(spin);
  };
  setImmediate(spin);
  const text = await m.text();
  counting = false;
  const { samples } = parseExposition(text);
  // What the API's views say, built the slow way.
  const views = allDeploymentViews(src);
  assert.equal(views.length, N);
  const perDeployment = new Map<string, number>();
  for (const x of samples) if (x.name.startsWith('mo_deployment_replicas_')) perDeployment.set(`${x.name}/${x.labels.deployment}`, x.value);
  assert.equal(perDeployment.size, 4 * N);
  let readySeen = 0;
  for (const v of views) {
    const d = v.metadata.name;
    assert.equal(perDeployment.get(`mo_deployment_replicas_desired/${d}`), v.spec.replicas, d);
    assert.equal(perDeployment.get(`mo_deployment_replicas_ready/${d}`), v.status.readyReplicas, d);
    assert.equal(perDeployment.get(`mo_deployment_replicas_available/${d}`), v.status.availableReplicas, d);
    assert.equal(perDeployment.get(`mo_deployment_replicas_updated/${d}`), v.status.updatedReplicas, d);
    readySeen += v.status.readyReplicas as number;
  }
  assert.ok(readySeen > 0 && readySeen < N, `some deployments ready, not all (${readySeen})`);
  const units = allUnitViews(src);
  const byPhase = new Map<string, number>();
  const byReason = new Map<string, number>();
  for (const u of units) {
    const st = u.status as { phase: string; reason: string | null };
    byPhase.set(st.phase, (byPhase.get(st.phase) ?? 0) + 1);
    byReason.set(`${st.phase}/${st.reason ?? 'none'}`, (byReason.get(`${st.phase}/${st.reason ?? 'none'}`) ?? 0) + 1);
  }
  for (const s of samples.filter((x) => x.name === 'mo_units')) assert.equal(s.value, byPhase.get(s.labels.phase) ?? 0, s.labels.phase);
  const reasonSamples = samples.filter((x) => x.name === 'mo_units_by_reason');
  assert.equal(reasonSamples.length, byReason.size);
  for (const s of reasonSamples) assert.equal(s.value, byReason.get(`${s.labels.phase}/${s.labels.reason}`), JSON.stringify(s.labels));
  assert.ok(
    ['Terminating', 'Failed', 'Running', 'Pending'].every((p) => byPhase.get(p)! > 0),
    `the state covers each kind: ${JSON.stringify([...byPhase])}`,
  );
  assert.equal(value(samples, 'mo_units_unscheduled'), Math.ceil(N / 7));
  assert.equal(value(samples, 'mo_nodes', { ready: 'true' }), 1);
  assert.ok(turns >= 3, `the event loop turned ${turns} times during the scrape`);
});

test('Raft, controller and API events move their series', async () => {
  let role = 'leader';
  const m = metricsFor(new DesiredState(), { role: () => role });
  const r = m.raftObserver;
  r.election();
  r.electionWon();
  r.leaderChanged('cp-1', 1, null); // the first leader: a change, no failover
  r.election();
  r.leaderChanged('cp-2', 2, 0.42);
  r.persisted(0.0007);
  r.persisted(0.003);
  r.proposal('applied');
  r.committed(0.004);
  r.proposal('refused');
  r.snapshot('taken', 16_000_000, 0.8);
  r.snapshot('installed', 12_000_000, 0.3);
  const c = m.controllerObserver;
  c.scheduled(0.00003, true);
  c.placed();
  c.scheduled(0.00002, false);
  c.pass(0.012, [{ type: 'create' }, { type: 'create' }, { type: 'spawn' }], { deferred: 7, spawns: 3, terminates: 1 });
  m.observeRequest('GET', '/v1/units/web-1', 200, 0.002);
  m.observeRequest('GET', '/v1/units/web-2', 200, 0.003);
  m.observeRequest('GET', '/v1/units?watch=1', 200, 120);
  m.observeRequest('BREW', '/v1/nope', 404, 0.001);
  const { samples } = parseExposition(await m.text());
  assert.equal(value(samples, 'mo_raft_elections_total'), 2);
  assert.equal(value(samples, 'mo_raft_elections_won_total'), 1);
  assert.equal(value(samples, 'mo_raft_leader_changes_total'), 2);
  assert.equal(value(samples, 'mo_raft_failover_seconds_count'), 1);
  assert.equal(value(samples, 'mo_raft_failover_seconds_bucket', { le: '0.5' }), 1);
  assert.equal(value(samples, 'mo_raft_failover_seconds_bucket', { le: '0.25' }), 0);
  assert.equal(value(samples, 'mo_raft_last_failover_seconds'), 0.42);
  assert.ok(value(samples, 'mo_raft_last_leader_change_timestamp_seconds')! > 0);
  assert.equal(value(samples, 'mo_raft_fsync_duration_seconds_count'), 2);
  assert.equal(value(samples, 'mo_raft_fsync_duration_seconds_bucket', { le: '0.001' }), 1);
  assert.equal(value(samples, 'mo_raft_commit_duration_seconds_count'), 1);
  assert.equal(value(samples, 'mo_raft_proposals_total', { outcome: 'applied' }), 1);
  assert.equal(value(samples, 'mo_raft_proposals_total', { outcome: 'refused' }), 1);
  assert.equal(value(samples, 'mo_raft_snapshots_total', { kind: 'taken' }), 1);
  assert.equal(value(samples, 'mo_raft_snapshots_total', { kind: 'installed' }), 1);
  assert.equal(value(samples, 'mo_raft_snapshot_bytes'), 12_000_000, 'the latest one');
  assert.equal(value(samples, 'mo_raft_snapshot_duration_seconds_bucket', { kind: 'taken', le: '0.5' }), 0);
  assert.equal(value(samples, 'mo_raft_snapshot_duration_seconds_bucket', { kind: 'taken', le: '1' }), 1);
  assert.equal(value(samples, 'mo_raft_proposals_pending'), 1);
  assert.equal(value(samples, 'mo_scheduler_placements_total'), 1);
  assert.equal(value(samples, 'mo_scheduler_unschedulable_total'), 1);
  assert.equal(value(samples, 'mo_scheduler_duration_seconds_count'), 2);
  assert.equal(value(samples, 'mo_reconcile_passes_total'), 1);
  assert.equal(value(samples, 'mo_reconcile_actions_total', { action: 'create' }), 2);
  assert.equal(value(samples, 'mo_reconcile_actions_total', { action: 'spawn' }), 1);
  assert.equal(value(samples, 'mo_reconcile_backlog', { kind: 'deferred' }), 7);
  assert.equal(value(samples, 'mo_reconcile_backlog', { kind: 'spawns_in_flight' }), 3);
  // Once this replica follows, its loop is idle: no backlog is shown.
  role = 'follower';
  const followerText = parseExposition(await m.text()).samples;
  assert.equal(value(followerText, 'mo_reconcile_backlog', { kind: 'deferred' }), 0);
  assert.equal(value(followerText, 'mo_raft_is_leader'), 0);
  assert.equal(value(followerText, 'mo_scheduler_placements_total'), 1, 'counters keep what it counted while it led');
  // Two unit names, one route; the watch is counted but not timed; an odd method is 'other'.
  assert.equal(value(samples, 'mo_api_requests_total', { method: 'GET', route: '/v1/units/:name', code: '200' }), 2);
  assert.equal(value(samples, 'mo_api_requests_total', { method: 'GET', route: '/v1/units?watch', code: '200' }), 1);
  assert.equal(value(samples, 'mo_api_requests_total', { method: 'other', route: 'other', code: '404' }), 1);
  assert.equal(value(samples, 'mo_api_request_duration_seconds_count', { method: 'GET', route: '/v1/units/:name' }), 2);
  assert.equal(value(samples, 'mo_api_request_duration_seconds_count', { method: 'GET', route: '/v1/units?watch' }), undefined);
  assert.ok(!samples.some((s) => Object.values(s.labels).some((v) => v.includes('web-1'))), 'no raw unit name in any label');
});

test('agent figures: counted by the agent, carried by the real codec, shown per connected node', async () => {
  const f = new AgentFigures();
  f.spawnReceived('web-1', 1000);
  f.spawnReceived('web-1', 1500); // a resend: the first arrival counts
  f.unitPhase('web-1', 'Pending', 1010);
  f.unitPhase('web-1', 'Running', 1030); // 30 ms
  f.spawnReceived('web-2', 2000);
  f.unitPhase('web-2', 'Failed', 2005); // never ran: not timed
  f.spawnReceived('web-3', 3000);
  f.spawnRefused('web-3');
  assert.equal(f.pendingSpawns, 0);
  f.roundTrip('cp-1', 0.0004);
  f.roundTrip('cp-1', 0.002);
  f.roundTrip('cp-"2"\\', 0.07);
  f.probe('readiness', true);
  f.probe('readiness', true);
  f.probe('liveness', false);
  const stats = f.stats([{ phase: 'Running' }, { phase: 'Running' }, { phase: 'Failed' }]);
  // They travel on a heartbeat.
  const decoded = decodeAgentMessage(encodeMessage({ v: 1, type: 'heartbeat', seq: 7, sentAt: 1_700_000_000_000, stats }));
  assert.ok(decoded.ok, decoded.ok ? '' : decoded.error);
  assert.ok(decoded.msg.type === 'heartbeat' && decoded.msg.stats, 'a heartbeat with the figures');

  const connected = new Set(['node-a', 'node-b']);
  const m = metricsFor(new DesiredState(), { connected });
  m.agentStats('node-a', decoded.msg.stats);
  m.agentStats('node-b', new AgentFigures().stats([]));
  let { samples } = parseExposition(await m.text());
  assert.equal(value(samples, 'mo_agent_spawn_duration_seconds_count', { node: 'node-a' }), 1);
  assert.equal(value(samples, 'mo_agent_spawn_duration_seconds_bucket', { node: 'node-a', le: '0.025' }), 0);
  assert.equal(value(samples, 'mo_agent_spawn_duration_seconds_bucket', { node: 'node-a', le: '0.05' }), 1);
  assert.ok(Math.abs(value(samples, 'mo_agent_spawn_duration_seconds_sum', { node: 'node-a' })! - 0.03) < 1e-9);
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_seconds_count', { node: 'node-a', replica: 'cp-1' }), 2);
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_seconds_bucket', { node: 'node-a', replica: 'cp-1', le: '0.0005' }), 1);
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_last_seconds', { node: 'node-a', replica: 'cp-1' }), 0.002);
  // A replica id with quotes and a backslash is escaped, and reads back as itself.
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_last_seconds', { node: 'node-a', replica: 'cp-"2"\\' }), 0.07);
  assert.equal(value(samples, 'mo_agent_probe_results_total', { node: 'node-a', probe: 'readiness', result: 'success' }), 2);
  assert.equal(value(samples, 'mo_agent_probe_results_total', { node: 'node-a', probe: 'liveness', result: 'failure' }), 1);
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-a', phase: 'Running' }), 2);
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-a', phase: 'Failed' }), 1);
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-b', phase: 'Running' }), 0);
  assert.ok(value(samples, 'mo_agent_stats_age_seconds', { node: 'node-a' })! >= 0);
  // node-b's agent disconnects from this replica: its figures go (no stale series).
  connected.delete('node-b');
  ({ samples } = parseExposition(await m.text()));
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-b', phase: 'Running' }), undefined);
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-a', phase: 'Running' }), 2);
});

test("an agent's later figures replace its earlier ones, whether or not they have the same shape", async () => {
  const f = new AgentFigures();
  f.roundTrip('cp-1', 0.0004);
  f.probe('readiness', true);
  const m = metricsFor(new DesiredState(), { connected: new Set(['node-a']) });
  const send = (phases: Array<{ phase: 'Running' | 'Pending' }>) => {
    const decoded = decodeAgentMessage(encodeMessage({ v: 1, type: 'heartbeat', seq: 1, sentAt: 1_700_000_000_000, stats: f.stats(phases) }));
    assert.ok(decoded.ok && decoded.msg.type === 'heartbeat' && decoded.msg.stats);
    m.agentStats('node-a', decoded.msg.stats);
    return decoded.msg.stats;
  };
  send([{ phase: 'Running' }]);
  // The same shape: new counts in every figure.
  f.roundTrip('cp-1', 0.02);
  f.probe('readiness', true);
  const second = send([{ phase: 'Running' }, { phase: 'Running' }]);
  let { samples } = parseExposition(await m.text());
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_seconds_count', { node: 'node-a', replica: 'cp-1' }), 2);
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_seconds_bucket', { node: 'node-a', replica: 'cp-1', le: '0.01' }), 1);
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_last_seconds', { node: 'node-a', replica: 'cp-1' }), 0.02);
  assert.equal(value(samples, 'mo_agent_probe_results_total', { node: 'node-a', probe: 'readiness', result: 'success' }), 2);
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-a', phase: 'Running' }), 2);
  // The decoded frame itself is not what is kept: changing it changes nothing shown.
  for (const u of second.units) u.count = 99;
  ({ samples } = parseExposition(await m.text()));
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-a', phase: 'Running' }), 2);
  // Another shape (a second replica, a new probe kind): shown as sent.
  f.roundTrip('cp-2', 0.3);
  f.probe('liveness', false);
  send([{ phase: 'Pending' }]);
  ({ samples } = parseExposition(await m.text()));
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_last_seconds', { node: 'node-a', replica: 'cp-2' }), 0.3);
  assert.equal(value(samples, 'mo_agent_heartbeat_rtt_seconds_count', { node: 'node-a', replica: 'cp-1' }), 2);
  assert.equal(value(samples, 'mo_agent_probe_results_total', { node: 'node-a', probe: 'liveness', result: 'failure' }), 1);
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-a', phase: 'Pending' }), 1);
  assert.equal(value(samples, 'mo_agent_units', { node: 'node-a', phase: 'Running' }), 0);
});

test('the agent times at most MAX_PENDING_SPAWNS spawns at once, oldest dropped', () => {
  const f = new AgentFigures();
  for (let i = 0; i <= MAX_PENDING_SPAWNS; i++) f.spawnReceived(`u-${i}`, i);
  assert.equal(f.pendingSpawns, MAX_PENDING_SPAWNS);
  f.unitPhase('u-0', 'Running', 10); // dropped: not counted
  assert.equal(f.stats([]).spawnSeconds.count, 0);
  f.unitPhase(`u-${MAX_PENDING_SPAWNS}`, 'Running', MAX_PENDING_SPAWNS + 5);
  assert.equal(f.stats([]).spawnSeconds.count, 1);
});

test('shared histogram: cumulative buckets; a negative or NaN value counts as 0', () => {
  const h = emptyHistogram();
  observe(h, 0.003);
  observe(h, 20);
  observe(h, -1);
  observe(h, NaN);
  assert.equal(h.count, 4);
  assert.equal(h.sum, 20.003);
  assert.equal(h.buckets[AGENT_SECONDS_BUCKETS.indexOf(0.0025)], 2);
  assert.equal(h.buckets[AGENT_SECONDS_BUCKETS.indexOf(0.005)], 3);
  assert.equal(h.buckets.at(-1), 3, '20 s is above every bound: only in +Inf (count)');
});

test('malformed figures on a heartbeat are refused with the field at fault', () => {
  const good = new AgentFigures().stats([]);
  const check = (stats: unknown) => decodeAgentMessage(encodeMessage({ v: 1, type: 'heartbeat', seq: 1, sentAt: 1_700_000_000_000, stats: stats as typeof good }));
  assert.equal(check(good).ok, true);
  assert.equal(decodeAgentMessage(encodeMessage({ v: 1, type: 'heartbeat', seq: 2, sentAt: 1_700_000_000_000 })).ok, true, 'a heartbeat without figures');
  const bad: Array<[unknown, RegExp]> = [
    [{ ...good, spawnSeconds: { buckets: [1], count: 1, sum: 0 } }, /stats\.spawnSeconds\.buckets: expected \d+ counts/],
    [{ ...good, spawnSeconds: { buckets: AGENT_SECONDS_BUCKETS.map((_, i) => (i === 0 ? 2 : 1)), count: 2, sum: 0 } }, /stats\.spawnSeconds\.buckets\[1\]: cumulative/],
    [{ ...good, spawnSeconds: { buckets: AGENT_SECONDS_BUCKETS.map(() => 5), count: 2, sum: 0 } }, /must not decrease nor exceed count/],
    [{ ...good, spawnSeconds: { ...good.spawnSeconds, sum: -1 } }, /stats\.spawnSeconds\.sum: expected a finite number >= 0/],
    [{ ...good, probes: [{ probe: 'sideways', result: 'success', count: 1 }] }, /stats\.probes\[0\]\.probe: expected one of/],
    [{ ...good, heartbeatRtt: [{ replica: 'cp\n1', seconds: good.spawnSeconds, lastSeconds: 0 }] }, /control characters/],
    [{ ...good, heartbeatRtt: Array.from({ length: 17 }, (_, i) => ({ replica: `r${i}`, seconds: good.spawnSeconds, lastSeconds: 0 })) }, /at most 16 entries/],
    [{ ...good, extra: 1 }, /stats\.extra: unknown field/],
  ];
  for (const [msg, re] of bad) {
    const r = check(msg);
    assert.equal(r.ok, false, JSON.stringify(msg).slice(0, 80));
    assert.match((r as { error: string }).error, re);
  }
});

test("the agent's counting and the shared histogram are pure: no node:* import, no clock, no timers", () => {
  for (const file of ['../../node-agent/agent-figures.ts', '../../shared/histogram.ts']) {
    const code = fs.readFileSync(fileURLToPath(new URL(file, import.meta.url)), 'utf8').replace(/\/\/.*$/gm, '');
    assert.doesNotMatch(code, /from ['"]node:/, file);
    assert.doesNotMatch(code, /Date\.now|new Date|performance\.now|Math\.random|setTimeout|setInterval/, file);
  }
});

test("each agent's kept figures share the strings every agent sends (replica names, phases), not one copy per node (a heap snapshot counts them)", async () => {
  const m = metricsFor(new DesiredState(), { connected: new Set() });
  const nodes = 300;
  const replica = 'cp-probe-replica'; // distinctive, so the snapshot's strings are this and nothing else of the process
  for (let i = 0; i < nodes; i++) {
    const f = new AgentFigures();
    f.roundTrip(replica, 0.001);
    const decoded = decodeAgentMessage(encodeMessage({ v: 1, type: 'heartbeat', seq: 1, sentAt: 1_700_000_000_000, stats: f.stats([{ phase: 'Running' }]) }));
    assert.ok(decoded.ok && decoded.msg.type === 'heartbeat' && decoded.msg.stats);
    m.agentStats(`probe-${i}`, decoded.msg.stats);
  }
  const copies = await stringCopies([replica]);
  // One shared instance, and the literal in this file's code; without sharing, one per node.
  assert.ok(copies.get(replica)! <= 2, `${copies.get(replica)} copies of "${replica}" in the heap for ${nodes} agents' figures`);
});
