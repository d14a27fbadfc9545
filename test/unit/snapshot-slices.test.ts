// test/unit/snapshot-slices.test.ts -- the leader's snapshot packed in slices
// (control-plane/store/snapshot-slices.ts): the bytes decode to the same
// state as encodeStoreData(state.snapshot()) does, a restore from them gives the same
// state, the packing yields whenever a slice ran out of time, and the view
// captured at the snapshot's instant is not changed by applies after it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeStoreData as unpack, encodeStoreData as pack, packFrame } from '../../shared/codec.ts';
import { DesiredState, type DesiredSnapshot, type StoreCommand } from '../../control-plane/store/desired-state.ts';
import { capture, packInSlices, unpackInSlices } from '../../control-plane/store/snapshot-slices.ts';
import { unitSpecHash, validateManifest } from '../../shared/manifest.ts';

function applyDeployment(s: DesiredState, index: number, name: string, replicas: number, env = 'a'): void {
  const { manifest, unitSpec } = validateManifest({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      template: { spec: { containers: [{ name, command: ['sleep', '3600'], env: [{ name: 'E', value: env }], resources: { requests: { cpu: '10m', memory: '8Mi' } } }] } },
    },
  });
  const cmd: StoreCommand = { type: 'deployment.apply', at: 1000 + index, uid: `uid-${index}`, manifest, unitSpec, specHash: unitSpecHash(unitSpec) };
  const r = s.apply(index, cmd);
  assert.equal(r.ok, true);
}

function bigState(n: number): DesiredState {
  const s = new DesiredState();
  let i = 1;
  s.apply(i++, { type: 'node.register', at: 1, node: { name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} } });
  for (let k = 0; k < n; k++) applyDeployment(s, i++, `d-${k}`, k % 7 === 0 ? 1 : 0);
  for (let k = 0; k < n; k += 7) s.apply(i++, { type: 'unit.create', at: 5, uid: `u-${k}`, deployment: `d-${k}`, nodeName: 'node-a', scheduling: null });
  s.apply(i++, {
    type: 'events.record',
    at: 6,
    events: [{ type: 'Normal', reason: 'Scheduled', message: 'assigned', involvedObject: { kind: 'Unit', name: 'd-0-1' }, source: 'cp-1', timestamp: 6 }],
  });
  return s;
}

test('sliced bytes unpack to the same snapshot as one pack, and restore the same state', async () => {
  const s = bigState(300);
  const whole = unpack(pack(s.snapshot())) as DesiredSnapshot;
  const sliced = await packInSlices(capture(s), () => Promise.resolve(), 0);
  const back = unpack(sliced) as DesiredSnapshot;
  // The very bytes of the store format: header, then the same msgpack.
  assert.deepEqual(Buffer.from(sliced), Buffer.from(pack(capture(s))));
  const r = new DesiredState();
  r.restore(back);
  assert.deepEqual(unpack(pack(r.snapshot())), whole);
  assert.equal(r.deployments.size, 300);
  assert.equal(r.units.size, Math.ceil(300 / 7));
});

test('packing yields to the event loop whenever a slice has run for its time', async () => {
  const s = bigState(50);
  let t = 0;
  let yields = 0;
  // Every clock reading advances 1 ms; slices of 5 ms: it must yield many times, and still give the same bytes.
  const bytes = await packInSlices(
    capture(s),
    async () => void yields++,
    5,
    () => t++,
  );
  assert.ok(yields >= 10, `yielded ${yields} times`);
  assert.deepEqual(unpack(bytes), unpack(pack(capture(s))));
});

test('the captured view is the state at its instant: applies after it change nothing in it', async () => {
  const s = bigState(20);
  const before = unpack(pack(s.snapshot()));
  const view = capture(s);
  // Change records in place the way apply does: scale, a new template, a bind, a cordon, a delete.
  s.apply(1000, { type: 'deployment.scale', at: 7, name: 'd-1', replicas: 5 });
  applyDeployment(s, 1001, 'd-2', 0, 'b');
  s.apply(1002, { type: 'node.cordon', at: 8, name: 'node-a', unschedulable: true });
  s.apply(1003, { type: 'deployment.delete', at: 9, name: 'd-3' });
  s.apply(1004, { type: 'unit.bind', at: 10, name: [...s.units.keys()][0], nodeName: 'node-b', scheduling: null });
  const bytes = await packInSlices(view, () => Promise.resolve(), 0);
  const r = new DesiredState();
  r.restore(unpack(bytes) as DesiredSnapshot);
  assert.deepEqual(unpack(pack(r.snapshot())), before);
  assert.notDeepEqual(unpack(pack(s.snapshot())), before);
});

