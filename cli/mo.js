#!/usr/bin/env node
// cli/mo.js -- the executable shim behind package.json "bin" (`npx mo ...`):
// runs cli/mo.ts through tsx in a child Node process, passing arguments and
// stdio straight through, and exits the way the child did (same code, or
// the same signal). Signals sent to this shim alone are forwarded.

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

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
