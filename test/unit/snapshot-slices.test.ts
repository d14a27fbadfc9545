// test/unit/snapshot-slices.test.ts -- the leader's snapshot packed in slices
// (control-plane/store/snapshot-slices.ts): the bytes decode to the same
// state as encodeStoreData(state.snapshot()) does, a restore from them gives the same
// state, the packing yields whenever a slice ran out of time, and the view
// captured at the snapshot's instant is not changed by applies after it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeStoreData as unpack, encodeStoreData as pack } from '../../shared/codec.ts';
import { DesiredState, type DesiredSnapshot, type StoreCommand } from '../../control-plane/store/desired-state.ts';
import { capture, packInSlices } from '../../control-plane/store/snapshot-slices.ts';
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
  assert.deepEqual(Buffer.from(sliced), Buffer.from(pack(s.snapshot())));
  assert.deepEqual(back, whole);
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
  assert.deepEqual(unpack(bytes), unpack(pack(s.snapshot())));
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
  assert.deepEqual(unpack(bytes), before);
  assert.notDeepEqual(unpack(pack(s.snapshot())), before);
});
