// test/unit/raft-store-slow-save.test.ts -- a leader whose own save hangs
// for seconds (a compaction ahead of it in the storage queue, a busy disk)
// keeps sending heartbeats meanwhile, so its followers do not campaign
// (RaftNode.takeLeaderMessages); a follower whose save hangs answers
// heartbeats meanwhile, so its leader does not step down for want of a
// quorum (RaftNode.takeEarlyMessages). Three RaftStores on the simulation's
// memory network and disks, one manual clock; a slow disk takes 2 s per
// write once the cluster has settled, 4-8 election timeouts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RaftNode } from '../../control-plane/raft/index.ts';
import { openSimStores } from '../helpers/sim-stores.ts';

const SLOW_SAVE_MS = 2000;

/**
 * Once a leader has settled, the saves of `slowed(leader, all)` take 2 s
 * each; a write proposed then is applied after them, with no election
 * meanwhile: every replica keeps the term and the leader.
 */
async function writeThroughSlowSaves(seed: number, slowed: (leader: string, all: string[]) => string[], what: string): Promise<void> {
  const slow = new Set<string>();
  const { clock, stores, runUntil, close } = await openSimStores(seed, (id) => (slow.has(id) ? SLOW_SAVE_MS : 1));
  try {
    await runUntil('a leader caught up', () => stores.some((s) => s.caughtUp()));
    const leader = stores.find((s) => s.isLeader())!;
    const term = leader.term();
    for (const id of slowed(
      leader.id,
      stores.map((s) => s.id),
    ))
      slow.add(id);
    let outcome: 'applied' | Error | null = null;
    const t0 = clock.now();
    void leader.propose({ type: 'node.register', at: clock.now(), node: { name: 'node-a', capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} } }).then(
      () => (outcome = 'applied'),
      (e: Error) => (outcome = e),
    );
    // Through the whole slow save, and after it: nobody campaigns.
    await runUntil('the write answered', () => outcome !== null, 10_000);
    for (const s of stores) {
      assert.equal(s.term(), term, `${s.id}'s term moved: an election while ${what} only waited for its disk`);
      assert.equal(s.leaderId(), leader.id, `${s.id} follows ${s.leaderId()}`);
    }
    assert.equal(outcome, 'applied');
    assert.ok(clock.now() - t0 >= SLOW_SAVE_MS, `applied after ${clock.now() - t0} ms, before the slow saves were done`);
  } finally {
    await close();
  }
}

test('a leader whose save hangs for 2 s keeps its followers: same term and leader, its write applied once the save is done', () =>
  writeThroughSlowSaves(11, (leader) => [leader], 'the leader'));

test("every replica's save hangs for 2 s at once (one disk under all three stalls): no election, and the write is applied after it", () =>
  writeThroughSlowSaves(12, (_leader, all) => all, 'every replica'));

test('takeEarlyMessages: a follower hands out its heartbeat responses while a Ready is outstanding, and nothing else', () => {
  const b = new RaftNode({
    id: 'b',
    peers: ['a', 'b', 'c'],
    electionTimeoutTicks: 10,
    heartbeatTicks: 2,
    random: () => 0,
    preVote: true,
    checkQuorum: true,
    maxEntriesPerMsg: 64,
    maxInflight: 8,
  });
  // The leader's first heartbeat raises b's term: its answer waits for the Ready that hands the term out.
  b.step({ type: 'heartbeat', from: 'a', to: 'b', term: 2, commit: 0, context: null });
  assert.deepEqual(b.takeEarlyMessages(), [], 'an answer in a term not yet handed out waits');
  const first = b.ready()!;
  assert.ok(first.messages.some((m) => m.type === 'heartbeatResponse'));
  // With that Ready outstanding (being saved): an append and a heartbeat arrive.
  b.step({ type: 'append', from: 'a', to: 'b', term: 2, prevLogIndex: 0, prevLogTerm: 0, commit: 0, entries: [{ index: 1, term: 2, kind: 'noop', data: new Uint8Array(0) }] });
  b.step({ type: 'heartbeat', from: 'a', to: 'b', term: 2, commit: 0, context: 'read-1' });
  const early = b.takeEarlyMessages();
  assert.deepEqual(early, [{ type: 'heartbeatResponse', from: 'b', to: 'a', term: 2, context: 'read-1' }]);
  assert.deepEqual(b.takeEarlyMessages(), [], 'taken once');
  b.advance(first);
  const next = b.ready()!;
  assert.deepEqual(
    next.messages.map((m) => m.type),
    ['appendResponse'],
    'the append is acknowledged only in the Ready that saves its entry',
  );
  assert.deepEqual(
    next.entries.map((e) => e.index),
    [1],
  );
});

test('takeLeaderMessages: a leader hands out its heartbeats while a Ready is outstanding; a follower or candidate hands out nothing', () => {
  const node = (id: string) =>
    new RaftNode({ id, peers: ['a', 'b', 'c'], electionTimeoutTicks: 10, heartbeatTicks: 2, random: () => 0, preVote: false, checkQuorum: false, maxEntriesPerMsg: 64, maxInflight: 8 });
  const a = node('a');
  // A follower, then a candidate: nothing (a candidate's vote requests wait for its term and vote on disk).
  assert.deepEqual(a.takeLeaderMessages(), []);
  for (let i = 0; i < 20 && a.status().role === 'follower'; i++) a.tick();
  assert.equal(a.status().role, 'candidate');
  assert.deepEqual(a.takeLeaderMessages(), []);
  const rd = a.ready()!;
  a.advance(rd);
  for (const from of ['b', 'c']) a.step({ type: 'voteResponse', from, to: 'a', term: a.status().term, reject: false });
  assert.equal(a.status().role, 'leader');
  const first = a.ready()!; // the new leader's empty entry and appends: "being saved" from here on
  for (let i = 0; i < 4; i++) a.tick();
  const early = a.takeLeaderMessages();
  assert.ok(
    early.some((m) => m.type === 'heartbeat' && m.to === 'b') && early.some((m) => m.type === 'heartbeat' && m.to === 'c'),
    `heartbeats to b and c while the Ready is outstanding: ${early.map((m) => `${m.type}->${m.to}`).join(', ')}`,
  );
  assert.deepEqual(a.takeLeaderMessages(), [], 'taken once');
  a.advance(first);
  const next = a.ready();
  assert.ok(next === null || !next.messages.some((m) => early.includes(m)), 'a message taken early is not in the next Ready again');
});
