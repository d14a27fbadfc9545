// test/unit/event-loop-windows.test.ts -- the event-loop windows a replica
// keeps for `npm run bench` (control-plane/event-loop-windows.ts): the ring
// keeps the newest windows in order, `since` answers those closed after a
// time, the summary takes the longest stop and the worst p99, and a
// histogram's nanoseconds become milliseconds.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WindowRing, parseSchedstat, sumOf, summarize, windowOf, type LoopWindow } from '../../control-plane/event-loop-windows.ts';

const w = (end: number, p99Ms: number, maxMs: number): LoopWindow => ({ end, ms: 1000, p50Ms: 1, p99Ms, maxMs, samples: 200 });

test('the ring keeps the newest windows, oldest first, and answers those closed after a time', () => {
  const r = new WindowRing(3);
  for (let i = 1; i <= 5; i++) r.push(w(i * 1000, i, i * 10));
  assert.equal(r.size, 3);
  assert.deepEqual(
    r.since(0).map((x) => x.end),
    [3000, 4000, 5000],
  );
  assert.deepEqual(
    r.since(3000).map((x) => x.end),
    [4000, 5000],
  );
  assert.deepEqual(
    r.since(3500).map((x) => x.end),
    [4000, 5000],
  );
  assert.deepEqual(r.since(5000), []);
});

test('a summary takes the longest stop, the worst and the median p99, and the span', () => {
  const s = summarize([w(1000, 2, 7), w(2000, 40, 180), w(3000, 3, 9)]);
  assert.deepEqual(s, { windows: 3, fromMs: 0, toMs: 3000, maxMs: 180, worstP99Ms: 40, medianP99Ms: 3 });
  assert.deepEqual(summarize([]), { windows: 0, fromMs: null, toMs: null, maxMs: 0, worstP99Ms: 0, medianP99Ms: 0 });
});

test("a histogram's nanoseconds are told in milliseconds; a window without a sample claims no stop of its own", () => {
  const h = { count: 10, max: 123_456_789, percentile: (p: number) => (p === 50 ? 5_100_000 : 60_000_000) };
  assert.deepEqual(windowOf(h, 5000, 1000), { end: 5000, ms: 1000, p50Ms: 5.1, p99Ms: 60, maxMs: 123.46, samples: 10 });
  assert.deepEqual(windowOf({ count: 0, max: 0, percentile: () => 0 }, 5000, 1000), { end: 5000, ms: 1000, p50Ms: 0, p99Ms: 0, maxMs: 0, samples: 0 });
});

test("a window carries where its time went; schedstat's nanoseconds are read, and sums skip windows that do not say", () => {
  const h = { count: 10, max: 250_000_000, percentile: () => 1_000_000 };
  const win = windowOf(h, 5000, 1000, { cpuMs: 310.5, runWaitMs: 402, gcMs: 12.25, gcMaxMs: 9.5 });
  assert.deepEqual(win, { end: 5000, ms: 1000, p50Ms: 1, p99Ms: 1, maxMs: 250, samples: 10, cpuMs: 310.5, runWaitMs: 402, gcMs: 12.25, gcMaxMs: 9.5 });
  assert.deepEqual(parseSchedstat('599438928 123792680 1406\n'), { cpuNs: 599438928, waitNs: 123792680 });
  assert.equal(parseSchedstat(''), null);
  assert.equal(parseSchedstat('not a schedstat'), null);
  assert.equal(sumOf([win, w(6000, 1, 1), { ...win, runWaitMs: 98 }], 'runWaitMs'), 500);
  assert.equal(sumOf([w(6000, 1, 1)], 'cpuMs'), undefined);
});
