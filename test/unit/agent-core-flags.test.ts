// test/unit/agent-core-flags.test.ts -- the agent's flags and environment
// variables (docs/contract.md): defaults, precedence, taint and label syntax, and
// the one-line errors a user sees for bad input.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentUrl, parseAgentFlags, parseTaint, type AgentConfig } from '../../node-agent/flags.ts';

const defaults = { cpuMillicores: 2000, memoryMiB: 4096, tmpDir: '/tmp' };

function ok(argv: string[], env: Record<string, string> = {}): AgentConfig {
  const r = parseAgentFlags(argv, env, defaults);
  assert.ok(r.ok === true, `expected success, got ${JSON.stringify(r)}`);
  return r.config;
}

function err(argv: string[], env: Record<string, string> = {}): string {
  const r = parseAgentFlags(argv, env, defaults);
  assert.ok(r.ok === false, `expected an error, got ${JSON.stringify(r)}`);
  assert.ok(!r.error.includes('\n'), 'one line');
  return r.error;
}

test('the docs/contract.md example parses into the node the agent registers', () => {
  const c = ok(['--name', 'node-a', '--cpu', '4000', '--memory', '8192', '--taint', 'gpu-only', '--control-plane', 'ws://h1:7001,ws://h2:7002,ws://h3:7003', '--token', 'T']);
  assert.equal(c.name, 'node-a');
  assert.deepEqual(c.capacity, { cpu: 4000, memory: 8192 });
  assert.deepEqual(c.taints, [{ key: 'gpu-only', effect: 'NoSchedule' }]);
  assert.deepEqual(c.controlPlaneUrls, ['ws://h1:7001/agent', 'ws://h2:7002/agent', 'ws://h3:7003/agent']);
  assert.equal(c.token, 'T');
  assert.equal(c.heartbeatIntervalMs, 200);
  assert.equal(c.stateDir, '/tmp/mo-agent-node-a');
});

test('environment variables configure the agent, and flags win over them', () => {
  const env = {
    MO_NODE_NAME: 'node-b',
    MO_CPU: '8000m',
    MO_MEMORY: '16Gi',
    MO_TAINTS: 'gpu-only,zone=eu:PreferNoSchedule',
    MO_LABELS: 'zone=eu,disk=ssd',
    MO_CONTROL_PLANE: 'ws://cp-1:7001',
    MO_TOKEN: 'env-token',
  };
  const c = ok([], env);
  assert.equal(c.name, 'node-b');
  assert.deepEqual(c.capacity, { cpu: 8000, memory: 16384 });
  assert.deepEqual(c.taints, [
    { key: 'gpu-only', effect: 'NoSchedule' },
    { key: 'zone', value: 'eu', effect: 'PreferNoSchedule' },
  ]);
  assert.deepEqual(c.labels, { zone: 'eu', disk: 'ssd' });
  assert.equal(c.token, 'env-token');
  const o = ok(['--name', 'node-c', '--token', 'flag-token', '--taint', 'x:NoExecute'], env);
  assert.equal(o.name, 'node-c');
  assert.equal(o.token, 'flag-token');
  assert.deepEqual(o.taints, [{ key: 'x', effect: 'NoExecute' }], 'repeatable flags replace the variable');
});

test('without --cpu and --memory the machine capacity is used; flags accept --flag=value too', () => {
  const c = ok(['--name=node-a', '--control-plane=ws://127.0.0.1:7001', '--heartbeat-interval-ms=50', '--state-dir=/var/lib/mo']);
  assert.deepEqual(c.capacity, { cpu: 2000, memory: 4096 });
  assert.equal(c.heartbeatIntervalMs, 50);
  assert.equal(c.stateDir, '/var/lib/mo');
  assert.equal(c.token, null);
});

test('repeated --label and --control-plane flags accumulate; duplicate URLs collapse', () => {
  const c = ok(['--name', 'n', '--label', 'a=1', '--label', 'b=2', '--control-plane', 'ws://h:1', '--control-plane', 'ws://h:2,ws://h:1']);
  assert.deepEqual(c.labels, { a: '1', b: '2' });
  assert.deepEqual(c.controlPlaneUrls, ['ws://h:1/agent', 'ws://h:2/agent']);
});

test('bad input is refused with a message naming the flag and the cause', () => {
  const cp = ['--control-plane', 'ws://h:1'];
  assert.match(err([...cp]), /missing --name/);
  assert.match(err(['--name', 'n']), /missing --control-plane/);
  assert.match(err(['--name', 'Node_A', ...cp]), /--name: invalid node name "Node_A"/);
  assert.match(err(['--name', 'n', '--cpu', '4 cores', ...cp]), /--cpu: want millicores/);
  assert.match(err(['--name', 'n', '--cpu', '0', ...cp]), /--cpu: want millicores/);
  assert.match(err(['--name', 'n', '--memory', '8GB', ...cp]), /--memory: want MiB/);
  assert.match(err(['--name', 'n', '--taint', 'gpu:Never', ...cp]), /--taint: invalid taint "gpu:Never": effect must be one of/);
  assert.match(err(['--name', 'n', '--label', 'novalue', ...cp]), /--label: invalid label "novalue"/);
  assert.match(err(['--name', 'n', '--control-plane', 'http://h:1']), /--control-plane: invalid URL/);
  assert.match(err(['--name', 'n', '--heartbeat-interval-ms', '0', ...cp]), /--heartbeat-interval-ms: want 10\.\.60000/);
  assert.match(err(['--name', 'n', '--wat', '1', ...cp]), /unknown flag --wat/);
  assert.match(err(['--name', 'n', '--name', 'm', ...cp]), /--name given twice/);
  assert.match(err(['--name']), /--name needs a value/);
  assert.match(err(['stray']), /unexpected argument "stray"/);
  assert.match(err([], { MO_NODE_NAME: 'n', MO_CONTROL_PLANE: 'ws://h:1', MO_CPU: 'lots' }), /^MO_CPU: want millicores/);
  assert.deepEqual(parseAgentFlags(['--help'], {}, defaults), { ok: 'help' });
});

test('taints follow KEY[=VALUE][:EFFECT] with NoSchedule as the default effect', () => {
  assert.deepEqual(parseTaint('gpu-only'), { key: 'gpu-only', effect: 'NoSchedule' });
  assert.deepEqual(parseTaint('gpu=nvidia'), { key: 'gpu', value: 'nvidia', effect: 'NoSchedule' });
  assert.deepEqual(parseTaint('example.com/dedicated=infra:NoExecute'), { key: 'example.com/dedicated', value: 'infra', effect: 'NoExecute' });
  assert.equal(typeof parseTaint('=x'), 'string');
  assert.equal(typeof parseTaint('a=b c'), 'string');
});

test('control-plane URLs get the /agent path unless they name one', () => {
  assert.equal(agentUrl('ws://h1:7001'), 'ws://h1:7001/agent');
  assert.equal(agentUrl('wss://h1:7001/'), 'wss://h1:7001/agent');
  assert.equal(agentUrl('ws://h1:7001/custom'), 'ws://h1:7001/custom');
  assert.equal(agentUrl('h1:7001'), null);
  assert.equal(agentUrl('not a url'), null);
});
