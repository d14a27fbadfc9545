// test/e2e/rest-trim.test.ts -- a real replica (the bundle `npm start`
// runs) that comes to rest after a burst of writes collects its garbage,
// then gives malloc's free pages back to the system (glibc's malloc_trim
// through ffi-rs, resolved beside the bundle) and logs what both gave back:
// the line a user reads, with the RSS before and after the trim. And the
// collection, made after seconds of little allocation, has V8 shrink the
// young generation the burst grew (replicas run with semi-spaces of up to
// 16 MiB: launcher/command-lines.ts), read from the replica's /metrics. The
// replica is stopped by pid in t.after; the wait has a deadline.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, waitFor, webManifest } from '../helpers/cluster.ts';

/** V8's young generation (its semi-spaces) as the replica's /metrics gives it, in MiB. */
async function youngGenerationMiB(c: Cluster): Promise<number> {
  const r = await c.api('GET', '/metrics');
  const m = /^nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)$/m.exec(r.text);
  assert.ok(m, `/metrics gives the young generation's size: ${r.status}`);
  return Number(m[1]) / 1048576;
}

test('a replica at rest after a burst of writes collects its garbage, shrinks its young generation and trims malloc, and logs what it gave back', { timeout: 120000 }, async (t) => {
  const c = await Cluster.start({ replicas: 1, nodes: [] });
  t.after(() => c.stop());

  // The burst: 2,000 deployments of 0 replicas from 8 writers, a few seconds of the replica's loop busy.
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let k = w; k < 2000; k += 8) {
        const r = await c.api('PUT', `/v1/deployments/burst-${k}`, webManifest(`burst-${k}`, 0));
        assert.ok(r.status === 200 || r.status === 201, `PUT burst-${k}: ${r.status} ${r.text}`);
      }
    }),
  );

  const young = await youngGenerationMiB(c);
  assert.ok(young > 8, `the burst grew the young generation past 8 MiB (semi-spaces of up to 16 MiB): ${young} MiB`);

  // Then nothing: after 5 s of quiet the replica collects, and 1.5 s later trims.
  const line = await waitFor('the rest collection and its trim logged', async () => c.cps[0].output.find((l) => l.includes('memory: collected at rest')) ?? null, 60000, 100);
  const m = /memory: collected at rest in \d+ ms: heap [\d.]+ -> [\d.]+ MiB used, .*; malloc trimmed in \d+ ms: RSS ([\d.]+) -> ([\d.]+) MiB/.exec(line);
  assert.ok(m, `the line says what the trim gave back: ${line}`);
  assert.ok(Number(m[2]) < Number(m[1]), `RSS fell: ${line}`);
  const rested = await youngGenerationMiB(c);
  assert.ok(rested < 8, `the young generation shrank at rest: ${young} -> ${rested} MiB`);
});
