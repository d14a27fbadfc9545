// test/unit/scheduler.test.ts -- the pure filter -> score scheduler: every
// filter and score plugin (tables), lesson 2's step-3 run (docs/lessons.md) reproduced line
// for line with balanced scoring alone, the spreading fix with the default
// plugins, Kubernetes-style unschedulable messages, determinism, the O(nodes)
// visit contract, ClusterSnapshot bookkeeping, a seeded comparison of the
// fast paths against a naive reference scheduler, and of the fused default
// pass against the plugin-by-plugin path.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { Taint, Toleration } from '../../shared/model.ts';
import {
  balancedAllocation,
  ClusterSnapshot,
  defaultFilters,
  defaultScores,
  FILTER_OK,
  formatDecision,
  MAX_REJECTED_NODES_IN_DECISION,
  MAX_SCORED_NODES_IN_DECISION,
  NODE_NOT_READY,
  NODE_PREFER_NO_SCHEDULE,
  NODE_TAINTED,
  nodeReady,
  nodeUnschedulable,
  preferNoSchedule,
  resourcesFit,
  Scheduler,
  spread,
  taintToleration,
  type FilterPlugin,
  type NodeState,
  type ScorePlugin,
  type UnitRequest,
} from '../../control-plane/scheduler/index.ts';
import { SeededRandom } from '../../shared/random.ts';
import { INCREMENTAL_MIN_NODES } from '../../control-plane/scheduler/incremental.ts';

// ---- fixtures ---------------------------------------------------------------

function node(name: string, over: Partial<NodeState> = {}): NodeState {
  return {
    name,
    ready: true,
    unschedulable: false,
    capacity: { cpu: 4000, memory: 8192 },
    allocated: { cpu: 0, memory: 0 },
    taints: [],
    labels: {},
    ...over,
  };
}

function request(over: Partial<UnitRequest> = {}): UnitRequest {
  return { deployment: 'web', resources: { cpu: 1000, memory: 2048 }, tolerations: [], ...over };
}

const gpuOnly: Taint = { key: 'gpu-only', effect: 'NoSchedule' };

/** Lesson 2's four nodes, with allocations that reproduce its step-3 numbers. */
function lessonNodes(): NodeState[] {
  return [
    node('node-a', { capacity: { cpu: 4000, memory: 8192 }, allocated: { cpu: 3200, memory: 4000 } }),
    node('node-b', { capacity: { cpu: 8000, memory: 16384 }, allocated: { cpu: 2000, memory: 4000 } }),
    node('node-c', { capacity: { cpu: 4000, memory: 8192 }, taints: [gpuOnly] }),
    node('node-d', { capacity: { cpu: 8000, memory: 16384 }, allocated: { cpu: 6000, memory: 14000 } }),
  ];
}

/** Lesson 2's `web` spec: 1000m / 2048Mi, no tolerations. */
const web = request();

/** Runs a filter both ways (one node, and the many-node fast path) and checks they agree. */
function runFilter(plugin: FilterPlugin, req: UnitRequest, n: NodeState) {
  const snap = new ClusterSnapshot([node('other'), n]);
  const status = plugin.filter(req, snap.get(n.name)!, snap);
  if (plugin.filterMany) {
    const candidates = Int32Array.from([0, 1]);
    const kept = plugin.filterMany(req, snap.nodes(), candidates, 2, snap);
    const keptNames = Array.from(candidates.slice(0, kept), (i) => snap.nodes()[i].name);
    assert.equal(keptNames.includes(n.name), status.ok, `filterMany disagrees with filter for ${plugin.name}`);
  }
  return status;
}

/** Scores one node both ways (alone, and through the many-node fast path) and checks they agree. */
function runScore(plugin: ScorePlugin, req: UnitRequest, snap: ClusterSnapshot, name: string): number {
  const n = snap.get(name)!;
  const score = plugin.score(req, n, snap);
  if (plugin.addScores) {
    const slot = snap.nodes().indexOf(n);
    const totals = Float64Array.from([7]);
    plugin.addScores(req, snap.nodes(), Int32Array.from([slot]), 1, snap, totals, 3);
    assert.equal(totals[0], 7 + 3 * score, `addScores disagrees with score for ${plugin.name}`);
  }
  return score;
}

// ---- filter plugins ----------------------------------------------------------

