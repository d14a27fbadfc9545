// A replica's autogroup (control-plane/priority.ts): set to its nice value
// only when the replica leads its own session, left alone when it shares its
// starter's, and nothing said where the kernel has none or they are off.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describePriority, sessionOf, setOwnAutogroup, type ProcFiles } from '../../control-plane/priority.ts';

/** A /proc of files given as text; a write is kept, or refused with `refuse`. */
function fakeProc(files: Record<string, string>, refuse?: string): ProcFiles & { writes: Array<[string, string]> } {
  const writes: Array<[string, string]> = [];
  return {
    writes,
    read(file) {
      if (!(file in files)) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
      return files[file];
    },
    write(file, text) {
      if (refuse) throw Object.assign(new Error(refuse), { code: refuse });
      writes.push([file, text]);
      files[file] = `/autogroup-7 nice ${text}\n`;
    },
  };
}

const stat = (pid: number, comm: string, sid: number) => `${pid} (${comm}) S 1 ${pid} ${sid} 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 11 0 1234 5678 99`;

test('the session id is read after the command name, whatever that name holds', () => {
  assert.equal(sessionOf(stat(42, 'node', 42)), 42);
  assert.equal(sessionOf(stat(42, 'a ) b (c)', 17)), 17);
  assert.equal(sessionOf('garbage'), null);
});

test('a session leader sets its autogroup to its nice value, once', () => {
  const proc = fakeProc({
    '/proc/self/autogroup': '/autogroup-7 nice 0\n',
    '/proc/sys/kernel/sched_autogroup_enabled': '1\n',
    '/proc/42/stat': stat(42, 'node', 42),
  });
  assert.deepEqual(setOwnAutogroup(-5, proc, 42), { kind: 'set', nice: -5 });
  assert.deepEqual(proc.writes, [['/proc/self/autogroup', '-5']]);
  // Already there: not written again.
  assert.deepEqual(setOwnAutogroup(-5, proc, 42), { kind: 'set', nice: -5 });
  assert.equal(proc.writes.length, 1);
});

test("a replica in its starter's session leaves that session's autogroup alone", () => {
  const proc = fakeProc({
    '/proc/self/autogroup': '/autogroup-7 nice 0\n',
    '/proc/sys/kernel/sched_autogroup_enabled': '1\n',
    '/proc/42/stat': stat(42, 'node', 40),
  });
  assert.deepEqual(setOwnAutogroup(-5, proc, 42), { kind: 'shared' });
  assert.deepEqual(proc.writes, []);
});

test('no autogroups, autogroups off, or a refusal: nothing written, and the reason kept', () => {
  assert.deepEqual(setOwnAutogroup(-5, fakeProc({ '/proc/42/stat': stat(42, 'node', 42) }), 42), { kind: 'absent' });
  const off = fakeProc({ '/proc/self/autogroup': '/autogroup-7 nice 0\n', '/proc/sys/kernel/sched_autogroup_enabled': '0\n', '/proc/42/stat': stat(42, 'node', 42) });
  assert.deepEqual(setOwnAutogroup(-5, off, 42), { kind: 'off' });
  assert.deepEqual(off.writes, []);
  const refused = fakeProc({ '/proc/self/autogroup': '/autogroup-7 nice 0\n', '/proc/sys/kernel/sched_autogroup_enabled': '1\n', '/proc/42/stat': stat(42, 'node', 42) }, 'EACCES');
  assert.deepEqual(setOwnAutogroup(-5, refused, 42), { kind: 'refused', error: 'EACCES' });
});

test('the log line says what became of the autogroup', () => {
  const ok = { ok: true as const, nice: -5, threads: 11 };
  assert.match(describePriority(-5, ok, { kind: 'set', nice: -5 }), /^priority: nice -5 on 11 threads, and its session's autogroup at nice -5 \(--nice -5\)/);
  assert.match(describePriority(-5, ok, { kind: 'shared' }), /leaves alone/);
  assert.match(describePriority(-5, ok, { kind: 'refused', error: 'EACCES' }), /autogroup stays as it was \(EACCES\)/);
  assert.equal(describePriority(-5, ok, { kind: 'off' }), describePriority(-5, ok));
});
