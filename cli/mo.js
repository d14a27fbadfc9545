#!/usr/bin/env node
// cli/mo.js -- the executable behind package.json "bin" (`npx mo ...`, a
// global install). Runs dist/mo.mjs, the esbuild bundle of cli/mo.ts, in
// this very process: no tsx loader and no second Node, so `mo` starts in
// tens of milliseconds (bench: `npm run bench -- --only cli`). The bundle is
// built at `npm ci`/`npm install` ("prepare"); when it is missing or older
// than one of its sources (an edit, a pull) it is rebuilt here first (~0.2 s,
// once). If it cannot be built (no esbuild, a read-only install), or with
// MO_NO_BUNDLE=1, cli/mo.ts runs through tsx in a child process instead,
// with arguments, stdio, exit code and signals passed straight through.

import { fileURLToPath, pathToFileURL } from 'node:url';

async function bundled() {
  if (process.env.MO_NO_BUNDLE === '1') return undefined;
  try {
    const { BUNDLE, bundleCli, bundleFresh } = await import('./bundle.mjs');
    if (!bundleFresh()) await bundleCli();
    return BUNDLE;
  } catch {
    return undefined;
  }
}

const bundle = await bundled();
if (bundle !== undefined) {
  await import(pathToFileURL(bundle).href);
} else {
  await runThroughTsx();
}

async function runThroughTsx() {
  // Loaded here, not at the top: only this fallback spawns, and loading
  // node:child_process was ~6% of a bundled `mo get nodes` (a CPU profile).
  const { spawn } = await import('node:child_process');
  const entry = fileURLToPath(new URL('./mo.ts', import.meta.url));
  // Resolve tsx from this file, so `mo` works from any working directory.
  const tsx = import.meta.resolve('tsx');

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
