// rest-collect.ts: when a replica at rest collects its garbage and trims
// malloc (the decision, with made-up readings), that the collection it uses
// is V8's full one (a real object, unreachable, is gone after it), and what
// the shell logs. malloc-trim.test.ts checks the trim itself.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fullCollection, REST_COLLECTIONS_MAX, REST_SLACK_BYTES, REST_TRIM_EVERY_MS, RestCollector, startRestCollection } from '../../control-plane/rest-collect.ts';
import type { TrimResult } from '../../control-plane/malloc-trim.ts';
import { waitFor } from '../helpers/cluster.ts';

const opts = { minWorkMs: 1000, quietMs: 5000, maxBusy: 0.05 };

/** Feed one reading a second from `from` (s): busy shares, one per second; returns the seconds at which it said collect. */
function feed(c: RestCollector, from: number, busy: number[]): number[] {
  const said: number[] = [];
  busy.forEach((b, i) => {
    if (c.tick((from + i) * 1000, b, 1000) !== null) said.push(from + i);
  });
  return said;
}

test('after a burst, one collection once the loop has been quiet for quietMs; none again until the next burst', () => {
  const c = new RestCollector(opts);
  // A start with nothing done: quiet for a minute, no collection.
  assert.deepEqual(feed(c, 0, Array(60).fill(0.02)), []);
  // A burst: 4 s at 60% (2.4 s of work), then quiet.
  const said = feed(c, 60, [0.6, 0.6, 0.6, 0.6, ...Array(30).fill(0.02)]);
  assert.deepEqual(said, [64 + 5], 'once, when the quiet that began at 64 s has lasted 5 s');
  // Quiet goes on: nothing more.
  assert.deepEqual(feed(c, 94, Array(120).fill(0.01)), []);
});

test('a busy second resets the quiet; work too small to be a burst is never worth a collection', () => {
  const c = new RestCollector(opts);
  // 0.9 s of work in all, in sparse busy seconds: under minWorkMs.
  assert.deepEqual(feed(c, 0, [0.3, 0.02, 0.02, 0.3, 0.02, 0.3, ...Array(20).fill(0.02)]), []);
  // 0.2 s more: the burst is now 1.1 s; quiet must then last 5 s after the last busy second (30 s).
  assert.deepEqual(feed(c, 26, [0.2, 0.02, 0.02, 0.02, 0.6, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02]), [31 + 5], 'quiet from 31 s, after the last busy second');
});

test('a collection that leaves the heap holding much more than it uses is followed by another at each quiet tick, up to the most per rest; a burst ends it', () => {
  const c = new RestCollector(opts);
  const slack = REST_SLACK_BYTES + 1;
  // A burst, then quiet: the first collection at 4 + 5 s.
  assert.deepEqual(feed(c, 0, [0.6, 0.6, 0.6, 0.6, ...Array(6).fill(0.02)]), [9]);
  assert.equal(c.collected(true, slack), 1);
  // Still fragmented: the next quiet ticks collect again, each told what it left.
  assert.equal(c.tick(10_000, 0.01, 1000), 'again');
  assert.equal(c.collected(false, slack), 2);
  assert.equal(c.tick(11_000, 0.01, 1000), 'again');
  assert.equal(c.collected(false, slack), 3);
  assert.equal(c.tick(12_000, 0.01, 1000), 'again');
  assert.equal(c.collected(false, slack), REST_COLLECTIONS_MAX);
  // The most in one rest: no more, however much is held.
  assert.deepEqual(feed(c, 13, Array(60).fill(0.01)), []);

  // A collection that leaves little held beyond use ends the rest at once.
  const d = new RestCollector(opts);
  assert.deepEqual(feed(d, 0, [0.6, 0.6, 0.6, 0.6, ...Array(6).fill(0.02)]), [9]);
  assert.equal(d.collected(true, REST_SLACK_BYTES), 1);
  assert.deepEqual(feed(d, 10, Array(30).fill(0.01)), []);

  // A busy second between two collections of a rest delays the next one to a quiet tick;
  // a burst's worth of work (minWorkMs since the last collection) ends the rest: V8 collects as it allocates.
  const e = new RestCollector(opts);
  assert.deepEqual(feed(e, 0, [0.6, 0.6, 0.6, 0.6, ...Array(6).fill(0.02)]), [9]);
  e.collected(true, slack);
  assert.equal(e.tick(10_000, 0.3, 1000), null);
  assert.equal(e.tick(11_000, 0.06, 1000), null);
  assert.equal(e.tick(12_000, 0.01, 1000), 'again', 'the 0.36 s of work is no burst: the rest goes on');
  e.collected(false, slack);
  assert.equal(e.tick(13_000, 0.7, 1000), null);
  assert.equal(e.tick(14_000, 0.7, 1000), null);
  assert.deepEqual(feed(e, 15, Array(3).fill(0.01)), [], 'no collection of the ended rest (1.4 s of work since the last collection)');
});

