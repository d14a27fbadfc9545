// test/unit/transport-conformance.test.ts -- one suite, two implementations
// of the Transport RaftStore sends through (raft-transport/transport.ts):
// the real PeerTransport over WebSockets on loopback (three http servers on
// 127.0.0.1, ephemeral ports) and the simulation's MemoryNetwork
// (control-plane/sim/memory-network.ts) on a manual clock. Both must deliver
// a batch to each addressed peer in order with every field intact, hand
// over nothing from an unknown replica, drop (not queue, not throw) what is
// sent to a peer that is down, tell the peers of a closed replica, and
// carry messages again once the replica is back. Every wait has a deadline
// (real time for the sockets, simulated time for the memory network).

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ManualClock } from '../../shared/clock.ts';
import { SeededRandom } from '../../shared/random.ts';
import type { Message } from '../../control-plane/raft/types.ts';
import WebSocket from 'ws';
import { PeerTransport, SNAPSHOT_PART_BYTES } from '../../control-plane/raft-transport/peer-transport.ts';
import { packFrame } from '../../shared/codec.ts';
import type { Transport, TransportHandlers } from '../../control-plane/raft-transport/transport.ts';
import { MemoryNetwork } from '../../control-plane/sim/memory-network.ts';

const IDS = ['a', 'b', 'c'];
const DEADLINE_MS = 15000;

/** Three replicas' transports and what each heard. */
interface Group {
  transports: Map<string, Transport>;
  received: Map<string, Message[]>;
  closedPeers: Map<string, string[]>;
  /** Close replica id's transport (as its process would on exit). */
  down(id: string): void;
  /** Give replica id a fresh transport, as a restarted process would. */
  up(id: string): void;
  waitFor(cond: () => boolean, what: string): Promise<void>;
}

function handlersFor(g: Pick<Group, 'received' | 'closedPeers'>, id: string): TransportHandlers {
  return {
    onMessage: (m) => g.received.get(id)!.push(m),
    onPeerClosed: (peer) => g.closedPeers.get(id)!.push(peer),
  };
}

function blank() {
  return { received: new Map(IDS.map((id) => [id, [] as Message[]])), closedPeers: new Map(IDS.map((id) => [id, [] as string[]])) };
}

