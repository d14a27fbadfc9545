// ExecutableCache: a program found on PATH is used again for a while, but
// never once it is gone or no longer executable; misses are never kept.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ExecutableCache, resolveExecutable } from '../../node-agent/runtime/exec-util.ts';

test('a found program is used again within the TTL, checked each time; a removed or non-executable one is not', (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-exec-cache-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const [early, late] = ['early', 'late'].map((d) => {
    fs.mkdirSync(path.join(root, d));
    return path.join(root, d);
  });
  const PATH = `${early}:${late}`;
  fs.writeFileSync(path.join(late, 'prog'), '#!/bin/sh\n', { mode: 0o755 });
  let now = 0;
  const cache = new ExecutableCache(1000, () => now);
  assert.deepEqual(cache.resolve('prog', PATH, '/'), { ok: true, path: path.join(late, 'prog') });
  // One earlier on PATH appears: within the TTL the found one still answers (it still exists)...
  fs.writeFileSync(path.join(early, 'prog'), '#!/bin/sh\n', { mode: 0o755 });
  now = 500;
  assert.deepEqual(cache.resolve('prog', PATH, '/'), { ok: true, path: path.join(late, 'prog') });
  // ...after it, PATH is searched again, as execvp would.
  now = 1500;
  assert.deepEqual(cache.resolve('prog', PATH, '/'), resolveExecutable('prog', PATH, '/'));
  assert.deepEqual(cache.resolve('prog', PATH, '/'), { ok: true, path: path.join(early, 'prog') });
  // Gone: found afresh (the later one), within the TTL.
  fs.rmSync(path.join(early, 'prog'));
  now = 1600;
  assert.deepEqual(cache.resolve('prog', PATH, '/'), { ok: true, path: path.join(late, 'prog') });
  // Not executable any more: EACCES, as resolveExecutable says.
  fs.chmodSync(path.join(late, 'prog'), 0o644);
  assert.deepEqual(cache.resolve('prog', PATH, '/'), { ok: false, errno: 'EACCES' });
  // Misses are not kept: once it is there again, it is found.
  fs.chmodSync(path.join(late, 'prog'), 0o755);
  assert.deepEqual(cache.resolve('prog', PATH, '/'), { ok: true, path: path.join(late, 'prog') });
  // Another PATH is another lookup.
  assert.deepEqual(cache.resolve('prog', late, '/'), { ok: true, path: path.join(late, 'prog') });
  assert.deepEqual(cache.resolve('prog', early, '/'), { ok: false, errno: 'ENOENT' });
});
