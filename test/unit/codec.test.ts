// test/unit/codec.test.ts -- the agent <-> control-plane frame codec:
// every message survives a round trip, every kind of bad frame is refused
// with a one-line reason naming the cause, and no input (random bytes,
// mutated valid frames) ever makes a decoder throw. Then the versioned store
// format of shared/codec.ts, and that it owns every msgpack setting.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Packr, pack } from 'msgpackr';
import { decodeStoreData, encodeStoreData, STORE_FORMAT_MARKER, STORE_FORMAT_VERSION, StoreFormatError, storeFormatVersion } from '../../shared/codec.ts';
import { decodeAgentMessage, decodeControlPlaneMessage, encodeMessage } from '../../shared/protocol/codec.ts';
import { MAX_FRAME_BYTES, type AgentMessage, type ControlPlaneMessage } from '../../shared/protocol/messages.ts';
import { MAX_UNITS_PER_HELLO, MAX_NAME_CHARS } from '../../shared/protocol/validate.ts';
import { fieldPath } from '../../shared/validate.ts';
import type { UnitReport, UnitSpec } from '../../shared/model.ts';
import { SeededRandom } from '../../shared/random.ts';

/** Encodes anything, bypassing the typed encoder, to forge bad frames. */
const raw = new Packr({ useRecords: false });
const forge = (value: unknown): Buffer => raw.pack(value);

/** A seeded PRNG (shared/random.ts) so every fuzz failure can be replayed. */
function prng(seed: number): () => number {
  const r = new SeededRandom(seed);
  return () => r.next();
}

const report: UnitReport = {
  name: 'web-1',
  deployment: 'web',
  phase: 'Failed',
  pid: 4242,
  exitCode: 1,
  signal: 'SIGKILL',
  reason: 'Killed',
  startedAt: 1_700_000_000_000,
  finishedAt: 1_700_000_005_000,
  resources: { cpu: 1000, memory: 2048 },
  term: 3,
};

const minimalReport: UnitReport = {
  name: 'web-2',
  deployment: 'web',
  phase: 'Pending',
  resources: { cpu: 100, memory: 128 },
  term: 0,
};

const spec: UnitSpec = {
  containerName: 'web',
  command: ['sleep', '3600'],
  env: [{ name: 'GREETING', value: 'hello' }],
  resources: { cpu: 1000, memory: 2048 },
  tolerations: [{ key: 'gpu-only', operator: 'Exists' }, { key: 'zone', operator: 'Equal', value: 'b', effect: 'NoExecute' }, { operator: 'Exists' }],
};

const agentMessages: AgentMessage[] = [
  {
    v: 1,
    type: 'hello',
    node: {
      name: 'node-c',
      capacity: { cpu: 4000, memory: 8192 },
      taints: [
        { key: 'gpu-only', effect: 'NoSchedule' },
        { key: 'zone', value: 'b', effect: 'PreferNoSchedule' },
      ],
      labels: { zone: 'b', 'kubernetes.io/hostname': 'node-c' },
    },
    agentPid: 1234,
    units: [report, minimalReport],
    highestTerm: 3,
  },
  { v: 1, type: 'heartbeat', seq: 17, sentAt: 1_700_000_000_123 },
  { v: 1, type: 'unit-status', unit: report },
  { v: 1, type: 'unit-gone', name: 'web-1' },
  { v: 1, type: 'command-refused', commandId: 'c-1', reason: 'stale term 3 < highest seen 4' },
];

const controlPlaneMessages: ControlPlaneMessage[] = [
  { v: 1, type: 'welcome', replicaId: 'cp-1', term: 4, leaderId: 'cp-2', heartbeatIntervalMs: 1000, pingIntervalMs: 1000 },
  { v: 1, type: 'welcome', replicaId: 'cp-1', term: 0, leaderId: null, heartbeatIntervalMs: 1000, pingIntervalMs: 32000 },
  { v: 1, type: 'spawn', commandId: 'c-2', term: 4, leaderId: 'cp-2', unit: { name: 'web-1', deployment: 'web', spec, revision: 1, specHash: '0123456789abcdef' } },
  {
    v: 1,
    type: 'terminate',
    commandId: 'c-3',
    term: 4,
    leaderId: 'cp-2',
    name: 'web-1',
    gracePeriodMs: 5000,
    reason: 'scaled down',
  },
  { v: 1, type: 'forget', commandId: 'c-4', term: 4, leaderId: 'cp-2', name: 'web-1' },
  { v: 1, type: 'leader', term: 5, leaderId: 'cp-3' },
  { v: 1, type: 'leader', term: 5, leaderId: null },
  { v: 1, type: 'ping-interval', pingIntervalMs: 2000 },
];

