// The log's lines: those of one turn of the event loop go out in one write,
// in order, and none is lost when the process exits in the middle of a turn.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { flushLog, makeLogger } from '../../shared/log.ts';

const LOG_MODULE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../shared/log.ts');

test("one turn's lines are one write to stdout, at the end of the turn, in order", async () => {
  flushLog();
  const writes: string[] = [];
  const write = process.stdout.write;
  // The test runner writes its own report to stdout meanwhile: only writes of our lines count.
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) =>
    typeof chunk === 'string' && / line \d+\n/.test(chunk)
      ? (writes.push(chunk), true)
      : (write.call(process.stdout, chunk, ...(rest as [])) as boolean)) as typeof process.stdout.write;
  try {
    const log = makeLogger();
    for (let i = 0; i < 100; i++) log(`line ${i}`);
    assert.equal(writes.length, 0, 'nothing written during the turn');
    await new Promise((r) => setImmediate(r));
    assert.equal(writes.length, 1, 'one write');
    const lines = writes[0].trimEnd().split('\n');
    assert.equal(lines.length, 100);
    lines.forEach((l, i) => assert.match(l, new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} line ${i}$`)));
  } finally {
    process.stdout.write = write;
  }
});

for (const [how, end, code] of [
  ['process.exit', 'process.exit(3)', 3],
  ['an uncaught exception', "throw new Error('boom')", 1],
] as const) {
  test(`lines logged just before ${how} in the same turn are written`, () => {
    const script = `import { makeLogger } from ${JSON.stringify(LOG_MODULE)}; const log = makeLogger(); log('first'); log('second'); ${end};`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, code, r.stderr);
    assert.deepEqual(
      r.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.slice(13)),
      ['first', 'second'],
    );
  });
}
