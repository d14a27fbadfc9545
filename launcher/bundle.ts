// launcher/bundle.ts -- bundles each process's TypeScript into one ES module
// under dist/ with esbuild (the compiler tsx itself uses) before a cluster
// starts. Why: tsx's loader hooks run in an extra V8 isolate that costs each
// process ~30 MB (an idle agent measured 81 MB under `--import tsx`, 49 MB
// bundled), and the agent must stay under 60 MB. The bundle is rebuilt at
// every start (~0.2 s), so it is never stale; `npx tsx <entry>.ts` keeps
// working for hand starts. Writes go through a temp file and a rename, so
// concurrent starts never see a half-written bundle.

import { build, type BuildOptions } from 'esbuild';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * What every one-file Node ES module bundle of this project is built with
 * (these processes, the fleet simulator's scripts, a test's launcher): ws
 * and msgpackr probe optional native add-ons with require(), so those stay
 * out of the bundle and the ESM bundle gets a require.
 */
export const NODE_ESM_BUNDLE = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  logLevel: 'silent',
  external: ['bufferutil', 'utf-8-validate', 'msgpackr-extract'],
  banner: { js: "import { createRequire as __moCreateRequire } from 'node:module'; const require = __moCreateRequire(import.meta.url);" },
} as const satisfies BuildOptions;

export const ENTRIES = {
  controlPlane: { entry: 'control-plane/main.ts', out: 'dist/control-plane.mjs' },
  nodeAgent: { entry: 'node-agent/main.ts', out: 'dist/node-agent.mjs' },
} as const;

/** mo-init's source and where it is built (node-agent/runtime/mo-init.c). */
export const INIT_HELPER = { source: 'node-agent/runtime/mo-init.c', out: 'dist/mo-init' } as const;

/**
 * Build mo-init with the system C compiler (`cc`), when there is one and
 * the binary is older than its source. Without a compiler, or if it fails,
 * agents make units' namespaces with util-linux instead (namespaces.ts);
 * the reason is returned, not thrown. Through a temp file and a rename, as
 * the bundles are.
 */
export function buildInitHelper(repo: string = REPO_DIR): { path: string } | { error: string } {
  const src = path.join(repo, INIT_HELPER.source);
  const out = path.join(repo, INIT_HELPER.out);
  try {
    if (fs.statSync(out).mtimeMs >= fs.statSync(src).mtimeMs) return { path: out };
  } catch {
    // not built yet
  }
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  // Statically linked where the C library allows it (Debian: libc6-dev, which gcc brings), else
  // with every symbol bound at load (-z now). A unit's P is forked from the spawn server, and P
  // and its init fork again: each of those processes had resolved every libc function it called
  // on its first call, again (lazy binding writes the copy-on-write GOT of each fork), and a
  // dynamic executable's forks copy the page tables of every library it maps. 1,000 isolated
  // starts through 4 servers (bench/cluster.ts isolatedSpawn, 3 runs each): 6.2-6.5 s dynamic,
  // 5.6-5.8 s with -z now, 5.0-5.2 s static.
  let r = spawnSync('cc', ['-O2', '-Wall', '-static', '-o', tmp, src], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) r = spawnSync('cc', ['-O2', '-Wall', '-Wl,-z,now', '-o', tmp, src], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) {
    fs.rmSync(tmp, { force: true });
    const why = r.error ? r.error.message : (r.stderr || `exit ${r.status ?? r.signal}`).trim().split('\n')[0];
    return { error: `cc ${INIT_HELPER.source}: ${why}` };
  }
  fs.renameSync(tmp, out);
  return { path: out };
}

export async function bundleProcesses(repo: string = REPO_DIR): Promise<{ controlPlane: string; nodeAgent: string }> {
  fs.mkdirSync(path.join(repo, 'dist'), { recursive: true });
  buildInitHelper(repo);
  await Promise.all(
    Object.values(ENTRIES).map(async ({ entry, out }) => {
      const result = await build({
        ...NODE_ESM_BUNDLE,
        entryPoints: [path.join(repo, entry)],
        write: false,
        outfile: path.join(repo, out),
        // Beside the bundle, not inside it: an inline map is ~4.5 MiB of
        // base64 that V8 keeps twice per process (in the source and as the
        // script's sourceMappingURL), ~9 MiB of every replica's and agent's heap.
        sourcemap: 'linked',
      });
      // The map first, so a bundle is never there before its map.
      for (const file of [...result.outputFiles].sort((a, b) => Number(b.path.endsWith('.map')) - Number(a.path.endsWith('.map')))) {
        const tmp = `${file.path}.${process.pid}.tmp`;
        fs.writeFileSync(tmp, file.contents);
        fs.renameSync(tmp, file.path);
      }
    }),
  );
  return { controlPlane: ENTRIES.controlPlane.out, nodeAgent: ENTRIES.nodeAgent.out };
}