function refusedAsAgent(frame: Uint8Array): string {
  const result = decodeAgentMessage(frame);
  assert.equal(result.ok, false, 'frame should have been refused');
  return (result as { error: string }).error;
}

function refusedAsControlPlane(frame: Uint8Array): string {
  const result = decodeControlPlaneMessage(frame);
  assert.equal(result.ok, false, 'frame should have been refused');
  return (result as { error: string }).error;
}

/** A deep copy of a message with one field replaced (path of keys/indices). */
function withField(msg: object, path: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(msg) as Record<string | number, unknown>;
  let at: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (value === undefined) delete at[last];
  else at[last] = value;
  return copy;
}

test('every agent message survives an encode/decode round trip unchanged', () => {
  for (const msg of agentMessages) {
    const result = decodeAgentMessage(encodeMessage(msg));
    assert.deepEqual(result, { ok: true, msg }, msg.type);
  }
});

test('every control-plane message survives an encode/decode round trip unchanged', () => {
  for (const msg of controlPlaneMessages) {
    const result = decodeControlPlaneMessage(encodeMessage(msg));
    assert.deepEqual(result, { ok: true, msg }, msg.type);
  }
});

test('an optional field set to undefined is left out of the frame and decodes as absent', () => {
  const msg: AgentMessage = { v: 1, type: 'unit-status', unit: { ...minimalReport, pid: undefined, reason: undefined } };
  const result = decodeAgentMessage(encodeMessage(msg));
  assert.ok(result.ok);
  assert.deepEqual(Object.keys((result.msg as { unit: object }).unit).sort(), Object.keys(minimalReport).sort());
});

test('frames are plain msgpack maps that a generic decoder reads', () => {
  const frame = encodeMessage(controlPlaneMessages[0]);
  // 0x87: a fixmap of 7 entries, not msgpackr's record extension.
  assert.equal(frame[0], 0x87);
  assert.deepEqual(new Packr({ useRecords: false }).unpack(frame), controlPlaneMessages[0]);
});

test('a frame larger than MAX_FRAME_BYTES is refused before it is decoded', () => {
  const big = new Uint8Array(2 * MAX_FRAME_BYTES);
  assert.equal(refusedAsAgent(big), 'frame of 2097152 bytes exceeds limit 1048576');
  assert.equal(refusedAsControlPlane(big), 'frame of 2097152 bytes exceeds limit 1048576');
});

test('encoding a message that would exceed MAX_FRAME_BYTES fails loudly instead of sending it', () => {
  const huge: AgentMessage = { v: 1, type: 'unit-gone', name: 'x'.repeat(MAX_FRAME_BYTES) };
  assert.throws(() => encodeMessage(huge), /unit-gone frame of \d+ bytes exceeds limit 1048576/);
});

test('bytes that are not msgpack are refused as undecodable', () => {
  // An array header promising two items, then one.
  assert.match(refusedAsAgent(Buffer.from([0x92, 0x01])), /^undecodable msgpack frame: /);
  // A map header promising one entry, then nothing.
  assert.match(refusedAsAgent(Buffer.from([0x81])), /^undecodable msgpack frame: /);
  // A valid value followed by trailing garbage.
  assert.match(refusedAsAgent(Buffer.concat([encodeMessage(agentMessages[1]), Buffer.from([1, 2, 3])])), /^undecodable msgpack frame: /);
  assert.equal(refusedAsAgent(new Uint8Array(0)), 'empty frame');
});

test('a frame that is not a map is refused', () => {
  assert.equal(refusedAsAgent(forge([1, 2])), 'frame is not a map, got a list of 2');
  assert.equal(refusedAsAgent(forge('hello')), 'frame is not a map, got "hello"');
  assert.equal(refusedAsControlPlane(forge(null)), 'frame is not a map, got null');
  assert.equal(refusedAsControlPlane(forge(Buffer.from('xy'))), 'frame is not a map, got binary data of 2 bytes');
});

