// test/unit/nodes-file.test.ts -- the `--nodes FILE` list, the four
// default nodes, and the taint / capacity notation the agent's flags share.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LESSON_NODES, NodeSpecError, parseCapacityCpu, parseCapacityMemory, parseNodesFile, parseTaint } from '../../shared/nodes-file.ts';
import { encodeMessage, decodeAgentMessage } from '../../shared/protocol/codec.ts';
import type { NodeInfo } from '../../shared/model.ts';

test('the default nodes are the four of docs/contract.md, node-c tainted gpu-only', () => {
  assert.deepEqual(LESSON_NODES, [
    { name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} },
    { name: 'node-b', capacity: { cpu: 8000, memory: 16384 }, taints: [], labels: {} },
    { name: 'node-c', capacity: { cpu: 4000, memory: 8192 }, taints: [{ key: 'gpu-only', effect: 'NoSchedule' }], labels: {} },
    { name: 'node-d', capacity: { cpu: 8000, memory: 16384 }, taints: [], labels: {} },
  ] satisfies NodeInfo[]);
});

test('the default nodes cannot be changed by accident', () => {
  assert.throws(() => {
    (LESSON_NODES[0].capacity as { cpu: number }).cpu = 1;
  }, TypeError);
  assert.equal(LESSON_NODES[0].capacity.cpu, 4000);
});

test('every default node passes the wire validation of a hello', () => {
  for (const node of LESSON_NODES) {
    const result = decodeAgentMessage(encodeMessage({ v: 1, type: 'hello', node, agentPid: 1, units: [], highestTerm: 0 }));
    assert.ok(result.ok, result.ok ? '' : result.error);
  }
});

test('a YAML nodes file with numbers, quantities, taints and labels becomes NodeInfo', () => {
  const text = `
- name: small
  cpu: 2000
  memory: 4096
- name: big
  cpu: 16000m
  memory: 32Gi
  taints: [gpu-only, "zone=b:PreferNoSchedule", {key: dedicated, value: db, effect: NoExecute}]
  labels: {zone: b, "example.com/rack": "3"}
- name: quoted
  cpu: "1000"
  memory: "512Mi"
`;
  assert.deepEqual(parseNodesFile(text), [
    { name: 'small', capacity: { cpu: 2000, memory: 4096 }, taints: [], labels: {} },
    {
      name: 'big',
      capacity: { cpu: 16000, memory: 32768 },
      taints: [
        { key: 'gpu-only', effect: 'NoSchedule' },
        { key: 'zone', value: 'b', effect: 'PreferNoSchedule' },
        { key: 'dedicated', value: 'db', effect: 'NoExecute' },
      ],
      labels: { zone: 'b', 'example.com/rack': '3' },
    },
    { name: 'quoted', capacity: { cpu: 1000, memory: 512 }, taints: [], labels: {} },
  ] satisfies NodeInfo[]);
});

test('a field written empty (`taints:`) is a field not given', () => {
  assert.deepEqual(parseNodesFile('- name: a\n  cpu: 1000\n  memory: 1024\n  taints:\n  labels:\n'), [{ name: 'a', capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} }]);
});

test('a JSON nodes file is read the same way', () => {
  const json = JSON.stringify([{ name: 'node-a', cpu: 4000, memory: 8192, taints: ['gpu-only'] }]);
  assert.deepEqual(parseNodesFile(json), [{ name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [{ key: 'gpu-only', effect: 'NoSchedule' }], labels: {} }]);
});

test('taints in kubectl notation default to NoSchedule', () => {
  assert.deepEqual(parseTaint('gpu-only'), { key: 'gpu-only', effect: 'NoSchedule' });
  assert.deepEqual(parseTaint('k=v:NoExecute'), { key: 'k', value: 'v', effect: 'NoExecute' });
  assert.deepEqual(parseTaint('k=v'), { key: 'k', value: 'v', effect: 'NoSchedule' });
  assert.deepEqual(parseTaint('example.com/gpu:PreferNoSchedule'), { key: 'example.com/gpu', effect: 'PreferNoSchedule' });
  assert.deepEqual(parseTaint('k=:NoSchedule'), { key: 'k', effect: 'NoSchedule' });
});

test('bad taints are refused naming the taint and the reason', () => {
  assert.throws(() => parseTaint('k=v:Never'), {
    name: 'NodeSpecError',
    message: 'taint: invalid taint "k=v:Never": effect must be one of NoSchedule, PreferNoSchedule, NoExecute, got "Never"',
  });
  assert.throws(() => parseTaint(''), /^NodeSpecError: taint: invalid taint "": key "" is not a valid key/);
  assert.throws(() => parseTaint('bad key'), /invalid taint "bad key": key "bad key" is not a valid key/);
  assert.throws(() => parseTaint('k=v w', '--taint'), /^NodeSpecError: --taint: invalid taint "k=v w": value "v w" is not a valid value/);
});

