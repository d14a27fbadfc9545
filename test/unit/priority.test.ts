// test/unit/priority.test.ts -- reading the kernel's autogroup line and the
// line a replica logs about its priority (control-plane/priority.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { autogroupNice, describePriority } from '../../control-plane/priority.ts';

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
