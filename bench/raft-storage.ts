// bench/raft-storage.ts -- how many Raft Ready batches per second DiskStorage
// makes durable. Every awaited save() is one write plus one fdatasync, so the
// sequential numbers are this disk's fsync rate; the concurrent line shows
// group commit sharing one fsync among saves that arrive while one is in flight.
//
// Run alone: npx tsx bench/raft-storage.ts   (or import { benchStorage }).

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DiskStorage } from '../control-plane/raft-storage/index.ts';
import type { Entry } from '../control-plane/raft/types.ts';

const ENTRY_DATA_BYTES = 600;
/** Each measurement runs this long (after a short warm-up). */
const RUN_MS = 1500;
/** In-flight saves in the group-commit run. */
const CONCURRENT_SAVES = 16;

export interface StorageBenchResult {
  name: string;
  savesPerSec: number;
  entriesPerSec: number;
  meanSaveMs: number;
}

function makeEntry(index: number): Entry {
  const data = new Uint8Array(ENTRY_DATA_BYTES);
  data.fill(index & 0xff);
  return { term: 1, index, kind: 'normal', data };
}

async function measure(name: string, entriesPerSave: number, concurrency: number): Promise<StorageBenchResult> {
  const dir = await mkdtemp(join(tmpdir(), 'raft-storage-bench-'));
  const storage = await DiskStorage.open(dir, { log: () => {} });
  try {
    let next = 1;
    let saves = 0;
    const takeBatch = (): Entry[] => {
      const batch: Entry[] = [];
      for (let k = 0; k < entriesPerSave; k++) batch.push(makeEntry(next++));
      return batch;
    };
    // Warm-up: file creation and the first extents are not what we measure.
    for (let i = 0; i < 20; i++) await storage.save({ term: 1, vote: 'cp-1', commit: next - 1 }, takeBatch());

    const start = performance.now();
    const deadline = start + RUN_MS;
    // Each worker awaits its save before the next, like a Raft host awaiting persistence.
    // Batches are built synchronously in call order, so indexes stay contiguous.
    const worker = async (): Promise<void> => {
      while (performance.now() < deadline) {
        await storage.save({ term: 1, vote: 'cp-1', commit: next - 1 }, takeBatch());
        saves++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const elapsedSec = (performance.now() - start) / 1000;
    return {
      name,
      savesPerSec: Math.round(saves / elapsedSec),
      entriesPerSec: Math.round((saves * entriesPerSave) / elapsedSec),
      meanSaveMs: Number(((elapsedSec * 1000 * concurrency) / saves).toFixed(3)),
    };
  } finally {
    await storage.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** Print and return saves/sec at batch sizes 1 and 16 (one fsync each), and with group commit. */
export async function benchStorage(): Promise<StorageBenchResult[]> {
  const results = [
    await measure('batch 1, sequential (1 fsync per save)', 1, 1),
    await measure('batch 16, sequential (1 fsync per save)', 16, 1),
    await measure(`batch 1, ${CONCURRENT_SAVES} concurrent (group commit)`, 1, CONCURRENT_SAVES),
  ];
  console.log(`raft storage: ${ENTRY_DATA_BYTES}-byte entries, ${RUN_MS} ms each, in ${tmpdir()}`);
  for (const r of results) {
    console.log(`  ${r.name.padEnd(44)} ${String(r.savesPerSec).padStart(7)} saves/s ${String(r.entriesPerSec).padStart(8)} entries/s  mean ${r.meanSaveMs} ms`);
  }
  return results;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await benchStorage();
}