test('a frame with another protocol version is refused naming the version', () => {
  assert.equal(refusedAsAgent(forge({ ...agentMessages[1], v: 2 })), 'unsupported protocol version 2');
  assert.equal(refusedAsAgent(forge({ ...agentMessages[1], v: '1' })), 'unsupported protocol version "1"');
  assert.equal(refusedAsAgent(forge({ type: 'heartbeat', seq: 1, sentAt: 1 })), 'frame has no protocol version "v"');
});

test('an unknown message type is refused naming the type', () => {
  assert.equal(refusedAsAgent(forge({ v: 1, type: 'foo' })), 'unknown message type "foo"');
  assert.equal(refusedAsAgent(forge({ v: 1 })), 'frame has no message type, got nothing');
  assert.equal(refusedAsAgent(forge({ v: 1, type: 7 })), 'frame has no message type, got 7');
});

test('a message sent in the wrong direction is refused as unknown to that side', () => {
  assert.equal(refusedAsAgent(encodeMessage(controlPlaneMessages[0])), 'unknown message type "welcome" (not a message an agent sends)');
  assert.equal(refusedAsControlPlane(encodeMessage(agentMessages[0])), 'unknown message type "hello" (not a message the control plane sends)');
});

test('wrong or missing fields are refused with the path of the field at fault', () => {
  const hello = agentMessages[0];
  const cases: Array<[unknown, string]> = [
    [withField(hello, ['node', 'capacity', 'cpu'], 'x'), 'hello.node.capacity.cpu: expected an integer in 0..1099511627776, got "x"'],
    [withField(hello, ['node', 'capacity', 'memory'], -1), 'hello.node.capacity.memory: expected an integer in 0..1099511627776, got -1'],
    [withField(hello, ['node', 'name'], undefined), 'hello.node.name: missing'],
    [withField(hello, ['node', 'name'], ''), 'hello.node.name: expected a non-empty string of at most 253 chars, got ""'],
    [withField(hello, ['node', 'taints', 1, 'effect'], 'Sometimes'), 'hello.node.taints[1].effect: expected one of "NoSchedule", "PreferNoSchedule", "NoExecute", got "Sometimes"'],
    [withField(hello, ['node', 'labels', 'zone'], 3), 'hello.node.labels.zone: expected a string of at most 63 chars, got 3'],
    [withField(hello, ['units', 1, 'phase'], 'Lost'), 'hello.units[1].phase: expected one of "Pending", "Running", "Terminating", "Succeeded", "Failed", got "Lost"'],
    [withField(hello, ['units', 0, 'pid'], 1.5), 'hello.units[0].pid: expected a positive integer, got 1.5'],
    [withField(hello, ['units', 0, 'pid'], null), 'hello.units[0].pid: expected a positive integer, got null'],
    [withField(hello, ['units', 0, 'term'], 2 ** 60), `hello.units[0].term: expected a non-negative integer, got ${2 ** 60}`],
    [withField(hello, ['agentPid'], 0), 'hello.agentPid: expected a positive integer, got 0'],
    [withField(hello, ['units'], {}), `hello.units: expected a list of at most ${MAX_UNITS_PER_HELLO}, got an object`],
    [withField(hello, ['node', 'extra'], true), 'hello.node.extra: unknown field'],
    [withField(hello, ['node', 'a\nb'], true), 'hello.node["a\\nb"]: unknown field'],
    [withField(hello, ['node', 'k'.repeat(5000)], true), `hello.node["${'k'.repeat(40)}..." (5000 chars)]: unknown field`],
    [withField(hello, ['node', 'name'], 'node\nc'), 'hello.node.name: control characters are not allowed, got "node\\nc"'],
    [withField(agentMessages[1], ['seq'], '1'), 'heartbeat.seq: expected a non-negative integer, got "1"'],
    [withField(agentMessages[3], ['name'], 'x'.repeat(MAX_NAME_CHARS + 1)), `unit-gone.name: expected a non-empty string of at most 253 chars, got "${'x'.repeat(40)}..." (254 chars)`],
    [withField(agentMessages[4], ['commandId'], undefined), 'command-refused.commandId: missing'],
  ];
  for (const [msg, error] of cases) assert.equal(refusedAsAgent(forge(msg)), error);
});

