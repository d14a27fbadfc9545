// test/unit/quantity.test.ts -- Kubernetes quantities to millicores and MiB,
// exact rounding up, and a QuantityError naming every bad value.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QuantityError, formatCpu, formatMemory, parseCpu, parseMemory } from '../../shared/quantity.ts';

test('cpu quantities in Kubernetes notation become millicores', () => {
  const cases: Array<[string | number, number]> = [
    ['500m', 500],
    ['1', 1000],
    ['1.5', 1500],
    [2, 2000],
    [0.25, 250],
    ['0.1', 100],
    ['.5', 500],
    ['2.', 2000],
    ['+3', 3000],
    ['1000m', 1000],
    ['0', 0],
    ['1e3', 1_000_000],
    ['1E-3', 1],
    ['1k', 1_000_000],
    ['1000000u', 1000],
  ];
  for (const [input, millicores] of cases) assert.equal(parseCpu(input), millicores, `parseCpu(${JSON.stringify(input)})`);
});

test('cpu finer than one millicore rounds up, never down', () => {
  assert.equal(parseCpu('0.0001'), 1);
  assert.equal(parseCpu('1n'), 1);
  assert.equal(parseCpu('1.0005'), 1001);
});

test('memory quantities in Kubernetes notation become MiB, rounded up', () => {
  const cases: Array<[string | number, number]> = [
    ['512Mi', 512],
    ['2Gi', 2048],
    ['1Ti', 1024 * 1024],
    ['1024Ki', 1],
    ['1G', 954], // 10^9 bytes = 953.67 MiB
    ['1000M', 954],
    ['128974848', 123], // bytes, 123 MiB exactly
    [128974848, 123],
    ['128974849', 124],
    ['1e3', 1], // 1000 bytes
    ['1.5Gi', 1536],
    ['0', 0],
    ['1Mi', 1],
    ['1', 1], // one byte still needs a whole MiB
  ];
  for (const [input, mib] of cases) assert.equal(parseMemory(input), mib, `parseMemory(${JSON.stringify(input)})`);
});

test('a bare E is the exa suffix while E followed by digits is an exponent', () => {
  assert.equal(parseMemory('1E3'), 1);
  assert.equal(parseMemory('1E'), Math.ceil(1e18 / 2 ** 20));
});

test('bad quantities throw a QuantityError that names the bad value', () => {
  const bad: Array<[() => number, RegExp]> = [
    [() => parseCpu('abc'), /^invalid cpu quantity "abc": expected Kubernetes notation such as '500m', '1', '1.5'$/],
    [() => parseCpu('-1'), /^invalid cpu quantity "-1": quantities cannot be negative$/],
    [() => parseCpu(-1), /^invalid cpu quantity -1: expected a non-negative amount/],
    [() => parseCpu(Number.NaN), /^invalid cpu quantity NaN/],
    [() => parseCpu('1 m'), /^invalid cpu quantity "1 m"/],
    [() => parseCpu(''), /^invalid cpu quantity ""/],
    [() => parseCpu('1x'), /^invalid cpu quantity "1x"/],
    [() => parseMemory('512MB'), /^invalid memory quantity "512MB": expected Kubernetes notation such as '512Mi', '2Gi', '1G'$/],
    [() => parseMemory('2gi'), /^invalid memory quantity "2gi"/],
    [() => parseMemory('1e'), /^invalid memory quantity "1e"/],
    [() => parseMemory('1e999'), /^invalid memory quantity "1e999": exponent beyond ±30$/],
    [() => parseMemory('2Ei'), /^invalid memory quantity "2Ei": more than 1099511627776Mi$/],
    [() => parseMemory('9'.repeat(100)), /^invalid memory quantity "9{64}\.\.\."/],
    [() => parseMemory(true as unknown as string), /^invalid memory quantity boolean: expected a string/],
    [() => parseMemory({} as unknown as string), /^invalid memory quantity an object/],
  ];
  for (const [call, message] of bad) {
    assert.throws(
      call,
      (err: unknown) => {
        assert.ok(err instanceof QuantityError);
        assert.equal(err.code, 'INVALID_QUANTITY');
        assert.match(err.message, message);
        return true;
      },
      `expected a QuantityError matching ${message}`,
    );
  }
});

test('formatting writes millicores and MiB with their suffixes and parses back', () => {
  assert.equal(formatCpu(1000), '1000m');
  assert.equal(formatCpu(250), '250m');
  assert.equal(formatMemory(2048), '2048Mi');
  for (const millicores of [0, 1, 999, 4000]) assert.equal(parseCpu(formatCpu(millicores)), millicores);
  for (const mib of [0, 1, 128, 16384]) assert.equal(parseMemory(formatMemory(mib)), mib);
});
