// test/unit/agent-server.test.ts -- the replica's side of agent connections,
// without processes: sockets are stand-ins that record every frame written
// to them (decoded with the real codec), time is a manual clock.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { WebSocket } from 'ws';
import { AgentServer, LEADER_BROADCAST_MS } from '../../control-plane/agent-server.ts';
import { NodeRegistry } from '../../control-plane/registry/node-registry.ts';
import { ManualClock } from '../../shared/clock.ts';
import { decodeControlPlaneMessage, encodeMessage } from '../../shared/protocol/codec.ts';
import { stringCopies } from '../helpers/heap-strings.ts';

class FakeSocket extends EventEmitter {
  readonly OPEN = 1;
  readyState = 1;
  readonly got: Array<{ type: string; term?: number; leaderId?: string | null; pingIntervalMs?: number }> = [];
  send(data: Uint8Array): void {
    const d = decodeControlPlaneMessage(data);
    assert.ok(d.ok, 'a frame the agent can decode');
    this.got.push(d.msg as { type: string });
  }
  close(): void {
    this.readyState = 3;
  }
  terminate(): void {
    this.readyState = 3;
  }
}

function server(clock: ManualClock): AgentServer {
  return new AgentServer({
    replicaId: 'cp-1',
    token: 't',
    registry: new NodeRegistry(3000),
    now: () => clock.now(),
    heartbeatIntervalMs: 1000,
    leadership: () => ({ term: 1, leaderId: 'cp-1' }),
    log: () => {},
    clock,
  });
}

function connect(s: AgentServer, name: string): FakeSocket {
  const ws = new FakeSocket();
  s.accept(ws as unknown as WebSocket, '127.0.0.1');
  const hello = encodeMessage({ v: 1, type: 'hello', node: { name, capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} }, agentPid: 7, units: [], highestTerm: 0 });
  ws.emit('message', Buffer.from(hello), true);
  assert.equal(ws.got[0]?.type, 'welcome');
  return ws;
}

/** Run every timer and immediate due by `at` (ms on the manual clock). */
function runUntil(clock: ManualClock, at: number): void {
  for (let next = clock.nextAt(); next !== null && next <= at; next = clock.nextAt()) clock.runNext();
  clock.skip(at - clock.now());
}

test('an election burst of leadership changes reaches each agent as one frame with the latest news, not one per change', () => {
  const clock = new ManualClock(1000);
  const s = server(clock);
  const agents = [connect(s, 'node-a'), connect(s, 'node-b')];
  const leaderFrames = (ws: FakeSocket) => ws.got.filter((m) => m.type === 'leader').map((m) => `${m.term}/${m.leaderId}`);

  // A campaign (no leader yet), then two answers within a few ms: only the latest goes out, once the window ends.
  s.broadcastLeader(2, null);
  s.broadcastLeader(2, 'cp-3');
  s.broadcastLeader(2, 'cp-2');
  runUntil(clock, clock.now() + LEADER_BROADCAST_MS - 1);
  for (const ws of agents) assert.deepEqual(leaderFrames(ws), [], 'held while the election lasts');
  runUntil(clock, clock.now() + 1);
  for (const ws of agents) assert.deepEqual(leaderFrames(ws), ['2/cp-2'], 'then only the latest');

  // The same news again sends nothing; a quiet spell, then news goes out at once again.
  s.broadcastLeader(2, 'cp-2');
  runUntil(clock, clock.now() + 10 * LEADER_BROADCAST_MS);
  for (const ws of agents) assert.deepEqual(leaderFrames(ws), ['2/cp-2']);
  assert.equal(clock.nextAt(), null, 'no timer left once quiet');
  s.broadcastLeader(3, 'cp-1');
  runUntil(clock, clock.now());
  for (const ws of agents) assert.deepEqual(leaderFrames(ws), ['2/cp-2', '3/cp-1'], 'news of a leader after a quiet spell: at once');
  // A campaign nobody wins soon is still told (its term fences the old leader's commands), after the window.
  runUntil(clock, clock.now() + 10 * LEADER_BROADCAST_MS);
  s.broadcastLeader(4, null);
  runUntil(clock, clock.now() + LEADER_BROADCAST_MS);
  for (const ws of agents) assert.deepEqual(leaderFrames(ws), ['2/cp-2', '3/cp-1', '4/null']);
  s.close();
  assert.equal(clock.nextAt(), null, 'close leaves no timer behind');
});

