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
