// test/unit/kube-patch.test.ts -- the patch types of the Kubernetes API
// (control-plane/kube/patch.ts, strategic-merge.ts) on the shapes kubectl
// sends: client-side apply's strategic merge patch with its directives,
// rollout restart's annotation patch, rollout undo's JSON patch, scale's
// merge patch; and the clear errors of patches that cannot apply.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PatchError, jsonPatch, mergePatch } from '../../control-plane/kube/patch.ts';
import { SCHEMAS, strategicMerge } from '../../control-plane/kube/strategic-merge.ts';

const deployment = () => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web', labels: { app: 'web' } },
  spec: {
    replicas: 3,
    strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: '25%' } },
    template: {
      metadata: { labels: { app: 'web' } },
      spec: {
        containers: [
          {
            name: 'web',
            command: ['sleep', '3600'],
            env: [
              { name: 'A', value: '1' },
              { name: 'B', value: '2' },
            ],
            ports: [{ containerPort: 80, protocol: 'TCP' }],
          },
          { name: 'side', command: ['sleep', '1'] },
        ],
      },
    },
  },
});

test('strategic merge: containers merge by name, env by name, ports by containerPort; other lists are replaced', () => {
  const patched = strategicMerge(
    deployment(),
    {
      spec: {
        template: {
          spec: {
            containers: [
              {
                name: 'web',
                command: ['sleep', '10'],
                env: [
                  { name: 'B', value: 'two' },
                  { name: 'C', value: '3' },
                ],
                ports: [{ containerPort: 80, name: 'http' }],
              },
            ],
          },
        },
      },
    },
    SCHEMAS.Deployment,
  ) as ReturnType<typeof deployment>;
  const [web, side] = patched.spec.template.spec.containers;
  assert.deepEqual(web.command, ['sleep', '10'], 'command (no merge key) is replaced');
  assert.deepEqual(web.env, [
    { name: 'A', value: '1' },
    { name: 'B', value: 'two' },
    { name: 'C', value: '3' },
  ]);
  assert.deepEqual(web.ports, [{ containerPort: 80, protocol: 'TCP', name: 'http' }]);
  assert.equal(side.name, 'side', 'a container the patch does not name stays');
});

test('strategic merge: $patch delete, $setElementOrder, null and $retainKeys as kubectl apply sends them', () => {
  const patch = {
    spec: {
      strategy: { $retainKeys: ['type'], type: 'Recreate', rollingUpdate: null },
      template: {
        spec: {
          $setElementOrder: undefined,
          '$setElementOrder/containers': [{ name: 'side' }, { name: 'web' }],
          containers: [{ name: 'web', '$setElementOrder/env': [{ name: 'B' }], env: [{ name: 'A', $patch: 'delete' }] }],
        },
      },
    },
    metadata: { labels: null },
  };
  delete (patch.spec.template.spec as Record<string, unknown>).$setElementOrder;
  const out = strategicMerge(deployment(), patch, SCHEMAS.Deployment) as ReturnType<typeof deployment>;
  assert.deepEqual(out.spec.strategy, { type: 'Recreate' });
  assert.deepEqual(
    out.spec.template.spec.containers.map((c) => c.name),
    ['side', 'web'],
  );
  assert.deepEqual(out.spec.template.spec.containers[1].env, [{ name: 'B', value: '2' }]);
  assert.equal('labels' in out.metadata, false);
});

test('strategic merge: rollout restart adds one template annotation and changes nothing else', () => {
  const before = deployment();
  const out = strategicMerge(before, { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-01-01T00:00:00Z' } } } } }, SCHEMAS.Deployment) as {
    spec: { template: { metadata: unknown } };
  };
  assert.deepEqual(out.spec.template.metadata, { labels: { app: 'web' }, annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-01-01T00:00:00Z' } });
  assert.deepEqual(before, deployment(), 'the input is not changed');
});

test('strategic merge: a list item without its merge key and an unknown directive are refused by name', () => {
  assert.throws(
    () => strategicMerge(deployment(), { spec: { template: { spec: { containers: [{ command: ['x'] }] } } } }, SCHEMAS.Deployment),
    /spec\.template\.spec\.containers: an item has no merge key "name"/,
  );
  assert.throws(() => strategicMerge(deployment(), { spec: { $patch: 'explode' } }, SCHEMAS.Deployment), /unknown \$patch directive "explode"/);
  assert.throws(() => strategicMerge(deployment(), [1], SCHEMAS.Deployment), PatchError);
});

test('merge patch (RFC 7386): maps merge, null deletes, lists replace', () => {
  assert.deepEqual(mergePatch({ a: 1, b: { c: 2, d: 3 }, l: [1, 2] }, { b: { c: null, e: 4 }, l: [3] }), { a: 1, b: { d: 3, e: 4 }, l: [3] });
  assert.deepEqual(mergePatch({ spec: { replicas: 3 } }, { spec: { replicas: 5 } }), { spec: { replicas: 5 } });
});

test('JSON patch (RFC 6902): rollout undo replaces the template and the annotations; a bad path names the operation', () => {
  const undo = [
    { op: 'replace', path: '/spec/template', value: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', command: ['old'] }] } } },
    { op: 'replace', path: '/metadata/annotations', value: { x: 'y' } },
  ];
  const d = { ...deployment(), metadata: { name: 'web', annotations: { a: 'b' } } };
  const out = jsonPatch(d, undo) as { spec: { template: { spec: { containers: Array<{ command: string[] }> } } }; metadata: { annotations: unknown } };
  assert.deepEqual(out.spec.template.spec.containers[0].command, ['old']);
  assert.deepEqual(out.metadata.annotations, { x: 'y' });
  assert.deepEqual(
    jsonPatch({ l: [1, 3] }, [
      { op: 'add', path: '/l/1', value: 2 },
      { op: 'add', path: '/l/-', value: 4 },
      { op: 'test', path: '/l/0', value: 1 },
      { op: 'move', from: '/l', path: '/m' },
    ]),
    { m: [1, 2, 3, 4] },
  );
  assert.throws(() => jsonPatch({}, [{ op: 'replace', path: '/spec/x', value: 1 }]), /operation 0: path \/spec\/x does not exist/);
  assert.throws(() => jsonPatch({ a: 1 }, [{ op: 'test', path: '/a', value: 2 }]), /operation 0: test failed at \/a/);
  assert.throws(() => jsonPatch({}, [{ op: 'frobnicate', path: '/a' }]), /unknown op "frobnicate"/);
  assert.throws(() => jsonPatch({}, { op: 'add' }), /a JSON patch must be a list/);
});
