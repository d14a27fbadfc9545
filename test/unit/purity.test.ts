// test/unit/purity.test.ts -- the house rule "decisions are pure functions
// over data" checked by machine, for every pure module at once. From each
// pure module's entry files it follows every value import (type-only imports
// are erased by the compiler and carry no effect) through the repository and
// fails, naming the import chain, when any file reached:
//   * imports a Node.js built-in (node:fs, node:net, child_process, timers,
//     crypto, ...) or a package that is not on the short list of pure ones;
//   * reads the clock (Date.now, new Date() without an argument,
//     performance.*), randomness (Math.random, crypto.*), or `process`;
//   * schedules work (setTimeout, setInterval, setImmediate, queueMicrotask);
//   * loads code at run time (require, import()).
// Comments and string contents are blanked before the check, so a comment
// or a message that names these words is not a finding. The architecture
// (docs/architecture.md, "The pure core and the shell") says which modules
// are pure; this list is that one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** The pure modules: a folder means every .ts file below it. */
const PURE_MODULES: readonly string[] = [
  'control-plane/raft/', // the Raft state machine and its deterministic simulation (sim/)
  'control-plane/scheduler/',
  'control-plane/reconcile/',
  'control-plane/store/desired-state.ts',
  'control-plane/registry/node-registry.ts',
  'node-agent/agent-core.ts',
  'node-agent/runtime/probe-logic.ts',
  'netns/plan.ts',
  // The Kubernetes API's conversions, patches, selectors, Tables and discovery (server.ts, watch.ts, certs.ts are the shell).
  'control-plane/kube/convert.ts',
  'control-plane/kube/patch.ts',
  'control-plane/kube/strategic-merge.ts',
  'control-plane/kube/selectors.ts',
  'control-plane/kube/tables.ts',
  'control-plane/kube/discovery.ts',
  'control-plane/kube/kubeconfig.ts',
  // The injected clock and the simulated world of the production host's simulation (control-plane/sim/).
  'shared/clock.ts',
  'shared/random.ts',
  // One validation approach for frames, manifests and the nodes file (shared/validate.ts's combinators).
  'shared/validate.ts',
  'shared/protocol/validate.ts',
  'shared/manifest.ts',
  'shared/nodes-file.ts',
  'control-plane/raft-transport/transport.ts',
  'control-plane/mutations.ts',
  'control-plane/sim/memory-storage.ts',
  'control-plane/sim/memory-network.ts',
];

/** Packages that only compute: parsing and formatting, no I/O, no clock. */
const PURE_PACKAGES: ReadonlySet<string> = new Set(['yaml']);

/**
 * Files a pure module may reach although they hold a shell part too, each
 * with the only finding allowed there and why it does not reach the pure
 * caller. Keep this short: split the file instead when it grows.
 */
const MIXED_FILES: ReadonlyMap<string, { allowed: string; why: string }> = new Map([
  [
    'control-plane/events.ts',
    {
      allowed: 'setTimeout',
      why: 'EventLog (the shell half) flushes its batch on a timer; desired-state.ts uses only the pure EventRing beside it',
    },
  ],
]);

const BANNED_CODE: ReadonlyArray<[RegExp, string]> = [
  [/\bDate\.now\b/, 'Date.now (the clock)'],
  [/\bnew Date\(\s*\)/, 'new Date() (the clock)'],
  [/(?<![.\w])Date\(\s*\)/, 'Date() (the clock)'],
  [/\bperformance\./, 'performance (the clock)'],
  [/\bMath\.random\b/, 'Math.random (randomness)'],
  [/\bcrypto\./, 'crypto (randomness)'],
  [/\bsetTimeout\b/, 'setTimeout'],
  [/\bsetInterval\b/, 'setInterval'],
  [/\bsetImmediate\b/, 'setImmediate'],
  [/\bqueueMicrotask\b/, 'queueMicrotask'],
  [/(?<![.\w])process\b/, 'process'],
  [/(?<![.\w])require\s*\(/, 'require()'],
  [/(?<![.\w])import\s*\(/, 'import() at run time'],
];

const BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));

