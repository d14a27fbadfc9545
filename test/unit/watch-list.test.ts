// test/unit/watch-list.test.ts -- a list answer's body built from the JSON the
// watch history took in (control-plane/api/watch.ts listJson) is the very text
// JSON.stringify of the list gives, and its resourceVersion is one a watch resumes from.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type http from 'node:http';
import { GoneError, WatchHub } from '../../control-plane/api/watch.ts';
import { renderAll } from '../../control-plane/api/view-cache.ts';
import type { ApiObject } from '../../control-plane/api/views.ts';

/** A hub whose every resource renders the objects `objects()` gives at the time. */
function hubOf(objects: () => ApiObject[]): WatchHub {
  return new WatchHub({
    render: () => renderAll(objects()),
    events: () => [],
    onEvent: () => () => {},
    eventView: () => ({ kind: 'Event', metadata: { name: 'e' } }),
    subscribe: () => () => {},
    isLeader: () => true,
  });
}

test('listJson is JSON.stringify of the list, with the version of the rendering it took in', () => {
  let objects: ApiObject[] = [
    { kind: 'Deployment', metadata: { name: 'a', labels: { x: '"quoted"' } }, spec: { replicas: 0 } },
    { kind: 'Deployment', metadata: { name: 'b\u2028' }, status: { ok: true } },
  ];
  const hub = hubOf(() => objects);
  const first = hub.listJson('deployments', 'DeploymentList');
  const { items, resourceVersion } = hub.list('deployments');
  assert.equal(first, JSON.stringify({ kind: 'DeploymentList', metadata: { resourceVersion }, items }));
  objects = [];
  const empty = JSON.parse(hub.listJson('deployments', 'DeploymentList'));
  assert.deepEqual(empty.items, []);
  assert.notEqual(empty.metadata.resourceVersion, resourceVersion); // the two deletions were numbered
  assert.equal(hub.listJson('events', 'EventList'), JSON.stringify({ kind: 'EventList', metadata: { resourceVersion: '0' }, items: [] }));
});

test('at rest a history no watch follows is released: its versions are refused as gone, the next list starts a new one; a followed one stays', () => {
  let objects: ApiObject[] = [{ kind: 'Deployment', metadata: { name: 'a' }, spec: { replicas: 1 } }];
  const hub = hubOf(() => objects);
  // A watch as the HTTP server opens one: what it writes is kept; closing the request ends it.
  const open = (resource: string, from: string | null) => {
    const req = new EventEmitter() as unknown as http.IncomingMessage;
    const lines: string[] = [];
    const res = Object.assign(new EventEmitter(), {
      writeHead: () => res,
      write: (s: string) => lines.push(s),
      end: () => {},
    }) as unknown as http.ServerResponse;
    hub.watch(resource, from, req, res);
    return { lines, close: () => (req as unknown as EventEmitter).emit('close') };
  };
  const v1 = hub.list('deployments').resourceVersion;
  const units = hub.list('units').resourceVersion;
  const w = open('units', units);
  assert.equal(hub.release(), false, 'a watch of units is open: not everything could go');
  // The deployments' history went: a watch from its version is refused (the client lists again).
  assert.throws(() => open('deployments', v1), GoneError);
  const v2 = hub.list('deployments').resourceVersion;
  assert.notEqual(v2.slice(0, v2.lastIndexOf('.')), v1.slice(0, v1.lastIndexOf('.')), 'a new history, in a new epoch');
  objects = [...objects, { kind: 'Deployment', metadata: { name: 'b' }, spec: { replicas: 2 } }];
  const d = open('deployments', v2);
  assert.deepEqual(
    d.lines.map((l) => JSON.parse(l)).map((e: { type: string; object: ApiObject }) => [e.type, e.object.metadata.name]),
    [['ADDED', 'b']],
    'the new history resumes from its own version',
  );
  // The units' history stayed: its watcher is still told of changes.
  const before = w.lines.length;
  objects = [];
  hub.list('units');
  assert.ok(w.lines.length > before, 'the open watch was told of the change');
  w.close();
  d.close();
  assert.equal(hub.release(), true, 'no watch open: every history went');
});