describe('filter plugins', () => {
  const tol = (t: Toleration) => [t];
  const cases: Array<{ name: string; plugin: FilterPlugin; node: Partial<NodeState>; req?: Partial<UnitRequest>; reasons: string[] | 'ok' }> = [
    { name: 'A ready node passes node-ready.', plugin: nodeReady, node: {}, reasons: 'ok' },
    { name: 'A node without heartbeats is rejected as not ready.', plugin: nodeReady, node: { ready: false }, reasons: ['node not ready (no heartbeat)'] },
    {
      name: 'A not-ready node names how long it has been silent when told.',
      plugin: nodeReady,
      node: { ready: false, notReadyReason: 'no heartbeat for 1.3s' },
      reasons: ['node not ready (no heartbeat for 1.3s)'],
    },
    { name: 'An uncordoned node passes node-unschedulable.', plugin: nodeUnschedulable, node: {}, reasons: 'ok' },
    { name: 'A cordoned node is rejected as unschedulable.', plugin: nodeUnschedulable, node: { unschedulable: true }, reasons: ['node is cordoned (unschedulable)'] },
    {
      name: 'A unit tolerating the unschedulable taint may still go to a cordoned node.',
      plugin: nodeUnschedulable,
      node: { unschedulable: true },
      req: { tolerations: tol({ key: 'node.kubernetes.io/unschedulable', operator: 'Exists', effect: 'NoSchedule' }) },
      reasons: 'ok',
    },
    { name: 'A node with exactly the requested cpu and memory free fits.', plugin: resourcesFit, node: { allocated: { cpu: 3000, memory: 6144 } }, reasons: 'ok' },
    { name: 'A node short of cpu is rejected with its free cpu.', plugin: resourcesFit, node: { allocated: { cpu: 3200, memory: 0 } }, reasons: ['cpu_free=800m < request=1000m'] },
    {
      name: 'A node short of memory is rejected with its free memory.',
      plugin: resourcesFit,
      node: { allocated: { cpu: 0, memory: 7288 } },
      reasons: ['mem_free=904Mi < request=2048Mi'],
    },
    {
      name: 'A node short of both gives one reason for each.',
      plugin: resourcesFit,
      node: { allocated: { cpu: 3200, memory: 7288 } },
      reasons: ['cpu_free=800m < request=1000m', 'mem_free=904Mi < request=2048Mi'],
    },
    { name: 'A node without taints passes taint-toleration.', plugin: taintToleration, node: {}, reasons: 'ok' },
    { name: 'An untolerated NoSchedule taint rejects the node.', plugin: taintToleration, node: { taints: [gpuOnly] }, reasons: ['untolerated taint gpu-only'] },
    {
      name: 'Every untolerated taint is listed.',
      plugin: taintToleration,
      node: { taints: [gpuOnly, { key: 'foo', value: 'bar', effect: 'NoExecute' }] },
      reasons: ['untolerated taints gpu-only, foo'],
    },
    {
      name: 'An untolerated NoExecute taint rejects the node too.',
      plugin: taintToleration,
      node: { taints: [{ key: 'drain', effect: 'NoExecute' }] },
      reasons: ['untolerated taint drain'],
    },
    { name: 'A PreferNoSchedule taint is not a filter.', plugin: taintToleration, node: { taints: [{ key: 'spot', effect: 'PreferNoSchedule' }] }, reasons: 'ok' },
    {
      name: 'Exists with the taint key tolerates it whatever its value.',
      plugin: taintToleration,
      node: { taints: [{ key: 'gpu-only', value: 'a100', effect: 'NoSchedule' }] },
      req: { tolerations: tol({ key: 'gpu-only', operator: 'Exists' }) },
      reasons: 'ok',
    },
    {
      name: 'Exists with an empty key tolerates every taint.',
      plugin: taintToleration,
      node: { taints: [gpuOnly, { key: 'foo', effect: 'NoExecute' }] },
      req: { tolerations: tol({ operator: 'Exists' }) },
      reasons: 'ok',
    },
    {
      name: 'Equal with the same value tolerates the taint.',
      plugin: taintToleration,
      node: { taints: [{ key: 'team', value: 'ml', effect: 'NoSchedule' }] },
      req: { tolerations: tol({ key: 'team', operator: 'Equal', value: 'ml' }) },
      reasons: 'ok',
    },
    {
      name: 'Equal with another value does not tolerate the taint.',
      plugin: taintToleration,
      node: { taints: [{ key: 'team', value: 'ml', effect: 'NoSchedule' }] },
      req: { tolerations: tol({ key: 'team', operator: 'Equal', value: 'web' }) },
      reasons: ['untolerated taint team'],
    },
    {
      name: 'A toleration for another effect does not tolerate the taint.',
      plugin: taintToleration,
      node: { taints: [gpuOnly] },
      req: { tolerations: tol({ key: 'gpu-only', operator: 'Exists', effect: 'NoExecute' }) },
      reasons: ['untolerated taint gpu-only'],
    },
    {
      name: 'A toleration without an effect matches every effect.',
      plugin: taintToleration,
      node: { taints: [gpuOnly, { key: 'gpu-only', effect: 'NoExecute' }] },
      req: { tolerations: tol({ key: 'gpu-only', operator: 'Exists' }) },
      reasons: 'ok',
    },
    {
      name: 'Tolerating one taint leaves the other one rejecting the node.',
      plugin: taintToleration,
      node: { taints: [gpuOnly, { key: 'foo', effect: 'NoSchedule' }] },
      req: { tolerations: tol({ key: 'gpu-only', operator: 'Exists' }) },
      reasons: ['untolerated taint foo'],
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const status = runFilter(c.plugin, request(c.req), node('n1', c.node));
      if (c.reasons === 'ok') assert.equal(status, FILTER_OK);
      else assert.deepEqual(status, { ok: false, reasons: c.reasons });
    });
  }
});

// ---- score plugins -----------------------------------------------------------

