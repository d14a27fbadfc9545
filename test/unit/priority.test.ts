// test/unit/priority.test.ts -- reading the kernel's autogroup line and the
// line a replica logs about its priority, and the leader's step ahead of its
// followers (control-plane/priority.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { autogroupNice, describePriority, leaderNice, MIN_NICE, RolePriority, type PriorityOutcome } from '../../control-plane/priority.ts';

test('autogroupNice reads the nice value of a /proc/PID/autogroup line, and nothing else', () => {
  assert.equal(autogroupNice('/autogroup-14770 nice 0\n'), 0);
  assert.equal(autogroupNice('/autogroup-3 nice -5'), -5);
  assert.equal(autogroupNice('/autogroup-3 nice 19\n'), 19);
  // What the kernel shows a process outside the root cpu cgroup, or garbage.
  assert.equal(autogroupNice(''), null);
  assert.equal(autogroupNice('/autogroup-3 nice\n'), null);
  assert.equal(autogroupNice('autogroup-3 nice 0'), null);
});

test("the priority line says what became of the session's autogroup", () => {
  const ok = (autogroup: Parameters<typeof describePriority>[1] & { ok: true }) => describePriority(-5, autogroup);
  assert.match(ok({ ok: true, nice: -5, threads: 11, autogroup: { kind: 'set' } }), /^priority: nice -5 on 11 threads, and its session's autogroup too \(--nice -5\)/);
  assert.match(
    ok({ ok: true, nice: -5, threads: 1, autogroup: { kind: 'shared', session: 42 } }),
    /on 1 thread \(its autogroup is left alone: the replica shares session 42 with other processes/,
  );
  assert.match(ok({ ok: true, nice: -5, threads: 2, autogroup: { kind: 'refused', error: 'EACCES' } }), /autogroup refused it: EACCES/);
  assert.match(ok({ ok: true, nice: -5, threads: 2, autogroup: { kind: 'none' } }), /^priority: nice -5 on 2 threads \(--nice -5\)/);
  assert.match(describePriority(-5, { ok: false, nice: 0, error: 'EACCES' }), /^priority: stays at nice 0: --nice -5 was refused \(EACCES/);
});

test('a leader runs 5 nice steps ahead of its followers, only when the replica raises its priority at all', () => {
  assert.equal(leaderNice(-10), -15);
  assert.equal(leaderNice(-1), -6);
  assert.equal(leaderNice(-18), MIN_NICE, 'never below -20');
  assert.equal(leaderNice(MIN_NICE), MIN_NICE);
  // --nice 0 (or a lower priority) leaves both roles alone.
  assert.equal(leaderNice(0), 0);
  assert.equal(leaderNice(5), 5);
});

test('RolePriority moves the threads as the role changes, once per change, and not at all when the start was refused', () => {
  const calls: number[] = [];
  let refuse = false;
  const set = (nice: number): PriorityOutcome => {
    calls.push(nice);
    return refuse ? { ok: false, nice: -10, error: 'EPERM' } : { ok: true, nice, threads: 9, autogroup: { kind: 'set' } };
  };
  const p = new RolePriority(-10, true, set);
  assert.equal(p.update(false), null, 'a follower at start is already at its value');
  assert.match(p.update(true) ?? '', /^priority: as leader, nice -15 on 9 threads, and its session's autogroup too/);
  assert.equal(p.update(true), null, 'still leader: nothing to do');
  assert.match(p.update(false) ?? '', /^priority: as a follower, nice -10 on 9 threads/);
  assert.deepEqual(calls, [-15, -10]);
  refuse = true;
  assert.match(p.update(true) ?? '', /^priority: as leader, stays at nice -10: nice -15 was refused \(EPERM\)/);
  refuse = false;
  assert.match(p.update(true) ?? '', /nice -15/, 'a refused move is tried again at the next change');

  const unprivileged: number[] = [];
  const q = new RolePriority(-10, false, (nice) => {
    unprivileged.push(nice);
    return { ok: true, nice, threads: 1, autogroup: { kind: 'none' } };
  });
  assert.equal(q.update(true), null);
  assert.deepEqual(unprivileged, [], 'a replica whose start-up priority was refused tries nothing later');
});
