#!/usr/bin/env node
// cli/mo.cjs -- the executable behind package.json "bin" (`npx mo ...`, a
// global install). Runs dist/mo.cjs, the esbuild bundle of cli/mo.ts, in
// this very process, compiled with V8's code cache (cli/run-bundle.cjs): no
// tsx loader, no ES module loader and no second Node, so `mo` starts in tens
// of milliseconds (bench: `npm run bench -- --only cli`). The bundle is
// built at `npm ci`/`npm install` ("prepare"); when it is missing or older
// than one of its sources (an edit, a pull) it is rebuilt here first (~0.2 s,
// once). If it cannot be built (no esbuild, a read-only install), or with
// MO_NO_BUNDLE=1, cli/mo.ts runs through tsx in a child process instead,
// with arguments, stdio, exit code and signals passed straight through.

'use strict';

const { bundleFresh, runBundle } = require('./run-bundle.cjs');

function runThroughTsx() {
  // Loaded here, not at the top: only this fallback spawns, and loading
  // node:child_process was ~6% of a bundled `mo get nodes` (a CPU profile).
  const { spawn } = require('node:child_process');
  const path = require('node:path');
  const { pathToFileURL } = require('node:url');
  const entry = path.join(__dirname, 'mo.ts');
  // Resolve tsx from this file, so `mo` works from any working directory.
  const tsx = pathToFileURL(require.resolve('tsx')).href;

  const child = spawn(process.execPath, ['--import', tsx, entry, ...process.argv.slice(2)], {
    stdio: 'inherit',
  });

  const forwarded = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const sig of forwarded) {
    process.on(sig, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    });
  }

  child.on('error', (err) => {
    process.stderr.write(`error: cannot start mo: ${err.message}\n`);
    process.exit(1);
  });

  child.on('exit', (code, signal) => {
    if (signal) {
      for (const sig of forwarded) process.removeAllListeners(sig);
      process.kill(process.pid, signal);
      return;
    }
    process.exit(code ?? 1);
  });
}

if (process.env.MO_NO_BUNDLE === '1') {
  runThroughTsx();
} else if (bundleFresh()) {
  runBundle();
} else {
  // Only a stale bundle loads the builder (an ES module, and esbuild).
  import('./bundle.mjs')
    .then((builder) => builder.bundleCli())
    .then(
      () => runBundle(),
      () => runThroughTsx(),
    );
}
