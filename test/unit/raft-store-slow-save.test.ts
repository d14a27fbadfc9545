// test/unit/raft-store-slow-save.test.ts -- a leader whose own save hangs
// for seconds (a compaction ahead of it in the storage queue, a busy disk)
// keeps sending heartbeats meanwhile, so its followers do not campaign
// (RaftNode.takeLeaderMessages); a follower whose save hangs answers
// heartbeats meanwhile, so its leader does not step down for want of a
// quorum (RaftNode.takeEarlyMessages); a write its two followers saved is
// applied during the leader's own save (RaftNode.takeCommittedDuringSave),
// and a write proposed during that save has its appends sent at once
// (RaftStore.sendAppendsSoon). Three RaftStores on the simulation's
// memory network and disks, one manual clock; a slow disk takes 2 s per
// write once the cluster has settled, 4-8 election timeouts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RaftNode } from '../../control-plane/raft/index.ts';
import { openSimStores } from '../helpers/sim-stores.ts';

const SLOW_SAVE_MS = 2000;

/**
 * Once a leader has settled, the saves of `slowed(leader, all)` take 2 s
 * each; a write proposed then is applied, with no election meanwhile:
 * every replica keeps the term and the leader. `applied` says when: 'after'
 * the slow saves, or 'during' them (the two followers saved it, a majority
 * without the leader: RaftNode.takeCommittedDuringSave).
 */
async function writeThroughSlowSaves(seed: number, slowed: (leader: string, all: string[]) => string[], what: string, applied: 'during' | 'after'): Promise<void> {
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
    if (applied === 'after') assert.ok(clock.now() - t0 >= SLOW_SAVE_MS, `applied after ${clock.now() - t0} ms, before the slow saves were done`);
    else assert.ok(clock.now() - t0 < SLOW_SAVE_MS, `applied after ${clock.now() - t0} ms: it waited for the leader's own save, though both followers had saved it`);
  } finally {
    await close();
  }
}

test('a leader whose save hangs for 2 s keeps its followers: same term and leader, and its write applied before the save is done (the two followers hold it)', () =>
  writeThroughSlowSaves(11, (leader) => [leader], 'the leader', 'during'));

test("every replica's save hangs for 2 s at once (one disk under all three stalls): no election, and the write is applied after it", () =>
  writeThroughSlowSaves(12, (_leader, all) => all, 'every replica', 'after'));

test('a write proposed while the leader saves the one before has its appends sent at once, not after that save (RaftStore.sendAppendsSoon)', async () => {
  const slow = new Set<string>();
  const held = new Set<string>();
  const { clock, net, stores, runUntil, close } = await openSimStores(13, (id) => (slow.has(id) ? SLOW_SAVE_MS : 1), { ticksHeld: (id) => held.has(id) });
  try {
    await runUntil('a leader caught up', () => stores.some((s) => s.caughtUp()));
    const leader = stores.find((s) => s.isLeader())!;
    // When each entry's first append left the leader, by the clock.
    const sentAt = new Map<number, number>();
    const sendFrame = net.sendFrame.bind(net);
    net.sendFrame = (from, to, msgs) => {
      if (from === leader.id) for (const m of msgs) if (m.type === 'append') for (const e of m.entries) if (!sentAt.has(e.index)) sentAt.set(e.index, clock.now());
      sendFrame(from, to, msgs);
    };
    // The leader's saves take 2 s and its ticks do not run (they would send its messages too):
    // only its next Ready or sendAppendsSoon can send an append.
    slow.add(leader.id);
    held.add(leader.id);
    let answered = 0;
    const register = (name: string) =>
      void leader.propose({ type: 'node.register', at: clock.now(), node: { name, capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} } }).finally(() => answered++);
    register('node-a');
    await runUntil('the first write sent with its Ready', () => sentAt.size > 0, 100);
    const first = Math.max(...sentAt.keys());
    const t0 = clock.now();
    register('node-b');
    await runUntil("the second write's append sent during the first write's save", () => sentAt.has(first + 1), SLOW_SAVE_MS / 2);
    assert.ok(sentAt.get(first + 1)! - t0 < 10, `sent ${sentAt.get(first + 1)! - t0} ms after it was proposed`);
    held.clear();
    await runUntil('both writes answered', () => answered === 2, 10_000);
  } finally {
    await close();
  }
});

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

test('takeCommittedDuringSave: a leader hands out, while its Ready is saved, the entries both followers hold: each once, none it has not begun to save, none to a follower', () => {
  const node = (id: string) =>
    new RaftNode({ id, peers: ['a', 'b', 'c'], electionTimeoutTicks: 10, heartbeatTicks: 2, random: () => 0, preVote: false, checkQuorum: false, maxEntriesPerMsg: 64, maxInflight: 8 });
  const a = node('a');
  for (let i = 0; i < 20 && a.status().role === 'follower'; i++) a.tick();
  a.advance(a.ready()!);
  const term = a.status().term;
  for (const from of ['b', 'c']) a.step({ type: 'voteResponse', from, to: 'a', term, reject: false });
  assert.equal(a.status().role, 'leader');
  const ack = (from: string, index: number) => a.step({ type: 'appendResponse', from, to: 'a', term, reject: false, index, hintIndex: index });
  // The leader's empty entry (index 1), saved and acknowledged: committed and applied.
  a.advance(a.ready()!);
  ack('b', 1);
  a.advance(a.ready()!);
  assert.equal(a.status().applied, 1);
  const data = (s: string) => new TextEncoder().encode(s);
  assert.ok(a.propose(data('x')).ok); // index 2
  const saving = a.ready()!; // index 2 is being saved from here on
  assert.deepEqual(
    saving.entries.map((e) => e.index),
    [2],
  );
  assert.ok(a.propose(data('y')).ok); // index 3: proposed during the save, not handed out yet
  assert.deepEqual(a.takeCommittedDuringSave(16), [], 'nothing is committed yet');
  ack('b', 3);
  assert.deepEqual(a.takeCommittedDuringSave(16), [], 'one follower and an unsaved leader are not a majority');
  ack('c', 3);
  assert.deepEqual(
    a.takeCommittedDuringSave(16).map((e) => e.index),
    [2],
    'both followers hold 2 and 3: 2 is handed out, 3 waits for the Ready that saves it',
  );
  assert.deepEqual(a.takeCommittedDuringSave(16), [], 'taken once');
  a.advance(saving);
  assert.equal(a.status().applied, 2);
  const next = a.ready()!;
  assert.deepEqual(
    next.committedEntries.map((e) => e.index),
    [3],
    'the next Ready applies from 3: 2 is not handed out again',
  );
  // A follower hands out nothing, Ready outstanding or not.
  const b = node('b');
  b.step({ type: 'append', from: 'a', to: 'b', term, prevLogIndex: 0, prevLogTerm: 0, commit: 1, entries: [{ index: 1, term, kind: 'noop', data: new Uint8Array(0) }] });
  const rd = b.ready()!;
  assert.deepEqual(b.takeCommittedDuringSave(16), []);
  b.advance(rd);
});
