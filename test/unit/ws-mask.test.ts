// test/unit/ws-mask.test.ts -- our own WebSocket clients (an agent's link to
// a replica, a replica's link to a peer) send every frame with the all-zero
// masking key (shared/ws-mask.ts), so that neither side copies or XORs the
// payload, and a stock `ws` server still reads the frames intact. The bytes
// are read off the server's TCP socket as they arrive, over loopback.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { ControlPlaneLink } from '../../node-agent/control-plane-link.ts';
import { PeerTransport } from '../../control-plane/raft-transport/peer-transport.ts';
import type { Message } from '../../control-plane/raft/types.ts';
import { decodeAgentMessage } from '../../shared/protocol/codec.ts';

const DEADLINE_MS = 15000;

/** The client-to-server frames in `bytes` (after the HTTP upgrade request): mask bit and key of each. */
function frames(bytes: Buffer): Array<{ masked: boolean; key: Buffer; length: number }> {
  const out = [];
  let at = bytes.indexOf('\r\n\r\n') + 4;
  while (at + 2 <= bytes.length) {
    const masked = (bytes[at + 1] & 0x80) !== 0;
    let length = bytes[at + 1] & 0x7f;
    let head = 2;
    if (length === 126) {
      length = bytes.readUInt16BE(at + 2);
      head = 4;
    } else if (length === 127) {
      length = Number(bytes.readBigUInt64BE(at + 2));
      head = 10;
    }
    const key = masked ? bytes.subarray(at + head, at + head + 4) : Buffer.alloc(0);
    out.push({ masked, key, length });
    at += head + (masked ? 4 : 0) + length;
  }
  return out;
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + DEADLINE_MS;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** An HTTP server on loopback whose upgrades go to `onUpgrade`, with every byte its sockets receive kept. */
async function tappedServer(t: TestContext, onUpgrade: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void): Promise<{ url: string; raw: () => Buffer }> {
  const chunks: Buffer[] = [];
  const sockets = new Set<Duplex>();
  const server = http.createServer((_req, res) => res.writeHead(404).end());
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('data', (b: Buffer) => chunks.push(b));
  });
  server.on('upgrade', onUpgrade);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    // Upgraded sockets are the server's no more: close() would wait for them.
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`, raw: () => Buffer.concat(chunks) };
}

test("an agent's link masks its frames with the zero key, and a stock ws server reads them", async (t) => {
  const wss = new WebSocketServer({ noServer: true });
  const received: unknown[] = [];
  wss.on('connection', (ws) => ws.on('message', (data) => received.push(decodeAgentMessage(data as Buffer))));
  const server = await tappedServer(t, (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req)));
  t.after(() => wss.close());
  let opened = false;
  const link = new ControlPlaneLink(server.url, 'tok', { onOpen: () => (opened = true), onMessage: () => {}, log: () => {} });
  t.after(() => link.stop());
  link.start();
  await until(() => opened, 'the link to open');
  const heartbeat = { v: 1, type: 'heartbeat', seq: 7, sentAt: 1234 } as const;
  assert.ok(link.send(heartbeat));
  await until(() => received.length === 1, 'the heartbeat at the server');
  const got = frames(server.raw());
  assert.ok(got.length >= 1, 'a frame on the wire');
  for (const f of got) {
    assert.equal(f.masked, true, 'a client frame has the mask bit (RFC 6455 5.1)');
    assert.deepEqual([...f.key], [0, 0, 0, 0], 'with the all-zero key');
  }
  assert.deepEqual(received[0], { ok: true, msg: heartbeat });
});

test("a replica's peer link masks its frames with the zero key, and the peer reads the batch intact", async (t) => {
  const heard: Message[] = [];
  let b: PeerTransport | null = null;
  const server = await tappedServer(t, (req, socket, head) => {
    if (!b?.handleUpgrade(req, socket, head)) socket.destroy();
  });
  const other = await tappedServer(t, (_req, socket) => socket.destroy());
  const peers = new Map([
    ['a', other.url],
    ['b', server.url],
  ]);
  b = new PeerTransport({ id: 'b', peers, token: 'tok', log: () => {}, onMessage: (m) => heard.push(m) });
  const a = new PeerTransport({ id: 'a', peers, token: 'tok', log: () => {}, onMessage: () => {} });
  t.after(() => {
    a.close();
    b!.close();
  });
  const data = Buffer.alloc(3000, 7); // byte arrays come back as Buffers (shared/codec.ts)
  const append: Message = { type: 'append', from: 'a', to: 'b', term: 3, prevLogIndex: 10, prevLogTerm: 2, commit: 9, entries: [{ index: 11, term: 3, kind: 'normal', data }] };
  await until(() => {
    if (heard.length === 0) a.sendBatch([append]);
    return heard.length > 0;
  }, 'the append at the peer');
  assert.deepEqual(heard[0], append);
  const got = frames(server.raw());
  assert.ok(
    got.some((f) => f.length > 3000),
    'the append on the wire',
  );
  for (const f of got) {
    assert.equal(f.masked, true);
    assert.deepEqual([...f.key], [0, 0, 0, 0]);
  }
});