test('wrong fields deep inside a spawn command are refused with their path', () => {
  const spawn = controlPlaneMessages[2];
  const cases: Array<[unknown, string]> = [
    [withField(spawn, ['unit', 'spec', 'command'], []), 'spawn.unit.spec.command: expected a non-empty argv (command[0] is the program)'],
    [withField(spawn, ['unit', 'spec', 'command', 1], 'a\u0000b'), 'spawn.unit.spec.command[1]: NUL characters are not allowed, got "a\\u0000b"'],
    [withField(spawn, ['unit', 'spec', 'env', 0, 'value'], 5), 'spawn.unit.spec.env[0].value: expected a string of at most 4096 chars, got 5'],
    [withField(spawn, ['unit', 'spec', 'tolerations', 0, 'operator'], 'In'), 'spawn.unit.spec.tolerations[0].operator: expected one of "Exists", "Equal", got "In"'],
    [withField(spawn, ['unit', 'spec', 'resources'], undefined), 'spawn.unit.spec.resources: missing'],
    [withField(spawn, ['unit', 'spec', 'image'], 'nginx'), 'spawn.unit.spec.image: unknown field'],
    [withField(spawn, ['term'], -1), 'spawn.term: expected a non-negative integer, got -1'],
    [withField(spawn, ['leaderId'], null), 'spawn.leaderId: expected a non-empty string of at most 128 chars, got null'],
    [withField(controlPlaneMessages[0], ['leaderId'], undefined), 'welcome.leaderId: missing'],
    [withField(controlPlaneMessages[0], ['heartbeatIntervalMs'], 0), 'welcome.heartbeatIntervalMs: expected a positive integer, got 0'],
    [withField(controlPlaneMessages[0], ['pingIntervalMs'], undefined), 'welcome.pingIntervalMs: missing'],
    [withField({ v: 1, type: 'ping-interval', pingIntervalMs: 2000 }, ['pingIntervalMs'], -5), 'ping-interval.pingIntervalMs: expected a positive integer, got -5'],
    [withField(controlPlaneMessages[3], ['gracePeriodMs'], 1e400), 'terminate.gracePeriodMs: expected a non-negative integer, got Infinity'],
  ];
  for (const [msg, error] of cases) assert.equal(refusedAsControlPlane(forge(msg)), error);
});

test('lists longer than their named maximum are refused', () => {
  const units = Array.from({ length: MAX_UNITS_PER_HELLO + 1 }, (_, i) => ({ ...minimalReport, name: `u-${i}` }));
  const frame = forge(withField(agentMessages[0], ['units'], units));
  assert.ok(frame.length <= MAX_FRAME_BYTES);
  assert.equal(refusedAsAgent(frame), `hello.units: at most ${MAX_UNITS_PER_HELLO} entries allowed, got ${MAX_UNITS_PER_HELLO + 1}`);
});

