// cli/run-bundle.cjs -- runs dist/mo.cjs, the bundle of the `mo` CLI that
// cli/bundle.mjs builds, in this very process, and says whether it is fresh.
// CommonJS, as cli/mo.cjs is, so that a `mo` command never starts Node's ES
// module loader (13-17 ms of a `mo get nodes` on a 2-core machine, measured
// ad hoc: the same bundle run from an ES module shim and from this one).
//
// The bundle is compiled through `vm.Script` with V8's code cache beside it
// (dist/mo.cache, written by the first run): Node 20 keeps no code cache for
// ES modules, and compiling the 350 KB bundle afresh was a seventh of a
// `mo get nodes` (a CPU profile).

'use strict';

const fs = require('node:fs');
const { createRequire } = require('node:module');
const path = require('node:path');
const vm = require('node:vm');

const REPO_DIR = path.resolve(__dirname, '..');

/**
 * True when dist/mo.cjs exists and no source it was built from changed since
 * (by mtime): dist/mo.meta.json lists them (cli/bundle.mjs writes it). A
 * missing or unreadable meta file means stale.
 */
function bundleFresh(repo = REPO_DIR) {
  try {
    const builtMs = fs.statSync(path.join(repo, 'dist', 'mo.cjs')).mtimeMs;
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

/**
 * Runs dist/mo.cjs as Node runs a CommonJS module, compiled with the code
 * cache in dist/mo.cache when that was made from this very bundle: its first
 * line names the bundle's size and mtime, because V8 itself checks only the
 * source's length and its own version (and rejects a cache of another V8).
 * With no usable cache, one is written when the process exits, so that it
 * holds the functions this run compiled as well; through a temp file and a
 * rename, and a failure to write (a read-only install) costs only the next
 * run's compile.
 */
function runBundle(repo = REPO_DIR) {
  const file = path.join(repo, 'dist', 'mo.cjs');
  const cacheFile = path.join(repo, 'dist', 'mo.cache');
  const st = fs.statSync(file);
  const stamp = `mo.cjs ${st.size} ${st.mtimeMs}\n`;
  // cli/bundle.mjs writes ASCII only, so latin1 reads it without decoding UTF-8.
  const source = fs.readFileSync(file, 'latin1');
  let cachedData;
  try {
    const c = fs.readFileSync(cacheFile);
    if (c.length > stamp.length && c.toString('latin1', 0, stamp.length) === stamp) cachedData = c.subarray(stamp.length);
  } catch {
    // no cache yet
  }
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: file, cachedData });
  if (cachedData === undefined || script.cachedDataRejected) process.once('exit', () => writeCache(cacheFile, stamp, script));
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(file), module, file, path.dirname(file));
}

function writeCache(cacheFile, stamp, script) {
  const tmp = `${cacheFile}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, Buffer.concat([Buffer.from(stamp, 'latin1'), script.createCachedData()]));
    fs.renameSync(tmp, cacheFile);
  } catch {
    try {
      fs.rmSync(tmp, { force: true });
    } catch {
      // nothing was written
    }
  }
}

module.exports = { REPO_DIR, bundleFresh, runBundle };
