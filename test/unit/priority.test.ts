// test/unit/priority.test.ts -- reading the kernel's autogroup line and the
// line a replica logs about its priority, and the value each role runs at
// (control-plane/priority.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { autogroupNice, describePriority, FOLLOWER_NICE_STEP, RolePriority, roleNice, type PriorityOutcome } from '../../control-plane/priority.ts';

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
  const ok = (autogroup: Parameters<typeof describePriority>[1] & { ok: true }) => describePriority(-10, autogroup);
  assert.match(
    ok({ ok: true, nice: -5, threads: 11, autogroup: { kind: 'set' } }),
    /^priority: nice -5 on 11 threads, and its session's autogroup too \(--nice -10; -10 while it leads\)/,
  );
  assert.match(
    ok({ ok: true, nice: -5, threads: 1, autogroup: { kind: 'shared', session: 42 } }),
    /on 1 thread \(its autogroup is left alone: the replica shares session 42 with other processes/,
  );
  assert.match(ok({ ok: true, nice: -5, threads: 2, autogroup: { kind: 'refused', error: 'EACCES' } }), /autogroup refused it: EACCES/);
  assert.match(ok({ ok: true, nice: -5, threads: 2, autogroup: { kind: 'none' } }), /^priority: nice -5 on 2 threads \(--nice -10; -10 while it leads\)/);
  assert.match(describePriority(-5, { ok: false, nice: 0, error: 'EACCES' }), /^priority: stays at nice 0: --nice -5 was refused \(EACCES/);
  // Asked for a value that a follower keeps too: no second value named.
  assert.match(describePriority(0, { ok: true, nice: 0, threads: 3, autogroup: { kind: 'set' } }), /\(--nice 0\): the control plane/);
});

test('the leader runs at the nice value asked for, a follower a step nicer but never above 0', () => {
  assert.equal(roleNice(-10, true), -10);
  assert.equal(roleNice(-10, false), -10 + FOLLOWER_NICE_STEP);
  assert.equal(roleNice(-3, false), 0, 'never nicer than a default process');
  assert.equal(roleNice(-20, false), -20 + FOLLOWER_NICE_STEP);
  // Asked for 0 or more: the same in every role (no right is needed to keep it).
  assert.equal(roleNice(0, false), 0);
  assert.equal(roleNice(5, true), 5);
  assert.equal(roleNice(5, false), 5);
});

test('a replica starts at the follower value, moves on each change of role or of its peers, and stops trying once refused', () => {
  const calls: number[] = [];
  const lines: string[] = [];
  let refuse = false;
  const set = (nice: number): PriorityOutcome => {
    calls.push(nice);
    return refuse ? { ok: false, nice: -5, error: 'EPERM' } : { ok: true, nice, threads: 9, autogroup: { kind: 'set' } };
  };
  const p = new RolePriority(-10, (l) => lines.push(l), set);
  assert.equal(p.start().ok, true);
  assert.match(lines[0], /^priority: nice -5 on 9 threads, and its session's autogroup too \(--nice -10; -10 while it leads\)/);
  p.update(false, true); // a candidate, or a follower again: no change
  p.update(true, true);
  assert.match(lines[1], /^priority: nice -10 on 9 threads and its autogroup now that it leads$/);
  p.update(true, false); // a leader with a follower down: still the full value, nothing to do
  p.update(false, true);
  assert.match(lines[2], /^priority: nice -5 on 9 threads and its autogroup now that it follows with every replica up$/);
  // A follower that cannot reach every replica may be the leader's only one: the full value.
  p.update(false, false);
  assert.match(lines[3], /^priority: nice -10 on 9 threads and its autogroup now that it follows with a replica unreachable$/);
  p.update(false, true);
  assert.deepEqual(calls, [-5, -10, -5, -10, -5]);
  refuse = true;
  p.update(true, true);
  assert.match(lines[5], /^priority: stays at nice -5: nice -10 now that it leads was refused \(EPERM\); no further changes$/);
  p.update(false, true);
  p.update(true, true);
  assert.deepEqual(calls, [-5, -10, -5, -10, -5, -10], 'no try after a refusal');
  assert.equal(lines.length, 6);

  // Refused at the start (no root, no CAP_SYS_NICE): it runs as started in every role.
  const none: number[] = [];
  const q = new RolePriority(
    -10,
    () => {},
    (nice) => (none.push(nice), { ok: false, nice: 0, error: 'EACCES' }),
  );
  assert.equal(q.start().ok, false);
  q.update(true, true);
  assert.deepEqual(none, [-5]);
  // Asked for 0: nothing moves when it leads.
  const zero: number[] = [];
  const z = new RolePriority(
    0,
    () => {},
    (nice) => (zero.push(nice), { ok: true, nice, threads: 1, autogroup: { kind: 'none' } }),
  );
  z.start();
  z.update(true, true);
  z.update(false, false);
  assert.deepEqual(zero, [0]);
});
