#!/usr/bin/env node
// cli/mo.js -- the name of the package's bin before it became cli/mo.cjs,
// kept for checkouts that ran `npx mo` before the rename: npx links a
// checkout's own bin once, in its cache (~/.npm/_npx/<hash>/node_modules/.bin/mo
// -> <checkout>/cli/mo.js), and never links it again, so without this file
// such a checkout's `npx mo` fails with "sh: 1: mo: not found". It runs
// cli/mo.cjs in this process; only the ES module loader this file needs
// (this package is "type": "module") is added, ~15 ms.
import { createRequire } from 'node:module';

createRequire(import.meta.url)('./mo.cjs');
