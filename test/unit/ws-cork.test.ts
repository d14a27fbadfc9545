// corkForThisTick: the frames sent on a WebSocket in one synchronous run
// reach the socket as one write, and all of them arrive, in order.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import { corkForThisTick } from '../../shared/ws-cork.ts';

test('frames sent in one run are one write to the socket, delivered whole and in order; a later run is another write', async (t) => {
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

  const burst = (from: number, n: number, cork: boolean) => {
    for (let i = from; i < from + n; i++) {
      if (cork) corkForThisTick(ws);
      ws.send(`frame ${i}`);
    }
  };
  burst(0, 50, true);
  await new Promise((r) => setImmediate(r));
  assert.equal(writes, 1, 'fifty frames in one run: one write');
  burst(50, 10, true);
  await new Promise((r) => setImmediate(r));
  assert.equal(writes, 2, 'a later run: its own write');
  // Without it, ws writes each frame by itself (what the test would see if corking did nothing).
  burst(60, 10, false);
  await new Promise((r) => setImmediate(r));
  assert.equal(writes, 12);
  const deadline = Date.now() + 10_000;
  while (got.length < 70 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(
    got,
    Array.from({ length: 70 }, (_, i) => `frame ${i}`),
  );
  // A closed socket is left alone.
  ws.terminate();
  assert.doesNotThrow(() => corkForThisTick(ws));
});
