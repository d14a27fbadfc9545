// test/unit/pending-hold.test.ts -- a unit's Pending report waits
// PENDING_HOLD_MS for the report that overtakes it (node-agent/pending-hold.ts):
// a start that runs within the hold is one report, Running; a slow start is
// reported Pending at the end of the hold and Running after; every other
// report goes out at once and in order.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../shared/clock.ts';
import type { UnitReport } from '../../shared/model.ts';
import { PENDING_HOLD_MS, PendingHold } from '../../node-agent/pending-hold.ts';

function report(name: string, phase: UnitReport['phase']): UnitReport {
  return { name, deployment: 'web', phase, resources: { cpu: 100, memory: 64 }, term: 1, ready: phase === 'Running' };
}

function harness() {
  const clock = new ManualClock(1000);
  const sent: Array<{ at: number; name: string; phase: string }> = [];
  const hold = new PendingHold((r) => sent.push({ at: clock.now(), name: r.name, phase: r.phase }), clock);
  return { clock, sent, hold };
}

test('a start that runs within the hold is one report: Running, at once', () => {
  const { clock, sent, hold } = harness();
  hold.report(report('web-1', 'Pending'));
  assert.deepEqual(sent, [], 'Pending is held');
  clock.skip(2);
  hold.report(report('web-1', 'Running'));
  assert.deepEqual(sent, [{ at: 1002, name: 'web-1', phase: 'Running' }]);
  assert.equal(hold.size, 0);
  while (clock.runNext());
  assert.equal(sent.length, 1, 'the overtaken Pending is never sent');
});

test('a slow start is reported Pending at the end of the hold, then Running', () => {
  const { clock, sent, hold } = harness();
  hold.report(report('web-1', 'Pending'));
  assert.equal(clock.runNext(), true);
  assert.deepEqual(sent, [{ at: 1000 + PENDING_HOLD_MS, name: 'web-1', phase: 'Pending' }]);
  clock.skip(500);
  hold.report(report('web-1', 'Running'));
  assert.deepEqual(
    sent.map((s) => s.phase),
    ['Pending', 'Running'],
  );
});

test('any later report replaces a held Pending: a start that fails, a stop before the start', () => {
  const { clock, sent, hold } = harness();
  hold.report(report('bad-1', 'Pending'));
  hold.report(report('stop-1', 'Pending'));
  hold.report(report('bad-1', 'Failed'));
  hold.report(report('stop-1', 'Terminating'));
  hold.report(report('stop-1', 'Succeeded'));
  while (clock.runNext());
  assert.deepEqual(
    sent.map((s) => `${s.name} ${s.phase}`),
    ['bad-1 Failed', 'stop-1 Terminating', 'stop-1 Succeeded'],
  );
});

test("units are held apart: one unit's report does not release or drop another's Pending", () => {
  const { clock, sent, hold } = harness();
  hold.report(report('web-1', 'Pending'));
  clock.skip(10);
  hold.report(report('web-2', 'Pending'));
  hold.report(report('web-2', 'Running'));
  assert.deepEqual(
    sent.map((s) => `${s.name} ${s.phase}`),
    ['web-2 Running'],
  );
  assert.equal(clock.runNext(), true);
  assert.deepEqual(sent.at(-1), { at: 1000 + PENDING_HOLD_MS, name: 'web-1', phase: 'Pending' });
  assert.equal(clock.runNext(), false, 'nothing else pending');
});