test('capacity numbers are millicores and MiB; suffixed values are Kubernetes quantities', () => {
  assert.equal(parseCapacityCpu(4000), 4000);
  assert.equal(parseCapacityCpu('4000'), 4000);
  assert.equal(parseCapacityCpu('4000m'), 4000);
  assert.equal(parseCapacityCpu('4k'), 4_000_000);
  assert.equal(parseCapacityMemory(8192), 8192);
  assert.equal(parseCapacityMemory('8192'), 8192);
  assert.equal(parseCapacityMemory('8Gi'), 8192);
  assert.equal(parseCapacityMemory('8G'), 7630);
  assert.throws(() => parseCapacityCpu('1.5', '--cpu'), { message: '--cpu: expected a whole number of millicores or a quantity such as 4000m, got "1.5"' });
  assert.throws(() => parseCapacityCpu(0), { message: 'cpu: a node needs some cpu, got 0' });
  assert.throws(() => parseCapacityMemory('lots', '--memory'), /^NodeSpecError: --memory: invalid memory quantity "lots"/);
});

test('every kind of bad entry is refused naming the entry and field', () => {
  const cases: Array<[string, RegExp | string]> = [
    [
      '- {name: a, cpu: 1000, memory: 1024}\n- {name: b, cpu: 1000, memory: 1024}\n- {name: c, cpu: x, memory: 1024}',
      "nodes[2].cpu: invalid cpu quantity \"x\": expected Kubernetes notation such as '500m', '1', '1.5'",
    ],
    ['- {name: a, cpu: -5, memory: 1024}', 'nodes[0].cpu: expected a whole number of millicores or a quantity such as 4000m, got -5'],
    ['- {name: a, memory: 1024}', 'nodes[0].cpu: missing'],
    ['- {name: a, cpu: 1000}', 'nodes[0].memory: missing'],
    ['- {name: a, cpu: 1000, memory: [1]}', 'nodes[0].memory: expected MiB or a quantity such as 8Gi, got a list of 1'],
    ['- {name: Node_A, cpu: 1000, memory: 1024}', /^nodes\[0\]\.name: expected a DNS-1123 name/],
    ['- {cpu: 1000, memory: 1024}', "nodes[0].name: expected a DNS-1123 name (lower-case letters, digits, '-' and '.'), got nothing"],
    ['- {name: a, cpu: 1000, memory: 1024, gpus: 2}', 'nodes[0].gpus: not supported'],
    ['- {name: a, cpu: 1000, memory: 1024, taints: ["x:Sometimes"]}', /^nodes\[0\]\.taints\[0\]: invalid taint "x:Sometimes": effect must be one of/],
    ['- {name: a, cpu: 1000, memory: 1024, taints: [{key: x, effect: Never}]}', 'nodes[0].taints[0].effect: expected one of NoSchedule, PreferNoSchedule, NoExecute, got "Never"'],
    ['- {name: a, cpu: 1000, memory: 1024, taints: [{key: x, operator: Exists}]}', 'nodes[0].taints[0].operator: not supported'],
    ['- {name: a, cpu: 1000, memory: 1024, taints: [gpu-only, gpu-only]}', 'nodes[0].taints[1]: duplicate taint gpu-only:NoSchedule'],
    ['- {name: a, cpu: 1000, memory: 1024, taints: [5]}', 'nodes[0].taints[0]: expected "key[=value][:Effect]" or {key, value, effect}, got 5'],
    ['- {name: a, cpu: 1000, memory: 1024, labels: {rack: 3}}', 'nodes[0].labels.rack: expected a string (quote it in YAML), got 3'],
    ['- {name: a, cpu: 1000, memory: 1024, labels: {"bad key": x}}', 'nodes[0].labels["bad key"]: not a valid label key ([prefix/]name, name at most 63 chars)'],
    ['- {name: a, cpu: 1000, memory: 1024, taints:, gpus:}', 'nodes[0].gpus: not supported'],
    ['- {name: a, cpu: 1000, memory: 1024}\n- {name: a, cpu: 1000, memory: 1024}', 'nodes[1].name: "a" is already the name of nodes[0]'],
    ['[]', 'nodes: the list has no nodes'],
    ['name: a\ncpu: 1000', 'nodes: expected a list of nodes, got an object'],
    ['- name: a\n  cpu: 1000\n  cpu: 2000\n  memory: 1', /^syntax error at line 3, column 3: Map keys must be unique$/],
    ['- [name: a', /^syntax error at line \d+, column \d+: /],
  ];
  for (const [text, message] of cases) {
    assert.throws(
      () => parseNodesFile(text),
      (err: unknown) => {
        assert.ok(err instanceof NodeSpecError, `${text}: ${String(err)}`);
        if (typeof message === 'string') assert.equal(err.message, message);
        else assert.match(err.message, message);
        assert.ok(!err.message.includes('\n'));
        return true;
      },
      text,
    );
  }
});
