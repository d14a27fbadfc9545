// test/unit/unit-log.test.ts -- unit log files (node-agent/runtime/unit-log.ts)
// and the agent's log streams (node-agent/runtime/log-streams.ts): the record
// format, partial lines, rotation, node-wide retention, tail/since/timestamps,
// following a live writer, the end of a stream, and backpressure. Real files
// in a temp dir (removed in t.after); the clock is injected; no processes.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LogDirectory, MAX_LOG_LINE_BYTES, UnitLog, formatRecord, parseRecord, unitOfLogFile } from '../../node-agent/runtime/unit-log.ts';
import { LogStreams, MAX_IN_FLIGHT_LOG_FRAMES, MAX_LOG_STREAMS_PER_CONNECTION, readUnitLog, type LogConnection } from '../../node-agent/runtime/log-streams.ts';
import { MAX_LOG_CHUNK_CHARS, type AgentMessage, type LogOpenMessage } from '../../shared/protocol/messages.ts';
import { validateAgentMessage } from '../../shared/protocol/validate.ts';

const T0 = Date.parse('2026-05-01T10:00:00.000Z');

function tempDir(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-unit-log-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A directory with a settable clock and its own caps. */
function logDir(t: TestContext, opts: { maxTotalBytes?: number; maxFiles?: number } = {}) {
  const dir = tempDir(t);
  const clock = { now: T0 };
  const d = new LogDirectory(dir, { ...opts, now: () => clock.now });
  const open = (name: string, maxBytes?: number) => new UnitLog(path.join(dir, `${name}.log`), maxBytes, d);
  return { dir, d, clock, open };
}

const lines = (file: string) => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);

test('a record is `<RFC 3339 ms> <stream> <text>`, and parses back', () => {
  const rec = formatRecord(T0 + 123, 'stderr', Buffer.from('héllo world'));
  assert.equal(rec.toString('utf8'), '2026-05-01T10:00:00.123Z stderr héllo world\n');
  assert.deepEqual(parseRecord('2026-05-01T10:00:00.123Z stderr héllo world'), {
    time: T0 + 123,
    stamp: '2026-05-01T10:00:00.123Z',
    stream: 'stderr',
    text: 'héllo world',
  });
  assert.deepEqual(parseRecord('2026-05-01T10:00:00.123Z stdout '), { time: T0 + 123, stamp: '2026-05-01T10:00:00.123Z', stream: 'stdout', text: '' });
  for (const bad of ['', 'hello', '2026-05-01T10:00:00.123Z stdin x', '2026-05-01 10:00:00.123Z stdout x']) assert.equal(parseRecord(bad), null, bad);
  assert.deepEqual(unitOfLogFile('web-1.log'), { name: 'web-1', rotated: false });
  assert.deepEqual(unitOfLogFile('web-1.log.1'), { name: 'web-1', rotated: true });
  assert.equal(unitOfLogFile('web-1.txt'), null);
  assert.equal(unitOfLogFile('.x.log'), null);
});

test('lines are stored one record each with the stream; stdout and stderr partial lines are held apart', (t) => {
  const { dir, clock, open } = logDir(t);
  const log = open('web-1');
  log.write(Buffer.from('one\ntw'));
  log.write(Buffer.from('oops\n'), 'stderr');
  log.write(Buffer.from('half'), 'stderr');
  clock.now += 5;
  log.write(Buffer.from('o\nthree\n'));
  assert.deepEqual(lines(path.join(dir, 'web-1.log')), [
    '2026-05-01T10:00:00.000Z stdout one',
    '2026-05-01T10:00:00.000Z stderr oops',
    '2026-05-01T10:00:00.005Z stdout two',
    '2026-05-01T10:00:00.005Z stdout three',
  ]);
  clock.now += 5;
  log.close(); // the held stderr partial line is written when the unit ends
  assert.equal(lines(path.join(dir, 'web-1.log')).at(-1), '2026-05-01T10:00:00.010Z stderr half');
  log.write(Buffer.from('after close\n'));
  assert.equal(lines(path.join(dir, 'web-1.log')).length, 5);
});