async function realGroup(t: TestContext): Promise<Group> {
  const g = blank();
  const servers = new Map<string, http.Server>();
  const transports = new Map<string, PeerTransport>();
  const downIds = new Set<string>();
  for (const id of IDS) {
    const server = http.createServer((_req, res) => res.writeHead(404).end());
    server.on('upgrade', (req, socket, head) => {
      const tr = transports.get(id);
      if (!tr || downIds.has(id) || !tr.handleUpgrade(req, socket, head)) socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.set(id, server);
  }
  const peers = new Map(IDS.map((id) => [id, `ws://127.0.0.1:${(servers.get(id)!.address() as AddressInfo).port}`]));
  const make = (id: string) => {
    transports.set(id, new PeerTransport({ id, peers, token: 'conformance', log: () => {}, ...handlersFor(g, id) }));
  };
  for (const id of IDS) make(id);
  t.after(async () => {
    for (const tr of transports.values()) tr.close();
    for (const s of servers.values()) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });
  return {
    ...g,
    transports: transports as Map<string, Transport>,
    down: (id) => {
      downIds.add(id);
      transports.get(id)!.close();
    },
    up: (id) => {
      downIds.delete(id);
      make(id);
    },
    waitFor: async (cond, what) => {
      const until = Date.now() + DEADLINE_MS;
      while (!cond()) {
        if (Date.now() > until) assert.fail(`PeerTransport: not within ${DEADLINE_MS} ms: ${what}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
  };
}

async function memoryGroup(): Promise<Group> {
  const g = blank();
  const clock = new ManualClock();
  const net = new MemoryNetwork({ clock, random: new SeededRandom(1) });
  const transports = new Map<string, Transport>();
  const make = (id: string) => transports.set(id, net.transport(id, IDS)(handlersFor(g, id)));
  for (const id of IDS) make(id);
  return {
    ...g,
    transports,
    down: (id) => transports.get(id)!.close(),
    up: (id) => make(id),
    waitFor: async (cond, what) => {
      const until = clock.now() + DEADLINE_MS;
      while (!cond()) {
        if (clock.now() > until || !clock.runNext()) assert.fail(`MemoryNetwork: not within ${DEADLINE_MS} simulated ms: ${what}`);
      }
    },
  };
}

const IMPLEMENTATIONS: Array<{ name: string; group: (t: TestContext) => Promise<Group> }> = [
  { name: 'PeerTransport (WebSocket on loopback)', group: realGroup },
  { name: 'MemoryNetwork', group: () => memoryGroup() },
];

function batch(from: string, to: string, term: number): Message[] {
  const data = new Uint8Array([term, 1, 2, 3, 250]);
  return [
    {
      type: 'append',
      from,
      to,
      term,
      prevLogIndex: 4,
      prevLogTerm: 1,
      entries: [
        { term, index: 5, kind: 'normal', data },
        { term, index: 6, kind: 'noop', data: new Uint8Array(0) },
      ],
      commit: 4,
    },
    { type: 'heartbeat', from, to, term, commit: 6, context: 'read-1' },
    { type: 'vote', from, to, term, lastLogIndex: 6, lastLogTerm: term },
    { type: 'appendResponse', from, to, term, reject: true, index: 3, hintIndex: 2 },
  ];
}

/** Plain data for comparison: byte arrays as number lists, whatever Uint8Array subclass carried them. */
function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return { bytes: Array.from(v) };
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

for (const impl of IMPLEMENTATIONS) {
  test(`${impl.name}: every peer becomes reachable, and a batch reaches each addressed peer in order, intact`, async (t) => {
    const g = await impl.group(t);
    await g.waitFor(() => IDS.every((id) => g.transports.get(id)!.connectedPeers().length === 2), 'every replica connected to both peers');
    assert.deepEqual([...g.transports.get('a')!.connectedPeers()].sort(), ['b', 'c']);
    const toB = batch('a', 'b', 3);
    const toC = batch('a', 'c', 3).slice(0, 2);
    g.transports.get('a')!.sendBatch([toB[0], toC[0], toB[1], toB[2], toC[1], toB[3]]);
    await g.waitFor(() => g.received.get('b')!.length === 4 && g.received.get('c')!.length === 2, 'b has 4 messages and c 2');
    assert.deepEqual(plain(g.received.get('b')!), plain(toB));
    assert.deepEqual(plain(g.received.get('c')!), plain(toC));
    assert.equal(g.received.get('a')!.length, 0);
  });

  test(`${impl.name}: a message claiming to come from an unknown replica is not handed over`, async (t) => {
    const g = await impl.group(t);
    await g.waitFor(() => g.transports.get('a')!.connectedPeers().includes('b'), 'a connected to b');
    const [forged] = batch('zz', 'b', 1);
    const [real] = batch('a', 'b', 1);
    g.transports.get('a')!.sendBatch([forged, real]);
    await g.waitFor(() => g.received.get('b')!.length >= 1, 'the real message reached b');
    assert.deepEqual(
      g.received.get('b')!.map((m) => m.from),
      ['a'],
    );
  });

  test(`${impl.name}: a closed replica's peers are told; what is sent to it is dropped; once back, messages flow again`, async (t) => {
    const g = await impl.group(t);
    await g.waitFor(() => IDS.every((id) => g.transports.get(id)!.connectedPeers().length === 2), 'every replica connected');
    g.down('c');
    await g.waitFor(() => g.closedPeers.get('a')!.includes('c') && g.closedPeers.get('b')!.includes('c'), 'a and b heard that c closed');
    await g.waitFor(() => !g.transports.get('a')!.connectedPeers().includes('c'), 'a no longer lists c');
    assert.doesNotThrow(() => g.transports.get('a')!.sendBatch(batch('a', 'c', 2)));
    assert.doesNotThrow(() => g.transports.get('c')!.sendBatch(batch('c', 'a', 2)), 'a closed transport may be sent on');
    g.transports.get('a')!.sendBatch(batch('a', 'b', 2).slice(0, 1));
    await g.waitFor(() => g.received.get('b')!.length === 1, 'b still hears a');
    assert.equal(g.received.get('c')!.length, 0, 'nothing reached the closed replica');
    g.up('c');
    await g.waitFor(() => g.transports.get('a')!.connectedPeers().includes('c'), 'a reconnected to the restarted c');
    g.transports.get('a')!.sendBatch(batch('a', 'c', 4).slice(0, 2));
    await g.waitFor(() => g.received.get('c')!.length === 2, 'the restarted c hears a');
    assert.deepEqual(
      g.received.get('c')!.map((m) => m.term),
      [4, 4],
    );
  });
}

// ---------------------------------------------------------------- size: what a large state makes the real transport carry

test('PeerTransport: a snapshot over 64 MiB (a state of 40,000-55,000 deployments) reaches the peer whole', async (t) => {
  const g = await realGroup(t);
  await g.waitFor(() => g.transports.get('a')!.connectedPeers().includes('b'), 'a connected to b');
  const data = new Uint8Array(70 * 1024 * 1024);
  for (let i = 0; i < data.length; i += 4096) data[i] = (i >>> 12) & 0xff;
  g.transports.get('a')!.sendBatch([{ type: 'snapshot', from: 'a', to: 'b', term: 3, snapshot: { meta: { index: 60000, term: 3 }, data } }]);
  await g.waitFor(() => g.received.get('b')!.length === 1, 'b received the snapshot');
  const m = g.received.get('b')![0];
  assert.equal(m.type, 'snapshot');
  if (m.type === 'snapshot') {
    assert.equal(m.snapshot.data.length, data.length);
    assert.ok(Buffer.from(m.snapshot.data).equals(Buffer.from(data)), 'every byte as sent');
    // Copied into a buffer of its own as its parts arrived (a view into a frame would have an offset).
    assert.equal(m.snapshot.data.byteOffset, 0);
    assert.equal(m.snapshot.data.buffer.byteLength, data.length);
  }
  assert.ok(g.transports.get('a')!.connectedPeers().includes('b'), 'the connection stayed up');
});

test('PeerTransport: a large snapshot goes apart (a head, then its data in parts); what is sent after it arrives after it', async (t) => {
  const g = await realGroup(t);
  await g.waitFor(() => g.transports.get('a')!.connectedPeers().includes('b'), 'a connected to b');
  const data = new Uint8Array(2 * 1024 * 1024 + 5);
  for (let i = 0; i < data.length; i++) data[i] = i % 251;
  const a = g.transports.get('a')!;
  a.sendBatch([{ type: 'snapshot', from: 'a', to: 'b', term: 3, snapshot: { meta: { index: 500, term: 3 }, data } }]);
  a.sendBatch([{ type: 'heartbeat', from: 'a', to: 'b', term: 3, commit: 500, context: null }]);
  await g.waitFor(() => g.received.get('b')!.length === 2, 'b received both');
  const [first, second] = g.received.get('b')!;
  assert.equal(first.type, 'snapshot');
  assert.equal(second.type, 'heartbeat');
  if (first.type === 'snapshot') {
    assert.deepEqual(first.snapshot.meta, { index: 500, term: 3 });
    assert.ok(Buffer.from(first.snapshot.data).equals(Buffer.from(data)), 'every byte as sent');
  }
});

/** Replica b's transport alone, with its log, and a raw WebSocket dialled into it as replica a. */
async function rawPeer(t: TestContext): Promise<{ ws: WebSocket; received: Message[]; log: string[]; closed: Promise<number> }> {
  const received: Message[] = [];
  const log: string[] = [];
  const server = http.createServer((_req, res) => res.writeHead(404).end());
  // a's address is a closed port on loopback: b's own dialling of a fails and retries until closed.
  const peers = new Map([
    ['a', 'ws://127.0.0.1:1'],
    ['b', ''],
  ]);
  const tr = new PeerTransport({ id: 'b', peers, token: 'raw', log: (l) => log.push(l), onMessage: (m) => received.push(m) });
  server.on('upgrade', (req, socket, head) => {
    if (!tr.handleUpgrade(req, socket, head)) socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const ws = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}/raft`, { headers: { authorization: 'Bearer raw', 'x-mo-replica': 'a' } });
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  t.after(async () => {
    ws.terminate();
    tr.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, received, log, closed };
}

const headFor = (bytes: number, message: unknown = { type: 'snapshot', from: 'a', to: 'b', term: 2, snapshot: { meta: { index: 9, term: 2 }, data: new Uint8Array(0) } }) =>
  packFrame({ snapshotBytes: bytes, message });

test('PeerTransport: a snapshot sent apart by hand is put together from parts of any size', async (t) => {
  const p = await rawPeer(t);
  const data = Buffer.alloc(3 * SNAPSHOT_PART_BYTES + 7, 9);
  p.ws.send(headFor(data.length));
  for (const [from, to] of [
    [0, 10],
    [10, SNAPSHOT_PART_BYTES + 3],
    [SNAPSHOT_PART_BYTES + 3, data.length],
  ]) {
    p.ws.send(data.subarray(from, to));
  }
  const until = Date.now() + DEADLINE_MS;
  while (p.received.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  assert.equal(p.received.length, 1, p.log.join('\n'));
  const m = p.received[0];
  assert.ok(m.type === 'snapshot' && Buffer.from(m.snapshot.data).equals(data));
});

test('PeerTransport: a snapshot head that is not one, or data past the length it announced, is refused and the connection closed', async (t) => {
  const over = await rawPeer(t);
  over.ws.send(headFor(10));
  over.ws.send(Buffer.alloc(11));
  assert.equal(await over.closed, 1008);
  assert.deepEqual(over.received, []);
  assert.match(over.log.join('\n'), /refused: more snapshot data than the 10 bytes announced; closing/);

  const notSnapshot = await rawPeer(t);
  notSnapshot.ws.send(headFor(10, { type: 'heartbeat', from: 'a', to: 'b', term: 2, commit: 1, context: null }));
  assert.equal(await notSnapshot.closed, 1008);
  assert.match(notSnapshot.log.join('\n'), /refused: a snapshot head must carry a snapshot without data and its length/);

  const tooLong = await rawPeer(t);
  tooLong.ws.send(headFor(2 * 1024 * 1024 * 1024));
  assert.equal(await tooLong.closed, 1008);
  assert.match(tooLong.log.join('\n'), /refused: a snapshot head must carry/);
});

test('PeerTransport: one batch of 100 appends of 1 MiB each (a burst of large manifests) goes in frames of ~8 MiB: the socket holds a bounded part, what arrives is in order, the link stays up', async (t) => {
  const g = await realGroup(t);
  await g.waitFor(() => g.transports.get('a')!.connectedPeers().includes('b'), 'a connected to b');
  const appends: Message[] = Array.from({ length: 100 }, (_, i) => ({
    type: 'append',
    from: 'a',
    to: 'b',
    term: 2,
    prevLogIndex: 10 + i,
    prevLogTerm: 2,
    entries: [{ term: 2, index: 11 + i, kind: 'normal', data: new Uint8Array(1024 * 1024).fill(i) }],
    commit: 10,
  }));
  g.transports.get('a')!.sendBatch(appends);
  // Frames are sent while the socket holds at most MAX_PEER_BUFFERED_BYTES (32 MiB), so the tail is
  // dropped, as any loss Raft retries. One frame of it all (100 MiB) went whole, and past 64 MiB the
  // peer had refused it and closed the link with nothing delivered.
  await g.waitFor(() => g.received.get('b')!.length >= 8, 'b received the first frame of appends');
  g.transports.get('a')!.sendBatch([{ type: 'heartbeat', from: 'a', to: 'b', term: 2, commit: 10, context: null }]);
  await g.waitFor(() => g.received.get('b')!.some((m) => m.type === 'heartbeat'), 'a heartbeat sent after it arrived too');
  const got = g.received.get('b')!.filter((m) => m.type === 'append');
  assert.deepEqual(
    got.map((m) => (m.type === 'append' ? m.entries[0].data[0] : -1)),
    got.map((_, i) => i),
    'a prefix of the batch, in order',
  );
  assert.ok(got.length < 100, `a bounded part was sent, not all 100 (${got.length})`);
  assert.deepEqual(g.closedPeers.get('b'), [], 'b never saw the link from a close');
});