test('a map key of __proto__ cannot change the prototype of a decoded object', () => {
  // Hand-built: {v:1, type:'heartbeat', seq:1, sentAt:1, __proto__: {}}
  const frame = Buffer.concat([
    Buffer.from([0x85]),
    forge('v'),
    forge(1),
    forge('type'),
    forge('heartbeat'),
    forge('seq'),
    forge(1),
    forge('sentAt'),
    forge(1),
    forge('__proto__'),
    forge({ polluted: true }),
  ]);
  const error = refusedAsAgent(frame);
  assert.match(error, /^heartbeat\.__proto_*: unknown field$/);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test('msgpack extension values (timestamps, bigints) are refused as wrong types', () => {
  assert.equal(refusedAsAgent(forge({ v: 1, type: 'heartbeat', seq: 1, sentAt: new Date(5) })), 'heartbeat.sentAt: expected a non-negative integer, got a timestamp');
  assert.equal(refusedAsAgent(forge({ v: 1, type: 'heartbeat', seq: 2n ** 63n, sentAt: 1 })), 'heartbeat.seq: expected a non-negative integer, got bigint 9223372036854775808');
});

test('thousands of seeded random buffers are refused without a throw', () => {
  const seed = 20240601;
  const rand = prng(seed);
  for (let i = 0; i < 4000; i++) {
    const length = Math.floor(rand() * 64);
    const buf = new Uint8Array(length);
    // Bias the first byte towards map headers so many reach the validator.
    for (let j = 0; j < length; j++) buf[j] = Math.floor(rand() * 256);
    if (length > 0 && rand() < 0.5) buf[0] = 0x80 | Math.floor(rand() * 16);
    for (const decode of [decodeAgentMessage, decodeControlPlaneMessage]) {
      let result: ReturnType<typeof decodeAgentMessage> | ReturnType<typeof decodeControlPlaneMessage>;
      try {
        result = decode(buf);
      } catch (err) {
        assert.fail(`seed ${seed} buffer ${i} (${Buffer.from(buf).toString('hex')}) threw: ${String(err)}`);
      }
      if (!result.ok) {
        assert.equal(typeof result.error, 'string');
        assert.ok(!result.error.includes('\n'), `seed ${seed} buffer ${i}: error is more than one line`);
      }
    }
  }
});

test('thousands of seeded mutations of valid frames never throw and never pass an invalid message', () => {
  const seed = 77;
  const rand = prng(seed);
  const frames = [
    ...agentMessages.map((m) => ({ frame: encodeMessage(m), decode: decodeAgentMessage as (b: Uint8Array) => { ok: boolean; msg?: unknown; error?: string } })),
    ...controlPlaneMessages.map((m) => ({ frame: encodeMessage(m), decode: decodeControlPlaneMessage as (b: Uint8Array) => { ok: boolean; msg?: unknown; error?: string } })),
  ];
  let refused = 0;
  for (let i = 0; i < 4000; i++) {
    const { frame, decode } = frames[Math.floor(rand() * frames.length)];
    let mutated = Buffer.from(frame);
    const kind = Math.floor(rand() * 4);
    if (kind === 0) {
      mutated[Math.floor(rand() * mutated.length)] = Math.floor(rand() * 256);
    } else if (kind === 1) {
      mutated = mutated.subarray(0, Math.floor(rand() * mutated.length));
    } else if (kind === 2) {
      const at = Math.floor(rand() * mutated.length);
      mutated = Buffer.concat([mutated.subarray(0, at), Buffer.from([Math.floor(rand() * 256)]), mutated.subarray(at)]);
    } else {
      for (let k = 0; k < 4; k++) mutated[Math.floor(rand() * mutated.length)] ^= 1 << Math.floor(rand() * 8);
    }
    let result;
    try {
      result = decode(mutated);
    } catch (err) {
      assert.fail(`seed ${seed} mutation ${i} (${mutated.toString('hex')}) threw: ${String(err)}`);
    }
    if (result.ok) {
      // Whatever passes must re-encode and decode to the same message: the
      // validator let through only well-formed data.
      assert.deepEqual(decode(encodeMessage(result.msg as AgentMessage)), result, `seed ${seed} mutation ${i}`);
    } else {
      assert.ok(!result.error!.includes('\n'), `seed ${seed} mutation ${i}: error is more than one line`);
      refused++;
    }
  }
  assert.ok(refused > 2000, `most mutations should be refused, only ${refused} were`);
});

/** Every [path, value] leaf and branch of a message, for structural mutation. */
function paths(value: unknown, at: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = at.length > 0 ? [at] : [];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...at, i])));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...at, k]));
  return out;
}

test('thousands of seeded field replacements in valid messages never throw and are refused naming that field', () => {
  const seed = 4242;
  const rand = prng(seed);
  const oddValues: unknown[] = [
    null,
    true,
    -1,
    1.5,
    2 ** 53,
    Number.NaN,
    '',
    'x'.repeat(5000),
    'a\u0000b',
    [],
    [1, 'two'],
    {},
    { k: 1 },
    new Date(0),
    7n,
    Buffer.from('ab'),
    'Exists',
    'NoSchedule',
    'Running',
    0,
  ];
  const messages = [
    ...agentMessages.map((msg) => ({ msg, decode: decodeAgentMessage as (b: Uint8Array) => { ok: boolean; error?: string } })),
    ...controlPlaneMessages.map((msg) => ({ msg, decode: decodeControlPlaneMessage as (b: Uint8Array) => { ok: boolean; error?: string } })),
  ];
  let refused = 0;
  for (let i = 0; i < 3000; i++) {
    const { msg, decode } = messages[Math.floor(rand() * messages.length)];
    const all = paths(msg).filter((p) => p[0] !== 'v' && p[0] !== 'type');
    const path = all[Math.floor(rand() * all.length)];
    const value = oddValues[Math.floor(rand() * oddValues.length)];
    const mutated = withField(msg, path, value);
    let result;
    try {
      result = decode(forge(mutated));
    } catch (err) {
      assert.fail(`seed ${seed} case ${i}: ${path.join('.')} = ${String(value)} threw: ${String(err)}`);
    }
    if (!result.ok) {
      refused++;
      // The error names the replaced field or something inside it, or, for
      // a replaced list entry, the list itself (argv[0] must be non-empty).
      const render = (p: (string | number)[]) => p.reduce<string>((acc, k) => (typeof k === 'number' ? `${acc}[${k}]` : fieldPath(acc, k)), msg.type);
      const field = render(path);
      const parent = render(path.slice(0, -1));
      assert.ok(
        result.error!.startsWith(`${field}:`) ||
          result.error!.startsWith(`${field}.`) ||
          result.error!.startsWith(`${field}[`) ||
          (typeof path[path.length - 1] === 'number' && result.error!.startsWith(`${parent}:`)),
        `seed ${seed} case ${i}: "${result.error}" should name ${field}`,
      );
      assert.ok(!result.error!.includes('\n'));
    }
  }
  assert.ok(refused > 2000, `most replacements should be refused, only ${refused} were`);
});

