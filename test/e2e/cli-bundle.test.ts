// test/e2e/cli-bundle.test.ts -- the prebuilt CLI bundle (cli/bundle.mjs,
// dist/mo.cjs): built from the sources, judged fresh until a source changes,
// rebuilt by cli/mo.cjs on its own when stale, and run in mo.cjs's own process. Works on a
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
  // The CLI's sources: cli/ and the project's shared/ (API types, notation, the usage error).
  fs.cpSync(path.join(REPO, 'cli'), path.join(dir, 'cli'), { recursive: true });
  fs.cpSync(path.join(REPO, 'shared'), path.join(dir, 'shared'), { recursive: true });
  fs.copyFileSync(path.join(REPO, 'package.json'), path.join(dir, 'package.json'));
  fs.copyFileSync(path.join(REPO, 'package-lock.json'), path.join(dir, 'package-lock.json'));
  fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, [path.join(dir, 'cli', 'mo.cjs'), ...args], { cwd: dir, env: { ...process.env, ...env }, encoding: 'utf8' });

test('the bundle is built from cli/, fresh until a source changes, and listed sources leave node_modules out', async () => {
  assert.equal(bundleFresh(dir), false, 'no bundle yet');
  await bundleCli(dir);
  assert.equal(bundleFresh(dir), true);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'dist', 'mo.meta.json'), 'utf8'));
  assert.ok(meta.inputs.includes(path.join('cli', 'mo.ts')));
  assert.ok(meta.inputs.includes(path.join('cli', 'commands', 'get.ts')));
  assert.ok(meta.inputs.includes(path.join('shared', 'notation.ts')), 'sources outside cli/ are listed too');
  assert.ok(!meta.inputs.some((p: string) => p.includes('node_modules')));
  const later = new Date(Date.now() + 5000);
  fs.utimesSync(path.join(dir, 'cli', 'help.ts'), later, later);
  assert.equal(bundleFresh(dir), false, 'an edited source makes it stale');
});