/** The ping intervals a socket was told, in its welcome and in ping-interval frames, in order. */
function toldPingIntervals(ws: FakeSocket): number[] {
  return ws.got.flatMap((m) => (m.type === 'welcome' || m.type === 'ping-interval' ? [m.pingIntervalMs!] : []));
}

test('a replica tells every connected agent a new ping interval when the count of agents calls for one, and a newcomer in its welcome', () => {
  const clock = new ManualClock(1000);
  const s = server(clock);
  const join = (name: string): FakeSocket => {
    const ws = connect(s, name);
    runUntil(clock, clock.now());
    return ws;
  };
  const leave = (ws: FakeSocket) => {
    ws.readyState = 3;
    ws.emit('close');
    runUntil(clock, clock.now());
  };

  // PING_BUDGET_PER_SECOND (200) agents once a second: the budget exactly.
  const agents = Array.from({ length: 200 }, (_, i) => join(`node-${i}`));
  assert.deepEqual(toldPingIntervals(agents[0]), [1000]);
  assert.deepEqual(toldPingIntervals(agents[199]), [1000]);

  const newcomer = join('node-200');
  assert.equal(s.pingInterval, 2000);
  assert.deepEqual(toldPingIntervals(newcomer), [2000], 'the 201st agent hears the new interval in its welcome, once');
  for (const ws of agents) assert.deepEqual(toldPingIntervals(ws), [1000, 2000], 'every agent already connected hears it in a frame');

  // Down to 101 agents: 1 s would be within the budget but not within half of it, so nothing is sent.
  for (const ws of agents.slice(101)) leave(ws);
  leave(newcomer);
  assert.equal(s.pingInterval, 2000);
  for (const ws of agents.slice(0, 101)) assert.deepEqual(toldPingIntervals(ws), [1000, 2000]);
  // At 100 it is within half the budget at 1 s.
  leave(agents[100]);
  assert.equal(s.pingInterval, 1000);
  for (const ws of agents.slice(0, 100)) assert.deepEqual(toldPingIntervals(ws), [1000, 2000, 1000]);
  for (const ws of agents.slice(100)) assert.equal(toldPingIntervals(ws).length, 2, 'nothing to agents that left');
  s.close();
});

test("the strings of a node's hello (its labels, taints, address) are kept as one shared copy, not one per agent (a heap snapshot counts them)", async () => {
  const clock = new ManualClock(1000);
  const s = server(clock);
  const agents = 300;
  // Distinctive values, so the snapshot's strings are these and nothing else of the process.
  const [label, taint] = ['zone-probe-label', 'taint-probe-key'];
  for (let i = 0; i < agents; i++) {
    const ws = new FakeSocket();
    s.accept(ws as unknown as WebSocket, '127.0.0.1');
    const node = { name: `probe-${i}`, capacity: { cpu: 1000, memory: 1024 }, taints: [{ key: taint, effect: 'NoSchedule' as const }], labels: { zone: label } };
    ws.emit('message', Buffer.from(encodeMessage({ v: 1, type: 'hello', node, agentPid: 7, units: [], highestTerm: 0 })), true); // decoded: a copy of each string
    assert.equal(ws.got[0]?.type, 'welcome');
  }
  const copies = await stringCopies([label, taint]);
  // One shared instance each, and the literal in this file's code; without sharing, one per agent.
  for (const [value, n] of copies) assert.ok(n <= 2, `${n} copies of "${value}" in the heap for ${agents} agents' hellos`);
});
