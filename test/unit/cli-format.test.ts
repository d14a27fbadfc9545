// test/unit/cli-format.test.ts -- the CLI's pure parts, without processes:
// kubectl-style ages, column alignment, the argument parser and the
// manifest reader of `mo apply`.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { outputFormat, parseMoArgs, requireFlags } from '../../cli/args.ts';
import { UsageError, RequestError } from '../../cli/errors.ts';
import { humanDuration, naturalCompare, table } from '../../cli/format.ts';
import { parseDurationMs, parseManifests } from '../../cli/commands/mutate.ts';
import type { EventView } from '../../shared/api-types.ts';

describe('ages read like kubectl', () => {
  const cases: Array<[string, number, string]> = [
    ['a few seconds are shown in seconds', 5_000, '5s'],
    ['up to two minutes are still seconds', 119_000, '119s'],
    ['under ten minutes show minutes and seconds', 125_000, '2m5s'],
    ['whole minutes under ten drop the seconds', 180_000, '3m'],
    ['under three hours are minutes', 150 * 60_000, '150m'],
    ['under eight hours show hours and minutes', (3 * 60 + 20) * 60_000, '3h20m'],
    ['under two days are hours', 30 * 3600_000, '30h'],
    ['under eight days show days and hours', (2 * 24 + 4) * 3600_000, '2d4h'],
    ['under two years are days', 400 * 24 * 3600_000, '400d'],
    ['a clock slightly ahead still shows 0s', -500, '0s'],
  ];
  for (const [name, ms, want] of cases) {
    test(name, () => assert.equal(humanDuration(ms), want));
  }
});

test('table pads every column to its widest cell with three spaces and no trailing blanks', () => {
  const out = table(
    ['NAME', 'STATUS'],
    [
      ['web-1', 'Running'],
      ['web-10', 'Pending'],
    ],
  );
  assert.equal(out, 'NAME     STATUS\nweb-1    Running\nweb-10   Pending\n');
});