describe('score plugins', () => {
  const lesson = () => new ClusterSnapshot(lessonNodes());
  const cases: Array<{ name: string; plugin: ScorePlugin; snap: () => ClusterSnapshot; node: string; req?: Partial<UnitRequest>; score: number; explain?: string }> = [
    {
      name: "Balanced allocation gives lesson 2's node-b 99 after placing the unit.",
      plugin: balancedAllocation,
      snap: lesson,
      node: 'node-b',
      score: 99,
      explain: 'cpu%=37.5% mem%=36.9% imbalance=0.6%',
    },
    {
      name: "Balanced allocation gives lesson 2's node-d 90 after placing the unit.",
      plugin: balancedAllocation,
      snap: lesson,
      node: 'node-d',
      score: 90,
      explain: 'cpu%=87.5% mem%=97.9% imbalance=10.4%',
    },
    {
      name: 'Balanced allocation never goes below 0 on an over-committed node.',
      plugin: balancedAllocation,
      snap: () => new ClusterSnapshot([node('n1', { allocated: { cpu: 9000, memory: 0 } })]),
      node: 'n1',
      req: { resources: { cpu: 0, memory: 0 } },
      score: 0,
    },
    {
      name: 'Balanced allocation counts a node without capacity as full, not as NaN.',
      plugin: balancedAllocation,
      snap: () => new ClusterSnapshot([node('n1', { capacity: { cpu: 0, memory: 0 } })]),
      node: 'n1',
      score: 100,
    },
    {
      name: 'Spread gives every node 100 while the deployment has no units.',
      plugin: spread,
      snap: lesson,
      node: 'node-b',
      score: 100,
      explain: 'web units here=0 max on one node=0',
    },
    {
      name: 'Spread gives 0 to the node holding the most units of the deployment.',
      plugin: spread,
      snap: () =>
        new ClusterSnapshot(lessonNodes(), [
          { deployment: 'web', node: 'node-b' },
          { deployment: 'web', node: 'node-b' },
        ]),
      node: 'node-b',
      score: 0,
    },
    {
      name: 'Spread gives 100 to a node without units of the deployment.',
      plugin: spread,
      snap: () =>
        new ClusterSnapshot(lessonNodes(), [
          { deployment: 'web', node: 'node-b' },
          { deployment: 'web', node: 'node-b' },
        ]),
      node: 'node-d',
      score: 100,
    },
    {
      name: 'Spread scores a node in proportion between the emptiest and the fullest.',
      plugin: spread,
      snap: () =>
        new ClusterSnapshot(lessonNodes(), [
          { deployment: 'web', node: 'node-b' },
          { deployment: 'web', node: 'node-b' },
          { deployment: 'web', node: 'node-d' },
        ]),
      node: 'node-d',
      score: 50,
      explain: 'web units here=1 max on one node=2',
    },
    {
      name: "Spread ignores other deployments' units.",
      plugin: spread,
      snap: () => new ClusterSnapshot(lessonNodes(), [{ deployment: 'db', node: 'node-b' }]),
      node: 'node-b',
      score: 100,
    },
    {
      name: 'PreferNoSchedule scoring leaves an untainted node at 100.',
      plugin: preferNoSchedule,
      snap: lesson,
      node: 'node-b',
      score: 100,
    },
    {
      name: 'One untolerated PreferNoSchedule taint halves the score.',
      plugin: preferNoSchedule,
      snap: () => new ClusterSnapshot([node('n1', { taints: [{ key: 'spot', effect: 'PreferNoSchedule' }, gpuOnly] })]),
      node: 'n1',
      score: 50,
      explain: 'untolerated PreferNoSchedule spot',
    },
    {
      name: 'Two untolerated PreferNoSchedule taints cost more than one.',
      plugin: preferNoSchedule,
      snap: () =>
        new ClusterSnapshot([
          node('n1', {
            taints: [
              { key: 'spot', effect: 'PreferNoSchedule' },
              { key: 'old', effect: 'PreferNoSchedule' },
            ],
          }),
        ]),
      node: 'n1',
      score: 33,
    },
    {
      name: 'A tolerated PreferNoSchedule taint costs nothing.',
      plugin: preferNoSchedule,
      snap: () => new ClusterSnapshot([node('n1', { taints: [{ key: 'spot', effect: 'PreferNoSchedule' }] })]),
      node: 'n1',
      req: { tolerations: [{ key: 'spot', operator: 'Exists' }] },
      score: 100,
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const snap = c.snap();
      const req = request(c.req);
      assert.equal(runScore(c.plugin, req, snap, c.node), c.score);
      if (c.explain !== undefined) assert.equal(c.plugin.explain?.(req, snap.get(c.node)!, snap), c.explain);
    });
  }
});

// ---- lesson 2's step 3 ------------------------------------------------------

/** Places `replicas` units one at a time, assuming each, and returns the decisions. */
function placeReplicas(scheduler: Scheduler, snap: ClusterSnapshot, req: UnitRequest, replicas: number) {
  const decisions = [];
  for (let i = 0; i < replicas; i++) {
    const d = scheduler.schedule(req, snap);
    decisions.push(d);
    if (d.chosen !== null) snap.assume(d.chosen, req);
  }
  return decisions;
}

describe("lesson 2's step 3", () => {
  test('Balanced scoring alone reproduces the printed run and piles all three replicas onto node-b.', () => {
    const snap = new ClusterSnapshot(lessonNodes());
    const decisions = placeReplicas(new Scheduler({ scores: [balancedAllocation] }), snap, web, 3);
    const expected = [
      ['37.5', '36.9'],
      ['50.0', '49.4'],
      ['62.5', '61.9'],
    ];
    decisions.forEach((d, i) => {
      assert.deepEqual(formatDecision(d), [
        'filtering: feasible=[node-b, node-d]',
        '  rejected node-a: cpu_free=800m < request=1000m',
        '  rejected node-c: untolerated taint gpu-only',
        `  scoring node-b: cpu%=${expected[i][0]}% mem%=${expected[i][1]}% imbalance=0.6% -> score=99`,
        '  scoring node-d: cpu%=87.5% mem%=97.9% imbalance=10.4% -> score=90',
        '  -> binding decision: node-b',
      ]);
    });
    assert.equal(decisions[0].message, 'node-b (score 99: balanced=99) over node-d (90); 2 of 4 nodes rejected');
    assert.deepEqual(decisions[0].nodes.find((n) => n.node === 'node-b')?.detail, ['cpu%=37.5% mem%=36.9% imbalance=0.6%']);
    assert.equal(snap.countOn('web', 'node-b'), 3);
    assert.deepEqual(snap.get('node-b')?.allocated, { cpu: 5000, memory: 10144 });
  });

  test('With the default plugins the three replicas spread over node-b and node-d.', () => {
    const snap = new ClusterSnapshot(lessonNodes());
    const decisions = placeReplicas(new Scheduler(), snap, web, 3);
    assert.deepEqual(
      decisions.map((d) => d.chosen),
      ['node-b', 'node-d', 'node-b'],
    );
    assert.equal(decisions[0].message, 'node-b (score 299: balanced=99 spread=100 prefer-no-schedule=100) over node-d (290); 2 of 4 nodes rejected');
    assert.equal(decisions[1].message, 'node-d (score 290: balanced=90 spread=100 prefer-no-schedule=100) over node-b (199); 2 of 4 nodes rejected');
    // node-d is now out of memory, so the third replica has only node-b left.
    assert.deepEqual(decisions[2].nodes.find((n) => n.node === 'node-d')?.reasons, ['mem_free=336Mi < request=2048Mi']);
    assert.match(decisions[2].message, /^node-b \(score 199: .*\), the only feasible node; 3 of 4 nodes rejected$/);
    assert.deepEqual(formatDecision(decisions[1]).slice(3), [
      '  scoring node-d: balanced=90 (cpu%=87.5% mem%=97.9% imbalance=10.4%) spread=100 (web units here=0 max on one node=1) prefer-no-schedule=100 -> score=290',
      '  scoring node-b: balanced=99 (cpu%=50.0% mem%=49.4% imbalance=0.6%) spread=0 (web units here=1 max on one node=1) prefer-no-schedule=100 -> score=199',
      '  -> binding decision: node-d',
    ]);
    assert.equal(snap.countOn('web', 'node-b'), 2);
    assert.equal(snap.countOn('web', 'node-d'), 1);
  });

  test('A fourth replica in a full cluster is unschedulable and every node says why.', () => {
    const nodes = lessonNodes();
    nodes[1].unschedulable = true;
    nodes[3] = { ...nodes[3], ready: false, notReadyReason: 'no heartbeat for 1.3s' };
    const d = new Scheduler().schedule(web, new ClusterSnapshot(nodes));
    assert.equal(d.chosen, null);
    assert.equal(
      d.message,
      '0/4 nodes are available: node-a: cpu_free=800m < request=1000m; node-b: node is cordoned (unschedulable); ' +
        'node-c: untolerated taint gpu-only; node-d: node not ready (no heartbeat for 1.3s)',
    );
    assert.equal(formatDecision(d).at(-1), `  -> no binding: ${d.message}`);
  });
});

