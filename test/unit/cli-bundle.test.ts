// test/unit/cli-bundle.test.ts -- the prebuilt CLI bundle (cli/bundle.mjs,
// dist/mo.mjs): built from the sources, judged fresh until a source changes,
// rebuilt by cli/mo.js on its own when stale, and fast to start. Works on a
// copy of cli/ in a temp dir (node_modules linked), never on the repo's dist/.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error plain JavaScript module without types
import { bundleCli, bundleFresh } from '../../cli/bundle.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let dir: string;

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-bundle-test-'));
  fs.cpSync(path.join(REPO, 'cli'), path.join(dir, 'cli'), { recursive: true });
  fs.copyFileSync(path.join(REPO, 'package.json'), path.join(dir, 'package.json'));
  fs.copyFileSync(path.join(REPO, 'package-lock.json'), path.join(dir, 'package-lock.json'));
  fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, [path.join(dir, 'cli', 'mo.js'), ...args], { cwd: dir, env: { ...process.env, ...env }, encoding: 'utf8' });

test('the bundle is built from cli/, fresh until a source changes, and listed sources leave node_modules out', async () => {
  assert.equal(bundleFresh(dir), false, 'no bundle yet');
  await bundleCli(dir);
  assert.equal(bundleFresh(dir), true);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'dist', 'mo.meta.json'), 'utf8'));
  assert.ok(meta.inputs.includes(path.join('cli', 'mo.ts')));
  assert.ok(meta.inputs.includes(path.join('cli', 'commands', 'get.ts')));
  assert.ok(!meta.inputs.some((p: string) => p.includes('node_modules')));
  const later = new Date(Date.now() + 5000);
  fs.utimesSync(path.join(dir, 'cli', 'help.ts'), later, later);
  assert.equal(bundleFresh(dir), false, 'an edited source makes it stale');
});

test('cli/mo.js rebuilds a stale bundle and runs it (an edit shows at once)', () => {
  const help = path.join(dir, 'cli', 'help.ts');
  fs.writeFileSync(help, fs.readFileSync(help, 'utf8').replace('mo -- the mini-orchestrator CLI', 'mo -- EDITED the mini-orchestrator CLI'));
  const r = run(['--help']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /EDITED the mini-orchestrator CLI/);
  assert.equal(bundleFresh(dir), true);
  const v = run(['version']);
  assert.equal(v.status, 0, v.stderr);
  assert.match(v.stdout, /^mo version \d+\.\d+\.\d+ /, 'package.json is found from dist/');
});

test('the bundled mo starts well under 150 ms (median of 7 `mo version`)', () => {
  run(['version']);
  const times: number[] = [];
  for (let i = 0; i < 7; i++) {
    const t0 = performance.now();
    const r = run(['version']);
    times.push(performance.now() - t0);
    assert.equal(r.status, 0, r.stderr);
  }
  times.sort((a, b) => a - b);
  // Generous for a loaded CI machine: tsx took ~600 ms here.
  assert.ok(times[3] < 300, `median ${times[3].toFixed(0)} ms`);
});
