// test/unit/leader-wait.test.ts -- a follower that knows no leader holds a
// request until it learns of one (control-plane/store/leader-wait.ts), and
// the /v1 follower proxy then forwards it: over real loopback HTTP, with a
// stand-in store whose leader the test sets.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LeaderWait } from '../../control-plane/store/leader-wait.ts';
import { forwardToLeader } from '../../control-plane/api/leader-routing.ts';
import { sendJson } from '../../control-plane/api/http-server.ts';
import { NoQuorumError, type ReplicatedStore } from '../../control-plane/store/store.ts';
import { waitFor } from '../helpers/cluster.ts';

/** The parts of a store LeaderWait and the proxy read; `elect` announces a leader as a Ready would. */
function standIn(): { store: ReplicatedStore; elect: (id: string | null) => void } {
  let leader: string | null = null;
  const listeners: Array<() => void> = [];
  const store = {
    leaderId: () => leader,
    onRoleChange: (fn: () => void) => listeners.push(fn),
  } as unknown as ReplicatedStore;
  return {
    store,
    elect: (id) => {
      leader = id;
      for (const fn of listeners) fn();
    },
  };
}

test('LeaderWait: a known leader at once; none: the first one announced, or null when the wait ends', async () => {
  const s = standIn();
  const wait = new LeaderWait(s.store, 60_000);
  const pending = wait.known();
  assert.equal(wait.pending, 1);
  s.elect(null); // a role change that names no leader (a candidate): still waiting
  assert.equal(wait.pending, 1);
  s.elect('cp-2');
  assert.equal(await pending, 'cp-2');
  assert.equal(wait.pending, 0);
  assert.equal(await wait.known(), 'cp-2', 'known: no wait');

  const none = standIn();
  assert.equal(await new LeaderWait(none.store, 0).known(), null, 'a wait of 0 refuses at once');
  const short = new LeaderWait(none.store, 50);
  assert.equal(await short.known(), null, 'no leader within the wait');
  assert.equal(short.pending, 0);
});

test('the /v1 follower proxy holds a write that finds no leader or a dead one, forwards it once a leader is known, and refuses after the wait', async (t) => {
  const seen: Array<{ method: string; url: string; forwardedBy: string | undefined; body: string }> = [];
  const leaderServer = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', forwardedBy: req.headers['x-mo-forwarded'] as string | undefined, body });
      sendJson(res, 200, { answeredBy: 'cp-2' });
    });
  });
  await new Promise<void>((r) => leaderServer.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => leaderServer.close(() => r())));

  const s = standIn();
  const wait = new LeaderWait(s.store, 200);
  // cp-3: a leader that has just died (a port nothing listens on: the connect is refused).
  const dead = http.createServer();
  await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
  const deadPort = (dead.address() as AddressInfo).port;
  await new Promise<void>((r) => dead.close(() => r()));
  const peers = new Map<string, string>([
    ['cp-1', 'ws://127.0.0.1:1'],
    ['cp-2', `ws://127.0.0.1:${(leaderServer.address() as AddressInfo).port}`],
    ['cp-3', `ws://127.0.0.1:${deadPort}`],
  ]);
  const follower = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      forwardToLeader(req, res, Buffer.concat(chunks), { store: s.store, peers, selfId: 'cp-1', reachable: () => 1, leaderWait: wait }).then(
        (sent) => {
          if (!sent) sendJson(res, 500, { error: 'handled here: this replica is not the leader' });
        },
        (err) => sendJson(res, 503, { error: (err as Error).message, outcome: err instanceof NoQuorumError ? err.outcome : undefined }),
      );
    });
  });
  await new Promise<void>((r) => follower.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => follower.close(() => r())));
  const url = `http://127.0.0.1:${(follower.address() as AddressInfo).port}/v1/deployments/web/scale`;
  const patch = () => fetch(url, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"replicas":4}' });

  // No leader known: the write waits; the leader is announced; it is forwarded, once.
  const answer = patch();
  await waitFor('the write held', () => wait.pending === 1, 10_000, 5);
  assert.equal(seen.length, 0, 'nothing forwarded while no leader is known');
  s.elect('cp-2');
  const r = await answer;
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { answeredBy: 'cp-2' });
  assert.deepEqual(seen, [{ method: 'PATCH', url: '/v1/deployments/web/scale', forwardedBy: 'cp-1', body: '{"replicas":4}' }]);

  // The leader it knows refuses the connection (it died; this replica has not
  // heard yet): nothing was sent, so the write waits for another leader.
  s.elect('cp-3');
  const retried = patch();
  await waitFor('the write held after the refused connect', () => wait.pending === 1, 10_000, 5);
  s.elect('cp-2');
  assert.equal((await retried).status, 200);
  assert.equal(seen.length, 2, 'forwarded once more, to cp-2');

  // No leader within the wait: refused, saying it never applies and how long it waited.
  s.elect(null);
  const refused = await patch();
  assert.equal(refused.status, 503);
  const why = (await refused.json()) as { error: string; outcome: string };
  assert.match(why.error, /^no quorum: no leader elected within 200 ms \(cp-1 reaches 1 of 3 replicas\); the write was refused and will never apply$/);
  assert.equal(why.outcome, 'refused');
  assert.equal(seen.length, 2);
  assert.equal(wait.pending, 0);
});
