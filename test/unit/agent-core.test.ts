// test/unit/agent-core.test.ts -- the agent's pure decision core: fencing
// by term, leadership tracking, bounded command dedupe, and the frames it
// builds (checked against the shared codec so they are valid on the wire).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AgentCore, MAX_REMEMBERED_COMMAND_IDS } from '../../node-agent/agent-core.ts';
import { decodeAgentMessage, encodeMessage } from '../../shared/protocol/codec.ts';
import type { NodeInfo, UnitReport } from '../../shared/model.ts';
import type { SpawnCommand, TerminateCommand } from '../../shared/protocol/messages.ts';

const node: NodeInfo = { name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [{ key: 'gpu-only', effect: 'NoSchedule' }], labels: {} };

function spawnCmd(commandId: string, term: number, leaderId = 'cp-1'): SpawnCommand {
  return {
    v: 1,
    type: 'spawn',
    commandId,
    term,
    leaderId,
    unit: {
      name: 'web-1',
      deployment: 'web',
      spec: { containerName: 'web', command: ['sleep', '1'], env: [], resources: { cpu: 1, memory: 1 }, tolerations: [] },
      revision: 1,
      specHash: '0123456789abcdef',
    },
  };
}

function terminateCmd(commandId: string, term: number): TerminateCommand {
  return { v: 1, type: 'terminate', commandId, term, leaderId: 'cp-1', name: 'web-1', gracePeriodMs: 2000, reason: 'scaled down' };
}

test('a command whose term is below the highest term seen is refused with the terms in the reason', () => {
  const core = new AgentCore(node, 42);
  core.observeLeader(4, 'cp-2');
  assert.deepEqual(core.admit(spawnCmd('a', 3)), { kind: 'refuse', reason: 'stale term 3 < highest seen 4' });
  assert.deepEqual(core.admit(terminateCmd('b', 1)), { kind: 'refuse', reason: 'stale term 1 < highest seen 4' });
  assert.equal(core.highestTerm, 4, 'a refused command changes nothing');
  assert.equal(core.leaderId, 'cp-2');
});

test('a command at or above the highest term is executed and raises the term to its own', () => {
  const core = new AgentCore(node, 42);
  core.observeLeader(2, 'cp-1');
  assert.deepEqual(core.admit(spawnCmd('a', 2)), { kind: 'execute' });
  assert.deepEqual(core.admit(spawnCmd('b', 5, 'cp-3')), { kind: 'execute' });
  assert.equal(core.highestTerm, 5);
  assert.equal(core.leaderId, 'cp-3');
  // Once term 5 is known, the term-2 leader is deposed for this agent.
  assert.equal(core.admit(spawnCmd('c', 2)).kind, 'refuse');
});

test('a refused command id is not remembered, so it is refused again rather than reported as a duplicate', () => {
  const core = new AgentCore(node, 42);
  core.observeLeader(3, 'cp-1');
  assert.equal(core.admit(spawnCmd('x', 1)).kind, 'refuse');
  assert.equal(core.admit(spawnCmd('x', 1)).kind, 'refuse');
});

test('the same command id twice is executed once', () => {
  const core = new AgentCore(node, 42);
  assert.equal(core.admit(spawnCmd('a', 1)).kind, 'execute');
  assert.equal(core.admit(spawnCmd('a', 1)).kind, 'duplicate');
  assert.equal(core.admit(spawnCmd('b', 1)).kind, 'execute');
});

test('the dedupe memory is bounded and forgets the oldest ids first', () => {
  const core = new AgentCore(node, 42);
  for (let i = 0; i <= MAX_REMEMBERED_COMMAND_IDS; i++) assert.equal(core.admit(spawnCmd(`id-${i}`, 1)).kind, 'execute');
  // id-0 fell out of the window; the newest are still remembered.
  assert.equal(core.admit(spawnCmd(`id-${MAX_REMEMBERED_COMMAND_IDS}`, 1)).kind, 'duplicate');
  assert.equal(core.admit(spawnCmd('id-1', 1)).kind, 'duplicate');
  assert.equal(core.admit(spawnCmd('id-0', 1)).kind, 'execute');
});

test('leadership news: a higher term raises, the same term only names an unknown leader, a lower term is ignored', () => {
  const core = new AgentCore(node, 42);
  assert.deepEqual(core.observeLeader(3, null), { termRaised: true, leaderChanged: false });
  assert.equal(core.highestTerm, 3);
  assert.deepEqual(core.observeLeader(3, 'cp-2'), { termRaised: false, leaderChanged: true });
  assert.deepEqual(core.observeLeader(3, null), { termRaised: false, leaderChanged: false }, 'a replica that does not know the leader does not unlearn it');
  assert.deepEqual(core.observeLeader(2, 'cp-1'), { termRaised: false, leaderChanged: false });
  assert.equal(core.leaderId, 'cp-2');
  assert.deepEqual(core.observeLeader(7, 'cp-1'), { termRaised: true, leaderChanged: true });
  assert.equal(core.highestTerm, 7);
});

test('hello carries the node, the agent pid, every unit and the highest term, and passes the shared codec', () => {
  const core = new AgentCore(node, 4242);
  core.observeLeader(6, 'cp-1');
  const unit: UnitReport = { name: 'web-1', deployment: 'web', phase: 'Running', pid: 99, resources: { cpu: 100, memory: 64 }, term: 6, startedAt: 1000 };
  const hello = core.hello([unit]);
  assert.deepEqual(hello, { v: 1, type: 'hello', node, agentPid: 4242, units: [unit], highestTerm: 6 });
  const decoded = decodeAgentMessage(encodeMessage(hello));
  assert.ok(decoded.ok, !decoded.ok ? decoded.error : '');
  assert.deepEqual(decoded.msg, hello);
});

test('heartbeats count up from 1 and carry the time they are given', () => {
  const core = new AgentCore(node, 1);
  assert.deepEqual(core.heartbeat(1000), { v: 1, type: 'heartbeat', seq: 1, sentAt: 1000 });
  assert.deepEqual(core.heartbeat(1200), { v: 1, type: 'heartbeat', seq: 2, sentAt: 1200 });
  for (const msg of [core.heartbeat(1400), core.unitGone('web-1'), core.refused('c1', 'stale term 1 < highest seen 2')]) {
    assert.ok(decodeAgentMessage(encodeMessage(msg)).ok, `${msg.type} frame is valid on the wire`);
  }
});
