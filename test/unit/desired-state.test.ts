// test/unit/desired-state.test.ts -- the replicated desired-state machine
// (control-plane/store/desired-state.ts) and the API views over it
// (control-plane/api/views.ts), as plain data with time passed in (the
// views' `now`): the same log gives the same state on every replica, names
// are never reused, a bound unit is never rebound, a snapshot restores
// exactly, and the views tell desired and observed apart.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { unitSpecHash, validateManifest } from '../../shared/manifest.ts';
import type { UnitReport } from '../../shared/model.ts';
import { DesiredState, type StoreCommand } from '../../control-plane/store/desired-state.ts';
import { NodeRegistry } from '../../control-plane/registry/node-registry.ts';
import { allDeploymentViews, allNodeViews, allUnitViews, deploymentView, nodeViewByName } from '../../control-plane/api/views.ts';

const NOW = 1_700_000_000_000;
const NODE = { name: 'node-a', capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: { zone: 'z1' } };

function deployment(replicas: number, arg = '3600', name = 'web'): StoreCommand {
  const { manifest, unitSpec } = validateManifest({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas, template: { spec: { containers: [{ name: 'web', command: ['sleep', arg], resources: { requests: { cpu: '200m', memory: '64Mi' } } }] } } },
  });
  return { type: 'deployment.apply', at: NOW, uid: `u-${name}`, manifest, unitSpec, specHash: unitSpecHash(unitSpec) };
}

const LOG: StoreCommand[] = [
  { type: 'node.register', at: NOW, node: NODE },
  deployment(2),
  { type: 'unit.create', at: NOW, uid: 'a', deployment: 'web', nodeName: 'node-a', scheduling: null },
  { type: 'unit.create', at: NOW, uid: 'b', deployment: 'web', nodeName: null, scheduling: null },
  { type: 'deployment.scale', at: NOW + 1, name: 'web', replicas: 3 },
  { type: 'unit.bind', at: NOW + 2, name: 'web-2', nodeName: 'node-a', scheduling: null },
  deployment(3, '7200'),
];

function replay(log: StoreCommand[]): DesiredState {
  const s = new DesiredState();
  log.forEach((cmd, i) => s.apply(i + 1, cmd));
  return s;
}

test('the same log applied on two replicas gives the same state, snapshot for snapshot', () => {
  const a = replay(LOG);
  const b = replay(LOG);
  assert.deepEqual(a.snapshot(), b.snapshot());
  assert.equal(a.appliedIndex, LOG.length);
  const web = a.deployments.get('web')!;
  assert.equal(web.replicas, 3);
  assert.equal(web.revision, 2, 'a changed template is a new revision');
  assert.equal(web.generation, 3);
});

test('a snapshot restores to exactly the state it was taken from', () => {
  const a = replay(LOG);
  const b = new DesiredState();
  b.restore(structuredClone(a.snapshot()));
  assert.deepEqual(b.snapshot(), a.snapshot());
  // And both go on the same way.
  const next: StoreCommand = { type: 'unit.create', at: NOW, uid: 'c', deployment: 'web', nodeName: 'node-a', scheduling: null };
  assert.deepEqual(a.apply(100, next), b.apply(100, next));
});

test("a unit's scheduling record is kept as one string, from a log entry or snapshot in either form, and the API shows its nodes as a list", () => {
  const nodes = [
    { node: 'node-a', feasible: true, reasons: [], scores: { balanced: 90, spread: 100 }, total: 95 },
    { node: 'node-c', feasible: false, reasons: ['untolerated taint gpu-only'] },
  ];
  const s = replay(LOG.slice(0, 2));
  // An entry a leader wrote before the record was text (a list), and one as the controller writes it now.
  s.apply(10, { type: 'unit.create', at: NOW, uid: 'old', deployment: 'web', nodeName: 'node-a', scheduling: { message: 'node-a (old form)', nodes, at: NOW } });
  s.apply(11, { type: 'unit.create', at: NOW, uid: 'new', deployment: 'web', nodeName: 'node-a', scheduling: { message: 'node-a (text)', nodes: JSON.stringify(nodes), at: NOW + 1 } });
  const kept = [...s.units.values()].filter((u) => u.uid === 'old' || u.uid === 'new');
  assert.equal(kept.length, 2);
  for (const u of kept) assert.equal(typeof u.scheduling!.nodes, 'string', `${u.name}: its record's nodes are one string`);
  const views = allUnitViews({ state: s, observed: new NodeRegistry(1000).nodes, now: NOW });
  for (const u of kept) {
    const v = views.find((x) => x.metadata.name === u.name)!;
    assert.deepEqual(v.status.scheduling, { message: u.scheduling!.message, nodes, at: u.scheduling!.at });
  }
  // A snapshot written before: its units' records in the list form.
  const snap = structuredClone(s.snapshot());
  for (const u of snap.units) if (u.scheduling) (u.scheduling as unknown as { nodes: unknown }).nodes = JSON.parse(u.scheduling.nodes);
  const r = new DesiredState();
  r.restore(snap);
  assert.deepEqual(r.snapshot(), s.snapshot(), 'restored from the list form, the state is the same as the one kept as text');
});

