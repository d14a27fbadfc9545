// test/unit/watch-list.test.ts -- a list answer's body built from the JSON the
// watch history took in (control-plane/api/watch.ts listJson) is the very text
// JSON.stringify of the list gives, and its resourceVersion is one a watch resumes from.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WatchHub } from '../../control-plane/api/watch.ts';
import { renderAll } from '../../control-plane/api/view-cache.ts';
import type { ApiObject } from '../../control-plane/api/views.ts';

test('listJson is JSON.stringify of the list, with the version of the rendering it took in', () => {
  let objects: ApiObject[] = [
    { kind: 'Deployment', metadata: { name: 'a', labels: { x: '"quoted"' } }, spec: { replicas: 0 } },
    { kind: 'Deployment', metadata: { name: 'b\u2028' }, status: { ok: true } },
  ];
  const hub = new WatchHub({
    render: () => renderAll(objects),
    events: () => [],
    onEvent: () => () => {},
    eventView: () => ({ kind: 'Event', metadata: { name: 'e' } }),
    subscribe: () => () => {},
    isLeader: () => true,
  });
  const first = hub.listJson('deployments', 'DeploymentList');
  const { items, resourceVersion } = hub.list('deployments');
  assert.equal(first, JSON.stringify({ kind: 'DeploymentList', metadata: { resourceVersion }, items }));
  objects = [];
  const empty = JSON.parse(hub.listJson('deployments', 'DeploymentList'));
  assert.deepEqual(empty.items, []);
  assert.notEqual(empty.metadata.resourceVersion, resourceVersion); // the two deletions were numbered
  assert.equal(hub.listJson('events', 'EventList'), JSON.stringify({ kind: 'EventList', metadata: { resourceVersion: '0' }, items: [] }));
});