/**
 * The source with comments removed and the contents of string and template
 * literals blanked (template `${...}` code kept), so that only code is checked.
 */
export function codeOnly(src: string): string {
  let out = '';
  let i = 0;
  const templateDepth: number[] = []; // brace depth at each open `${`
  let braces = 0;
  let lastSignificant = '';
  while (i < src.length) {
    const c = src[i];
    const n = src[i + 1];
    if (c === '/' && n === '/') {
      while (i < src.length && src[i] !== '\n') i++;
      continue;
    }
    if (c === '/' && n === '*') {
      const end = src.indexOf('*/', i + 2);
      i = end === -1 ? src.length : end + 2;
      out += ' ';
      continue;
    }
    if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < src.length && src[j] !== c && src[j] !== '\n') j += src[j] === '\\' ? 2 : 1;
      out += c + c;
      i = j + 1;
      lastSignificant = c;
      continue;
    }
    if (c === '`' || (c === '}' && templateDepth.length > 0 && templateDepth[templateDepth.length - 1] === braces)) {
      if (c === '}') templateDepth.pop();
      // Inside a template literal until ` or ${.
      let j = i + 1;
      while (j < src.length && src[j] !== '`' && !(src[j] === '$' && src[j + 1] === '{')) j += src[j] === '\\' ? 2 : 1;
      out += '`';
      if (src[j] === '$') {
        templateDepth.push(braces);
        out += '${';
        i = j + 2;
      } else {
        out += '`';
        i = j + 1;
      }
      lastSignificant = '`';
      continue;
    }
    if (c === '/' && (lastSignificant === '' || '(,=:[!&|?{};+-*%<>~^'.includes(lastSignificant))) {
      // A regular expression literal: blank it.
      let j = i + 1;
      let inClass = false;
      while (j < src.length && src[j] !== '\n' && (inClass || src[j] !== '/')) {
        if (src[j] === '\\') j++;
        else if (src[j] === '[') inClass = true;
        else if (src[j] === ']') inClass = false;
        j++;
      }
      j++;
      while (j < src.length && /[a-z]/i.test(src[j])) j++;
      out += '/r/';
      i = j;
      lastSignificant = '/';
      continue;
    }
    if (c === '{') braces++;
    if (c === '}') braces--;
    if (!/\s/.test(c)) lastSignificant = /[\w$]/.test(c) ? 'w' : c;
    out += c;
    i++;
  }
  return out;
}

interface ImportRef {
  spec: string;
  typeOnly: boolean;
}

/** The import and re-export specifiers of a file (comments removed first). */
export function importsOf(src: string): ImportRef[] {
  const noComments = src.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
  const refs: ImportRef[] = [];
  const re = /(?:^|[;\n])\s*(import|export)\s+(type\s+)?([^;'"`]*?)\s*from\s*['"]([^'"]+)['"]|(?:^|[;\n])\s*import\s*['"]([^'"]+)['"]/g;
  for (const m of noComments.matchAll(re)) {
    if (m[5] !== undefined) {
      refs.push({ spec: m[5], typeOnly: false });
      continue;
    }
    const clause = m[3].trim();
    const braced = /^\{([\s\S]*)\}$/.exec(clause);
    const allTypes =
      braced !== null &&
      braced[1]
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '')
        .every((s) => s.startsWith('type '));
    refs.push({ spec: m[4], typeOnly: m[2] !== undefined || allTypes });
  }
  return refs;
}

function filesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f))
    .sort();
}

