// takeFrame: a received frame's bytes, with nothing of the frame left held
// by the socket (shared/ws-frames.ts). The socket test is real: a ws server
// and a ws client on loopback, a masked frame, and V8's collector asked
// whether the socket read that carried it is still reachable.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { receiveAsFragments, takeFrame } from '../../shared/ws-frames.ts';
import { fullCollection } from '../../control-plane/rest-collect.ts';

test('takeFrame joins a fragment list and empties it; one fragment is handed over without a copy', () => {
  const one = Buffer.from('abc');
  const single = [one];
  assert.equal(takeFrame(single), one);
  assert.equal(single.length, 0);

  const list = [Buffer.from('ab'), Buffer.from('cd')];
  assert.equal(takeFrame(list).toString(), 'abcd');
  assert.equal(list.length, 0);

  const buf = Buffer.from('xyz');
  assert.equal(takeFrame(buf), buf);
  const ab = new Uint8Array([1, 2, 3]).buffer;
  const viewed = takeFrame(ab);
  assert.deepEqual([...viewed], [1, 2, 3]);
  assert.equal(viewed.buffer, ab, 'an ArrayBuffer is viewed, not copied');
});

test('takeFrame leaves a socket that is not a ws WebSocket alone', () => {
  const memorySocket = { frames: 1 };
  assert.equal(takeFrame(Buffer.from('a'), memorySocket).toString(), 'a');
  assert.deepEqual(memorySocket, { frames: 1 });
});

/**
 * Send one masked binary frame over loopback and hand its bytes, taken with
 * `take`, to a WeakRef of the socket read's ArrayBuffer (the frame and its
 * mask are slices of it). Returns whether that read is still reachable
 * after a full collection in a later task.
 */
async function readStillHeld(take: (data: WebSocket.RawData, ws: WebSocket) => Buffer): Promise<boolean> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const port = (wss.address() as AddressInfo).port;
  const client = new WebSocket(`ws://127.0.0.1:${port}`);
  try {
    const held = new Promise<WeakRef<ArrayBufferLike>>((resolve) => {
      wss.once('connection', (ws) => {
        receiveAsFragments(ws);
        ws.once('message', (data) => {
          const bytes = take(data, ws);
          assert.deepEqual([...bytes], [7, 7, 7]);
          resolve(new WeakRef(bytes.buffer));
        });
      });
    });
    await new Promise<void>((resolve, reject) => {
      client.once('open', () => resolve());
      client.once('error', reject);
    });
    client.send(Buffer.from([7, 7, 7]));
    const ref = await held;
    // A WeakRef keeps its target for the rest of the task that made it.
    await new Promise((resolve) => setImmediate(resolve));
    fullCollection()();
    return ref.deref() !== undefined;
  } finally {
    client.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  }
}

test('after takeFrame with its socket, the socket no longer holds the read that carried the frame', async () => {
  assert.equal(await readStillHeld((data, ws) => takeFrame(data, ws)), false);
});

test('without the socket, ws itself still holds that read (through the frame mask): what takeFrame undoes', async () => {
  // If this fails, ws no longer keeps the mask, or keeps it elsewhere: the
  // private field takeFrame clears (shared/ws-frames.ts) needs a new look.
  assert.equal(await readStillHeld((data) => takeFrame(data)), true);
});
