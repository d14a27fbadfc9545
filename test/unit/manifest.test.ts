// test/unit/manifest.test.ts -- the Deployment manifest subset: the
// docs/contract.md example becomes the expected UnitSpec, every kind of bad
// manifest is refused with the field at fault in the message, and the spec
// hash is stable.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_REPLICAS, ManifestError, parseManifest, parseManifestObject, unitSpecHash, canonicalSpecJson, validateManifest } from '../../shared/manifest.ts';
import type { UnitSpec } from '../../shared/model.ts';
import { decodeControlPlaneMessage, encodeMessage } from '../../shared/protocol/codec.ts';
import { SeededRandom } from '../../shared/random.ts';

/** The example manifest of docs/contract.md, verbatim. */
const CONTRACT_EXAMPLE = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  template:
    spec:
      containers:                # exactly one: a unit is one process
        - name: web
          command: ["sleep", "3600"]
          env: [{name: GREETING, value: hello}]
          resources:
            requests: {cpu: 1000m, memory: 2048Mi}
      tolerations:
        - {key: gpu-only, operator: Exists}
`;

/** A fresh plain-object copy of the example to mutate per case. */
function example(): Record<string, any> {
  return parseManifestObject(CONTRACT_EXAMPLE) as Record<string, any>;
}

function refusal(obj: unknown): ManifestError {
  try {
    validateManifest(obj);
  } catch (err) {
    assert.ok(err instanceof ManifestError, `expected a ManifestError, got ${String(err)}`);
    return err;
  }
  assert.fail('the manifest was accepted');
}

test('the docs/contract.md example manifest is accepted and yields the expected UnitSpec', () => {
  const { manifest, unitSpec } = validateManifest(parseManifestObject(CONTRACT_EXAMPLE));
  assert.deepEqual(unitSpec, {
    containerName: 'web',
    command: ['sleep', '3600'],
    env: [{ name: 'GREETING', value: 'hello' }],
    resources: { cpu: 1000, memory: 2048 },
    tolerations: [{ key: 'gpu-only', operator: 'Exists' }],
  } satisfies UnitSpec);
  assert.equal(manifest.metadata.name, 'web');
  assert.equal(manifest.spec.replicas, 3);
  assert.deepEqual(manifest.spec.template.spec.containers[0].resources, { requests: { cpu: '1000m', memory: '2048Mi' } });
});

test('the same manifest written as JSON gives the same result', () => {
  const json = JSON.stringify(example());
  assert.deepEqual(parseManifest(json, 'json'), parseManifest(CONTRACT_EXAMPLE));
});

test('a manifest ready for real Kubernetes (image, selector, labels) is accepted and image is ignored', () => {
  const m = example();
  m.metadata.labels = { app: 'web' };
  m.metadata.annotations = { 'example.com/owner': 'team a' };
  m.spec.selector = { matchLabels: { app: 'web' } };
  m.spec.template.metadata = { labels: { app: 'web', tier: 'front' } };
  m.spec.template.spec.containers[0].image = 'busybox:1.36';
  m.spec.template.spec.containers[0].imagePullPolicy = 'IfNotPresent';
  const { manifest, unitSpec } = validateManifest(m);
  assert.deepEqual(unitSpec, { ...validateManifest(example()).unitSpec, labels: { app: 'web', tier: 'front' } });
  assert.deepEqual(manifest.metadata.labels, { app: 'web' });
  assert.deepEqual(manifest.spec.template.metadata, { labels: { app: 'web', tier: 'front' } });
  assert.equal('image' in manifest.spec.template.spec.containers[0], false);
});

test('args are appended to command to form the argv', () => {
  const m = example();
  m.spec.template.spec.containers[0].command = ['node'];
  m.spec.template.spec.containers[0].args = ['-e', 'setInterval(() => {}, 1000)'];
  assert.deepEqual(validateManifest(m).unitSpec.command, ['node', '-e', 'setInterval(() => {}, 1000)']);
});

test('absent requests default to 100m cpu and 128Mi memory, absent replicas to 1', () => {
  const m = example();
  delete m.spec.replicas;
  delete m.spec.template.spec.containers[0].resources;
  const { manifest, unitSpec } = validateManifest(m);
  assert.deepEqual(unitSpec.resources, { cpu: 100, memory: 128 });
  assert.equal(manifest.spec.replicas, 1);
  const onlyCpu = example();
  onlyCpu.spec.template.spec.containers[0].resources = { requests: { cpu: '250m' } };
  assert.deepEqual(validateManifest(onlyCpu).unitSpec.resources, { cpu: 250, memory: 128 });
});

test('resources.limits reach the UnitSpec; a request not given defaults to its limit (Kubernetes); no limits, no field (hash unchanged)', () => {
  const m = example();
  m.spec.template.spec.containers[0].resources = { requests: { cpu: '100m' }, limits: { cpu: '200m', memory: '64Mi' } };
  const { manifest, unitSpec } = validateManifest(m);
  assert.deepEqual(unitSpec.limits, { cpu: 200, memory: 64 });
  assert.deepEqual(unitSpec.resources, { cpu: 100, memory: 64 });
  assert.deepEqual(manifest.spec.template.spec.containers[0].resources, { requests: { cpu: '100m' }, limits: { cpu: '200m', memory: '64Mi' } });
  const onlyLimits = example();
  onlyLimits.spec.template.spec.containers[0].resources = { limits: { cpu: '1.5', memory: '1Gi' } };
  const r = validateManifest(onlyLimits);
  assert.deepEqual(r.unitSpec.resources, { cpu: 1500, memory: 1024 });
  assert.deepEqual(r.unitSpec.limits, { cpu: 1500, memory: 1024 });
  assert.equal('limits' in validateManifest(example()).unitSpec, false);
  const equal = example();
  equal.spec.template.spec.containers[0].resources.limits = { cpu: '1', memory: '2Gi' };
  assert.deepEqual(validateManifest(equal).unitSpec.limits, { cpu: 1000, memory: 2048 });
});

test('hostPID: true reaches the UnitSpec; false is kept in the manifest only; anything else is refused naming the field', () => {
  const m = example();
  m.spec.template.spec.hostPID = true;
  const r = validateManifest(m);
  assert.equal(r.unitSpec.hostPID, true);
  assert.equal(r.manifest.spec.template.spec.hostPID, true);
  m.spec.template.spec.hostPID = false;
  assert.equal('hostPID' in validateManifest(m).unitSpec, false);
  assert.equal(validateManifest(m).manifest.spec.template.spec.hostPID, false);
  m.spec.template.spec.hostPID = 'yes';
  assert.equal(refusal(m).message, 'invalid manifest: spec.template.spec.hostPID: expected true or false, got "yes"');
  const frame = encodeMessage({
    v: 1,
    type: 'spawn',
    commandId: 'c',
    term: 1,
    leaderId: 'cp-1',
    unit: { name: 'web-1', deployment: 'web', spec: r.unitSpec, revision: 1, specHash: '0123456789abcdef' },
  });
  assert.ok(decodeControlPlaneMessage(frame).ok);
});

test('a UnitSpec from an accepted manifest, even at every limit, passes the wire validation of a spawn command', () => {
  const m = example();
  m.metadata.name = 'a'.repeat(52);
  m.spec.template.spec.containers[0] = {
    name: 'b'.repeat(63),
    command: ['x'.repeat(4096)],
    args: Array.from({ length: 255 }, () => 'y'.repeat(100)),
    env: Array.from({ length: 256 }, (_, i) => ({ name: `V${i}`, value: 'z'.repeat(100) })),
    resources: { requests: { cpu: '1k', memory: '1Ti' } },
  };
  m.spec.template.spec.tolerations = Array.from({ length: 64 }, (_, i) => ({ key: `example.com/k${i}`, operator: 'Equal', value: 'v', effect: 'NoExecute' }));
  const { manifest, unitSpec } = validateManifest(m);
  const frame = encodeMessage({
    v: 1,
    type: 'spawn',
    commandId: 'c',
    term: 1,
    leaderId: 'cp-1',
    unit: { name: `${manifest.metadata.name}-4294967295`, deployment: manifest.metadata.name, spec: unitSpec, revision: 1, specHash: '0123456789abcdef' },
  });
  const result = decodeControlPlaneMessage(frame);
  assert.ok(result.ok, result.ok ? '' : result.error);
});

test('tolerations default to operator Equal and leave empty fields out', () => {
  const m = example();
  m.spec.template.spec.tolerations = [{ key: 'zone', value: 'b', effect: 'NoSchedule' }, { operator: 'Exists' }, { key: 'x', operator: 'Exists', effect: '' }];
  assert.deepEqual(validateManifest(m).unitSpec.tolerations, [
    { key: 'zone', operator: 'Equal', value: 'b', effect: 'NoSchedule' },
    { operator: 'Exists' },
    { key: 'x', operator: 'Exists' },
  ]);
});

test('every kind of bad manifest is refused with the field at fault in the message', () => {
  const cases: Array<[string, (m: Record<string, any>) => unknown, string, string]> = [
    ['wrong apiVersion', (m) => ((m.apiVersion = 'apps/v2'), m), 'apiVersion', 'invalid manifest: apiVersion: expected "apps/v1", got "apps/v2"'],
    ['wrong kind', (m) => ((m.kind = 'StatefulSet'), m), 'kind', 'invalid manifest: kind: expected "Deployment", got "StatefulSet"'],
    ['missing name', (m) => (delete m.metadata.name, m), 'metadata.name', 'invalid manifest: metadata.name: missing'],
    ['upper-case name', (m) => ((m.metadata.name = 'Web'), m), 'metadata.name', 'invalid manifest: metadata.name: expected a DNS-1123 label of at most 52 chars'],
    ['name ending in a dash', (m) => ((m.metadata.name = 'web-'), m), 'metadata.name', 'invalid manifest: metadata.name: expected a DNS-1123 label'],
    [
      'name too long for a unit suffix',
      (m) => ((m.metadata.name = 'a'.repeat(53)), m),
      'metadata.name',
      'invalid manifest: metadata.name: expected a DNS-1123 label of at most 52 chars',
    ],
    ['negative replicas', (m) => ((m.spec.replicas = -1), m), 'spec.replicas', 'invalid manifest: spec.replicas: expected an integer >= 0, got -1'],
    ['fractional replicas', (m) => ((m.spec.replicas = 1.5), m), 'spec.replicas', 'invalid manifest: spec.replicas: expected an integer >= 0, got 1.5'],
    ['replicas as a word', (m) => ((m.spec.replicas = 'three'), m), 'spec.replicas', 'invalid manifest: spec.replicas: expected an integer >= 0, got "three"'],
    ['too many replicas', (m) => ((m.spec.replicas = MAX_REPLICAS + 1), m), 'spec.replicas', `invalid manifest: spec.replicas: at most ${MAX_REPLICAS} allowed, got 1001`],
    [
      'zero containers',
      (m) => ((m.spec.template.spec.containers = []), m),
      'spec.template.spec.containers',
      'invalid manifest: spec.template.spec.containers: expected exactly one container (a unit is one process), got 0',
    ],
    ['two containers', (m) => (m.spec.template.spec.containers.push({ ...m.spec.template.spec.containers[0], name: 'side' }), m), 'spec.template.spec.containers', 'got 2'],
    [
      'empty command',
      (m) => ((m.spec.template.spec.containers[0].command = []), m),
      'spec.template.spec.containers[0].command',
      'invalid manifest: spec.template.spec.containers[0].command: expected a non-empty list',
    ],
    ['missing command', (m) => (delete m.spec.template.spec.containers[0].command, m), 'spec.template.spec.containers[0].command', 'missing (a unit runs this program on the node'],
    ['command as a string', (m) => ((m.spec.template.spec.containers[0].command = 'sleep 5'), m), 'spec.template.spec.containers[0].command', 'expected a list, got "sleep 5"'],
    ['a number in args', (m) => ((m.spec.template.spec.containers[0].args = [5]), m), 'spec.template.spec.containers[0].args[0]', 'expected a string (quote it in YAML), got 5'],
    [
      'bad cpu quantity',
      (m) => ((m.spec.template.spec.containers[0].resources.requests.cpu = 'lots'), m),
      'spec.template.spec.containers[0].resources.requests.cpu',
      'invalid manifest: spec.template.spec.containers[0].resources.requests.cpu: invalid cpu quantity "lots"',
    ],
    [
      'bad memory quantity',
      (m) => ((m.spec.template.spec.containers[0].resources.requests.memory = '2GB'), m),
      'spec.template.spec.containers[0].resources.requests.memory',
      'invalid memory quantity "2GB"',
    ],
    [
      'a cpu limit below its request',
      (m) => ((m.spec.template.spec.containers[0].resources.limits = { cpu: '500m' }), m),
      'spec.template.spec.containers[0].resources.limits.cpu',
      'invalid manifest: spec.template.spec.containers[0].resources.limits.cpu: 500m is below the request of 1000m (resources.requests.cpu); a limit must be at least its request',
    ],
    [
      'a memory limit below its request',
      (m) => ((m.spec.template.spec.containers[0].resources.limits = { memory: '1Gi' }), m),
      'spec.template.spec.containers[0].resources.limits.memory',
      '1024Mi is below the request of 2048Mi (resources.requests.memory)',
    ],
    [
      'a bad limit quantity',
      (m) => ((m.spec.template.spec.containers[0].resources.limits = { memory: '2GB' }), m),
      'spec.template.spec.containers[0].resources.limits.memory',
      'invalid memory quantity "2GB"',
    ],
    ['a zero limit', (m) => ((m.spec.template.spec.containers[0].resources.limits = { cpu: 0 }), m), 'spec.template.spec.containers[0].resources.limits.cpu', 'must be greater than 0'],
    [
      'an extended resource limit',
      (m) => ((m.spec.template.spec.containers[0].resources.limits = { 'nvidia.com/gpu': 1 }), m),
      'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
      'not supported',
    ],
    [
      'an extended resource',
      (m) => ((m.spec.template.spec.containers[0].resources.requests['nvidia.com/gpu'] = 1), m),
      'spec.template.spec.containers[0].resources.requests["nvidia.com/gpu"]',
      'not supported',
    ],
    ['volumes', (m) => ((m.spec.template.spec.volumes = []), m), 'spec.template.spec.volumes', 'invalid manifest: spec.template.spec.volumes: not supported'],
    [
      'a hostPort',
      (m) => ((m.spec.template.spec.containers[0].ports = [{ containerPort: 80, hostPort: 80 }]), m),
      'spec.template.spec.containers[0].ports[0].hostPort',
      'not supported',
    ],
    [
      'a strategy field we do not know',
      (m) => ((m.spec.strategy = { type: 'Recreate', blueGreen: {} }), m),
      'spec.strategy.blueGreen',
      'invalid manifest: spec.strategy.blueGreen: not supported',
    ],
    ['a namespace', (m) => ((m.metadata.namespace = 'default'), m), 'metadata.namespace', 'not supported'],
    ['a status', (m) => ((m.status = {}), m), 'status', 'invalid manifest: status: not supported'],
    ['env from a secret', (m) => ((m.spec.template.spec.containers[0].env = [{ name: 'A', valueFrom: {} }]), m), 'spec.template.spec.containers[0].env[0].valueFrom', 'not supported'],
    [
      'a numeric env value',
      (m) => ((m.spec.template.spec.containers[0].env = [{ name: 'PORT', value: 8080 }]), m),
      'spec.template.spec.containers[0].env[0].value',
      'expected a string (quote it in YAML), got 8080',
    ],
    [
      'bad toleration operator',
      (m) => ((m.spec.template.spec.tolerations[0].operator = 'In'), m),
      'spec.template.spec.tolerations[0].operator',
      'invalid manifest: spec.template.spec.tolerations[0].operator: expected "Exists" or "Equal", got "In"',
    ],
    ['bad toleration effect', (m) => ((m.spec.template.spec.tolerations[0].effect = 'NoRun'), m), 'spec.template.spec.tolerations[0].effect', 'got "NoRun"'],
    ['Exists with a value', (m) => ((m.spec.template.spec.tolerations[0].value = 'x'), m), 'spec.template.spec.tolerations[0].value', 'must be empty when operator is "Exists"'],
    [
      'Equal without a key',
      (m) => ((m.spec.template.spec.tolerations = [{ operator: 'Equal', value: 'x' }]), m),
      'spec.template.spec.tolerations[0].key',
      'required when operator is "Equal"',
    ],
    ['a toleration key with a space', (m) => ((m.spec.template.spec.tolerations[0].key = 'gpu only'), m), 'spec.template.spec.tolerations[0].key', 'not a valid taint key'],
    ['tolerationSeconds', (m) => ((m.spec.template.spec.tolerations[0].tolerationSeconds = 30), m), 'spec.template.spec.tolerations[0].tolerationSeconds', 'not supported'],
    [
      'a selector the template does not match',
      (m) => ((m.spec.selector = { matchLabels: { app: 'web' } }), m),
      'spec.template.metadata.labels',
      'must carry every spec.selector.matchLabels pair, missing app=web',
    ],
    ['a bad label key', (m) => ((m.metadata.labels = { 'bad key': 'x' }), m), 'metadata.labels["bad key"]', 'not a valid label key'],
    ['a missing template spec', (m) => (delete m.spec.template.spec, m), 'spec.template.spec', 'invalid manifest: spec.template.spec: missing'],
    ['not an object at all', () => ['apiVersion'], '', 'invalid manifest: expected an object, got a list of 1'],
    [
      'maxSurge and maxUnavailable both 0',
      (m) => ((m.spec.strategy = { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: '0%' } }), m),
      'spec.strategy.rollingUpdate.maxUnavailable',
      'may not be 0 when maxSurge is 0',
    ],
    [
      'a maxSurge that is neither count nor percent',
      (m) => ((m.spec.strategy = { rollingUpdate: { maxSurge: '2 pods' } }), m),
      'spec.strategy.rollingUpdate.maxSurge',
      'expected an integer >= 0 or a percentage such as "25%", got "2 pods"',
    ],
    [
      'maxUnavailable over 100%',
      (m) => ((m.spec.strategy = { rollingUpdate: { maxUnavailable: '150%' } }), m),
      'spec.strategy.rollingUpdate.maxUnavailable',
      'may not be more than 100%',
    ],
    ['an unknown strategy type', (m) => ((m.spec.strategy = { type: 'BlueGreen' }), m), 'spec.strategy.type', 'expected "RollingUpdate" or "Recreate", got "BlueGreen"'],
    ['rollingUpdate with Recreate', (m) => ((m.spec.strategy = { type: 'Recreate', rollingUpdate: {} }), m), 'spec.strategy.rollingUpdate', 'may not be given when type is "Recreate"'],
    [
      'a probe with no handler',
      (m) => ((m.spec.template.spec.containers[0].readinessProbe = { periodSeconds: 1 }), m),
      'spec.template.spec.containers[0].readinessProbe',
      'needs a handler: one of exec, httpGet, tcpSocket',
    ],
    [
      'a probe with two handlers',
      (m) => ((m.spec.template.spec.containers[0].livenessProbe = { exec: { command: ['true'] }, tcpSocket: { port: 80 } }), m),
      'spec.template.spec.containers[0].livenessProbe',
      'may have only one handler, got exec and tcpSocket',
    ],
    [
      'a probe port out of range',
      (m) => ((m.spec.template.spec.containers[0].readinessProbe = { httpGet: { path: '/', port: 70000 } }), m),
      'spec.template.spec.containers[0].readinessProbe.httpGet.port',
      'expected a port number in 1..65535, got 70000',
    ],
    [
      'a probe naming a port the container lacks',
      (m) => ((m.spec.template.spec.containers[0].readinessProbe = { tcpSocket: { port: 'http' } }), m),
      'spec.template.spec.containers[0].readinessProbe.tcpSocket.port',
      'no port named "http"',
    ],
    [
      'a liveness successThreshold over 1',
      (m) => ((m.spec.template.spec.containers[0].livenessProbe = { exec: { command: ['true'] }, successThreshold: 2 }), m),
      'spec.template.spec.containers[0].livenessProbe.successThreshold',
      'must be 1 for liveness and startup probes',
    ],
    [
      'a zero probe period',
      (m) => ((m.spec.template.spec.containers[0].readinessProbe = { exec: { command: ['true'] }, periodSeconds: 0 }), m),
      'spec.template.spec.containers[0].readinessProbe.periodSeconds',
      'expected an integer in 1..',
    ],
    [
      'a container port out of range',
      (m) => ((m.spec.template.spec.containers[0].ports = [{ containerPort: 0 }]), m),
      'spec.template.spec.containers[0].ports[0].containerPort',
      'expected a port number in 1..65535, got 0',
    ],
    [
      'a duplicate port',
      (m) => ((m.spec.template.spec.containers[0].ports = [{ containerPort: 80 }, { containerPort: 80 }]), m),
      'spec.template.spec.containers[0].ports[1].containerPort',
      'duplicate port 80/TCP',
    ],
    [
      'a negative grace period',
      (m) => ((m.spec.template.spec.terminationGracePeriodSeconds = -1), m),
      'spec.template.spec.terminationGracePeriodSeconds',
      'expected an integer in 0..3600, got -1',
    ],
    [
      'a progress deadline not above minReadySeconds',
      (m) => ((m.spec.minReadySeconds = 10), (m.spec.progressDeadlineSeconds = 10), m),
      'spec.progressDeadlineSeconds',
      'must be greater than spec.minReadySeconds (10)',
    ],
    ['paused as a string', (m) => ((m.spec.paused = 'yes'), m), 'spec.paused', 'expected true or false, got "yes"'],
  ];
  for (const [what, mutate, field, message] of cases) {
    const err = refusal(mutate(example()));
    assert.equal(err.field, field, what);
    assert.ok(err.message.includes(message), `${what}: "${err.message}" should include "${message}"`);
    assert.ok(!err.message.includes('\n'), `${what}: the message is one line`);
  }
});

test('a field written empty (`key:`) is a field not given, but an unknown field is refused even when empty', () => {
  const withEmpty = CONTRACT_EXAMPLE.replace('  replicas: 3\n', '  replicas:\n  strategy:\n').replace('env: [{name: GREETING, value: hello}]', 'env: [{name: GREETING, value: }]');
  const { manifest, unitSpec } = validateManifest(parseManifestObject(withEmpty));
  assert.equal(manifest.spec.replicas, 1, 'replicas: (empty) is the default 1');
  assert.equal(manifest.spec.strategy, undefined);
  assert.deepEqual(unitSpec.env, [{ name: 'GREETING', value: '' }]);
  const unknown = refusal(parseManifestObject(CONTRACT_EXAMPLE.replace('  replicas: 3\n', '  replicas: 3\n  serviceName:\n')));
  assert.equal(unknown.field, 'spec.serviceName');
  assert.equal(unknown.message, 'invalid manifest: spec.serviceName: not supported');
  assert.equal(refusal(parseManifestObject(CONTRACT_EXAMPLE.replace('apiVersion: apps/v1', 'apiVersion:'))).message, 'invalid manifest: apiVersion: expected "apps/v1", got nothing');
  const proto = refusal(JSON.parse('{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","__proto__":{"x":1}},"spec":{}}'));
  assert.equal(proto.message, 'invalid manifest: metadata.__proto__: not supported');
});

test('a YAML syntax error becomes a one-line message with its line number', () => {
  const broken = CONTRACT_EXAMPLE.replace('command: ["sleep", "3600"]', 'command: ["sleep", "3600"');
  assert.throws(
    () => parseManifest(broken),
    (err: unknown) => {
      assert.ok(err instanceof ManifestError);
      assert.equal(err.field, '');
      assert.match(err.message, /^invalid manifest: YAML syntax error at line \d+, column \d+: \S.*$/);
      assert.ok(!err.message.includes('\n'));
      return true;
    },
  );
  assert.throws(() => parseManifest('apiVersion: apps/v1\napiVersion: apps/v1\n'), /^ManifestError: invalid manifest: YAML syntax error at line 2, column 1: Map keys must be unique$/);
  assert.throws(() => parseManifest('{"apiVersion": "apps/v1" "kind": 1}', 'json'), /^ManifestError: invalid manifest: JSON syntax error at line 1/);
  assert.throws(() => parseManifest('a: 1\n---\nb: 2\n'), /YAML syntax error at line 2, column 1: Source contains multiple documents/);
});

test('an empty file is refused as not being an object', () => {
  assert.throws(() => parseManifest(''), /^ManifestError: invalid manifest: expected an object, got null$/);
});

test('the spec hash is stable, ignores key order and changes with the spec', () => {
  const spec = validateManifest(example()).unitSpec;
  const reordered: UnitSpec = {
    tolerations: spec.tolerations.map((t) => ({ operator: t.operator, key: t.key })),
    resources: { memory: spec.resources.memory, cpu: spec.resources.cpu },
    env: spec.env,
    command: spec.command,
    containerName: spec.containerName,
  };
  assert.match(unitSpecHash(spec), /^[0-9a-f]{16}$/);
  assert.equal(unitSpecHash(reordered), unitSpecHash(spec));
  assert.equal(unitSpecHash(spec), unitSpecHash(structuredClone(spec)));
  assert.notEqual(unitSpecHash({ ...spec, command: ['sleep', '3601'] }), unitSpecHash(spec));
  assert.notEqual(unitSpecHash({ ...spec, resources: { cpu: 1001, memory: 2048 } }), unitSpecHash(spec));
  // A known value pins the algorithm: changing it would restart every unit on upgrade.
  assert.equal(unitSpecHash(spec), '789f7d500a5ddcd9');
});

test('unitSpecHash is 64-bit FNV-1a of the canonical JSON: the limb arithmetic matches BigInt on random specs', () => {
  const reference = (text: string): string => {
    let h = 0xcbf29ce484222325n;
    for (const b of new TextEncoder().encode(text)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
    return h.toString(16).padStart(16, '0');
  };
  const rand = new SeededRandom(7);
  for (let i = 0; i < 300; i++) {
    const word = () => Array.from({ length: 1 + rand.int(20) }, () => String.fromCharCode(32 + rand.int(400))).join('');
    const spec = {
      containerName: word(),
      command: [word(), word()],
      env: [{ name: 'K', value: word() }],
      resources: { cpu: rand.int(100000), memory: rand.int(100000) },
      tolerations: [],
    };
    assert.equal(unitSpecHash(spec), reference(canonicalSpecJson(spec)), `seed 7 case ${i}`);
  }
});

test('workload fields: strategy, probes with defaults and named ports, grace period reach the manifest and the UnitSpec', () => {
  const m = example();
  m.spec.strategy = { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } };
  m.spec.minReadySeconds = 2;
  m.spec.progressDeadlineSeconds = 30;
  m.spec.template.spec.terminationGracePeriodSeconds = 5;
  m.spec.template.spec.containers[0].ports = [{ name: 'http', containerPort: 8080 }];
  m.spec.template.spec.containers[0].readinessProbe = { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 1 };
  m.spec.template.spec.containers[0].livenessProbe = { tcpSocket: { port: 8080 } };
  const { manifest, unitSpec } = validateManifest(m);
  assert.deepEqual(manifest.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } });
  assert.equal(manifest.spec.minReadySeconds, 2);
  assert.deepEqual(unitSpec.ports, [{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
  assert.deepEqual(unitSpec.probes?.readiness, {
    httpGet: { path: '/healthz', port: 8080 },
    initialDelaySeconds: 0,
    periodSeconds: 1,
    timeoutSeconds: 1,
    failureThreshold: 3,
    successThreshold: 1,
  });
  assert.deepEqual(unitSpec.probes?.liveness?.tcpSocket, { port: 8080 });
  assert.equal(unitSpec.gracePeriodMs, 5000);
  // The written template keeps the port's name, with the defaults filled in.
  assert.deepEqual(manifest.spec.template.spec.containers[0].readinessProbe?.httpGet, { path: '/healthz', port: 'http' });
  // A template that uses none of them hashes as before.
  assert.equal(unitSpecHash(validateManifest(example()).unitSpec), unitSpecHash({ ...validateManifest(example()).unitSpec }));
  assert.equal('probes' in validateManifest(example()).unitSpec, false);
});