test('cli/mo.cjs rebuilds a stale bundle and runs it (an edit shows at once)', () => {
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

test("a fresh bundle runs in mo.cjs's own process, without tsx or esbuild: `mo version` works with no node_modules at all", (t) => {
  // How fast that starts is a benchmark figure (`npm run bench -- --only cli`),
  // not an assertion; the structure that makes it fast is checked here.
  assert.equal(run(['version']).status, 0);
  assert.equal(bundleFresh(dir), true);
  const bare = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-bundle-bare-'));
  t.after(() => fs.rmSync(bare, { recursive: true, force: true }));
  // Sources first, then the bundle: copies get new times, and the bundle must stay the newer.
  fs.cpSync(path.join(dir, 'cli'), path.join(bare, 'cli'), { recursive: true });
  fs.cpSync(path.join(dir, 'shared'), path.join(bare, 'shared'), { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(dir, f), path.join(bare, f));
  fs.cpSync(path.join(dir, 'dist'), path.join(bare, 'dist'), { recursive: true });
  assert.equal(bundleFresh(bare), true, 'the copied bundle is fresh');
  const r = spawnSync(process.execPath, [path.join(bare, 'cli', 'mo.cjs'), 'version'], { cwd: bare, encoding: 'utf8' });
  assert.equal(r.status, 0, `mo version without node_modules: ${r.stderr}`);
  assert.match(r.stdout, /^mo version \d+\.\d+\.\d+ /);
});

test('the bundle runs with a V8 code cache made from it: written by the first run, kept while V8 accepts it, replaced when stale or broken', () => {
  const cache = path.join(dir, 'dist', 'mo.cache');
  const stampOf = () => {
    const st = fs.statSync(path.join(dir, 'dist', 'mo.cjs'));
    return `mo.cjs ${st.size} ${st.mtimeMs}\n`;
  };
  const versionRuns = () => {
    const r = run(['version']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /^mo version \d+\.\d+\.\d+ /);
  };
  fs.rmSync(cache, { force: true });
  versionRuns();
  assert.equal(bundleFresh(dir), true);
  const first = fs.readFileSync(cache);
  assert.equal(first.toString('latin1', 0, stampOf().length), stampOf(), 'the cache names the bundle it was made from');
  assert.ok(first.length > stampOf().length + 1000, `V8's data follows the stamp (${first.length} bytes)`);

  // Accepted by V8: the next run leaves it as it is (a rejected one is written again).
  const before = fs.statSync(cache).mtimeMs;
  versionRuns();
  assert.equal(fs.statSync(cache).mtimeMs, before, 'an accepted cache is not written again');
  assert.deepEqual(fs.readFileSync(cache), first);

  // The right stamp over data V8 rejects: mo runs all the same and writes a good one.
  fs.writeFileSync(cache, Buffer.concat([Buffer.from(stampOf(), 'latin1'), Buffer.alloc(5000, 7)]));
  versionRuns();
  assert.ok(fs.readFileSync(cache).length > stampOf().length + 1000, 'a rejected cache is replaced');
  assert.notDeepEqual(fs.readFileSync(cache).subarray(stampOf().length, stampOf().length + 5000), Buffer.alloc(5000, 7));

  // The bundle edited to the same length (V8 alone would take the old cache for it, old strings and all):
  // the cache names another bundle, so the edit shows, and the cache is made again from the new one.
  const bundle = path.join(dir, 'dist', 'mo.cjs');
  const source = fs.readFileSync(bundle, 'latin1');
  assert.ok(source.includes('`mo version ${'));
  fs.writeFileSync(bundle, source.replace('`mo version ${', '`MO VERSION ${'), 'latin1');
  const edited = run(['version']);
  assert.equal(edited.status, 0, edited.stderr);
  assert.match(edited.stdout, /^MO VERSION \d+\.\d+\.\d+ /, 'the edited bundle runs, not the cached code of the old one');
  assert.equal(fs.readFileSync(cache).toString('latin1', 0, stampOf().length), stampOf());
  assert.deepEqual(
    fs.readdirSync(path.join(dir, 'dist')).filter((f) => f.endsWith('.tmp')),
    [],
    'no temp file left',
  );
});

test('`npx mo` still runs in a checkout whose npx cache linked the bin under its old name, cli/mo.js', (t) => {
  // npx links a checkout's own bin into its cache once (keyed by the
  // checkout's path) and never links it again. Made here with the real npx
  // and a private cache: first with package.json naming cli/mo.js, as before
  // the rename, then with today's package.json. Offline: npx only links the
  // checkout, so nothing is fetched, and the test never needs the registry.
  const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-npx-cache-'));
  const pkgFile = path.join(dir, 'package.json');
  const pkg = fs.readFileSync(pkgFile, 'utf8');
  t.after(() => {
    fs.writeFileSync(pkgFile, pkg);
    fs.rmSync(cache, { recursive: true, force: true });
  });
  const env = { ...process.env, npm_config_cache: cache, npm_config_offline: 'true', npm_config_update_notifier: 'false', npm_config_audit: 'false', npm_config_fund: 'false' };
  const npxMo = () => spawnSync('npx', ['--yes', 'mo', 'version'], { cwd: dir, env, encoding: 'utf8' });

  assert.match(pkg, /"mo": "cli\/mo\.cjs"/);
  fs.writeFileSync(pkgFile, pkg.replace('"mo": "cli/mo.cjs"', '"mo": "cli/mo.js"'));
  const before = npxMo();
  assert.equal(before.status, 0, `npx mo with the old bin name: ${before.stderr}`);
  const npxDirs = fs.readdirSync(path.join(cache, '_npx'));
  assert.equal(npxDirs.length, 1);
  const link = path.join(cache, '_npx', npxDirs[0], 'node_modules', '.bin', 'mo');
  assert.match(fs.readlinkSync(link), /cli\/mo\.js$/, 'npx linked the old name');

  fs.writeFileSync(pkgFile, pkg);
  const r = npxMo();
  assert.equal(r.status, 0, `npx mo after the rename: ${r.stderr}`);
  assert.match(r.stdout, /^mo version \d+\.\d+\.\d+ /);
  assert.match(fs.readlinkSync(link), /cli\/mo\.js$/, 'npx kept its old link: cli/mo.js is what ran');
});