// ---- messages, determinism, cost ---------------------------------------------

describe('scheduling decisions', () => {
  test('Several reasons on one node are joined with commas in the unschedulable message.', () => {
    const snap = new ClusterSnapshot([node('node-c', { allocated: { cpu: 3500, memory: 7000 }, taints: [gpuOnly] })]);
    const d = new Scheduler().schedule(web, snap);
    assert.equal(d.message, '0/1 nodes are available: node-c: cpu_free=500m < request=1000m, mem_free=1192Mi < request=2048Mi, untolerated taint gpu-only');
  });

  test('A node without heartbeats is rejected for availability alone, not for capacity.', () => {
    const snap = new ClusterSnapshot([node('node-a', { ready: false, allocated: { cpu: 4000, memory: 8192 } })]);
    assert.deepEqual(new Scheduler().schedule(web, snap).nodes[0].reasons, ['node not ready (no heartbeat)']);
  });

  test('An empty cluster is unschedulable with a message that says so.', () => {
    const d = new Scheduler().schedule(web, new ClusterSnapshot([]));
    assert.equal(d.chosen, null);
    assert.equal(d.message, '0/0 nodes are available: no nodes registered');
  });

  test('A big unschedulable cluster lists the first rejected nodes and counts the rest.', () => {
    const nodes = Array.from({ length: 30 }, (_, i) => node(`n${String(i).padStart(2, '0')}`, { taints: [gpuOnly] }));
    const d = new Scheduler().schedule(web, new ClusterSnapshot(nodes));
    assert.equal(d.rejectedCount, 30);
    assert.equal(d.nodes.length, MAX_REJECTED_NODES_IN_DECISION);
    assert.ok(d.message.startsWith('0/30 nodes are available: n00: untolerated taint gpu-only; n01:'));
    assert.ok(d.message.endsWith(`; ${30 - MAX_REJECTED_NODES_IN_DECISION} more nodes rejected`), d.message);
  });

  test('Equal totals go to the node whose name sorts first, whatever the node order.', () => {
    const twins = ['node-z', 'node-m', 'node-q'].map((name) => node(name));
    const forward = new Scheduler().schedule(web, new ClusterSnapshot(twins));
    const backward = new Scheduler().schedule(web, new ClusterSnapshot([...twins].reverse()));
    assert.equal(forward.chosen, 'node-m');
    assert.equal(backward.chosen, 'node-m');
    assert.equal(forward.message, backward.message);
    assert.deepEqual(
      forward.nodes.map((n) => n.node),
      ['node-m', 'node-q', 'node-z'],
    );
  });

  test('The same cluster and request always give the same decision.', () => {
    const a = new Scheduler().schedule(web, new ClusterSnapshot(lessonNodes()));
    const b = new Scheduler().schedule(web, new ClusterSnapshot(lessonNodes()));
    assert.deepEqual(a, b);
  });

  test('schedule() visits each node once: one filter call per node, one score call per feasible node.', () => {
    let filterCalls = 0;
    let scoreCalls = 0;
    const countingFilter: FilterPlugin = { name: 'count', filter: () => (filterCalls++, FILTER_OK) };
    const countingScore: ScorePlugin = { name: 'count-score', weight: 1, score: () => (scoreCalls++, 50) };
    const nodes = Array.from({ length: 500 }, (_, i) => node(`n${i}`, { taints: i % 5 === 0 ? [gpuOnly] : [] }));
    const scheduler = new Scheduler({ filters: [countingFilter, ...defaultFilters], scores: [...defaultScores, countingScore] });
    const d = scheduler.schedule(web, new ClusterSnapshot(nodes));
    assert.equal(d.rejectedCount, 100);
    // The counting filter runs once per node in the pass, and once more for
    // each rejected node the decision lists with reasons.
    assert.equal(filterCalls, 500 + MAX_REJECTED_NODES_IN_DECISION);
    // ... and once more for each feasible node the decision shows.
    assert.equal(scoreCalls, 400 + MAX_SCORED_NODES_IN_DECISION);
  });

  test('schedule() leaves the snapshot unchanged; assume() is what records a placement.', () => {
    const snap = new ClusterSnapshot(lessonNodes());
    new Scheduler().schedule(web, snap);
    assert.deepEqual(snap.get('node-b')?.allocated, { cpu: 2000, memory: 4000 });
    assert.equal(snap.total('web'), 0);
  });

  test('A score plugin answering out of range is clamped to 0..100.', () => {
    const wild: ScorePlugin = { name: 'wild', weight: 1, score: (_r, n) => (n.name === 'node-b' ? 250 : Number.NaN) };
    const d = new Scheduler({ scores: [wild] }).schedule(web, new ClusterSnapshot(lessonNodes()));
    assert.equal(d.chosen, 'node-b');
    assert.deepEqual(
      d.nodes.filter((n) => n.feasible).map((n) => [n.node, n.total]),
      [
        ['node-b', 100],
        ['node-d', 0],
      ],
    );
  });

  test('Weights scale each plugin in the total and show in the message.', () => {
    const d = new Scheduler({ scores: [{ ...balancedAllocation, weight: 2 }] }).schedule(web, new ClusterSnapshot(lessonNodes()));
    assert.equal(d.message, 'node-b (score 198: balanced=99x2) over node-d (180); 2 of 4 nodes rejected');
  });

  test('A scheduler refuses two plugins with one name and negative weights.', () => {
    assert.throws(() => new Scheduler({ filters: [nodeReady, nodeReady] }), /two plugins named "node-ready"/);
    assert.throws(() => new Scheduler({ scores: [{ ...spread, weight: -1 }] }), /weight -1/);
  });
});

