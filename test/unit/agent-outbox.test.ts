// test/unit/agent-outbox.test.ts -- frames to agents (control-plane/agent-outbox.ts):
// a broadcast is written a slice of sockets per turn of the event loop, every
// socket still gets every frame in the order it was sent (a frame to one agent
// queued behind a broadcast never overtakes it), closed sockets are skipped,
// and with nothing queued a frame is written at once.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AgentOutbox } from '../../control-plane/agent-outbox.ts';

class FakeSocket {
  readonly OPEN = 1;
  readyState = 1;
  readonly got: string[] = [];
  send(data: Uint8Array): void {
    this.got.push(Buffer.from(data).toString());
  }
}

/** A clock whose immediates run only when the test turns it. */
function turns() {
  const q: Array<() => void> = [];
  return {
    clock: { immediate: (fn: () => void) => void q.push(fn) },
    turn: () => {
      const now = q.splice(0);
      for (const fn of now) fn();
      return now.length;
    },
    get waiting() {
      return q.length;
    },
  };
}

const f = (s: string) => Buffer.from(s);

test('a broadcast goes out a slice per turn; frames behind it keep their order for every socket', () => {
  const t = turns();
  const out = new AgentOutbox<FakeSocket>(t.clock, 2);
  const socks = Array.from({ length: 5 }, () => new FakeSocket());
  out.send(socks[0], f('direct-1')); // nothing queued: written at once
  assert.deepEqual(socks[0].got, ['direct-1']);
  out.broadcast(socks, f('leader'));
  assert.deepEqual(
    socks.map((s) => s.got.length),
    [2, 1, 0, 0, 0],
    'the first slice only',
  );
  out.send(socks[4], f('direct-2')); // must not overtake the broadcast on socks[4]
  out.broadcast(socks, f('table'));
  socks[3].readyState = 3; // closed meanwhile: skipped
  assert.equal(out.send(socks[3], f('to-closed')), false);
  let n = 0;
  while (t.waiting > 0) {
    t.turn();
    n++;
  }
  assert.ok(n >= 4, `several turns (${n})`);
  assert.deepEqual(socks[0].got, ['direct-1', 'leader', 'table']);
  assert.deepEqual(socks[2].got, ['leader', 'table']);
  assert.deepEqual(socks[3].got, [], 'closed before its turn: nothing written');
  assert.deepEqual(socks[4].got, ['leader', 'direct-2', 'table']);
  assert.equal(out.pending, 0);
  out.send(socks[1], f('after'));
  assert.deepEqual(socks[1].got, ['leader', 'table', 'after'], 'idle again: written at once');
});

test('no turn writes more than a slice, however many broadcasts are queued', () => {
  const t = turns();
  const out = new AgentOutbox<FakeSocket>(t.clock, 100);
  const socks = Array.from({ length: 1000 }, () => new FakeSocket());
  const written = () => socks.reduce((s, x) => s + x.got.length, 0);
  for (let k = 0; k < 5; k++) out.broadcast(socks, f(`b${k}`));
  let before = written();
  assert.equal(before, 100);
  while (t.waiting > 0) {
    t.turn();
    const now = written();
    assert.ok(now - before <= 100, `a turn wrote ${now - before}`);
    before = now;
  }
  assert.equal(written(), 5000);
  for (const s of socks) assert.deepEqual(s.got, ['b0', 'b1', 'b2', 'b3', 'b4']);
});