/** Every finding reachable from the entry files, each naming its import chain. */
export function findImpurities(root: string, entries: readonly string[], pkgs = PURE_PACKAGES, mixed = MIXED_FILES): string[] {
  const findings: string[] = [];
  const seen = new Set<string>();
  const visit = (file: string, chain: string[]): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const rel = relative(root, file);
    const path = [...chain, rel];
    const where = path.join(' -> ');
    const src = readFileSync(file, 'utf8');
    const code = codeOnly(src);
    const exempt = mixed.get(rel);
    for (const [re, what] of BANNED_CODE) {
      if (!re.test(code)) continue;
      if (exempt !== undefined && what.startsWith(exempt.allowed)) continue;
      findings.push(`${where}: uses ${what}`);
    }
    for (const ref of importsOf(src)) {
      if (ref.typeOnly) continue;
      if (ref.spec.startsWith('.') || ref.spec.startsWith('/')) {
        const target = resolve(dirname(file), ref.spec);
        if (!existsSync(target) || !statSync(target).isFile()) {
          findings.push(`${where}: imports ${ref.spec}, which is not a file here`);
          continue;
        }
        visit(target, path);
      } else if (BUILTINS.has(ref.spec) || BUILTINS.has(ref.spec.split('/')[0])) {
        findings.push(`${where}: imports ${ref.spec} (a Node.js built-in)`);
      } else {
        const pkg = ref.spec.startsWith('@') ? ref.spec.split('/').slice(0, 2).join('/') : ref.spec.split('/')[0];
        if (!pkgs.has(pkg)) findings.push(`${where}: imports the package ${ref.spec}, not on the list of pure packages`);
      }
    }
  };
  for (const entry of entries) {
    const abs = join(root, entry);
    for (const f of entry.endsWith('/') ? filesBelow(abs) : [abs]) visit(f, []);
  }
  return findings;
}

test('every pure module, followed through its imports, reaches no I/O, clock, randomness, timers or process', () => {
  for (const entry of PURE_MODULES) assert.ok(existsSync(join(REPO, entry)), `${entry} exists`);
  assert.ok(filesBelow(join(REPO, 'control-plane/raft/sim')).length >= 3, 'the simulation is checked too');
  const findings = findImpurities(REPO, PURE_MODULES);
  assert.deepEqual(findings, [], `impure code reached from a pure module:\n  ${findings.join('\n  ')}`);
});

test('the check finds what it must: a clock read two imports away, a built-in, an unlisted package, a timer, and names the chain', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mo-purity-'));
  try {
    writeFileSync(join(dir, 'entry.ts'), "import type { T } from './types.ts';\nimport { f } from './a.ts';\nexport const g = (t: T) => f(t);\n");
    writeFileSync(join(dir, 'types.ts'), "import { readFileSync } from 'node:fs';\nexport type T = number;\n");
    writeFileSync(join(dir, 'a.ts'), "import { type X, h } from './b.ts';\nexport const f = (n: number) => h(n);\n");
    writeFileSync(
      join(dir, 'b.ts'),
      [
        "import { spawn } from 'child_process';",
        "import WebSocket from 'ws';",
        "import { parse } from 'yaml';",
        '// Date.now() in a comment is fine, and so is a message:',
        "const msg = 'setTimeout and process are words here';",
        'export type X = string;',
        'export const h = (n: number) => n + Date.now();',
        'export const later = () => setTimeout(() => {}, 1);',
        'export const at = (ms: number) => new Date(ms).toISOString();',
        'export const re = /\\/\\/ not a comment/;',
      ].join('\n'),
    );
    const findings = findImpurities(dir, ['entry.ts'], new Set(['yaml']), new Map());
    assert.deepEqual(findings.sort(), [
      'entry.ts -> a.ts -> b.ts: imports child_process (a Node.js built-in)',
      'entry.ts -> a.ts -> b.ts: imports the package ws, not on the list of pure packages',
      'entry.ts -> a.ts -> b.ts: uses Date.now (the clock)',
      'entry.ts -> a.ts -> b.ts: uses setTimeout',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a file on the mixed list may use only its one named shell part', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mo-purity-'));
  try {
    writeFileSync(join(dir, 'entry.ts'), "import { ring } from './mixed.ts';\nexport const r = ring;\n");
    writeFileSync(join(dir, 'mixed.ts'), 'export const ring = 1;\nexport const flush = () => setTimeout(() => {}, 50);\nexport const now = () => Date.now();\n');
    const findings = findImpurities(dir, ['entry.ts'], new Set(), new Map([['mixed.ts', { allowed: 'setTimeout', why: 'test' }]]));
    assert.deepEqual(findings, ['entry.ts -> mixed.ts: uses Date.now (the clock)']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