test("each deployment's units (the index a bounded reconcile pass reads) are exactly the units that name it, after creates, deletes and a restore", () => {
  const s = replay([...LOG, deployment(1, '3600', 'api')]);
  let index = LOG.length + 1;
  const check = (st: DesiredState, when: string) => {
    const grouped = new Map<string, string[]>();
    for (const u of st.units.values()) grouped.set(u.deployment, [...(grouped.get(u.deployment) ?? []), u.name]);
    assert.deepEqual(
      [...st.deploymentsWithUnits()].sort().map((d) => [d, [...st.unitsOf(d)!.keys()].sort()]),
      [...grouped].sort().map(([d, names]) => [d, names.sort()]),
      when,
    );
    for (const [d, names] of grouped) for (const n of names) assert.equal(st.unitsOf(d)!.get(n), st.units.get(n), `${when}: the same record`);
  };
  check(s, 'after the log');
  s.apply(++index, { type: 'unit.create', at: NOW, uid: 'c', deployment: 'api', nodeName: 'node-a', scheduling: null });
  s.apply(++index, { type: 'unit.create', at: NOW, uid: 'd', deployment: 'api', nodeName: null, scheduling: null });
  check(s, 'after creates');
  s.apply(++index, { type: 'unit.bind', at: NOW, name: 'api-2', nodeName: 'node-a', scheduling: null });
  assert.equal(s.unitsOf('api')!.get('api-2')!.nodeName, 'node-a', 'a binding shows in the index at once');
  s.apply(++index, { type: 'unit.delete', at: NOW, name: 'web-1', reason: 'surplus' });
  s.apply(++index, { type: 'unit.delete', at: NOW, name: 'api-1', reason: 'surplus' });
  s.apply(++index, { type: 'unit.delete', at: NOW, name: 'api-2', reason: 'surplus' });
  check(s, 'after deletes');
  assert.equal(s.unitsOf('api'), undefined, 'a deployment without units has no entry');
  const r = new DesiredState();
  r.apply(1, deployment(1, '3600', 'gone'));
  r.apply(2, { type: 'unit.create', at: NOW, uid: 'g', deployment: 'gone', nodeName: null, scheduling: null });
  r.restore(structuredClone(s.snapshot()));
  check(r, 'after a restore over other units');
  assert.equal(r.unitsOf('gone'), undefined);
});

test("each node's bound requests (the index the scheduler's snapshot reads) equal a scan of every unit, through 1,500 random creates, binds, deletes and restores", () => {
  const nodes = ['node-a', 'node-b', 'node-c'];
  let s = new DesiredState();
  let index = 0;
  for (const n of nodes) s.apply(++index, { type: 'node.register', at: NOW, node: { ...NODE, name: n } });
  for (const d of ['web', 'api']) s.apply(++index, deployment(0, '3600', d));
  let seed = 7;
  const rand = (k: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) >>> 0) % k;
  for (let step = 0; step < 1500; step++) {
    const units = [...s.units.values()];
    const op = rand(10);
    if (op < 4 || units.length === 0) {
      s.apply(++index, { type: 'unit.create', at: NOW, uid: `u${step}`, deployment: rand(2) ? 'web' : 'api', nodeName: rand(3) ? nodes[rand(3)] : null, scheduling: null });
    } else if (op < 6) {
      const unbound = units.filter((u) => u.nodeName === null);
      if (unbound.length > 0) s.apply(++index, { type: 'unit.bind', at: NOW, name: unbound[rand(unbound.length)].name, nodeName: nodes[rand(3)], scheduling: null });
    } else if (op < 9) {
      s.apply(++index, { type: 'unit.delete', at: NOW, name: units[rand(units.length)].name, reason: 'surplus' });
    } else {
      const r = new DesiredState();
      r.restore(structuredClone(s.snapshot()));
      s = r;
    }
    for (const n of [...nodes, 'node-unknown']) assert.deepEqual(s.requestsOn(n), s.allocatedOn(n), `step ${step}: ${n}`);
  }
  assert.ok(
    [...s.units.values()].some((u) => u.nodeName !== null),
    'units were bound',
  );
});

