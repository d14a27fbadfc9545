// cli/bundle.mjs -- builds dist/mo.cjs, the single-file bundle of the `mo`
// CLI (cli/mo.ts and everything it imports, yaml included) that cli/mo.cjs
// runs in its own process (cli/run-bundle.cjs): no tsx loader, so `mo`
// starts in tens of milliseconds instead of about a second. Plain
// JavaScript, so the shim can import it without tsx. Run at `npm
// install`/`npm ci` (package.json "prepare"), by `npm run build`, and by the
// shim itself when the bundle is missing or older than one of its sources (a
// `git pull`, an edit).
//
// CommonJS, not an ES module, so that it can be compiled with V8's code cache
// (Node 20 has none for ES modules).
//
// Beside the bundle, dist/mo.meta.json lists its source files (esbuild's
// metafile inputs, repo-relative, node_modules left out; package-lock.json
// stands for those): the shim's freshness check stats only these.
// Writes go through a temp file and a rename, so two `mo` processes building
// at once never run a half-written bundle.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// Whether the bundle is fresh is the shim's question, answered without this module (and esbuild).
export { bundleFresh } from './run-bundle.cjs';

/** Builds dist/mo.cjs and dist/mo.meta.json; returns the bundle's path. */
export async function bundleCli(repo = REPO_DIR) {
  const { build } = await import('esbuild');
  const dist = path.join(repo, 'dist');
  fs.mkdirSync(dist, { recursive: true });
  const out = path.join(dist, 'mo.cjs');
  const result = await build({
    entryPoints: [path.join(repo, 'cli', 'mo.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // ASCII only (other characters escaped): the shim reads it as latin1, without decoding UTF-8.
    charset: 'ascii',
    // import() of a package or a built-in becomes require(): a vm.Script has no module loader.
    supported: { 'dynamic-import': false },
    // The sources' import.meta.url (package.json is found from it) is the bundle's own URL.
    define: { 'import.meta.url': '__moBundleUrl' },
    banner: { js: "const __moBundleUrl = require('node:url').pathToFileURL(__filename).href;" },
    write: false,
    outfile: out,
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = Object.keys(result.metafile.inputs)
    .map((p) => path.relative(repo, path.resolve(p)))
    .filter((p) => !p.split(path.sep).includes('node_modules'));
  if (fs.existsSync(path.join(repo, 'package-lock.json'))) inputs.push('package-lock.json');
  const meta = path.join(dist, 'mo.meta.json');
  const tag = `${process.pid}.${Date.now()}.tmp`;
  // The meta first: a bundle newer than its meta is never read as fresh with old inputs.
  fs.writeFileSync(`${meta}.${tag}`, JSON.stringify({ inputs }) + '\n');
  fs.renameSync(`${meta}.${tag}`, meta);
  fs.writeFileSync(`${out}.${tag}`, result.outputFiles[0].contents);
  fs.renameSync(`${out}.${tag}`, out);
  // The ES module bundle that versions before the CommonJS one built.
  fs.rmSync(path.join(dist, 'mo.mjs'), { force: true });
  return out;
}

// `node cli/bundle.mjs`: build it now (npm's "prepare").
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = performance.now();
  try {
    const out = await bundleCli();
    process.stdout.write(`bundled ${path.relative(process.cwd(), out) || out} in ${Math.round(performance.now() - started)} ms\n`);
  } catch (err) {
    const errors = err?.errors;
    const lines = errors?.length
      ? errors.map((e) => (e.location ? `${e.location.file}:${e.location.line}:${e.location.column}: ${e.text}` : e.text))
      : [String(err?.message ?? err).split('\n')[0]];
    for (const line of lines) process.stderr.write(`bundle: ${line}\n`);
    process.exit(1);
  }
}