describe('names in natural order', () => {
  test('numbers in names compare as numbers: web-2 before web-10', () => {
    assert.deepEqual(['web-10', 'web-2', 'node-b', 'web-1', 'node-a', 'web-02x'].sort(naturalCompare), ['node-a', 'node-b', 'web-1', 'web-2', 'web-02x', 'web-10']);
  });

  test("agrees with localeCompare(b, 'en', { numeric: true }) on random names of letters, digits, '-' and '.'", () => {
    // What get, describe and logs sorted with before (it loads ICU's collator: a tenth of a `mo get nodes`).
    const alphabet = 'abmz0189-.';
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const word = () => Array.from({ length: 1 + Math.floor(next() * 7) }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
    for (let n = 0; n < 20000; n++) {
      const a = word();
      const b = word();
      assert.equal(Math.sign(naturalCompare(a, b)), Math.sign(a.localeCompare(b, 'en', { numeric: true })), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
    }
  });
});

describe('the argument parser', () => {
  test('accepts -o json, -ojson, -o=json and --output=json alike', () => {
    for (const argv of [['-o', 'json'], ['-ojson'], ['-o=json'], ['--output=json'], ['--output', 'json']]) {
      assert.equal(parseMoArgs(['get', 'nodes', ...argv]).flags.get('output'), 'json', argv.join(' '));
    }
  });

  test('takes a lone dash as a value for -f and as a positional elsewhere', () => {
    assert.equal(parseMoArgs(['apply', '-f', '-']).flags.get('filename'), '-');
    assert.deepEqual(parseMoArgs(['x', '-']).positionals, ['x', '-']);
  });

  test('treats everything after -- as positionals', () => {
    assert.deepEqual(parseMoArgs(['get', '--', '-w']).positionals, ['get', '-w']);
  });

  test('refuses an unknown flag, a missing value and a value on a boolean flag', () => {
    assert.throws(() => parseMoArgs(['--nope']), UsageError);
    assert.throws(() => parseMoArgs(['get', 'units', '-o']), /flag --output needs a value/);
    assert.throws(() => parseMoArgs(['get', 'units', '-o', '-w']), /flag --output needs a value/);
    assert.throws(() => parseMoArgs(['get', '--watch=yes']), /takes no value/);
  });

  test('takes a negative number as a value (refused by the command with its reason) and -f as --follow after logs', () => {
    assert.equal(parseMoArgs(['scale', 'deploy', 'web', '--replicas', '-1']).flags.get('replicas'), '-1');
    const logs = parseMoArgs(['logs', 'web', '-f', '--tail', '-1']);
    assert.deepEqual(
      [logs.positionals, [...logs.flags]],
      [
        ['logs', 'web'],
        [
          ['follow', true],
          ['tail', '-1'],
        ],
      ],
    );
    assert.equal(parseMoArgs(['-f', 'x.yaml', 'logs']).flags.get('filename'), 'x.yaml');
  });

  test('reads kubectl booleans --watch=true and --watch=false, and suggests the flag meant', () => {
    assert.equal(parseMoArgs(['get', '--watch=true']).flags.get('watch'), true);
    assert.equal(parseMoArgs(['get', '-w', '--watch=false']).flags.has('watch'), false);
    assert.throws(() => parseMoArgs(['get', '--replica', '3']), /^UsageError: unknown flag --replica \(did you mean "--replicas"\?\)$/);
  });

  test('lets each command refuse flags it does not take but always allows --config', () => {
    const args = parseMoArgs(['describe', 'unit', 'x', '--config', 'c.json', '-w']);
    assert.throws(() => requireFlags(args, 'describe', []), /unknown flag --watch for "describe"/);
    assert.doesNotThrow(() => requireFlags(args, 'describe', ['watch']));
  });

  test('refuses an -o value the command does not support', () => {
    assert.throws(() => outputFormat(parseMoArgs(['-o', 'table']), ['table', 'json']), /bad -o value "table"/);
    assert.equal(outputFormat(parseMoArgs([]), ['table', 'json']), 'table');
  });
});

describe('reading manifests for apply', () => {
  test('reads JSON and every document of a YAML stream, skipping empty ones', async () => {
    assert.deepEqual(await parseManifests('{"metadata": {"name": "a"}}', 'x'), [{ metadata: { name: 'a' } }]);
    assert.deepEqual(
      (await parseManifests('metadata: {name: a}\n---\n---\nmetadata: {name: b}\n', 'x')).map((m) => (m.metadata as { name: string }).name),
      ['a', 'b'],
    );
  });

  test('refuses a file with no manifest or one that is not an object', async () => {
    await assert.rejects(
      () => parseManifests('', 'f.yaml'),
      (e: unknown) => e instanceof RequestError && /f.yaml: no manifest found/.test(e.message),
    );
    await assert.rejects(() => parseManifests('- a\n- b\n', 'f.yaml'), /invalid manifest: f.yaml: expected an object/);
  });

  test('reads drain timeouts as seconds unless a unit is given', () => {
    assert.equal(parseDurationMs('90'), 90_000);
    assert.equal(parseDurationMs('2m'), 120_000);
    assert.equal(parseDurationMs('1500ms'), 1500);
    assert.throws(() => parseDurationMs('soon'), UsageError);
  });
});

test('an event that happened several times says how often and since when, as kubectl describe does', async () => {
  const { eventAge } = await import('../../cli/format.ts');
  const now = Date.parse('2026-12-01T10:00:00Z');
  const event = (e: Pick<EventView, 'timestamp' | 'count' | 'firstTimestamp'>) => e as EventView;
  assert.equal(eventAge(event({ timestamp: '2026-12-01T09:59:30Z', count: 1, firstTimestamp: '2026-12-01T09:59:30Z' }), now), '30s');
  assert.equal(eventAge(event({ timestamp: '2026-12-01T09:59:30Z', count: 7, firstTimestamp: '2026-12-01T09:58:00Z' }), now), '30s (x7 over 2m)');
});