test('a line longer than the bound is written in pieces, never cutting a UTF-8 character', (t) => {
  const { dir, open } = logDir(t);
  const log = open('long-1');
  const long = 'é'.repeat(MAX_LOG_LINE_BYTES); // 2 bytes each: about two records' worth
  log.write(Buffer.from(long)); // no newline yet: flushed because it is too long
  const held = lines(path.join(dir, 'long-1.log'));
  assert.ok(held.length >= 1, 'the partial line was flushed past the bound');
  log.write(Buffer.from('\n'));
  log.close();
  const recs = lines(path.join(dir, 'long-1.log')).map((l) => parseRecord(l)!);
  assert.equal(recs.map((r) => r.text).join(''), long, 'the pieces are the line, in order');
  for (const r of recs) {
    assert.ok(Buffer.byteLength(r.text) <= MAX_LOG_LINE_BYTES);
    assert.ok(!r.text.includes('\ufffd'), 'no broken character');
  }
});

test('rotation keeps the current file and one older file, each within the cap, newest output always kept', (t) => {
  const { dir, open } = logDir(t);
  const maxBytes = 4096;
  const log = open('noisy-1', maxBytes);
  for (let i = 0; i < 1000; i++) log.write(Buffer.from(`line ${i}\n`));
  const cur = path.join(dir, 'noisy-1.log');
  assert.ok(fs.statSync(cur).size <= maxBytes);
  assert.ok(fs.statSync(`${cur}.1`).size <= maxBytes);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['noisy-1.log', 'noisy-1.log.1']);
  assert.ok(lines(cur).at(-1)!.endsWith(' stdout line 999'));
  // Whole records on both sides of the rotation, consecutive across the two files.
  const all = [...lines(`${cur}.1`), ...lines(cur)].map((l) => Number(parseRecord(l)!.text.slice(5)));
  assert.deepEqual(
    all,
    Array.from({ length: all.length }, (_, i) => 1000 - all.length + i),
  );
  assert.ok(all.length > 100);
});

test('node retention: over the byte cap, the longest-finished units go first, a live unit current file never', (t) => {
  const { dir, d, clock, open } = logDir(t, { maxTotalBytes: 3000 });
  const line = Buffer.from('x'.repeat(67) + '\n'); // 100-byte records
  const a = open('a-1');
  const b = open('b-1');
  const live = open('live-1');
  for (let i = 0; i < 8; i++) {
    a.write(line);
    b.write(line);
    live.write(line);
  }
  assert.equal(d.usage().bytes, 2400);
  clock.now += 1000;
  b.close(); // b finished first ...
  clock.now += 1000;
  a.close(); // ... then a
  assert.equal(d.usage().bytes, 2400, 'under the cap nothing is deleted');
  for (let i = 0; i < 7; i++) live.write(line); // 3100 bytes: over
  assert.equal(fs.existsSync(path.join(dir, 'b-1.log')), false, 'the unit that finished longest ago went');
  assert.equal(fs.existsSync(path.join(dir, 'a-1.log')), true);
  assert.equal(d.usage().bytes, 2300);
  for (let i = 0; i < 20; i++) live.write(line); // far over: a goes too, the live file stays
  assert.equal(fs.existsSync(path.join(dir, 'a-1.log')), false);
  assert.equal(lines(path.join(dir, 'live-1.log')).length, 35, 'a live unit current file is never deleted');
  assert.deepEqual(fs.readdirSync(dir), ['live-1.log']);
});

