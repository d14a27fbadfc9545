// test/unit/watch-history.test.ts -- exact watches: successive renderings
// become numbered changes; resuming from any version returns exactly the
// changes after it; versions from another history, ahead, malformed or
// older than the ring are refused with a reason (the client lists again).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WatchHistory, type WatchChange } from '../../control-plane/api/watch-history.ts';
import { SeededRandom } from '../../shared/random.ts';

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

test('renderings with objects come, gone, moved, changed and named twice, and objects taken in alone: a client that applies the changes holds every rendering, told only what changed (300 seeded histories)', () => {
  type Obj = { name: string; text: string };
  let walked = 0;
  let renderings = 0;
  for (let seed = 1; seed <= 300; seed++) {
    const rnd = new SeededRandom(seed);
    const int = (n: number) => Math.floor(rnd.next() * n);
    const h = new WatchHistory(`s${seed}`);
    // One history in ten shows names twice (then every rendering is compared whole until none is).
    const twice = seed % 10 === 0;
    const client = new Map<string, string>();
    const tell = (c: WatchChange) => {
      if (c.type === 'DELETED') {
        assert.ok(client.has(c.name), `seed ${seed}: ${c.name} deleted, never added`);
        client.delete(c.name);
      } else {
        assert.equal(client.has(c.name), c.type === 'MODIFIED', `seed ${seed}: ${c.type} ${c.name}`);
        assert.notEqual(client.get(c.name), c.text, `seed ${seed}: ${c.name} told unchanged`);
        client.set(c.name, c.text);
      }
    };
    let list: Obj[] = [];
    let fresh = 0;
    for (let step = 0; step < 60; step++) {
      const next = [...list];
      // Big steps now and then (past the walk's limit: compared whole), mostly a few edits.
      const edits = rnd.next() < 0.05 ? 300 + int(300) : 1 + int(4);
      for (let e = 0; e < edits; e++) {
        const r = rnd.next();
        const at = int(next.length + 1);
        if (r < 0.3 || next.length === 0) next.splice(at, 0, { name: `o${fresh++}`, text: `t${int(3)}` });
        else if (r < 0.5) next.splice(at % next.length, 1);
        else if (r < 0.65) {
          const [moved] = next.splice(at % next.length, 1);
          next.splice(int(next.length + 1), 0, moved);
        } else if (r < 0.8) {
          const k = at % next.length;
          next[k] = { name: next[k].name, text: rnd.next() < 0.3 ? next[k].text : `t${int(5)}` };
        } else if (r < 0.85) {
          if (twice) next.splice(at, 0, { name: next[at % next.length].name, text: `t${int(5)}` });
        } else if (r < 0.9 && next.length > 0) {
          // A get takes in one object alone (it may come or change before the rendering shows it).
          const name = rnd.next() < 0.8 ? next[at % next.length].name : `o${fresh++}`;
          const c = h.updateOne(name, `g${int(3)}`);
          if (c !== null) tell(c);
        }
      }
      const walksBefore = h.walked;
      const changes = h.update(next);
      walked += h.walked - walksBefore;
      renderings++;
      const model = new Map(next.map((o) => [o.name, o.text]));
      const before = new Map(client);
      for (const c of changes) tell(c);
      assert.deepEqual(new Map(h.snapshot().map((c) => [c.name, c.text])), client, `seed ${seed} step ${step}: the client holds what a new watch would`);
      if (model.size === next.length) {
        assert.deepEqual(client, model, `seed ${seed} step ${step}: the client holds the rendering`);
        const differing = [...model].filter(([n, t]) => before.get(n) !== t).length + [...before.keys()].filter((n) => !model.has(n)).length;
        assert.equal(changes.length, differing, `seed ${seed} step ${step}: one change per object that differs`);
      } else {
        // A name shown twice has either text (which one is not defined); every name is there, and no other.
        assert.deepEqual([...client.keys()].sort(), [...model.keys()].sort(), `seed ${seed} step ${step}: the rendering's names`);
      }
      list = next;
    }
  }
  assert.ok(walked > renderings / 2, `most renderings walked beside the last (${walked} of ${renderings})`);
});