test('unit names come from a counter that is never reused, even across a delete and re-create', () => {
  const s = replay(LOG);
  assert.deepEqual([...s.units.keys()].sort(), ['web-1', 'web-2']);
  let i = LOG.length;
  assert.equal(s.apply(++i, { type: 'unit.delete', at: NOW, name: 'web-2', reason: 'test' }).ok, true);
  assert.equal(s.apply(++i, { type: 'deployment.delete', at: NOW, name: 'web' }).ok, true);
  assert.equal(s.apply(++i, deployment(1)).ok, true);
  const r = s.apply(++i, { type: 'unit.create', at: NOW, uid: 'd', deployment: 'web', nodeName: null, scheduling: null });
  assert.deepEqual(r, { ok: true, created: true, name: 'web-3' });
});

test('a bound unit is never rebound; unknown objects are 404s that change nothing', () => {
  const s = replay(LOG);
  const before = JSON.stringify(s.snapshot().units);
  assert.deepEqual(s.apply(50, { type: 'unit.bind', at: NOW, name: 'web-1', nodeName: 'node-b', scheduling: null }), {
    ok: false,
    code: 409,
    error: 'unit web-1 is already bound to node-a',
  });
  const r = s.apply(51, { type: 'deployment.scale', at: NOW, name: 'nope', replicas: 1 });
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.code, 404);
  assert.equal(JSON.stringify(s.snapshot().units), before);
  assert.equal(s.appliedIndex, 51, 'a refused command still takes its index');
});

test('views: a unit bound but not reported is Pending; reported Running it is Running; a report of an unbound unit is listed as an orphan', () => {
  const s = replay(LOG);
  const registry = new NodeRegistry(1000);
  registry.hello(NODE, 77, [], 3, NOW);
  const run = (name: string): UnitReport => ({ name, deployment: 'web', phase: 'Running', pid: 1234, resources: { cpu: 200, memory: 64 }, term: 3, ready: true });
  let views = allUnitViews({ state: s, observed: registry.nodes, now: NOW });
  assert.deepEqual(
    views.map((v) => v.metadata.name),
    ['web-1', 'web-2'],
  );
  const phase = (v: (typeof views)[number]) => (v.status as { phase?: string }).phase;
  assert.deepEqual(views.map(phase), ['Pending', 'Pending']);
  registry.unitStatus('node-a', run('web-1'));
  registry.unitStatus('node-a', run('web-9'));
  views = allUnitViews({ state: s, observed: registry.nodes, now: NOW });
  assert.deepEqual(
    views.map((v) => v.metadata.name),
    ['web-1', 'web-2', 'web-9'],
  );
  assert.equal(phase(views[0]), 'Running');
  const nodes = allNodeViews({ state: s, observed: registry.nodes, now: NOW });
  assert.equal(nodes.length, 1);
  const st = nodes[0].status as { ready: boolean; allocated: { cpu: number; memory: number }; agent: { pid: number } };
  assert.equal(st.ready, true);
  assert.deepEqual(st.allocated, { cpu: 400, memory: 128 }, 'both bound units count against the node');
  assert.equal(st.agent.pid, 77);
  assert.deepEqual(nodeViewByName({ state: s, observed: registry.nodes, now: NOW }, NODE.name), nodes[0], 'one node alone: the same view as in the list');
  assert.equal(nodeViewByName({ state: s, observed: registry.nodes, now: NOW }, 'node-unknown'), undefined);
  const d = deploymentView(s.deployments.get('web')!, { state: s, observed: registry.nodes, now: NOW });
  assert.equal((d.spec as { replicas: number }).replicas, 3);
});

