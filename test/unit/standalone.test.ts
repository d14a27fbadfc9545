// test/unit/standalone.test.ts -- the project stands alone: a reader of the
// repository, and nobody else, can follow every pointer in it. Walks every
// file of the checkout (not node_modules, .git or build output) and fails,
// naming file and line, when one
//   * names a path that leaves the repository: a relative path whose `..`
//     climbs above the checkout from the file's folder, or an absolute path
//     into the workplace that wrote it (`/work/...`);
//   * names a Markdown file (`contract.md`, `docs/lessons.md`, a design
//     document) that is not in the repository, relative to the file's folder
//     or to the repository's root (a bare `contract.md` in a comment is
//     exactly the pointer a newcomer cannot follow: it is `docs/contract.md`);
//   * cites a section of a document (`docs/contract.md, "JSON shapes"`) that
//     the document has no heading for;
//   * in Markdown, links to a file that does not exist or to an anchor the
//     target has no heading for.
// The one exception is `.ci/run`, which alone may use the tools laid beside
// the clone (`../shared/tools`, resolved from the clone's root). This file is
// not walked: its examples of bad pointers are the checker's own test cases.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(fileURLToPath(new URL('../../', import.meta.url)));

/** Folders that are not the project's own text: dependencies, VCS, build output, run data. */
const SKIP_DIRS = new Set(['node_modules', '.git', 'dist', '.mo', 'tmp']);
const TEXT_FILE = /\.(ts|js|mjs|cjs|json|md|ya?ml|sh|html|css|txt)$|^(Dockerfile|run|\.gitignore|\.dockerignore|\.prettierignore|\.prettierrc\.json)$/;
/** Files a walker finds in a checkout that git does not track. */
const SKIP_FILES = new Set(['package-lock.json']);
const SKIP_FILE = /\.log$/;
const SELF = 'test/unit/standalone.test.ts';

/** A file the checker sees: its path relative to the repository and its text. */
export interface RepoFile {
  path: string;
  text: string;
}

export function repoFiles(root = REPO): RepoFile[] {
  const out: RepoFile[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const full = join(dir, name);
      const st = statSync(full);
      if (st.isDirectory()) {
        if (!SKIP_DIRS.has(name)) walk(full);
      } else if (st.isFile() && TEXT_FILE.test(name) && !SKIP_FILES.has(name) && !SKIP_FILE.test(name)) {
        const path = relative(root, full).split(sep).join('/');
        if (path !== SELF) out.push({ path, text: readFileSync(full, 'utf8') });
      }
    }
  };
  walk(root);
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function headings(markdown: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (m) out.push(m[1]);
  }
  return out;
}

/** Where each finding is: `path:line: what is wrong`. */
export function findings(files: readonly RepoFile[], root = REPO): string[] {
  const byPath = new Map(files.map((f) => [f.path, f]));
  const exists = (p: string): boolean => byPath.has(p) || existsSync(join(root, p));
  const out: string[] = [];
  // `path` relative to the repository, or null when it climbs out of it.
  const inside = (fromDir: string, target: string): string | null => {
    const abs = resolve(root, fromDir, target);
    const rel = relative(root, abs);
    if (rel === '..' || rel.startsWith(`..${sep}`) || resolve(rel) === rel) return null;
    return rel.split(sep).join('/');
  };
  const mdHeadings = (path: string): string[] => headings(byPath.get(path)?.text ?? readFileSync(join(root, path), 'utf8'));

  for (const file of files) {
    const dir = dirname(file.path);
    const lines = file.text.split('\n');
    lines.forEach((line, i) => {
      const at = `${file.path}:${i + 1}`;
      // 1. Paths out of the repository.
      for (const m of line.matchAll(/(?<![\w./-])((?:\.\.\/)+)([\w.-][\w./-]*)?/g)) {
        const target = m[1] + (m[2] ?? '');
        if (file.path === '.ci/run' && /^\.\.\/shared\/tools\b/.test(target)) continue;
        if (inside(dir, target) === null) out.push(`${at}: ${target} points outside the repository`);
      }
      for (const m of line.matchAll(/(?<![\w.-])\/work\/[\w./-]*/g)) out.push(`${at}: ${m[0]} is an absolute path outside the repository`);
      // 2. Markdown files named anywhere (links are checked below, with their anchors).
      for (const m of line.matchAll(/(?<![\w./-])((?:\.{1,2}\/)*(?:[\w-]+\/)*[\w-]+\.md)\b(?!\w|\.\w)/g)) {
        const name = m[1];
        if (inside(dir, name) === null && name.startsWith('../')) continue; // reported above
        const candidates = [inside(dir, name), inside('.', name)].filter((p): p is string => p !== null);
        const found = candidates.find(exists);
        if (found === undefined) {
          out.push(`${at}: ${name} is not a file of the repository${/^[\w-]+\.md$/.test(name) ? ' (a document here is docs/<name>.md)' : ''}`);
          continue;
        }
        // 3. A cited section: `docs/x.md, "Section"` or `docs/x.md ("Section")`.
        const after = line.slice((m.index ?? 0) + name.length);
        const cite = /^(?:,\s*|\s*\(|'s\s+)["“]([^"”]+)["”]/.exec(after);
        if (cite && found.endsWith('.md')) {
          const wanted = cite[1].trim();
          if (!mdHeadings(found).some((h) => h.includes(wanted) || slug(h) === slug(wanted))) {
            out.push(`${at}: ${found} has no section "${wanted}"`);
          }
        }
      }
      // 4. Markdown links: the file exists, the anchor names a heading.
      if (!file.path.endsWith('.md')) return;
      for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1];
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // http:, https:, mailto:
        const [target, anchor] = link.split('#', 2) as [string, string | undefined];
        const path = target === '' ? file.path : inside(dir, decodeURIComponent(target));
        if (path === null) {
          out.push(`${at}: link ${link} points outside the repository`);
          continue;
        }
        if (!exists(path)) {
          out.push(`${at}: link ${link}: ${path} does not exist`);
          continue;
        }
        if (anchor !== undefined && path.endsWith('.md') && !mdHeadings(path).some((h) => slug(h) === anchor)) {
          out.push(`${at}: link ${link}: ${path} has no heading #${anchor}`);
        }
      }
    });
  }
  return out;
}

