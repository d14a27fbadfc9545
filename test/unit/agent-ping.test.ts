// test/unit/agent-ping.test.ts -- how often agents ping a replica. Every
// ping costs the replica a pong (a socket write), so a replica names the
// interval its agents keep to (shared/protocol/messages.ts,
// PING_BUDGET_PER_SECOND): in its welcome and, when the number of agents
// connected calls for another, in a ping-interval frame to each
// (test/unit/agent-server.test.ts). Here: the interval a replica names, and
// the agent's side, its real link over loopback to a stock `ws` server that
// counts the pings it gets.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { pingIntervalFor } from '../../control-plane/agent-server.ts';
import { ControlPlaneLink } from '../../node-agent/control-plane-link.ts';
import { encodeMessage } from '../../shared/protocol/codec.ts';
import { MAX_PING_INTERVAL_MS, MIN_PING_INTERVAL_MS, PING_BUDGET_PER_SECOND, type ControlPlaneMessage } from '../../shared/protocol/messages.ts';

const DEADLINE_MS = 15000;

test('the interval keeps the pings of the agents connected within the budget, a power of two times the shortest', () => {
  assert.equal(PING_BUDGET_PER_SECOND, 200);
  assert.equal(pingIntervalFor(0, MIN_PING_INTERVAL_MS), 1000);
  assert.equal(pingIntervalFor(200, 1000), 1000, '200 agents once a second: the budget exactly');
  assert.equal(pingIntervalFor(201, 1000), 2000);
  assert.equal(pingIntervalFor(5000, 1000), 32000, '5,000 agents: 156 pings a second');
  assert.equal(pingIntervalFor(1_000_000, 1000), MAX_PING_INTERVAL_MS, 'never longer than the longest');
  // Fewer agents: shorter only once the shorter interval keeps to half the budget.
  assert.equal(pingIntervalFor(150, 2000), 2000);
  assert.equal(pingIntervalFor(101, 2000), 2000);
  assert.equal(pingIntervalFor(100, 2000), 1000);
  assert.equal(pingIntervalFor(10, 32000), 1000);
  assert.equal(pingIntervalFor(3000, 32000), 32000, 'within the budget at 16 s too, but not within half of it');
  assert.equal(pingIntervalFor(1000, 32000), 16000, '8 s would be within the budget, 16 s within half of it');
});

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + DEADLINE_MS;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("an agent's link pings a replica at most once per the interval the replica names, and the round trip comes back", async (t: TestContext) => {
  const wss = new WebSocketServer({ noServer: true });
  let pings = 0;
  let replica: WebSocket | null = null;
  wss.on('connection', (ws) => {
    replica = ws;
    ws.on('ping', () => pings++);
  });
  const server = http.createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    wss.close();
    for (const ws of wss.clients) ws.terminate();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const roundTrips: number[] = [];
  const messages: string[] = [];
  const link = new ControlPlaneLink(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, 'tok', {
    onOpen: () => {},
    onMessage: (_l, msg) => messages.push(msg.type),
    log: () => {},
    onRoundTrip: (_l, seconds) => roundTrips.push(seconds),
  });
  t.after(() => link.stop());
  link.start();
  await until(() => replica !== null && link.isOpen, 'the link to open');
  const send = (msg: ControlPlaneMessage) => replica!.send(encodeMessage(msg));

  // Before a replica names an interval: the first ping goes at once.
  assert.equal(link.ping(), true);
  await until(() => pings === 1 && roundTrips.length === 1, 'the first ping and its pong');
  assert.ok(roundTrips[0] >= 0 && roundTrips[0] < DEADLINE_MS / 1000);

  // The welcome names a minute: every later offer within it is declined.
  send({ v: 1, type: 'welcome', replicaId: 'cp-1', term: 1, leaderId: 'cp-1', heartbeatIntervalMs: 1000, pingIntervalMs: 60_000 });
  await until(() => messages.includes('welcome'), 'the welcome');
  for (let i = 0; i < 5; i++) assert.equal(link.ping(), false);

  // A ping-interval frame shortens it; the agent sees that frame too.
  send({ v: 1, type: 'ping-interval', pingIntervalMs: 20 });
  await until(() => messages.includes('ping-interval'), 'the new interval');
  await until(() => link.ping(), 'a ping once 20 ms have passed');
  await until(() => pings === 2 && roundTrips.length === 2, 'the second ping and its pong');
  assert.equal(pings, 2, 'only the pings the link said it sent');
});