test('node retention: the file cap, rotated files of live units after finished units, logs left by an earlier agent', (t) => {
  const dir = tempDir(t);
  const clock = { now: T0 };
  // Logs of an earlier agent: finished at their mtime.
  fs.writeFileSync(path.join(dir, 'old-1.log'), '2026-05-01T09:00:00.000Z stdout old\n');
  fs.utimesSync(path.join(dir, 'old-1.log'), new Date(T0 - 3600_000), new Date(T0 - 3600_000));
  fs.writeFileSync(path.join(dir, 'old-2.log'), '2026-05-01T09:30:00.000Z stdout newer\n');
  fs.utimesSync(path.join(dir, 'old-2.log'), new Date(T0 - 1800_000), new Date(T0 - 1800_000));
  fs.writeFileSync(path.join(dir, 'not-a-log.txt'), 'left alone');
  const d = new LogDirectory(dir, { maxFiles: 4, now: () => clock.now });
  assert.deepEqual(d.usage().files, 2);
  const w1 = new UnitLog(path.join(dir, 'w-1.log'), 200, d);
  const w2 = new UnitLog(path.join(dir, 'w-2.log'), 200, d);
  assert.deepEqual(d.usage().files, 2, 'a live unit has no file before its first record');
  w2.write(Buffer.from('w2 start\n'));
  assert.deepEqual(d.usage().files, 3);
  for (let i = 0; i < 5; i++) w1.write(Buffer.from(`w1 line ${i}\n`)); // its file, then it rotates: 5 files
  assert.equal(fs.existsSync(path.join(dir, 'old-1.log')), false, 'the oldest finished log went first');
  assert.equal(fs.existsSync(path.join(dir, 'old-2.log')), true);
  for (let i = 0; i < 5; i++) w2.write(Buffer.from(`w2 line ${i}\n`)); // rotates: old-2 goes
  assert.equal(fs.existsSync(path.join(dir, 'old-2.log')), false);
  for (let i = 5; i < 10; i++) w2.write(Buffer.from(`w2 line ${i}\n`));
  // Nothing finished is left: the rotated files of live units go (w-1 runs longest), never the current ones.
  assert.ok(d.usage().files <= 4);
  assert.ok(fs.existsSync(path.join(dir, 'w-1.log')) && fs.existsSync(path.join(dir, 'w-2.log')));
  assert.ok(fs.existsSync(path.join(dir, 'not-a-log.txt')), 'only unit logs are counted and deleted');
  w1.close();
  w2.close();
});

test('readUnitLog: both files in order, since then tail, and null for no log', (t) => {
  const { d, clock, open } = logDir(t);
  const log = open('web-1', 300);
  for (let i = 1; i <= 12; i++) {
    clock.now = T0 + i * 1000;
    log.write(Buffer.from(`line ${i}\n`));
  }
  log.close();
  assert.ok(fs.existsSync(d.rotatedPath('web-1')), 'the log rotated');
  const all = readUnitLog(d, 'web-1')!;
  const rotatedCount = lines(d.rotatedPath('web-1')).length;
  assert.equal(all.length, rotatedCount + lines(d.currentPath('web-1')).length);
  assert.deepEqual(
    all.map((l) => l.text),
    Array.from({ length: all.length }, (_, i) => `line ${12 - all.length + 1 + i}`),
  );
  assert.deepEqual(
    readUnitLog(d, 'web-1', { tailLines: 3 })!.map((l) => l.text),
    ['line 10', 'line 11', 'line 12'],
  );
  assert.deepEqual(readUnitLog(d, 'web-1', { tailLines: 0 }), []);
  assert.deepEqual(
    readUnitLog(d, 'web-1', { sinceMs: T0 + 11_000 })!.map((l) => l.text),
    ['line 11', 'line 12'],
  );
  assert.deepEqual(
    readUnitLog(d, 'web-1', { sinceMs: T0 + 8_000, tailLines: 1 })!.map((l) => `${l.stamp} ${l.text}`),
    ['2026-05-01T10:00:12.000Z line 12'],
  );
  assert.equal(readUnitLog(d, 'nope-1'), null);
  assert.equal(readUnitLog(d, '../etc/passwd'), null);
});

test('a file comes with the first record: a silent live unit reads as empty, and ends with an empty file; one removed leaves none', (t) => {
  const { dir, d, open } = logDir(t);
  const quiet = open('quiet-1');
  assert.equal(fs.existsSync(d.currentPath('quiet-1')), false, 'no file while the unit wrote nothing');
  assert.deepEqual(readUnitLog(d, 'quiet-1'), [], 'a live unit without output has an empty log, not none');
  assert.deepEqual(d.usage(), { bytes: 0, files: 0 });
  quiet.close();
  assert.equal(fs.statSync(d.currentPath('quiet-1')).size, 0, 'it ended with an empty file');
  assert.deepEqual(readUnitLog(d, 'quiet-1'), []);
  assert.deepEqual(d.usage(), { bytes: 0, files: 1 });

  const talk = open('talk-1');
  talk.write(Buffer.from('hello\n'));
  assert.deepEqual(lines(d.currentPath('talk-1')), ['2026-05-01T10:00:00.000Z stdout hello']);
  assert.deepEqual(d.usage(), { bytes: lines(d.currentPath('talk-1'))[0].length + 1, files: 2 });

  const gone = open('gone-1');
  gone.remove();
  assert.equal(fs.existsSync(d.currentPath('gone-1')), false);
  assert.equal(readUnitLog(d, 'gone-1'), null);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['quiet-1.log', 'talk-1.log']);
});

