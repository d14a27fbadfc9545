// test/e2e/raft-storage-crash.test.ts -- DiskStorage under a real crash: a
// child process appending (with conflict rewrites, rotations and
// compactions) is SIGKILLed at a random moment, several rounds over the same
// directory, and no acknowledged entry may be lost. The in-process storage
// tests are in test/unit/raft-storage.test.ts.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DiskStorage, RaftStorageError } from '../../control-plane/raft-storage/index.ts';
import type { Entry } from '../../control-plane/raft/types.ts';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'raft-storage-test-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Entry data derived from index and term, so a misread entry cannot pass for a right one. */
function entry(index: number, term = 1, bytes = 32): Entry {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (index * 31 + term * 7 + i) & 0xff;
  return { term, index, kind: 'normal', data };
}

// ------------------------------------------------------------ crash

/**
 * The child appends forever (with conflict rewrites, rotations and compactions)
 * and prints "ack <lastIndex> <commit>" after each save() resolves. Its data is
 * a pure function of (index, term), so the parent can check every byte.
 */
const CHILD_SOURCE = `
import { DiskStorage } from ${JSON.stringify(join(REPO_ROOT, 'control-plane/raft-storage/index.ts'))};
const dir = process.argv[2];
function entry(index, term) {
  const data = new Uint8Array(200);
  for (let i = 0; i < data.length; i++) data[i] = (index * 31 + term * 7 + i) & 0xff;
  return { term, index, kind: 'normal', data };
}
const storage = await DiskStorage.open(dir, { segmentMaxBytes: 16 * 1024, log: () => {} });
const state = await storage.load();
let last = state.entries.at(-1)?.index ?? state.snapshot?.meta.index ?? 0;
let term = Math.max(state.hardState.term, state.entries.at(-1)?.term ?? 0, 1);
for (let round = 0; ; round++) {
  const batch = [];
  // Every 7th save rewrites the last two entries in a new term (conflict truncation, §5.3).
  let from = last + 1;
  if (round % 7 === 6 && last >= 2) { term++; from = last - 1; }
  for (let i = from; i <= last + 1 + (round % 5); i++) batch.push(entry(i, term));
  last = batch.at(-1).index;
  await storage.save({ term, vote: 'cp-1', commit: last }, batch);
  process.stdout.write('ack ' + last + '\\n');
  if (round % 40 === 39) {
    const at = last - 3;
    const t = (await storage.load()).entries.find((e) => e.index === at).term;
    await storage.saveCompaction({ meta: { index: at, term: t }, data: new TextEncoder().encode(String(at)) });
    process.stdout.write('snap ' + at + '\\n');
  }
}
`;

test('a child killed with SIGKILL at a random moment while appending loses no acknowledged entry, over several crash and restart rounds', async (t) => {
  const dir = await tempDir(t);
  const scratch = await tempDir(t);
  const childFile = join(scratch, 'append-forever.mts');
  await writeFile(childFile, CHILD_SOURCE);
  const seed = Date.now();
  let rng = seed >>> 0;
  const random = () => (rng = (rng * 1664525 + 1013904223) >>> 0) / 2 ** 32;
  t.diagnostic(`kill-timing seed ${seed}`);

  let acked = 0;
  for (let round = 0; round < 4; round++) {
    const child = spawn(process.execPath, ['--import', 'tsx', childFile, dir], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    // Wait until it is appending, then kill it a random 20-220 ms later.
    const started = Date.now();
    while (!out.includes('ack') && child.exitCode === null && Date.now() - started < 20_000) await new Promise((r) => setTimeout(r, 10));
    assert.ok(out.includes('ack'), `round ${round}: the child never acknowledged a save (seed ${seed}); stderr: ${err}`);
    if (round === 0) {
      await assert.rejects(DiskStorage.open(dir, { log: () => {} }), (e: unknown) => e instanceof RaftStorageError && e.code === 'LOCKED' && e.message.includes(String(child.pid)));
    }
    await new Promise((r) => setTimeout(r, 20 + Math.floor(random() * 200)));
    child.kill('SIGKILL');
    await exited;
    assert.equal(child.signalCode, 'SIGKILL', `round ${round}: the child died on its own: ${err}`);

    const acks = [...out.matchAll(/^ack (\d+)$/gm)].map((m) => Number(m[1]));
    acked = Math.max(acked, ...acks);
    t.diagnostic(`round ${round}: ${acks.length} saves and ${[...out.matchAll(/^snap /gm)].length} compactions acknowledged before the kill`);

    const storage = await DiskStorage.open(dir, { log: () => {} });
    try {
      const { hardState, snapshot, entries } = await storage.load();
      const base = snapshot?.meta.index ?? 0;
      if (snapshot !== null) assert.equal(new TextDecoder().decode(snapshot.data), String(base), `seed ${seed}`);
      const last = entries.at(-1)?.index ?? base;
      assert.ok(last >= acked, `round ${round}: last stored index ${last} < last acknowledged ${acked} (seed ${seed})`);
      assert.ok(hardState.commit >= acked, `round ${round}: stored commit ${hardState.commit} < acknowledged ${acked} (seed ${seed})`);
      entries.forEach((e, k) => {
        assert.equal(e.index, base + 1 + k, `seed ${seed}`);
        assert.deepEqual(e, entry(e.index, e.term, 200), `round ${round}: entry ${e.index} misread (seed ${seed})`);
        if (k > 0) assert.ok(e.term >= entries[k - 1].term, `terms go backwards at ${e.index} (seed ${seed})`);
      });
    } finally {
      await storage.close();
    }
  }
  assert.ok(acked > 20, `only ${acked} entries acknowledged over all rounds`);
});
