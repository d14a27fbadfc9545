// test/unit/kube-convert.test.ts -- our objects in Kubernetes' shapes and
// back (control-plane/kube/convert.ts), the selectors of lists and watches
// (selectors.ts) and kubectl's columns (tables.ts), on a desired state
// built with the same commands the API writes.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { unitSpecHash } from '../../shared/manifest.ts';
import { DesiredState } from '../../control-plane/store/desired-state.ts';
import { deploymentView, unitView } from '../../control-plane/api/views.ts';
import { deploymentIn, kubeDeployment, kubePod, kubeReplicaSets, replicaSetName, serviceIn } from '../../control-plane/kube/convert.ts';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from '../../control-plane/kube/selectors.ts';
import { humanDuration, table, tableHead, tableRow } from '../../control-plane/kube/tables.ts';

const manifest = (command = ['sleep', '3600']) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web', labels: { app: 'web' }, annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' } },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: 'web' } },
    template: {
      metadata: { labels: { app: 'web' } },
      spec: { containers: [{ name: 'web', image: 'busybox', command, env: [{ name: 'A', value: '1' }], resources: { requests: { cpu: '250m', memory: '64Mi' } } }] },
    },
  },
});

function stateWith(...commands: string[][]): DesiredState {
  const s = new DesiredState();
  let i = 1;
  for (const c of commands) {
    const { manifest: m, unitSpec } = deploymentIn(manifest(c));
    s.apply(i++, { type: 'deployment.apply', at: 1_700_000_000_000 + i, uid: 'uid-web', manifest: m, unitSpec, specHash: unitSpecHash(unitSpec) });
  }
  s.apply(i++, { type: 'unit.create', at: 1_700_000_100_000, uid: 'uid-u1', deployment: 'web', nodeName: null, scheduling: null });
  return s;
}

test('a Deployment read back and sent again is the manifest stored: lossless, with kubectl last-applied kept', () => {
  const s = stateWith(['sleep', '3600']);
  const d = s.deployments.get('web')!;
  const k = kubeDeployment(d, deploymentView(d, { state: s, observed: new Map(), now: 0 }));
  assert.equal(k.apiVersion, 'apps/v1');
  assert.deepEqual((k.spec as { selector: unknown }).selector, { matchLabels: { app: 'web' } });
  assert.equal((k.metadata.annotations as Record<string, string>)['deployment.kubernetes.io/revision'], '1');
  const back = deploymentIn(k);
  assert.deepEqual(back.manifest.spec.template, d.manifest.spec.template);
  assert.deepEqual(back.manifest.metadata.annotations, { 'kubectl.kubernetes.io/last-applied-configuration': '{}' });
  assert.equal(unitSpecHash(back.unitSpec), d.specHash, 'the same template: no new revision');
});

test('the restartedAt template annotation becomes a new UnitSpec (a rollout), and reads back', () => {
  const m = manifest();
  (m.spec.template.metadata as Record<string, unknown>).annotations = { 'kubectl.kubernetes.io/restartedAt': '2026-12-01T10:00:00Z' };
  const r = deploymentIn(m);
  assert.equal(r.unitSpec.restartedAt, '2026-12-01T10:00:00Z');
  assert.notEqual(unitSpecHash(r.unitSpec), unitSpecHash(deploymentIn(manifest()).unitSpec));
});

test('fields we do not support are refused by name; server-filled fields and the namespace default are accepted', () => {
  const m = manifest() as ReturnType<typeof manifest> & { spec: { template: { spec: Record<string, unknown> } } };
  m.spec.template.spec.volumes = [];
  assert.throws(() => deploymentIn(m), /spec\.template\.spec\.volumes: not supported/);
  assert.throws(() => deploymentIn({ ...manifest(), metadata: { name: 'web', namespace: 'prod' } }), /metadata\.namespace: only the namespace "default" exists/);
  const fromServer = {
    ...manifest(),
    metadata: { ...manifest().metadata, namespace: 'default', uid: 'x', resourceVersion: '7', generation: 3, creationTimestamp: '2026-01-01T00:00:00Z', managedFields: [] },
    status: { replicas: 2 },
  };
  assert.equal(deploymentIn(fromServer).manifest.metadata.name, 'web');
  assert.throws(
    () => serviceIn({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's' }, spec: { type: 'ClusterIP', selector: { a: 'b' }, ports: [{ port: 1 }] } }),
    /spec\.type: only "NodePort" is supported/,
  );
});

