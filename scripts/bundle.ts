// scripts/bundle.ts -- `npm run build`: writes dist/control-plane.mjs and
// dist/node-agent.mjs, the single-file bundles that the container image runs
// (`node dist/control-plane.mjs`, `node dist/node-agent.mjs`). It is the
// launcher's own bundling step (launcher/bundle.ts), callable on its own so
// the Dockerfile needs no launcher. `npm start` rebuilds the bundles itself.

import { bundleProcesses, REPO_DIR } from '../launcher/bundle.ts';

const startedMs = performance.now();
try {
  const out = await bundleProcesses(REPO_DIR);
  process.stdout.write(`bundled ${out.controlPlane} and ${out.nodeAgent} in ${Math.round(performance.now() - startedMs)} ms\n`);
} catch (err) {
  // esbuild's BuildFailure carries one entry per error: one line each.
  const errors = (err as { errors?: { text: string; location?: { file: string; line: number; column: number } | null }[] }).errors;
  const lines = errors?.length
    ? errors.map((e) => (e.location ? `${e.location.file}:${e.location.line}:${e.location.column}: ${e.text}` : e.text))
    : [(err as Error).message.split('\n')[0]];
  for (const line of lines) process.stderr.write(`bundle: ${line}\n`);
  process.exit(1);
}
