// test/unit/intern.test.ts -- shared/intern.ts: decoded trees keep their
// values (deep-equal before and after), bytes and long strings are left as
// they are, and the table stays bounded however many strings pass through;
// BoundedTable, which the table is and the registry's shared requests use.
// (Which instance a string is cannot be seen from JS; what sharing saves is
// shown by `npm run bench -- --only big-state`, a replica's RSS at rest.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BoundedTable, intern, internedCount, internStrings } from '../../shared/intern.ts';
import { decodeStoreData, encodeStoreData } from '../../shared/codec.ts';

test('a decoded tree is the same value after interning, in place; bytes and non-strings untouched', () => {
  const tree = {
    kind: 'Deployment',
    spec: { replicas: 3, template: { spec: { containers: [{ name: 'web', command: ['sleep', '3600'], env: [{ name: 'A', value: 'x'.repeat(500) }] }] } } },
    status: { conditions: [{ type: 'Available', status: 'True' }], list: [['True', 1, null, true]] },
    data: new Uint8Array([1, 2, 3]),
  };
  const copy = structuredClone(tree);
  const decoded = decodeStoreData(encodeStoreData(tree)) as typeof tree;
  assert.deepEqual(decoded, copy, 'decodeStoreData (which interns) gives the value it was given');
  const same = internStrings(decoded);
  assert.equal(same, decoded, 'in place');
  assert.deepEqual(same, copy);
  assert.ok(same.data instanceof Uint8Array && same.data.length === 3);
  assert.equal(internStrings('text'), 'text');
  assert.equal(internStrings(null), null);
});

test('intern answers an equal string for every input, short or long, however many pass through (the table starts over when full)', () => {
  for (let i = 0; i < 20_000; i++) {
    const s = `name-${i}`;
    assert.equal(intern(s), s);
    assert.ok(internedCount() <= 4096, `table holds ${internedCount()}`);
  }
  const long = 'y'.repeat(65);
  assert.equal(intern(long), long);
  assert.equal(intern(''), '');
});

test('a BoundedTable answers the first value kept under a key, and starts over once it holds max entries', () => {
  const t = new BoundedTable<string, { v: number }>(3);
  const a = { v: 1 };
  assert.equal(t.share('a', a), a);
  assert.equal(t.share('a', { v: 1 }), a, 'an equal key gets the instance kept first');
  t.share('b', { v: 2 });
  t.share('c', { v: 3 });
  assert.equal(t.size, 3);
  const again = { v: 1 };
  t.share('d', { v: 4 }); // full: starts over with d alone
  assert.equal(t.size, 1);
  assert.equal(t.share('a', again), again, 'what the table forgot is kept anew');
  assert.equal(t.size, 2);
});