// ---- ClusterSnapshot ---------------------------------------------------------

describe('ClusterSnapshot', () => {
  test('assume() adds the request and a count; forget() takes both back exactly.', () => {
    const snap = new ClusterSnapshot(lessonNodes());
    snap.assume('node-b', web);
    snap.assume('node-b', web);
    snap.assume('node-d', web);
    assert.deepEqual(snap.get('node-b')?.allocated, { cpu: 4000, memory: 8096 });
    assert.equal(snap.countOn('web', 'node-b'), 2);
    assert.equal(snap.total('web'), 3);
    assert.equal(snap.maxOnOneNode('web'), 2);
    snap.forget('node-b', web);
    assert.equal(snap.maxOnOneNode('web'), 1);
    snap.forget('node-b', web);
    snap.forget('node-d', web);
    assert.deepEqual(snap.get('node-b')?.allocated, { cpu: 2000, memory: 4000 });
    assert.equal(snap.total('web'), 0);
    assert.equal(snap.maxOnOneNode('web'), 0);
    assert.equal(snap.columns().cpuAllocated[1], 2000);
  });

  test('The snapshot copies the nodes it is given and never changes the caller’s objects.', () => {
    const nodes = lessonNodes();
    const snap = new ClusterSnapshot(nodes);
    snap.assume('node-b', web);
    assert.deepEqual(nodes[1].allocated, { cpu: 2000, memory: 4000 });
  });

  test('Seeded units count for spreading but do not add to allocation.', () => {
    const snap = new ClusterSnapshot(lessonNodes(), [{ deployment: 'web', node: 'node-b' }]);
    assert.equal(snap.countOn('web', 'node-b'), 1);
    assert.deepEqual(snap.get('node-b')?.allocated, { cpu: 2000, memory: 4000 });
  });

  test('Spread counts seeded lazily, one deployment when first used, equal counts seeded up front, through seeded random placements.', () => {
    for (let seed = 1; seed <= 10; seed++) {
      const random = prng(seed);
      const names = Array.from({ length: 40 }, (_, i) => `n${String(i).padStart(2, '0')}`);
      const units = Array.from({ length: 300 }, () => ({ deployment: `d${Math.floor(random() * 6)}`, node: names[Math.floor(random() * names.length)] }));
      const nodes = names.map((n) => node(n, { capacity: { cpu: 64000, memory: 65536 } }));
      const eager = new ClusterSnapshot(nodes, units);
      const asked: string[] = [];
      const lazy = new ClusterSnapshot(nodes, (d) => {
        asked.push(d);
        return units.filter((u) => u.deployment === d).map((u) => u.node);
      });
      const scheduler = new Scheduler();
      for (let step = 0; step < 200; step++) {
        const req = request({ deployment: `d${Math.floor(random() * 8)}`, resources: { cpu: 100, memory: 64 } });
        const a = scheduler.schedule(req, eager);
        const b = scheduler.schedule(req, lazy);
        assert.equal(b.chosen, a.chosen, `seed ${seed} step ${step}: the same node`);
        // A placement where the scheduler chose, or a unit of any deployment (perhaps one not read yet) added or removed anywhere.
        const other = request({ deployment: `d${Math.floor(random() * 8)}`, resources: { cpu: 100, memory: 64 } });
        const n = names[Math.floor(random() * names.length)];
        const r = random();
        if (r < 0.4 && a.chosen) {
          eager.assume(a.chosen, req);
          lazy.assume(a.chosen, req);
        } else if (r < 0.7) {
          eager.assume(n, other);
          lazy.assume(n, other);
        } else {
          eager.forget(n, other);
          lazy.forget(n, other);
        }
        const d = `d${Math.floor(random() * 8)}`;
        assert.equal(lazy.total(d), eager.total(d), `seed ${seed} step ${step}: total of ${d}`);
        assert.equal(lazy.maxOnOneNode(d), eager.maxOnOneNode(d));
        assert.deepEqual(lazy.countsBySlot(d), eager.countsBySlot(d));
      }
      assert.equal(new Set(asked).size, asked.length, 'each deployment is asked for once');
    }
  });

  test('assume() on an unknown node throws a one-line error naming it.', () => {
    assert.throws(() => new ClusterSnapshot([]).assume('node-x', web), /assume: unknown node "node-x"/);
  });

  test('forget() below zero leaves the counts at zero.', () => {
    const snap = new ClusterSnapshot(lessonNodes());
    snap.forget('node-b', web);
    assert.equal(snap.countOn('web', 'node-b'), 0);
    assert.equal(snap.total('web'), 0);
  });

  test('setNode() replaces a node in place and removeNode() keeps the rest consistent.', () => {
    const snap = new ClusterSnapshot(lessonNodes());
    snap.assume('node-d', web);
    assert.equal(snap.countsBySlot('web')?.[3], 1);
    assert.equal(snap.countFlagged(NODE_TAINTED), 1);
    assert.equal(snap.countFlagged(NODE_PREFER_NO_SCHEDULE), 0);
    snap.setNode(node('node-a', { ready: false }));
    assert.equal(snap.nodes()[0].ready, false);
    assert.equal(snap.countFlagged(NODE_NOT_READY), 1);
    snap.setNode(node('node-a'));
    assert.equal(snap.countFlagged(NODE_NOT_READY), 0);
    snap.removeNode('node-c');
    assert.equal(snap.countFlagged(NODE_TAINTED), 0);
    snap.removeNode('node-b');
    assert.deepEqual(
      snap.nodes().map((n) => n.name),
      ['node-a', 'node-d'],
    );
    assert.equal(snap.get('node-d')?.allocated.cpu, 7000);
    assert.equal(snap.columns().cpuAllocated[1], 7000);
    assert.equal(snap.countsBySlot('web')?.[1], 1);
    snap.setNode(node('node-e'));
    assert.equal(snap.get('node-e')?.capacity.cpu, 4000);
    assert.equal(snap.columns().cpuCapacity[2], 4000);
    // node-a (reset to empty) and node-e are twins: the decision sees both
    // through the columns, and the name decides.
    const d = new Scheduler().schedule(web, snap);
    assert.deepEqual(
      d.nodes.map((n) => [n.node, n.total ?? n.reasons.join(', ')]),
      [
        ['node-d', 'mem_free=336Mi < request=2048Mi'],
        ['node-a', 300],
        ['node-e', 300],
      ],
    );
  });
});