test("views: each deployment counts only its own units and its own unbound reports; a lost node's units are not counted", () => {
  const NODE_B = { ...NODE, name: 'node-b' };
  const s = replay([
    { type: 'node.register', at: NOW, node: NODE },
    { type: 'node.register', at: NOW, node: NODE_B },
    deployment(3),
    deployment(2, '3600', 'api'),
    { type: 'unit.create', at: NOW, uid: 'w1', deployment: 'web', nodeName: 'node-a', scheduling: null },
    { type: 'unit.create', at: NOW, uid: 'w2', deployment: 'web', nodeName: 'node-a', scheduling: null },
    { type: 'unit.create', at: NOW, uid: 'w3', deployment: 'web', nodeName: null, scheduling: null },
    { type: 'unit.create', at: NOW, uid: 'a1', deployment: 'api', nodeName: 'node-a', scheduling: null },
    { type: 'unit.create', at: NOW, uid: 'a2', deployment: 'api', nodeName: 'node-b', scheduling: null },
  ]);
  const registry = new NodeRegistry(1000);
  registry.hello(NODE, 77, [], 3, NOW); // node-b never said hello: its unit is lost
  const report = (name: string, deployment: string, phase: UnitReport['phase'], specHash?: string): UnitReport => ({
    name,
    deployment,
    phase,
    pid: 1234,
    resources: { cpu: 200, memory: 64 },
    term: 3,
    ready: true,
    ...(specHash ? { specHash } : {}),
  });
  registry.unitStatus('node-a', report('web-1', 'web', 'Running'));
  registry.unitStatus('node-a', report('api-1', 'api', 'Running'));
  // Units no binding wants: an old web unit still running, an old api unit stopping.
  registry.unitStatus('node-a', report('web-9', 'web', 'Running', 'old0000000000000'));
  registry.unitStatus('node-a', report('api-7', 'api', 'Terminating', 'old0000000000000'));
  const counts = Object.fromEntries(
    allDeploymentViews({ state: s, observed: registry.nodes, now: NOW }).map((v) => {
      const st = v.status;
      return [v.metadata.name, [st.replicas, st.updatedReplicas, st.readyReplicas, st.availableReplicas, st.oldReplicas]];
    }),
  );
  assert.deepEqual(counts, { api: [1, 1, 1, 1, 1], web: [3, 3, 1, 1, 1] }, 'replicas, updated, ready, available, old per deployment');
  // One deployment's view alone counts the same.
  const web = deploymentView(s.deployments.get('web')!, { state: s, observed: registry.nodes, now: NOW }).status;
  assert.deepEqual([web.replicas, web.updatedReplicas, web.readyReplicas, web.availableReplicas, web.oldReplicas], counts.web);
});

test('a unit is made from the spec it was scheduled for, even when a newer apply lands first in the log', () => {
  // The leader planned with revision 1 (200m) and named it; an apply of 500m proposed earlier lands before the create.
  const first = deployment(1) as Extract<StoreCommand, { type: 'deployment.apply' }>;
  const bigger = structuredClone(first);
  bigger.unitSpec.resources.cpu = 500;
  bigger.specHash = unitSpecHash(bigger.unitSpec);
  const s = replay([{ type: 'node.register', at: NOW, node: NODE }, first, bigger]);
  const r = s.apply(4, { type: 'unit.create', at: NOW, uid: 'a', deployment: 'web', nodeName: 'node-a', scheduling: null, specHash: first.specHash });
  assert.equal(r.ok, true);
  const unit = s.units.get('web-1')!;
  assert.equal(unit.spec.resources.cpu, 200, 'the resources the scheduler checked, not the newer apply');
  assert.equal(unit.revision, 1);
  assert.equal(s.deployments.get('web')!.revision, 2);
});

test('a unit scheduled for a revision the deployment no longer keeps is refused, naming it', () => {
  const s = replay([{ type: 'node.register', at: NOW, node: NODE }, deployment(1)]);
  const r = s.apply(3, { type: 'unit.create', at: NOW, uid: 'a', deployment: 'web', nodeName: 'node-a', scheduling: null, specHash: 'no-such-spec' });
  assert.equal(r.ok, false);
  assert.match(r.ok ? '' : r.error, /^deployment web no longer has the revision \(spec no-such-spec\) the unit was scheduled for$/);
  assert.equal(s.units.size, 0);
});