test('a writer appends to a file an earlier agent left under its name, and counts its bytes once', (t) => {
  const dir = tempDir(t);
  const old = '2026-05-01T09:00:00.000Z stdout before\n';
  fs.writeFileSync(path.join(dir, 'again-1.log'), old);
  const d = new LogDirectory(dir, { now: () => T0 });
  const log = new UnitLog(path.join(dir, 'again-1.log'), undefined, d);
  assert.deepEqual(
    readUnitLog(d, 'again-1')!.map((l) => l.text),
    ['before'],
    'readable before the writer writes',
  );
  log.write(Buffer.from('after\n'));
  assert.deepEqual(
    readUnitLog(d, 'again-1')!.map((l) => l.text),
    ['before', 'after'],
  );
  assert.deepEqual(d.usage(), { bytes: fs.statSync(path.join(dir, 'again-1.log')).size, files: 1 });
  log.close();
  assert.deepEqual(d.usage(), { bytes: fs.statSync(path.join(dir, 'again-1.log')).size, files: 1 });
});
/** A fake connection: frames are collected; writes complete when `release` is called (or at once). */
function fakeConn(autoWrite = true) {
  const frames: AgentMessage[] = [];
  const unwritten: Array<() => void> = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const conn: LogConnection = {
    sendLog(msg, onWritten) {
      const v = validateAgentMessage(msg);
      assert.ok(v.ok, `a valid frame: ${v.ok ? '' : v.error}`);
      frames.push(msg);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const done = () => {
        inFlight--;
        onWritten();
      };
      if (autoWrite) queueMicrotask(done);
      else unwritten.push(done);
      return true;
    },
  };
  return {
    conn,
    frames,
    get maxInFlight() {
      return maxInFlight;
    },
    release() {
      for (const f of unwritten.splice(0)) f();
    },
    text: (id: string) =>
      frames
        .filter((f) => f.type === 'log-data' && f.requestId === id)
        .map((f) => (f as { data: string }).data)
        .join(''),
    end: (id: string) => frames.find((f) => f.type === 'log-end' && f.requestId === id) as { error?: string } | undefined,
  };
}

function openMsg(requestId: string, name: string, extra: Partial<LogOpenMessage> = {}): LogOpenMessage {
  return { v: 1, type: 'log-open', requestId, name, follow: false, timestamps: false, ...extra };
}

const tick = () => new Promise((r) => setImmediate(r));

test('log-open: whole lines without the stream tag, --timestamps prefixes the time, then log-end; unknown unit is an error', async (t) => {
  const { d, clock, open } = logDir(t);
  const log = open('web-1');
  log.write(Buffer.from('a\nb\n'));
  clock.now += 1;
  log.write(Buffer.from('c\n'), 'stderr');
  const streams = new LogStreams({ directory: d, nodeName: 'node-a' });
  const c = fakeConn();
  streams.open(c.conn, openMsg('r1', 'web-1', { tailLines: 2 }));
  streams.open(c.conn, openMsg('r2', 'web-1', { timestamps: true }));
  streams.open(c.conn, openMsg('r3', 'web-9'));
  await tick();
  assert.equal(c.text('r1'), 'b\nc\n');
  assert.deepEqual(c.end('r1'), { v: 1, type: 'log-end', requestId: 'r1' });
  assert.equal(c.text('r2'), '2026-05-01T10:00:00.000Z a\n2026-05-01T10:00:00.000Z b\n2026-05-01T10:00:00.001Z c\n');
  assert.equal(c.end('r3')?.error, 'no log for unit web-9 on node node-a');
  assert.equal(streams.size, 0);
  log.close();
});