// ---- fast paths against a naive reference -------------------------------------

/** A seeded PRNG (shared/random.ts), so every run (and every failing case) replays exactly. */
function prng(seed: number): () => number {
  const r = new SeededRandom(seed);
  return () => r.next();
}

/** Lesson 2's algorithm, written the slow obvious way, with the same plugins' per-node answers. */
function naiveChoice(req: UnitRequest, snap: ClusterSnapshot): string | null {
  let best: { name: string; total: number; load: number } | null = null;
  for (const n of snap.nodes()) {
    if (!defaultFilters.every((f) => f.filter(req, n, snap).ok)) continue;
    const total = defaultScores.reduce((sum, s) => sum + s.weight * s.score(req, n, snap), 0);
    // Ties: the least allocated node once the unit is placed, then the smaller name.
    const load = (n.allocated.cpu + req.resources.cpu) / n.capacity.cpu + (n.allocated.memory + req.resources.memory) / n.capacity.memory;
    if (!best || total > best.total || (total === best.total && (load < best.load || (load === best.load && n.name < best.name)))) best = { name: n.name, total, load };
  }
  return best?.name ?? null;
}

describe('fast paths', () => {
  test('Seeded random clusters, with nodes changing, coming and going, place every unit where the naive scheduler would.', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const random = prng(seed);
      const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)];
      const taints: Taint[] = [gpuOnly, { key: 'spot', effect: 'PreferNoSchedule' }, { key: 'x', value: '1', effect: 'NoExecute' }];
      const nodes = Array.from({ length: 40 }, (_, i) => {
        const cpu = pick([2000, 4000, 8000]);
        return node(`n${String(Math.floor(random() * 1000)).padStart(3, '0')}-${i}`, {
          ready: random() > 0.1,
          unschedulable: random() < 0.1,
          capacity: { cpu, memory: cpu * 2 },
          allocated: { cpu: Math.floor(random() * cpu), memory: Math.floor(random() * cpu * 2) },
          taints: random() < 0.3 ? [pick(taints)] : [],
        });
      });
      const snap = new ClusterSnapshot(nodes);
      const scheduler = new Scheduler();
      const live: Array<[string, UnitRequest]> = [];
      for (let k = 0; k < 60; k++) {
        const req = request({
          deployment: pick(['web', 'db', 'cache']),
          resources: { cpu: pick([100, 500, 1000]), memory: pick([128, 512, 2048]) },
          tolerations: random() < 0.3 ? [pick<Toleration>([{ key: 'gpu-only', operator: 'Exists' }, { operator: 'Exists' }, { key: 'x', operator: 'Equal', value: '1' }])] : [],
        });
        if (live.length > 0 && random() < 0.2) {
          const [gone] = live.splice(Math.floor(random() * live.length), 1);
          snap.forget(gone[0], gone[1]);
        }
        const someNode = snap.nodes()[Math.floor(random() * snap.nodes().length)];
        if (random() < 0.1) {
          // A heartbeat or a cordon changes what is known about a node.
          snap.setNode({ ...someNode, ready: random() > 0.2, unschedulable: random() < 0.2, taints: random() < 0.3 ? [pick(taints)] : [] });
        } else if (random() < 0.05) {
          // A node leaves (its units are lost) and a new one joins.
          for (const [i, unit] of [...live.entries()].reverse()) {
            if (unit[0] === someNode.name) {
              live.splice(i, 1);
              snap.forget(unit[0], unit[1]);
            }
          }
          snap.removeNode(someNode.name);
          snap.setNode(node(`new-${seed}-${k}`, { capacity: { cpu: 4000, memory: 8192 } }));
        }
        const d = scheduler.schedule(req, snap);
        assert.equal(d.chosen, naiveChoice(req, snap), `seed ${seed}, unit ${k}: fast path and naive scheduler disagree`);
        if (d.chosen) {
          snap.assume(d.chosen, req);
          live.push([d.chosen, req]);
        }
      }
    }
  });
});

/** A scheduler with plugins that behave exactly like the defaults but are other objects: the plugin-by-plugin path. */
function pluginByPluginScheduler(): Scheduler {
  return new Scheduler({ filters: defaultFilters.map((p) => ({ ...p })), scores: defaultScores.map((p) => ({ ...p })) });
}

