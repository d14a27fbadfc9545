// test/unit/watch-history.test.ts -- exact watches: successive renderings
// become numbered changes; resuming from any version returns exactly the
// changes after it; versions from another history, ahead, malformed or
// older than the ring are refused with a reason (the client lists again).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WatchHistory } from '../../control-plane/api/watch-history.ts';

const objs = (m: Record<string, string>) => Object.entries(m).map(([name, text]) => ({ name, text }));

test('renderings become ADDED, MODIFIED and DELETED changes, numbered; resuming returns exactly what came after', () => {
  const h = new WatchHistory('e1');
  assert.deepEqual(
    h.update(objs({ a: '1', b: '1' })).map((c) => `${c.n}${c.type[0]}${c.name}`),
    ['1Aa', '2Ab'],
  );
  const v2 = h.version();
  assert.equal(v2, 'e1.2');
  assert.deepEqual(
    h.update(objs({ a: '2', b: '1' })).map((c) => `${c.n}${c.type[0]}${c.name}`),
    ['3Ma'],
  );
  assert.deepEqual(
    h.update(objs({ a: '2' })).map((c) => `${c.n}${c.type[0]}${c.name}`),
    ['4Db'],
  );
  assert.deepEqual(h.update(objs({ a: '2' })), [], 'no change, no number');
  const after = h.since(v2);
  assert.ok(Array.isArray(after));
  assert.deepEqual(
    after.map((c) => `${c.type} ${c.name}`),
    ['MODIFIED a', 'DELETED b'],
  );
  assert.deepEqual(h.since(h.version()), []);
  assert.deepEqual(
    h.snapshot().map((c) => c.name),
    ['a'],
  );
});

test('a version from another history, ahead, malformed, or older than the ring cannot be resumed', () => {
  const h = new WatchHistory('e1', 3);
  for (let i = 0; i < 10; i++) h.update(objs({ a: String(i) }));
  assert.match(h.since('e2.5') as string, /not one this replica can resume from/);
  assert.match(h.since('e1.99') as string, /ahead of this replica/);
  assert.match(h.since('garbage') as string, /not one this replica can resume from/);
  assert.match(h.since('e1.2') as string, /too old/);
  const ok = h.since('e1.7');
  assert.ok(Array.isArray(ok) && ok.length === 3);
});

test('a first rendering of 200,000 objects is taken in; the ring keeps the newest of its changes', () => {
  const h = new WatchHistory('e1', 4);
  const many = Array.from({ length: 200_000 }, (_, i) => ({ name: `u-${i}`, text: '{}' }));
  const changes = h.update(many);
  assert.equal(changes.length, 200_000);
  assert.match(h.since('e1.199995') as string, /too old/);
  const kept = h.since('e1.199996');
  assert.ok(Array.isArray(kept));
  assert.deepEqual(
    kept.map((c) => c.name),
    ['u-199996', 'u-199997', 'u-199998', 'u-199999'],
  );
});

test('a rendering with the same names in the same places compares only the objects that are not the last ones; one object taken in alone is never told twice', () => {
  const h = new WatchHistory('e1');
  const r1 = objs({ a: '1', b: '1', c: '1' });
  h.update(r1);
  const tag = (cs: ReturnType<WatchHistory['update']>) => cs.map((c) => `${c.n}${c.type[0]}${c.name}${c.text}`);
  // The same objects, one replaced: only that one is compared.
  const r2 = [r1[0], { name: 'b', text: '2' }, r1[2]];
  assert.deepEqual(tag(h.update(r2)), ['4Mb2']);
  // A get took in b alone; the next rendering showing the same is no change, and telling it again would be.
  assert.deepEqual(tag([h.updateOne('b', '3')!]), ['5Mb3']);
  assert.equal(h.updateOne('b', '3'), null);
  const r3 = [r2[0], { name: 'b', text: '3' }, r2[2]];
  assert.deepEqual(h.update(r3), []);
  // The very object of the last rendering after a get took in another text: the rendering is what is current.
  h.updateOne('a', '9');
  assert.deepEqual(tag(h.update(r3)), ['7Ma1']);
  // A name taken in alone that the last rendering did not have: the next one is compared whole (d goes).
  assert.deepEqual(tag([h.updateOne('d', '1')!]), ['8Ad1']);
  assert.deepEqual(tag(h.update(r3)), ['9Dd1']);
  // A name in another place: compared whole.
  assert.deepEqual(tag(h.update([r3[0], r3[2], r3[1]])), []);
  assert.deepEqual(tag(h.update(objs({ a: '1', c: '2', b: '3' }))), ['10Mc2']);
  const resumed = h.since('e1.3');
  assert.ok(Array.isArray(resumed));
  assert.deepEqual(tag(resumed), ['4Mb2', '5Mb3', '6Ma9', '7Ma1', '8Ad1', '9Dd1', '10Mc2']);
});
