// test/unit/raft-store-pulse.test.ts -- a leader whose tick timer runs late
// (its event loop busy with a long round of agent frames, which Node runs
// before timers) still heartbeats from those frames (RaftStore.pulse), so
// its followers do not campaign against a leader that is working. Three
// RaftStores on the simulation's memory network and disks, one manual
// clock; the leader's ticker is held for 3 s, 6-12 election timeouts, while
// "agent frames" arrive every 10 ms (and, in the control case, while no
// frame of any kind reaches it).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RaftNode } from '../../control-plane/raft/index.ts';
import { openSimStores } from '../helpers/sim-stores.ts';

const HOLD_MS = 3000;

/** `withFrames`: agent frames reach the leader every 10 ms; without them, nothing does (its followers' frames to it are dropped too). */
async function holdLeaderTicks(withFrames: boolean): Promise<{ termBefore: number; terms: number[]; leaders: (string | null)[]; leader: string; wrote: boolean }> {
  const held = new Set<string>();
  const { clock, net, stores, runUntil, close } = await openSimStores(7, () => 1, { ticksHeld: (id) => held.has(id) });
  try {
    await runUntil('a leader caught up', () => stores.some((s) => s.caughtUp()));
    const leader = stores.find((s) => s.isLeader())!;
    const termBefore = leader.term();
    held.add(leader.id);
    // The agents' frames: each one calls pulse(), as AgentServer's onFrame does.
    const frames = withFrames ? clock.interval(() => leader.pulse(), 10) : null;
    // The control: nothing reaches the leader at all (a leader really silent, not busy).
    if (!withFrames) for (const s of stores) if (s !== leader) net.cutLink(s.id, leader.id);
    const t0 = clock.now();
    let wrote = false;
    void leader.propose({ type: 'node.register', at: clock.now(), node: { name: 'node-a', capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} } }).then(
      () => (wrote = true),
      () => {},
    );
    await runUntil('the hold is over', () => clock.now() - t0 >= HOLD_MS, HOLD_MS + 1000);
    clock.cancel(frames);
    return { termBefore, terms: stores.map((s) => s.term()), leaders: stores.map((s) => s.leaderId()), leader: leader.id, wrote };
  } finally {
    await close();
  }
}

test('a leader whose ticks are held for 3 s but which handles agent frames keeps its term and followers, and commits a write meanwhile', async () => {
  const r = await holdLeaderTicks(true);
  assert.deepEqual(r.terms, [r.termBefore, r.termBefore, r.termBefore], `terms moved from ${r.termBefore}: ${r.terms.join(', ')}`);
  assert.deepEqual(r.leaders, [r.leader, r.leader, r.leader]);
  assert.ok(r.wrote, 'the write proposed during the hold was applied');
});

test('a leader whose ticks are held for 3 s and to which no frame arrives falls silent: its followers campaign (the hold above is long enough to matter)', async () => {
  const r = await holdLeaderTicks(false);
  assert.ok(
    r.terms.some((t) => t > r.termBefore),
    `terms ${r.terms.join(', ')} after 3 s without heartbeats from ${r.leader}`,
  );
});

test('heartbeatNow: a leader sends a heartbeat to each peer and its check-quorum clock still counts only ticks; a follower sends nothing', () => {
  const node = (id: string) =>
    new RaftNode({ id, peers: ['a', 'b', 'c'], electionTimeoutTicks: 10, heartbeatTicks: 2, random: () => 0, preVote: false, checkQuorum: true, maxEntriesPerMsg: 64, maxInflight: 8 });
  const a = node('a');
  a.heartbeatNow();
  assert.equal(a.ready(), null, 'a follower has nothing to send');
  for (let i = 0; i < 20 && a.status().role === 'follower'; i++) a.tick();
  a.advance(a.ready()!);
  for (const from of ['b', 'c']) a.step({ type: 'voteResponse', from, to: 'a', term: a.status().term, reject: false });
  assert.equal(a.status().role, 'leader');
  a.advance(a.ready()!);
  a.heartbeatNow();
  const rd = a.ready()!;
  assert.deepEqual(
    rd.messages.filter((m) => m.type === 'heartbeat').map((m) => m.to),
    ['b', 'c'],
  );
  a.advance(rd);
  // Nobody answers: heartbeatNow keeps no lease alive; after two election
  // timeouts of ticks the leader steps down (check quorum), however many
  // rounds it sent in between.
  for (let i = 0; i < 25; i++) {
    a.heartbeatNow();
    a.tick();
    const r = a.ready();
    if (r) a.advance(r);
  }
  assert.equal(a.status().role, 'follower');
});
