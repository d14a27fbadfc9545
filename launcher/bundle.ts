// launcher/bundle.ts -- bundles each process's TypeScript into one ES module
// under dist/ with esbuild (the compiler tsx itself uses) before a cluster
// starts. Why: tsx's loader hooks run in an extra V8 isolate that costs each
// process ~30 MB (an idle agent measured 81 MB under `--import tsx`, 49 MB
// bundled), and the agent must stay under 60 MB. The bundle is rebuilt at
// every start (~0.2 s), so it is never stale; `npx tsx <entry>.ts` keeps
// working for hand starts. Writes go through a temp file and a rename, so
// concurrent starts never see a half-written bundle.

import { build } from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const ENTRIES = {
  controlPlane: { entry: 'control-plane/main.ts', out: 'dist/control-plane.mjs' },
  nodeAgent: { entry: 'node-agent/main.ts', out: 'dist/node-agent.mjs' },
} as const;

export async function bundleProcesses(repo: string = REPO_DIR): Promise<{ controlPlane: string; nodeAgent: string }> {
  fs.mkdirSync(path.join(repo, 'dist'), { recursive: true });
  await Promise.all(
    Object.values(ENTRIES).map(async ({ entry, out }) => {
      const result = await build({
        entryPoints: [path.join(repo, entry)],
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        write: false,
        outfile: path.join(repo, out),
        // Beside the bundle, not inside it: an inline map is ~4.5 MiB of
        // base64 that V8 keeps twice per process (in the source and as the
        // script's sourceMappingURL), ~9 MiB of every replica's and agent's heap.
        sourcemap: 'linked',
        logLevel: 'silent',
        // ws and msgpackr probe optional native add-ons with require():
        // keep those out of the bundle and give the ESM bundle a require.
        external: ['bufferutil', 'utf-8-validate', 'msgpackr-extract'],
        banner: { js: "import { createRequire as __moCreateRequire } from 'node:module'; const require = __moCreateRequire(import.meta.url);" },
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
