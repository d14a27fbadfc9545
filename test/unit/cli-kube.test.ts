// test/unit/cli-kube.test.ts -- cli/kube.ts on its own: Kubernetes notation
// for -o yaml|json, label selectors, and "did you mean".

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closest, editDistance, kubeNotation, matchesSelector, parseSelector } from '../../cli/kube.ts';

test('kubeNotation: cpu/memory numbers under resource objects get units, epoch-ms times become RFC 3339, the rest passes', () => {
  const t = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
  const input = {
    spec: { replicas: 3, resources: { cpu: 100, memory: 128 }, template: { spec: { containers: [{ resources: { requests: { cpu: '250m' }, limits: { cpu: 500, memory: 64 } } }] } } },
    status: {
      capacity: { cpu: 8000, memory: 16384, pods: 110 },
      cpu: 5,
      scheduling: { at: t, nodes: [{ total: 152 }] },
      lastHeartbeatTime: '2026-01-02T03:04:05.000Z',
      backoff: { until: t, failures: 3 },
      exitCode: 0,
      startTime: null,
    },
    timestamp: t,
  };
  assert.deepEqual(kubeNotation(input), {
    spec: {
      replicas: 3,
      resources: { cpu: '100m', memory: '128Mi' },
      template: { spec: { containers: [{ resources: { requests: { cpu: '250m' }, limits: { cpu: '500m', memory: '64Mi' } } }] } },
    },
    status: {
      capacity: { cpu: '8000m', memory: '16384Mi', pods: 110 },
      cpu: 5,
      scheduling: { at: '2026-01-02T03:04:05.678Z', nodes: [{ total: 152 }] },
      lastHeartbeatTime: '2026-01-02T03:04:05.000Z',
      backoff: { until: '2026-01-02T03:04:05.678Z', failures: 3 },
      exitCode: 0,
      startTime: null,
    },
    timestamp: '2026-01-02T03:04:05.678Z',
  });
  assert.equal(input.spec.resources.cpu, 100, 'the input is not changed');
});

test('parseSelector and matchesSelector: =, ==, !=, exists, !exists, all must hold', () => {
  const o = { metadata: { labels: { app: 'web', tier: 'front' } } };
  const sel = (s: string) => matchesSelector(o, parseSelector(s));
  assert.equal(sel('app=web'), true);
  assert.equal(sel('app==web,tier=front'), true);
  assert.equal(sel('app=web,tier=back'), false);
  assert.equal(sel('tier!=back'), true);
  assert.equal(sel('zone!=a'), true);
  assert.equal(sel('app'), true);
  assert.equal(sel('!app'), false);
  assert.equal(sel('!zone'), true);
  assert.equal(sel('app='), false, 'an empty value matches only an empty label');
  assert.equal(matchesSelector({}, parseSelector('!app')), true);
  assert.equal(matchesSelector({ metadata: { labels: { constructor: 'x' } } }, parseSelector('toString')), false);
  assert.throws(() => parseSelector('a=b,,c'), /empty requirement/);
  assert.throws(() => parseSelector('app=we b'), /invalid label value/);
  assert.deepEqual(parseSelector('example.com/team = infra'), [{ key: 'example.com/team', op: '=', value: 'infra' }]);
});

test('closest: a typo within 1-2 edits or a prefix, nothing for unrelated words', () => {
  assert.equal(editDistance('kitten', 'sitting'), 3);
  assert.equal(closest('gett', ['apply', 'get', 'describe']), 'get');
  assert.equal(closest('descirbe', ['apply', 'get', 'describe']), 'describe');
  assert.equal(closest('desc', ['apply', 'get', 'describe']), 'describe');
  assert.equal(closest('frobnicate', ['apply', 'get', 'describe']), undefined);
  assert.equal(closest('xx', ['no', 'po']), undefined, 'two-letter words need a near match');
  assert.equal(closest('get', ['get']), undefined, 'an exact word is not a typo');
});