test('fullCollection is V8 full collection: an unreachable object is gone after it', async () => {
  const collect = fullCollection();
  let held: object | null = { payload: new Array(1000).fill('x') };
  const ref = new WeakRef(held);
  held = null;
  // A WeakRef's target lives until the end of the job that made it.
  await new Promise((r) => setImmediate(r));
  collect();
  assert.equal(ref.deref(), undefined);
  assert.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined', 'no gc() left on the global object');
});

test('a rest whose heap in use is over maxHeapUsedBytes is not collected (its pause would be too long): said once, then nothing until the next burst', () => {
  const c = new RestCollector({ ...opts, maxHeapUsedBytes: 96 * 1048576 });
  const big = 220 * 1048576;
  const said: Array<string | null> = [];
  for (let s = 0; s < 4; s++) said.push(c.tick(s * 1000, 0.6, 1000, big));
  for (let s = 4; s < 40; s++) said.push(c.tick(s * 1000, 0.02, 1000, big));
  assert.deepEqual(
    said.map((d, s) => (d === null ? null : `${s}:${d}`)).filter((x) => x !== null),
    ['9:too-big'],
  );
  // The next burst, with a heap that has shrunk under the bound: collected as usual.
  for (let s = 40; s < 44; s++) assert.equal(c.tick(s * 1000, 0.6, 1000, big), null);
  const after: Array<string | null> = [];
  for (let s = 44; s < 60; s++) after.push(c.tick(s * 1000, 0.02, 1000, 60 * 1048576));
  assert.deepEqual(
    after.filter((d) => d !== null),
    ['first'],
  );
  // A rest that goes on collecting (fragmented heap) stops once the heap in use passes the bound.
  assert.equal(c.collected(true, REST_SLACK_BYTES + 1), 1);
  assert.equal(c.tick(60_000, 0.01, 1000, big), 'too-big');
  assert.equal(c.tick(61_000, 0.01, 1000, big), null);
});

test('malloc is trimmed again every REST_TRIM_EVERY_MS, at a quiet reading, while a rest that collected lasts; a burst ends that, and a trim without a collection counts for nothing', () => {
  const c = new RestCollector(opts);
  // No collection in this rest: no trim is ever due, whatever the shell says it did.
  c.trimmed(0);
  assert.equal(c.trimDue(REST_TRIM_EVERY_MS * 3), false);
  assert.deepEqual(feed(c, 0, [0.6, 0.6, 0.6, 0.6, ...Array(6).fill(0.02)]), [9]);
  c.collected(true, 0);
  assert.equal(c.trimDue(10_000), false, 'not before the trim after the collection');
  c.trimmed(10_000);
  assert.equal(c.trimDue(10_000 + REST_TRIM_EVERY_MS - 1), false);
  assert.equal(c.trimDue(10_000 + REST_TRIM_EVERY_MS), true);
  c.trimmed(10_000 + REST_TRIM_EVERY_MS);
  assert.equal(c.trimDue(10_000 + 2 * REST_TRIM_EVERY_MS - 1), false);
  assert.equal(c.trimDue(10_000 + 2 * REST_TRIM_EVERY_MS), true);
  // Not at a busy reading; at the next quiet one.
  assert.equal(c.tick(30_000, 0.3, 1000), null);
  assert.equal(c.trimDue(30_000), false);
  assert.equal(c.tick(31_000, 0.01, 1000), null);
  assert.equal(c.trimDue(31_000), true);
  c.trimmed(31_000);
  // A burst's worth of work ends the rest: no trim until the next rest's collection, even one told late.
  assert.equal(c.tick(40_000, 0.8, 1000), null);
  c.trimmed(40_500);
  assert.equal(c.tick(41_000, 0.01, 1000), null);
  assert.equal(c.trimDue(41_000 + 5 * REST_TRIM_EVERY_MS), false);
});

test('the shell trims malloc a tick and a half after each collection and logs what it gave back; where it cannot, it says why once', async () => {
  const lines: string[] = [];
  const answers: TrimResult[] = [
    { ok: false, why: 'malloc_trim unavailable: no such library' },
    { ok: false, why: 'malloc_trim unavailable: no such library' },
    { ok: true, rssBefore: 150 * 1048576, rssAfter: 120 * 1048576, ms: 3 },
  ];
  let calls = 0;
  // Every reading counts as quiet and no work is needed: each tick collects.
  const stop = startRestCollection(
    (l) => lines.push(l),
    () => null,
    { minWorkMs: 0, quietMs: 0, maxBusy: 2 },
    100,
    () => answers[Math.min(calls++, answers.length - 1)],
  );
  try {
    await waitFor('three collections logged', async () => lines.length >= 3 || null, 20000, 20);
  } finally {
    stop();
  }
  assert.match(lines[0], /^memory: collected at rest in \d+ ms: .*; malloc not trimmed: malloc_trim unavailable: no such library$/);
  assert.doesNotMatch(lines[1], /malloc/, 'the refusal is said once');
  assert.match(lines[2], /; malloc trimmed in 3 ms: RSS 150\.0 -> 120\.0 MiB$/);
});