describe('the fused default pass', () => {
  test('The default plugins take the fused one-pass path; copies of them or other plugin lists do not.', () => {
    assert.equal(new Scheduler().usesFusedPath, true);
    assert.equal(new Scheduler({ filters: defaultFilters, scores: defaultScores }).usesFusedPath, true);
    assert.equal(pluginByPluginScheduler().usesFusedPath, false);
    assert.equal(new Scheduler({ scores: [balancedAllocation] }).usesFusedPath, false);
    assert.equal(new Scheduler({ scores: [spread, balancedAllocation, preferNoSchedule] }).usesFusedPath, false);
  });

  test('Seeded random clusters get decisions identical to the plugin-by-plugin path: chosen node, totals, reasons, scores, message.', () => {
    const spotTaints = (k: number): Taint[] => Array.from({ length: k }, (_, i) => ({ key: `spot-${i}`, effect: 'PreferNoSchedule' as const }));
    const taintChoices: Taint[][] = [
      [gpuOnly],
      [{ key: 'spot', effect: 'PreferNoSchedule' }],
      [{ key: 'x', value: '1', effect: 'NoExecute' }],
      spotTaints(2),
      spotTaints(17), // more than the fused pass's PreferNoSchedule table holds
      [gpuOnly, { key: 'spot', effect: 'PreferNoSchedule' }],
    ];
    const tolerationChoices: Toleration[][] = [
      [],
      [],
      [{ key: 'gpu-only', operator: 'Exists' }],
      [{ operator: 'Exists' }],
      [{ key: 'x', operator: 'Equal', value: '1' }],
      [{ key: 'spot', operator: 'Exists', effect: 'PreferNoSchedule' }],
      [{ key: 'spot-1', operator: 'Exists' }],
      [{ key: 'node.kubernetes.io/unschedulable', operator: 'Exists', effect: 'NoSchedule' }],
    ];
    let placed = 0;
    let unschedulable = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const random = prng(1000 + seed);
      const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)];
      // Small clusters (fewer feasible nodes than a decision shows, or none)
      // and big ones (more rejected nodes than a decision lists).
      const size = seed % 3 === 0 ? 3 : seed % 3 === 1 ? 30 : 120;
      const nodes = Array.from({ length: size }, (_, i) => {
        const cpu = pick([2000, 4000, 8000]);
        return node(`n${String(Math.floor(random() * 1000)).padStart(3, '0')}-${i}`, {
          ready: random() > 0.1,
          unschedulable: random() < 0.1,
          // Twins: equal shapes and allocations give equal totals, decided by name.
          capacity: { cpu, memory: cpu * 2 },
          allocated: random() < 0.3 ? { cpu: 0, memory: 0 } : { cpu: 100 * Math.floor(random() * (cpu / 100)), memory: 256 * Math.floor(random() * (cpu / 128)) },
          taints: random() < 0.4 ? pick(taintChoices) : [],
        });
      });
      // One node holds more units of `web` than the fused pass's spread table covers.
      const seeded = Array.from({ length: 1100 + seed }, () => ({ deployment: 'web', node: nodes[0].name }));
      const fusedSnap = new ClusterSnapshot(nodes, seeded);
      const slowSnap = new ClusterSnapshot(nodes, seeded);
      const fused = new Scheduler();
      const slow = pluginByPluginScheduler();
      for (let k = 0; k < 80; k++) {
        const req = request({
          deployment: pick(['web', 'web', 'db', 'cache']),
          resources: { cpu: pick([0, 100, 500, 1000]), memory: pick([0, 128, 512, 2048]) },
          tolerations: pick(tolerationChoices),
        });
        if (random() < 0.1) {
          const someNode = fusedSnap.nodes()[Math.floor(random() * fusedSnap.nodes().length)];
          const changed = { ...someNode, ready: random() > 0.2, unschedulable: random() < 0.2, taints: random() < 0.4 ? pick(taintChoices) : [] };
          fusedSnap.setNode(changed);
          slowSnap.setNode(changed);
        }
        const a = fused.schedule(req, fusedSnap);
        const b = slow.schedule(req, slowSnap);
        assert.deepEqual(a, b, `seed ${seed}, unit ${k}: the fused pass and the plugin-by-plugin path disagree`);
        if (a.chosen === null) {
          unschedulable++;
          continue;
        }
        placed++;
        fusedSnap.assume(a.chosen, req);
        slowSnap.assume(a.chosen, req);
      }
    }
    // The runs exercised both outcomes.
    assert.ok(placed > 100 && unschedulable > 10, `placed ${placed}, unschedulable ${unschedulable}`);
  });

  test('The PreferNoSchedule taint count column follows setNode() and removeNode().', () => {
    const snap = new ClusterSnapshot([
      node('a', { taints: [{ key: 's1', effect: 'PreferNoSchedule' }, gpuOnly, { key: 's2', effect: 'PreferNoSchedule' }] }),
      node('b'),
      node('c', { taints: [{ key: 's1', effect: 'PreferNoSchedule' }] }),
    ]);
    assert.deepEqual(Array.from(snap.columns().preferNoScheduleTaints.subarray(0, 3)), [2, 0, 1]);
    snap.setNode(node('b', { taints: [{ key: 's3', effect: 'PreferNoSchedule' }] }));
    snap.removeNode('a');
    assert.deepEqual(Array.from(snap.columns().preferNoScheduleTaints.subarray(0, 2)), [1, 1]);
    // A unit without tolerations now scores both nodes 50 for prefer-no-schedule.
    const d = new Scheduler().schedule(request({ resources: { cpu: 100, memory: 128 } }), snap);
    assert.deepEqual(
      d.nodes.map((n) => n.scores?.['prefer-no-schedule']),
      [50, 50],
    );
  });
});

test('Equal totals go to the least allocated node, not the first by name, and the decision says it was a tie', () => {
  // Both nodes score the same (balanced, spread, no taints); node-a is the fuller one.
  const snap = new ClusterSnapshot([
    node('node-a', { capacity: { cpu: 4000, memory: 8192 }, allocated: { cpu: 2000, memory: 4096 } }),
    node('node-b', { capacity: { cpu: 8000, memory: 16384 }, allocated: { cpu: 0, memory: 0 } }),
  ]);
  const d = new Scheduler().schedule(request({ resources: { cpu: 1000, memory: 2048 } }), snap);
  assert.equal(d.nodes.find((n) => n.node === 'node-a')?.total, d.nodes.find((n) => n.node === 'node-b')?.total, 'a tie on score');
  assert.equal(d.chosen, 'node-b');
  assert.match(d.message, /over node-a \(\d+, tied: the less allocated node wins, then the smaller name\)/);
});