test('no file of the repository points outside it, at a missing document or at a missing section', () => {
  const files = repoFiles();
  assert.ok(
    files.some((f) => f.path === 'docs/architecture.md'),
    'the walk finds docs/',
  );
  assert.ok(
    files.some((f) => f.path === 'control-plane/raft/raft-node.ts'),
    'the walk finds the code',
  );
  assert.ok(!files.some((f) => f.path.startsWith('node_modules/')), 'the walk skips node_modules');
  assert.deepEqual(findings(files), []);
});

test('the checker bites: each kind of pointer a newcomer cannot follow is a finding', () => {
  const docs: RepoFile[] = [
    { path: 'docs/contract.md', text: '# The contract\n\n## JSON shapes (the HTTP API)\n\n```\n# not a heading\n```\n' },
    { path: 'docs/lessons.md', text: '# Lessons\n\nSee [the contract](contract.md#json-shapes-the-http-api).\n' },
  ];
  const check = (path: string, text: string): string[] => findings([...docs, { path, text }]);
  assert.deepEqual(check('shared/x.ts', 'import { a } from \'../shared/model.ts\'; // docs/contract.md, "JSON shapes"'), []);
  assert.deepEqual(check('.ci/run', 'X=../shared/tools/compose-engine.sh'), []);
  assert.deepEqual(check('bench/x.ts', "import '../../shared/design/contract.md';")[0], 'bench/x.ts:1: ../../shared/design/contract.md points outside the repository');
  assert.match(check('a.ts', '// see /work/shared/design/architecture.md').join('\n'), /absolute path outside the repository/);
  assert.deepEqual(check('control-plane/a.ts', '// as contract.md says'), ['control-plane/a.ts:1: contract.md is not a file of the repository (a document here is docs/<name>.md)']);
  // A property in code (node-forge's forge.md.sha256) names no document.
  assert.deepEqual(check('a.ts', 'cert.sign(key, forge.md.sha256.create());'), []);
  assert.deepEqual(check('a.ts', '// house-style.md'), ['a.ts:1: house-style.md is not a file of the repository (a document here is docs/<name>.md)']);
  assert.deepEqual(check('a.ts', '// docs/contract.md, "Manifests"'), ['a.ts:1: docs/contract.md has no section "Manifests"']);
  assert.deepEqual(check('docs/b.md', 'a [link](nope.md) and [one](contract.md#manifests) and [ok](contract.md)'), [
    'docs/b.md:1: nope.md is not a file of the repository (a document here is docs/<name>.md)',
    'docs/b.md:1: link nope.md: docs/nope.md does not exist',
    'docs/b.md:1: link contract.md#manifests: docs/contract.md has no heading #manifests',
  ]);
  assert.deepEqual(check('docs/b.md', '[up](../../x/y.md)')[1], 'docs/b.md:1: link ../../x/y.md points outside the repository');
  assert.equal(slug('`npm start`: a local cluster on one machine'), 'npm-start-a-local-cluster-on-one-machine');
});