test("a snapshot holds each template once: revisions and units share their deployment's, and a restore shares them again", async () => {
  const s = bigState(70);
  // d-0 gets a second template: its units keep revision 1's spec, which is no longer the current one.
  applyDeployment(s, 500, 'd-0', 1, 'b');
  s.apply(501, { type: 'unit.create', at: 7, uid: 'u-new', deployment: 'd-0', nodeName: 'node-a', scheduling: null });
  const full = pack(s.snapshot()).length;
  const bytes = await packInSlices(capture(s), () => Promise.resolve(), 0);
  assert.ok(bytes.length < full * 0.75, `shared form ${bytes.length} bytes, full ${full}`);
  const r = new DesiredState();
  r.restore(unpack(bytes) as DesiredSnapshot);
  // Equal down to the order of the keys (the simulation compares replicas' states as JSON).
  assert.equal(JSON.stringify(r.snapshot()), JSON.stringify(s.snapshot()));
  const d = r.deployments.get('d-7')!;
  assert.equal(d.revisions[0].unitSpec, d.unitSpec);
  assert.equal(d.revisions[0].template, d.manifest.spec.template);
  assert.equal(r.units.get('d-7-1')!.spec, d.unitSpec);
  const d0 = r.deployments.get('d-0')!;
  assert.equal(r.units.get('d-0-1')!.spec, d0.revisions.find((x) => x.revision === 1)!.unitSpec);
  assert.equal(r.units.get('d-0-2')!.spec, d0.unitSpec);
  assert.notEqual(d0.revisions[0].unitSpec, d0.unitSpec);
  // A unit whose revision is gone keeps its own spec in the snapshot.
  s.apply(502, { type: 'deployment.delete', at: 8, name: 'd-14' });
  const again = new DesiredState();
  again.restore(unpack(await packInSlices(capture(s), () => Promise.resolve(), 0)) as DesiredSnapshot);
  assert.deepEqual(again.units.get('d-14-1')!.spec, s.units.get('d-14-1')!.spec);
});

test('unpacking in slices gives what one unpack gives, and yields whenever a slice has run for its time', async () => {
  const s = bigState(120);
  const bytes = await packInSlices(capture(s), () => Promise.resolve(), 0);
  let t = 0;
  let yields = 0;
  const back = await unpackInSlices(
    bytes,
    'snapshot',
    async () => void yields++,
    5,
    () => t++,
  );
  assert.deepEqual(back, unpack(bytes));
  assert.ok(yields >= 20, `yielded ${yields} times`);
  // encodeStoreData's bytes of the same value, and legacy (version 0, bare msgpack) data, read the same.
  assert.deepEqual(await unpackInSlices(pack(capture(s))), unpack(bytes));
  assert.deepEqual(await unpackInSlices(packFrame({ a: [1, 2], b: 'x' })), { a: [1, 2], b: 'x' });
  // Not a map at the top: decoded whole, as decodeStoreData does.
  assert.deepEqual(await unpackInSlices(pack([1, { a: 2 }])), [1, { a: 2 }]);
});

test('unpacking in slices refuses damaged bytes with a one-line error naming them', async () => {
  const bytes = await packInSlices(capture(bigState(30)), () => Promise.resolve(), 0);
  await assert.rejects(unpackInSlices(bytes.subarray(0, bytes.length - 40), 'snapshot at index 7'), /^StoreFormatError: snapshot at index 7 .*does not decode/);
  await assert.rejects(unpackInSlices(Buffer.concat([bytes, Buffer.from([1, 2])]), 'snapshot at index 7'), /snapshot at index 7: 2 bytes after the end/);
  const huge = Buffer.from([0xc1, 1, 0x81, 0xa1, 0x61, 0xdd, 0x7f, 0xff, 0xff, 0xff, 0]);
  await assert.rejects(unpackInSlices(huge, 'snapshot'), /field a says 2147483647 items in 1 bytes/);
  await assert.rejects(unpackInSlices(Buffer.from([0xc1, 9, 0x80])), /store format version 9/);
});

