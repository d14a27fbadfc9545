// test/unit/watch-fanout.test.ts -- the coalescing of refreshes for open
// watches (control-plane/api/watch-fanout.ts): a refresh that showed
// something not current (a deployment list past its counting budget,
// view-cache.ts) is followed by another without any new change, until one
// shows everything current.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WatchFanout } from '../../control-plane/api/watch-fanout.ts';

const DEADLINE_MS = 15000;

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + DEADLINE_MS;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

test('a refresh that was not current is followed by another, with no new change, until one is', async () => {
  const sub: { changed: (() => void) | null } = { changed: null };
  const refreshed: string[] = [];
  let staleLeft = 2;
  const fanout = new WatchFanout(
    {
      subscribe: (fn) => {
        sub.changed = fn;
        return () => (sub.changed = null);
      },
      isLeader: () => true,
      again: (resource) => resource === 'deployments' && staleLeft-- > 0,
    },
    (resource) => refreshed.push(resource),
  );
  const remove = [fanout.add('deployments', { end: () => {} }), fanout.add('units', { end: () => {} })];
  assert.ok(sub.changed, 'subscribed while a watch is open');
  sub.changed();
  // One change: the refresh it asked for, then two more because the first two were not current.
  await until(() => refreshed.length === 6, 'three refreshes of both resources');
  assert.equal(staleLeft, -1, 'asked after each refresh of deployments, and only of deployments');
  // The third was current: no fourth, even after many turns of the loop.
  for (let k = 0; k < 50; k++) await new Promise((r) => setImmediate(r));
  assert.equal(refreshed.length, 6);
  for (const r of remove) r();
  assert.equal(sub.changed, null, 'unsubscribed with the last watch');
});