test('log-open with follow: the snapshot, then new lines as written (since applies), log-end once the unit ended', async (t) => {
  const { d, clock, open } = logDir(t);
  const log = open('web-1');
  log.write(Buffer.from('old 1\nold 2\n'));
  const streams = new LogStreams({ directory: d, nodeName: 'node-a' });
  const c = fakeConn();
  streams.open(c.conn, openMsg('f1', 'web-1', { follow: true, tailLines: 1 }));
  await tick();
  assert.equal(c.text('f1'), 'old 2\n');
  clock.now += 10;
  log.write(Buffer.from('new 3\npart'));
  await tick();
  assert.equal(c.text('f1'), 'old 2\nnew 3\n', 'a new line arrives at once; a partial line waits');
  assert.equal(c.end('f1'), undefined, 'still following');
  log.close();
  await tick();
  assert.equal(c.text('f1'), 'old 2\nnew 3\npart\n', 'the held partial line is written when the unit ends');
  assert.deepEqual(c.end('f1'), { v: 1, type: 'log-end', requestId: 'f1' });
  assert.equal(streams.size, 0);
  // Following a unit that has ended: everything, then the end.
  streams.open(c.conn, openMsg('f2', 'web-1', { follow: true }));
  await tick();
  assert.equal(c.text('f2'), 'old 1\nold 2\nnew 3\npart\n');
  assert.ok(c.end('f2'));
});

test('log-close and a closed connection stop a follower without a word; the per-connection limit holds', async (t) => {
  const { d, open } = logDir(t);
  const log = open('web-1');
  const streams = new LogStreams({ directory: d, nodeName: 'node-a' });
  const c = fakeConn();
  streams.open(c.conn, openMsg('f1', 'web-1', { follow: true }));
  streams.open(c.conn, openMsg('f2', 'web-1', { follow: true }));
  await tick();
  streams.close(c.conn, 'f1');
  log.write(Buffer.from('after close\n'));
  await tick();
  assert.equal(c.text('f1'), '');
  assert.equal(c.text('f2'), 'after close\n');
  streams.closeConnection(c.conn);
  log.write(Buffer.from('gone\n'));
  await tick();
  assert.equal(c.text('f2'), 'after close\n');
  assert.equal(c.frames.filter((f) => f.type === 'log-end').length, 0);
  assert.equal(streams.size, 0);
  for (let i = 0; i < MAX_LOG_STREAMS_PER_CONNECTION; i++) streams.open(c.conn, openMsg(`m${i}`, 'web-1', { follow: true }));
  streams.open(c.conn, openMsg('one-too-many', 'web-1', { follow: true }));
  assert.match(c.end('one-too-many')?.error ?? '', /too many log streams on this connection \(max 16\)/);
  assert.equal(streams.size, MAX_LOG_STREAMS_PER_CONNECTION);
  streams.closeConnection(c.conn);
  log.close();
});

test('backpressure: frames wait for the socket write callback; chunks are whole lines within the frame limit', async (t) => {
  const { d, open } = logDir(t);
  const log = open('big-1', 4 * 1024 * 1024);
  const text = Array.from({ length: 40_000 }, (_, i) => `line ${i} ${'.'.repeat(i % 50)}`);
  log.write(Buffer.from(text.join('\n') + '\n'));
  const streams = new LogStreams({ directory: d, nodeName: 'node-a' });
  const c = fakeConn(false);
  streams.open(c.conn, openMsg('b1', 'big-1', { follow: true }));
  await tick();
  assert.equal(c.frames.length, MAX_IN_FLIGHT_LOG_FRAMES, 'no more than the in-flight bound before the socket writes');
  while (!c.end('b1')) {
    c.release();
    await tick();
    if (c.frames.length > 1000) assert.fail('runaway');
    if (c.frames.filter((f) => f.type === 'log-data').length * MAX_LOG_CHUNK_CHARS > 2 * text.join('\n').length) assert.fail('too many frames');
    if (!c.end('b1') && c.text('b1').length === text.join('\n').length + 1) log.close();
  }
  assert.ok(c.maxInFlight <= MAX_IN_FLIGHT_LOG_FRAMES);
  for (const f of c.frames)
    if (f.type === 'log-data') {
      assert.ok(f.data.length <= MAX_LOG_CHUNK_CHARS);
      assert.ok(f.data.endsWith('\n'));
    }
  assert.equal(c.text('b1'), text.join('\n') + '\n');
});
