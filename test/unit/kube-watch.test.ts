// test/unit/kube-watch.test.ts -- a Kubernetes watch's first events (every
// object from "0", or a resume's selector checks and replay) go out in
// slices (control-plane/kube/watch.ts); a change that comes meanwhile waits
// and follows them, so the client never sees an object's older state after
// its newer one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type http from 'node:http';
import { KubeWatchHub, kubeRendered } from '../../control-plane/kube/watch.ts';
import type { KubeObject } from '../../control-plane/kube/convert.ts';
import type { Rendered } from '../../control-plane/api/view-cache.ts';
import { countTurns } from '../helpers/hold-loop.ts';

const pod = (name: string, phase: string): KubeObject => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: { app: 'web' } }, status: { phase } });

/** A response that keeps the lines written to it. */
function fakeResponse() {
  const res = Object.assign(new EventEmitter(), {
    lines: [] as Array<{ type: string; object: KubeObject }>,
    writableEnded: false,
    destroyed: false,
    writeHead: () => res,
    write: (chunk: string) => {
      for (const line of chunk.split('\n')) if (line.trim()) res.lines.push(JSON.parse(line) as { type: string; object: KubeObject });
      return true;
    },
    end: () => {
      res.writableEnded = true;
      res.emit('close');
    },
  });
  return res;
}

for (const from of ['0', 'resume'] as const) {
  test(`a watch from ${from === '0' ? '"0"' : "a list's version, with a selector"} sends its first events in slices; a change meanwhile follows them`, async () => {
    let objects: Rendered[] = Array.from({ length: 200 }, (_, i) => kubeRendered(pod(`p-${String(i).padStart(3, '0')}`, 'Pending')));
    let changed: (() => void) | null = null;
    const hub = new KubeWatchHub({
      render: () => objects,
      events: () => [],
      onEvent: () => () => {},
      eventObject: () => pod('x', 'x'),
      subscribe: (fn) => {
        changed = fn;
        return () => {};
      },
      isLeader: () => true,
      catchUpSliceMs: 0, // a turn of the loop every 32 steps
    });
    const { resourceVersion } = hub.list('pods');
    // A change after the list: a watch resumed from the list's version replays it (last, after the selector checks).
    objects = objects.map((r) => (r.name === 'p-199' ? kubeRendered(pod('p-199', 'Starting')) : r));
    hub.list('pods');
    const req = new EventEmitter() as unknown as http.IncomingMessage;
    const res = fakeResponse();
    const loop = countTurns();
    hub.watch(
      'pods',
      from === '0' ? '0' : resourceVersion,
      req,
      res as unknown as http.ServerResponse,
      { labels: from === '0' ? [] : [{ key: 'app', op: 'in', values: ['web'] }], fields: [], encode: (o) => o },
      (m) => ({ message: m }),
    );
    // Right away, while the first events are still going out: the last pod changes.
    objects = objects.map((r) => (r.name === 'p-199' ? kubeRendered(pod('p-199', 'Running')) : r));
    changed!();
    const deadline = Date.now() + 10_000;
    while (!res.lines.some((l) => l.object.metadata.name === 'p-199' && (l.object.status as { phase: string }).phase === 'Running')) {
      assert.ok(Date.now() < deadline, `no Running p-199 after 10 s: ${res.lines.length} events`);
      await new Promise((r) => setTimeout(r, 10));
    }
    loop.stop();
    res.end();
    const of199 = res.lines.filter((l) => l.object.metadata.name === 'p-199').map((l) => `${l.type} ${(l.object.status as { phase: string }).phase}`);
    if (from === '0') {
      assert.equal(res.lines.filter((l) => l.type === 'ADDED').length, 200, 'every pod once');
      assert.deepEqual(of199, ['ADDED Starting', 'MODIFIED Running'], 'its state then, then its change');
    } else {
      assert.deepEqual(of199, ['MODIFIED Starting', 'MODIFIED Running'], 'the replayed change, then the new one');
    }
    assert.ok(loop.turns() >= 3, `the loop had ${loop.turns()} turns while the first events went out`);
  });
}

test('a get that makes a changed object alone gives it a new version, tells a watch once, and a resume from before replays it', async (t) => {
  let objects: Rendered[] = Array.from({ length: 20 }, (_, i) => kubeRendered(pod(`p-${i}`, 'Pending')));
  let renders = 0;
  const hub = new KubeWatchHub({
    render: () => {
      renders++;
      return objects;
    },
    renderOne: (_resource, name) => objects.find((r) => r.name === name),
    events: () => [],
    onEvent: () => () => {},
    eventObject: () => pod('x', 'x'),
    subscribe: () => () => {},
    isLeader: () => true,
  });
  const listed = hub.list('pods');
  const before = JSON.parse(listed.stamp(listed.items[5])) as KubeObject;
  const watch = (from: string) => {
    const res = fakeResponse();
    // Ended on every path (an open watch keeps the test process waiting).
    t.after(() => {
      if (!res.writableEnded) res.end();
    });
    hub.watch('pods', from, new EventEmitter() as unknown as http.IncomingMessage, res as unknown as http.ServerResponse, { labels: [], fields: [], encode: (o) => o }, (m) => ({
      message: m,
    }));
    return res;
  };
  const live = watch(listed.resourceVersion);
  assert.equal(renders, 2, 'the list and the watch rendered');
  objects = objects.map((r) => (r.name === 'p-5' ? kubeRendered(pod('p-5', 'Running')) : r));
  const got = hub.find('pods', 'p-5')!;
  assert.equal(renders, 2, 'the get rendered nothing but p-5');
  assert.equal((got.status as { phase: string }).phase, 'Running');
  assert.notEqual(got.metadata.resourceVersion, before.metadata.resourceVersion);
  assert.deepEqual(hub.find('pods', 'p-5'), got, 'unchanged since: the same version');
  assert.deepEqual(hub.find('pods', 'p-6'), JSON.parse(listed.stamp(listed.items[6])), 'another pod keeps the version of its last change');
  assert.equal(hub.find('pods', 'p-99'), undefined);
  const deadline = Date.now() + 10_000;
  while (live.lines.length === 0) {
    assert.ok(Date.now() < deadline, 'the watch heard nothing in 10 s');
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.deepEqual(live.lines, [{ type: 'MODIFIED', object: got }]);
  const again = hub.list('pods');
  assert.equal(JSON.parse(again.stamp(again.items[5])).metadata.resourceVersion, got.metadata.resourceVersion, "the next list shows the get's version");
  assert.equal(live.lines.length, 1, 'the change is told once');
  const resumed = watch(listed.resourceVersion);
  while (resumed.lines.length === 0) {
    assert.ok(Date.now() < deadline, 'the resumed watch heard nothing in 10 s');
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.deepEqual(resumed.lines, [{ type: 'MODIFIED', object: got }]);
});
