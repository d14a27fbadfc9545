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
