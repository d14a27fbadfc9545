// test/unit/validate.test.ts -- the combinators of shared/validate.ts that
// frames, manifests and the nodes file are all written with: the first
// problem names its field path, unknown fields are refused in the caller's
// words, null reads as absent only where a document rule says so, and no
// input of any kind makes a validator throw.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Problem,
  array,
  boolean,
  dropNullFields,
  integer,
  literal,
  object,
  optional,
  refine,
  string,
  stringMap,
  toldWhenMissing,
  union,
  withMissing,
  type Validator,
} from '../../shared/validate.ts';

type Pod = { name: string; replicas?: number; tags?: string[] };
const pod = object<Pod>({
  name: string({ maxChars: 8, nonEmpty: true }),
  replicas: optional(integer({ min: 0, max: 10 })),
  tags: optional(array(string({ maxChars: 4 }), 2)),
});

function line(check: Validator<unknown>, value: unknown, path = 'pod'): string | null {
  return check(value, path)?.line ?? null;
}

test('a problem names the path of the first field at fault and prints as one line', () => {
  assert.equal(line(pod, { name: 'web' }), null);
  const problem = pod({ name: 'web', tags: ['ok', 'toolong'] }, 'pod');
  assert.ok(problem instanceof Problem);
  assert.equal(problem.path, 'pod.tags[1]');
  assert.equal(problem.detail, 'expected a string of at most 4 chars, got "toolong"');
  assert.equal(String(problem), 'pod.tags[1]: expected a string of at most 4 chars, got "toolong"');
  assert.equal(line(pod, { replicas: 1 }), 'pod.name: missing');
  assert.equal(line(pod, { name: 'web', replicas: 11 }), 'pod.replicas: expected an integer in 0..10, got 11');
  assert.equal(line(pod, { name: 'web', tags: ['a', 'b', 'c'] }), 'pod.tags: at most 2 entries allowed, got 3');
  assert.equal(line(pod, [1, 2]), 'pod: expected an object, got a list of 2');
  // At the root (path ''), a field's path is its own name and the value's own problem has no prefix.
  assert.equal(line(pod, { name: '' }, ''), 'name: expected a non-empty string of at most 8 chars, got ""');
  assert.equal(line(pod, 5, ''), 'expected an object, got 5');
});

test('unknown fields are refused in the words the caller chose, before the known fields are looked at', () => {
  assert.equal(line(pod, { name: 5, image: 'x' }), 'pod.image: unknown field');
  const written = object<Pod>({ name: string({ maxChars: 8 }) } as never, { unknownField: 'not supported' });
  assert.equal(line(written, { name: 'a', 'nvidia.com/gpu': 1 }), 'pod["nvidia.com/gpu"]: not supported');
});

test('null is absent only under nullIsAbsent, where unknown fields stay refused; dropNullFields then gives the type', () => {
  const doc = object<Pod>({ name: string({ maxChars: 8 }), replicas: optional(integer({ min: 0 })), tags: optional(array(string({ maxChars: 4 }), 2)) }, { nullIsAbsent: true });
  assert.equal(line(pod, { name: 'a', replicas: null }), 'pod.replicas: expected an integer in 0..10, got null');
  assert.equal(line(doc, { name: 'a', replicas: null }), null);
  assert.equal(line(doc, { name: null }), 'pod.name: missing');
  assert.equal(line(doc, { name: 'a', extra: null }), 'pod.extra: unknown field');
  assert.equal(line(doc, { name: 'a', tags: [null] }), 'pod.tags[0]: expected a string of at most 4 chars, got null', 'a null in a list is a wrong value');
  assert.deepEqual(dropNullFields({ name: 'a', replicas: null, tags: [null], nested: { x: null, y: 1 } }), { name: 'a', tags: [null], nested: { y: 1 } });
  const copied = dropNullFields(JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(copied), Object.prototype, 'a "__proto__" key stays a plain field');
  assert.deepEqual(Object.keys(copied), ['__proto__']);
});

test('a missing field can be explained, or told by its own check', () => {
  const t = object<{ apiVersion: 'v1'; command: string }>({
    apiVersion: toldWhenMissing(literal('v1')),
    command: withMissing(string({ maxChars: 9 }), '(there is no default)'),
  });
  assert.equal(line(t, { command: 'x' }, ''), 'apiVersion: expected "v1", got nothing');
  assert.equal(line(t, { apiVersion: 'v1' }, ''), 'command: missing (there is no default)');
});

test('refine runs its rule only on a value of the right shape; union picks the alternative that accepts the value', () => {
  let asked = 0;
  const even = refine(integer({ min: 0 }), (n, path) => (asked++, n % 2 === 0 ? null : new Problem(path, 'must be even')));
  assert.equal(line(even, 'x', 'n'), 'n: expected a non-negative integer, got "x"');
  assert.equal(asked, 0);
  assert.equal(line(even, 3, 'n'), 'n: must be even');
  const count = union<number | string>(
    'a count or a percentage',
    { accepts: (v) => typeof v === 'number', check: integer({ min: 0 }) },
    { accepts: (v) => typeof v === 'string' && v.endsWith('%'), check: string({ maxChars: 4 }) },
  );
  assert.equal(line(count, 3, 'c'), null);
  assert.equal(line(count, '25%', 'c'), null);
  assert.equal(line(count, -1, 'c'), 'c: expected a non-negative integer, got -1');
  assert.equal(line(count, 'many', 'c'), 'c: expected a count or a percentage, got "many"');
});

test('written strings say how to fix them; map keys are checked at their own path', () => {
  const written = string({ maxChars: 3, written: true });
  assert.equal(line(written, 5, 'v'), 'v: expected a string (quote it in YAML), got 5');
  assert.equal(line(written, 'long', 'v'), 'v: at most 3 chars allowed, got 4');
  const labels = stringMap(string({ maxChars: 3, nonEmpty: true }), string({ maxChars: 3 }), 2);
  assert.equal(line(labels, { abcd: 'x' }, 'labels'), 'labels.abcd: expected a non-empty string of at most 3 chars, got "abcd"');
  assert.equal(line(labels, { a: 1 }, 'labels'), 'labels.a: expected a string of at most 3 chars, got 1');
});

test('no input of any kind makes a validator throw', () => {
  const cyclic: Record<string, unknown> = { name: 'a' };
  cyclic.self = cyclic;
  const odd: unknown[] = [
    undefined,
    null,
    NaN,
    Infinity,
    10n ** 30n,
    Symbol('s'),
    () => 1,
    new Uint8Array(3),
    new Date(0),
    new Map([[1, 2]]),
    Object.create(null),
    Object.create({ name: 'inherited' }),
    cyclic,
    { name: 'a', tags: cyclic },
    [cyclic],
    'x'.repeat(100_000),
  ];
  for (const value of odd) {
    for (const check of [pod, boolean, array(pod, 3), stringMap(string({ maxChars: 3 }), string({ maxChars: 3 }), 3)] as Validator<unknown>[]) {
      const problem = check(value, 'v');
      if (problem !== null) assert.ok(!problem.line.includes('\n') && problem.line.length < 300, problem.line);
    }
  }
  assert.equal(line(pod, Object.create({ name: 'inherited' })), 'pod: expected an object, got an object that is not plain data');
  assert.equal(line(pod, Object.assign(Object.create(null), { name: 'web' })), null, 'a map decoded without a prototype is plain data');
});