test('packed into chunks: the same bytes as one pack for every header size, whatever the size hint, and no part overwritten by the next', async () => {
  // Arrays and maps of 15, 16, 65,535 and 65,536 items take each of msgpack's header forms.
  const value: Record<string, unknown> = { a: Array.from({ length: 15 }, (_, i) => i), b: Array.from({ length: 16 }, (_, i) => `x${i}`) };
  value.c = Array.from({ length: 0xffff }, (_, i) => i % 3);
  value.d = Array.from({ length: 0x10000 }, (_, i) => ({ i }));
  for (let i = 0; i < 20; i++) value[`k${i}`] = { n: i, s: 'y'.repeat(i * 50) };
  // More than one chunk of 1 MiB, and one part larger than a chunk.
  value.e = Array.from({ length: 1500 }, (_, i) => 'z'.repeat(1000) + i);
  value.f = 'w'.repeat(1_500_000);
  const whole = Buffer.from(pack(value));
  for (const hint of [0, 1000, whole.length, whole.length * 4]) {
    const sliced = await packInSlices(
      value,
      () => Promise.resolve(),
      0,
      () => 0,
      hint,
    );
    assert.ok(Buffer.from(sliced).equals(whole), `size hint ${hint}: bytes differ`);
  }
});

test('restoring in slices gives what restore gives; until its last step the old state stays whole and no listener hears a thing, then one notice: all', async () => {
  const s = bigState(200);
  applyDeployment(s, 900, 'd-0', 1, 'b'); // a second template: units of two revisions
  s.apply(901, { type: 'unit.create', at: 7, uid: 'u-new', deployment: 'd-0', nodeName: 'node-a', scheduling: null });
  const bytes = await packInSlices(capture(s), () => Promise.resolve(), 0);
  const one = new DesiredState();
  one.restore(unpack(bytes) as DesiredSnapshot);

  const r = bigState(3); // something to replace
  const old = JSON.stringify(r.snapshot());
  const heard: string[] = [];
  r.onChange((kind, name) => heard.push(`${kind}/${name}`));
  let pauses = 0;
  await r.restoreInSlices(unpack(bytes) as DesiredSnapshot, async () => {
    pauses++;
    assert.equal(JSON.stringify(r.snapshot()), old, `the state changed before the last step (pause ${pauses})`);
    assert.equal(heard.length, 0);
    await new Promise((resolve) => setImmediate(resolve));
  });
  assert.ok(pauses >= Math.floor(200 / 64), `paused ${pauses} times`);
  assert.equal(JSON.stringify(r.snapshot()), JSON.stringify(one.snapshot()));
  assert.equal(JSON.stringify(r.snapshot()), JSON.stringify(s.snapshot()));
  // Shared as restore shares them, and every listener told once that everything may have changed.
  assert.equal(r.units.get('d-7-1')!.spec, r.deployments.get('d-7')!.unitSpec);
  assert.deepEqual(heard, ['all/']);
  assert.equal(r.requestsOn('node-a').cpu, one.requestsOn('node-a').cpu);
});

test('a snapshot whose unit has no spec to take is refused before anything changes: the old state stays, whole', async () => {
  const s = bigState(10);
  const view = capture(s);
  const unit = view.units.find((u) => u.spec === null)!;
  unit.specHash = 'no-such-revision';
  const bytes = await packInSlices(view, () => Promise.resolve(), 0);
  for (const how of ['restore', 'restoreInSlices'] as const) {
    const r = bigState(3);
    const old = JSON.stringify(r.snapshot());
    const restoring = async () => (how === 'restore' ? r.restore(unpack(bytes) as DesiredSnapshot) : r.restoreInSlices(unpack(bytes) as DesiredSnapshot, () => Promise.resolve()));
    await assert.rejects(restoring(), new RegExp(`snapshot: unit ${unit.name} has no spec and deployment ${unit.deployment} no revision no-such-revision`));
    assert.equal(JSON.stringify(r.snapshot()), old, how);
  }
});
