// sendInRun: of the frames sent on a WebSocket in one synchronous run, the
// first reaches the socket at once and the rest as one write at the end of
// the run; all of them arrive, in order.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import { sendInRun } from '../../shared/ws-cork.ts';

test('the first frame of a run is written at once, the rest of the run in one write; all delivered whole and in order', async (t) => {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await new Promise((r) => server.once('listening', r));
  const got: string[] = [];
  server.on('connection', (peer) => peer.on('message', (data) => got.push(String(data))));
  const ws = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
  t.after(() => ws.terminate());
  await new Promise((r) => ws.once('open', r));
  // Count what reaches the kernel: each write or writev of the socket under the WebSocket.
  const socket = (ws as unknown as { _socket: Duplex & { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void } })._socket;
  let writes = 0;
  const write = socket._write.bind(socket);
  const writev = socket._writev.bind(socket);
  socket._write = (...a: unknown[]) => (writes++, write(...a));
  socket._writev = (...a: unknown[]) => (writes++, writev(...a));

  // Returns the writes seen right after the run's first frame, before the run ends.
  const burst = (from: number, n: number, batched: boolean): number => {
    let afterFirst = -1;
    for (let i = from; i < from + n; i++) {
      if (batched) sendInRun(ws, () => ws.send(`frame ${i}`));
      else ws.send(`frame ${i}`);
      if (i === from) afterFirst = writes;
    }
    return afterFirst;
  };
  assert.equal(burst(0, 50, true), 1, 'the first frame of a run is written before the run goes on');
  assert.equal(writes, 1, 'the other 49 wait for the end of the run');
  await new Promise((r) => setImmediate(r));
  assert.equal(writes, 2, 'fifty frames in one run: two writes');
  assert.equal(burst(50, 1, true), 3, 'a lone frame: written at once');
  await new Promise((r) => setImmediate(r));
  assert.equal(writes, 3, 'and nothing more at the end of its run');
  burst(51, 9, true);
  await new Promise((r) => setImmediate(r));
  assert.equal(writes, 5, 'a later run: its own two writes');
  // Without it, ws writes each frame by itself (what the test would see if batching did nothing).
  burst(60, 10, false);
  await new Promise((r) => setImmediate(r));
  assert.equal(writes, 15);
  const deadline = Date.now() + 10_000;
  while (got.length < 70 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(
    got,
    Array.from({ length: 70 }, (_, i) => `frame ${i}`),
  );
  // A closed socket is left alone: the frame is handed to send as it is.
  ws.terminate();
  let called = 0;
  assert.doesNotThrow(() => sendInRun(ws, () => called++));
  assert.equal(called, 1);
});
