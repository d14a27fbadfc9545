// test/unit/metrics.test.ts -- the Prometheus text exposition format 0.0.4 of
// /metrics: label value and HELP escaping, TYPE lines, histogram buckets
// (cumulative, +Inf, _sum, _count), special values, invalid names refused,
// and a replica's families rendered from an empty state.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Histogram, ReplicaMetrics, escapeLabelValue, formatMetrics, formatValue } from '../../control-plane/api/metrics.ts';
import { DesiredState } from '../../control-plane/store/desired-state.ts';

test('label values escape backslash, double quote and newline', () => {
  assert.equal(escapeLabelValue('a\\b"c\nd'), 'a\\\\b\\"c\\nd');
  const text = formatMetrics([{ name: 'x_total', help: 'A "help"\nwith \\ in it', type: 'counter', samples: [{ labels: { path: 'C:\\dir "q"\n' }, value: 3 }] }]);
  assert.equal(text, '# HELP x_total A "help"\\nwith \\\\ in it\n# TYPE x_total counter\nx_total{path="C:\\\\dir \\"q\\"\\n"} 3\n');
});

test('HELP and TYPE come first, once per family; several labels joined by commas; no labels, no braces', () => {
  const text = formatMetrics([
    { name: 'a', help: 'A.', type: 'gauge', samples: [{ value: 1 }] },
    { name: 'b', help: 'B.', type: 'gauge', samples: [{ labels: { x: '1', y: '2' }, value: 2 }, { labels: { x: '3', y: '4' }, value: 0.5 }] },
  ]);
  assert.deepEqual(text.split('\n'), ['# HELP a A.', '# TYPE a gauge', 'a 1', '# HELP b B.', '# TYPE b gauge', 'b{x="1",y="2"} 2', 'b{x="3",y="4"} 0.5', '']);
});

test('special values: NaN, +Inf, -Inf', () => {
  assert.equal(formatValue(NaN), 'NaN');
  assert.equal(formatValue(Infinity), '+Inf');
  assert.equal(formatValue(-Infinity), '-Inf');
  assert.equal(formatValue(1e-7), '1e-7');
});

test('invalid metric and label names are refused', () => {
  assert.throws(() => formatMetrics([{ name: '1bad', help: '', type: 'gauge', samples: [] }]), /invalid metric name/);
  assert.throws(() => formatMetrics([{ name: 'ok', help: '', type: 'gauge', samples: [{ labels: { 'a-b': 'x' }, value: 1 }] }]), /invalid label name/);
  assert.throws(() => formatMetrics([{ name: 'ok', help: '', type: 'gauge', samples: [{ labels: { __x: 'x' }, value: 1 }] }]), /invalid label name/);
});

test('histogram: cumulative buckets, +Inf equals count, sum', () => {
  const h = new Histogram([0.1, 1]);
  h.observe({ method: 'GET' }, 0.05);
  h.observe({ method: 'GET' }, 0.5);
  h.observe({ method: 'GET' }, 5);
  const text = formatMetrics([{ name: 'd_seconds', help: 'D.', type: 'histogram', samples: h.samples() }]);
  assert.match(text, /^# TYPE d_seconds histogram$/m);
  assert.match(text, /^d_seconds_bucket\{method="GET",le="0.1"\} 1$/m);
  assert.match(text, /^d_seconds_bucket\{method="GET",le="1"\} 2$/m);
  assert.match(text, /^d_seconds_bucket\{method="GET",le="\+Inf"\} 3$/m);
  assert.match(text, /^d_seconds_sum\{method="GET"\} 5.55$/m);
  assert.match(text, /^d_seconds_count\{method="GET"\} 3$/m);
});

test('counter sums per label set', () => {
  const c = new Counter();
  c.inc({ code: '200' });
  c.inc({ code: '200' });
  c.inc({ code: '404' });
  assert.deepEqual(c.samples(), [{ labels: { code: '200' }, value: 2 }, { labels: { code: '404' }, value: 1 }]);
});

test('a replica renders every family with a TYPE; role changes count; requests by method and code', () => {
  let role = 'follower';
  const m = new ReplicaMetrics({
    replicaId: 'cp-1',
    raft: () => ({ role, term: 3, commitIndex: 10, appliedIndex: 9 }),
    source: () => ({ state: new DesiredState(), observed: new Map(), now: 0 }),
    reconcilePasses: () => 7,
  });
  try {
    m.roleChanged('follower');
    role = 'candidate';
    m.roleChanged('candidate');
    role = 'leader';
    m.roleChanged('leader');
    m.observeRequest('GET', 200, 0.002);
    m.observeRequest('BREW', 418, 0.002);
    const text = formatMetrics(m.families());
    for (const name of ['mo_raft_term', 'mo_raft_commit_index', 'mo_raft_applied_index', 'mo_raft_is_leader', 'mo_raft_leader_changes_total', 'mo_nodes', 'mo_units', 'mo_deployments', 'mo_reconcile_passes_total', 'mo_api_requests_total', 'mo_api_request_duration_seconds', 'process_resident_memory_bytes', 'process_cpu_seconds_total', 'nodejs_eventloop_delay_seconds']) {
      assert.match(text, new RegExp(`^# TYPE ${name} (counter|gauge|histogram)$`, 'm'), name);
    }
    assert.match(text, /^mo_raft_term 3$/m);
    assert.match(text, /^mo_raft_is_leader 1$/m);
    assert.match(text, /^mo_raft_leader_changes_total 2$/m);
    assert.match(text, /^mo_reconcile_passes_total 7$/m);
    assert.match(text, /^mo_nodes\{ready="true"\} 0$/m);
    assert.match(text, /^mo_units\{phase="Running"\} 0$/m);
    assert.match(text, /^mo_api_requests_total\{method="GET",code="200"\} 1$/m);
    assert.match(text, /^mo_api_requests_total\{method="other",code="418"\} 1$/m);
    assert.match(text, /^nodejs_eventloop_delay_seconds\{quantile="0.99"\} [0-9.e-]+$/m);
    // Every sample line parses as name{labels} value.
    for (const line of text.split('\n').filter((l) => l && !l.startsWith('#'))) assert.match(line, /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? \S+$/, line);
  } finally {
    m.stop();
  }
});