describe('the incremental default pass', () => {
  test('Decisions kept up to date between placements equal the full pass and the plugin-by-plugin path, through churn, node changes, cordons, new and removed nodes', () => {
    const taintChoices: Taint[][] = [[gpuOnly], [{ key: 'spot', effect: 'PreferNoSchedule' }], [{ key: 'x', value: '1', effect: 'NoExecute' }]];
    const tolerationChoices: Toleration[][] = [
      [],
      [],
      [],
      [{ key: 'gpu-only', operator: 'Exists' }],
      [{ operator: 'Exists' }],
      [{ key: 'node.kubernetes.io/unschedulable', operator: 'Exists', effect: 'NoSchedule' }],
    ];
    let incremental = 0;
    let full = 0;
    for (let seed = 1; seed <= 4; seed++) {
      const random = prng(7000 + seed);
      const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)];
      // More nodes than the pass keeps as candidates (64), so its boundary and rebuilds are exercised.
      const size = seed % 2 === 0 ? 120 : 250;
      const nodes = Array.from({ length: size }, (_, i) => {
        const cpu = pick([2000, 4000, 8000]);
        return node(`n${String(Math.floor(random() * 1000)).padStart(3, '0')}-${i}`, {
          ready: random() > 0.05,
          unschedulable: random() < 0.05,
          capacity: { cpu, memory: cpu * 2 },
          // Twins (equal shapes and allocations) make exact ties, decided by load and name.
          allocated: random() < 0.4 ? { cpu: 0, memory: 0 } : { cpu: 100 * Math.floor(random() * (cpu / 200)), memory: 256 * Math.floor(random() * (cpu / 256)) },
          taints: random() < 0.2 ? pick(taintChoices) : [],
        });
      });
      const snaps = [new ClusterSnapshot(nodes), new ClusterSnapshot(nodes), new ClusterSnapshot(nodes)];
      const inc = new Scheduler({ incremental: true });
      const fullPass = new Scheduler({ incremental: false });
      const slow = pluginByPluginScheduler();
      const live: Array<[string, UnitRequest]> = [];
      const requests = Array.from({ length: 5 }, (_, d) =>
        request({ deployment: `d${d}`, resources: { cpu: pick([100, 250, 500]), memory: pick([128, 256, 1024]) }, tolerations: pick(tolerationChoices) }),
      );
      for (let k = 0; k < 250; k++) {
        // Mostly the same few shapes, one after another, as a pass places a deployment's units.
        const req = requests[Math.floor(k / 7) % requests.length];
        const roll = random();
        if (roll < 0.15 && live.length > 0) {
          const [gone] = live.splice(Math.floor(random() * live.length), 1);
          for (const s of snaps) s.forget(gone[0], gone[1]);
        } else if (roll < 0.2) {
          const someNode = snaps[0].nodes()[Math.floor(random() * snaps[0].nodes().length)];
          const changed = { ...someNode, ready: random() > 0.2, unschedulable: random() < 0.2, taints: random() < 0.3 ? pick(taintChoices) : [] };
          for (const s of snaps) s.setNode(changed);
        } else if (roll < 0.21) {
          const someNode = snaps[0].nodes()[Math.floor(random() * snaps[0].nodes().length)];
          for (const [i, unit] of [...live.entries()].reverse()) {
            if (unit[0] !== someNode.name) continue;
            live.splice(i, 1);
            for (const s of snaps) s.forget(unit[0], unit[1]);
          }
          for (const s of snaps) {
            s.removeNode(someNode.name);
            s.setNode(node(`new-${seed}-${k}`, { capacity: { cpu: 4000, memory: 8192 } }));
          }
        }
        const a = inc.schedule(req, snaps[0]);
        const b = fullPass.schedule(req, snaps[1]);
        const c = slow.schedule(req, snaps[2]);
        assert.deepEqual(a, b, `seed ${seed}, unit ${k}: the incremental and the full pass disagree`);
        assert.deepEqual(a, c, `seed ${seed}, unit ${k}: the incremental pass and the plugin-by-plugin path disagree`);
        assert.equal(a.chosen, naiveChoice(req, snaps[0]), `seed ${seed}, unit ${k}: the naive scheduler disagrees`);
        if (a.chosen === null) continue;
        for (const s of snaps) s.assume(a.chosen, req);
        live.push([a.chosen, req]);
      }
      incremental += inc.passCounts!.incremental;
      full += inc.passCounts!.full;
    }
    // Most decisions came from kept shapes, and rebuilds happened too.
    assert.ok(incremental > 600 && full > 10, `incremental ${incremental}, full passes ${full}`);
  });

  test('By default only snapshots of INCREMENTAL_MIN_NODES nodes or more keep request shapes; smaller ones get the full pass', () => {
    const small = new ClusterSnapshot(lessonNodes());
    const big = new ClusterSnapshot(Array.from({ length: INCREMENTAL_MIN_NODES }, (_, i) => node(`n-${String(i).padStart(4, '0')}`)));
    const s = new Scheduler();
    for (let k = 0; k < 3; k++) s.schedule(web, small);
    assert.equal(s.passCounts!.incremental, 0);
    for (let k = 0; k < 3; k++) s.schedule(web, big);
    assert.deepEqual(s.passCounts, { incremental: 2, full: 1 });
    assert.equal(new Scheduler({ incremental: false }).passCounts, null);
  });

  test('A decision is the caller’s own: changing one changes no later decision', () => {
    const snap = new ClusterSnapshot([node('a'), node('b', { ready: false, notReadyReason: 'no heartbeat for 3.0s' }), node('c')]);
    const s = new Scheduler({ incremental: true });
    const first = s.schedule(web, snap);
    const again = s.schedule(web, snap);
    assert.deepEqual(again, first);
    for (const n of first.nodes) {
      n.reasons.push('scribbled');
      if (n.scores) n.scores.balanced = -1;
      n.detail?.push('scribbled');
    }
    assert.deepEqual(s.schedule(web, snap), again);
    assert.equal(s.passCounts!.incremental, 2);
  });
});
