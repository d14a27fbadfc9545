// cli/bundle.mjs -- builds dist/mo.mjs, the single-file bundle of the `mo`
// CLI (cli/mo.ts and everything it imports, yaml included) that cli/mo.js
// runs in its own process: no tsx loader, so `mo` starts in tens of
// milliseconds instead of about a second. Plain JavaScript, so the shim can
// import it without tsx. Run at `npm install`/`npm ci` (package.json
// "prepare"), by `npm run build`, and by the shim itself when the bundle is
// missing or older than one of its sources (a `git pull`, an edit).
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
export const BUNDLE = path.join(REPO_DIR, 'dist', 'mo.mjs');
export const META = path.join(REPO_DIR, 'dist', 'mo.meta.json');

/**
 * True when dist/mo.mjs exists and no source it was built from changed since
 * (by mtime). A missing or unreadable meta file means stale.
 */
export function bundleFresh(repo = REPO_DIR) {
  const bundle = path.join(repo, 'dist', 'mo.mjs');
  try {
    const builtMs = fs.statSync(bundle).mtimeMs;
    const meta = JSON.parse(fs.readFileSync(path.join(repo, 'dist', 'mo.meta.json'), 'utf8'));
    if (!Array.isArray(meta.inputs) || meta.inputs.length === 0) return false;
    for (const rel of meta.inputs) {
      if (fs.statSync(path.join(repo, rel)).mtimeMs > builtMs) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** Builds dist/mo.mjs and dist/mo.meta.json; returns the bundle's path. */
export async function bundleCli(repo = REPO_DIR) {
  const { build } = await import('esbuild');
  const dist = path.join(repo, 'dist');
  fs.mkdirSync(dist, { recursive: true });
  const out = path.join(dist, 'mo.mjs');
  const result = await build({
    entryPoints: [path.join(repo, 'cli', 'mo.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    outfile: out,
    metafile: true,
    logLevel: 'silent',
    banner: { js: "import { createRequire as __moCreateRequire } from 'node:module'; const require = __moCreateRequire(import.meta.url);" },
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