// ---- the store format (shared/codec.ts): the bytes of log entries and snapshots on disk ----

test('store data carries its format version: marker 0xc1, version 1, then plain msgpack', () => {
  const cmd = { type: 'deployment.apply', name: 'web', spec: { replicas: 3, image: undefined }, data: new Uint8Array([1, 2]) };
  const bytes = encodeStoreData(cmd);
  assert.equal(bytes[0], STORE_FORMAT_MARKER);
  assert.equal(bytes[1], STORE_FORMAT_VERSION);
  assert.equal(STORE_FORMAT_VERSION, 1);
  assert.equal(storeFormatVersion(bytes), 1);
  // The body is a plain msgpack map any implementation reads (0x84: a fixmap of 4 entries).
  assert.equal(bytes[2], 0x84);
  const back = decodeStoreData(bytes) as typeof cmd;
  assert.deepEqual({ ...back, data: [...back.data] }, { type: 'deployment.apply', name: 'web', spec: { replicas: 3 }, data: [1, 2] });
  assert.ok(!('image' in back.spec), 'an absent optional field stays absent');
});

test('store data written before the version existed (version 0, msgpackr defaults) still reads', () => {
  const legacy = pack({ type: 'node.register', name: 'node-a', taints: [{ key: 'k', value: undefined, effect: 'NoSchedule' }] });
  assert.equal(storeFormatVersion(legacy), 0);
  assert.deepEqual(decodeStoreData(legacy), { type: 'node.register', name: 'node-a', taints: [{ key: 'k', value: undefined, effect: 'NoSchedule' }] });
});

test('store data of another version, truncated or undecodable is refused with one line naming what and why', () => {
  const newer = encodeStoreData({ a: 1 });
  newer[1] = 7;
  assert.throws(
    () => decodeStoreData(newer, 'raft log entry 12'),
    (err: unknown) => {
      assert.ok(err instanceof StoreFormatError);
      assert.equal(err.version, 7);
      assert.equal(err.message, 'raft log entry 12 is in store format version 7; this build reads versions 0 and 1 only (written by a newer mini-orchestrator?)');
      return true;
    },
  );
  assert.throws(() => decodeStoreData(new Uint8Array([0xc1]), 'snapshot at index 9'), /^StoreFormatError: snapshot at index 9 is truncated: a format marker without a version$/);
  assert.throws(() => decodeStoreData(new Uint8Array([]), 'x'), /x is empty/);
  assert.throws(
    () => decodeStoreData(new Uint8Array([0xc1, 1, 0xd9]), 'entry 3'),
    (err: unknown) => {
      assert.ok(err instanceof StoreFormatError);
      assert.match(err.message, /^entry 3 \(store format version 1\) does not decode: /);
      assert.ok(!err.message.includes('\n'));
      return true;
    },
  );
});

test('shared/codec.ts is the only code that imports msgpackr (one owner of every msgpack setting)', () => {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const importers: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(root, dir))) {
      const rel = dir === '' ? name : `${dir}/${name}`;
      if (['node_modules', '.git', 'dist', 'test'].includes(rel)) continue;
      if (statSync(join(root, rel)).isDirectory()) walk(rel);
      else if (/\.(ts|mjs|js)$/.test(name) && /from\s+['"]msgpackr['"]|require\(['"]msgpackr['"]\)/.test(readFileSync(join(root, rel), 'utf8'))) importers.push(rel);
    }
  };
  walk('');
  assert.deepEqual(importers, ['shared/codec.ts']);
});