test('one ReplicaSet per revision, owned by the deployment; pods point at theirs', () => {
  const s = stateWith(['sleep', '1'], ['sleep', '2']);
  const d = s.deployments.get('web')!;
  const rss = kubeReplicaSets(d, new Map([[d.specHash, { live: 1, ready: 0 }]]));
  assert.deepEqual(
    rss.map((r) => (r.metadata.annotations as Record<string, string>)['deployment.kubernetes.io/revision']),
    ['1', '2'],
  );
  for (const r of rss)
    assert.deepEqual(
      (r.metadata.ownerReferences as Array<{ uid: string; controller: boolean }>).map((o) => [o.uid, o.controller]),
      [['uid-web', true]],
    );
  assert.deepEqual(
    rss.map((r) => (r.spec as { replicas: number }).replicas),
    [0, 2],
    'only the current revision wants replicas',
  );
  const unit = [...s.units.values()][0];
  const pod = kubePod(unitView(unit, undefined, new Map(), d, 0), unit, d, undefined);
  assert.equal((pod.metadata.ownerReferences as Array<{ name: string }>)[0].name, replicaSetName('web', unit.specHash));
  assert.equal((pod.status as { phase: string }).phase, 'Pending');
  assert.deepEqual(
    (pod.status as { conditions: Array<{ type: string; status: string; reason: string }> }).conditions.map((c) => [c.type, c.status, c.reason]),
    [['PodScheduled', 'False', 'Unschedulable']],
  );
  assert.equal(JSON.stringify(pod).includes('"pid"'), false, 'no pid in a Pod');
  const t = table('Pod', [pod], Date.parse('2023-11-14T22:30:00Z'), {});
  assert.deepEqual(
    (t.columnDefinitions as Array<{ name: string; priority: number }>).filter((c) => c.priority === 0).map((c) => c.name),
    ['Name', 'Ready', 'Status', 'Restarts', 'Age'],
  );
  assert.deepEqual((t.rows as Array<{ cells: unknown[] }>)[0].cells.slice(0, 4), [unit.name, '0/1', 'Pending', 0]);
  // What a big list sends in slices (kube/server.ts): the head, each row's JSON, `]}`: the same text.
  const at = Date.parse('2023-11-14T22:30:00Z');
  const meta = { resourceVersion: '7' };
  const rows = [pod, pod].map((p) => JSON.stringify(tableRow('Pod', p, at, 'Metadata')));
  assert.equal(`${tableHead('Pod', meta)}${rows.join(',')}]}`, JSON.stringify(table('Pod', [pod, pod], at, meta, 'Metadata')));
});

test('label and field selectors as kubectl and drain send them; unknown fields are refused', () => {
  const sel = parseLabelSelector('app=web,tier!=db,env in (a, b),!legacy,zone');
  assert.equal(matchesLabels(sel, { app: 'web', env: 'b', zone: 'x' }), true);
  assert.equal(matchesLabels(sel, { app: 'web', env: 'c', zone: 'x' }), false);
  assert.equal(matchesLabels(sel, { app: 'web', env: 'a', zone: 'x', legacy: '' }), false);
  const f = parseFieldSelector('spec.nodeName=node-a,status.phase!=Failed', 'Pod');
  assert.equal(matchesFields(f, { spec: { nodeName: 'node-a' }, status: { phase: 'Running' } }), true);
  assert.equal(matchesFields(f, { spec: { nodeName: 'node-b' }, status: { phase: 'Running' } }), false);
  assert.equal(matchesFields(parseFieldSelector('involvedObject.name=web-1,involvedObject.uid=u', 'Event'), { involvedObject: { name: 'web-1', uid: 'u' } }), true);
  assert.throws(() => parseFieldSelector('spec.color=red', 'Pod'), /"spec.color" is not a supported field selector for Pod/);
  assert.throws(() => parseLabelSelector('app in web'), /cannot parse "app in web"/);
});

test('ages print as kubectl prints them', () => {
  assert.deepEqual([5e3, 119e3, 150e3, 600e3, 3 * 3600e3, 7.5 * 3600e3, 30 * 3600e3, 50 * 3600e3, 10 * 86400e3].map(humanDuration), [
    '5s',
    '119s',
    '2m30s',
    '10m',
    '3h',
    '7h30m',
    '30h',
    '2d2h',
    '10d',
  ]);
});
