// control-plane/raft-storage/dir-lock.ts -- one writer per data directory.
// Two replicas appending to the same WAL would interleave batches and each
// would cut the other's "torn" tail, so open() takes this lock first.
//
// The lock is a file `LOCK` holding the owner's pid and its start time
// (clock ticks since boot, from /proc), created with O_EXCL. A replica
// killed with SIGKILL leaves it behind; it is stale when that pid is no
// longer alive, or is alive but another process (its start time differs),
// or is our own pid or one of our own threads: a restarted container
// numbers its processes from 1 again, so the dead owner's pid is often a
// thread of the new replica. A stale lock is taken over. Within one process
// a set of held directories catches a second open().

import { existsSync } from 'node:fs';
import { open, readFile, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pidAlive, readStat } from '../../shared/proc.ts';
import { RaftStorageError } from './errors.ts';

const LOCK_FILE = 'LOCK';
const heldInThisProcess = new Set<string>();

/** What the lock file says: our pid, and our start time where /proc tells it. */
function ownerLine(): string {
  const started = readStat(process.pid)?.startTicks;
  return started === undefined ? `${process.pid}\n` : `${process.pid} ${started}\n`;
}

/** The pid of the live process a lock file names, or null when the lock is stale. */
function liveOwner(text: string): number | null {
  const [pidText, started] = text.trim().split(/\s+/);
  const owner = Number(pidText);
  if (!Number.isInteger(owner) || owner <= 0 || owner === process.pid) return null;
  if (existsSync(`/proc/self/task/${owner}`)) return null; // one of our own threads
  if (!pidAlive(owner)) return null; // gone, or a zombie
  if (started !== undefined && readStat(owner)?.startTicks !== started) return null; // the pid was reused by another process
  return owner;
}

/** Take the lock on `dir`; resolves to its release. Throws RaftStorageError('LOCKED') if a live owner holds it. */
export async function lockDir(dir: string): Promise<() => Promise<void>> {
  const abs = resolve(dir);
  if (heldInThisProcess.has(abs)) {
    throw new RaftStorageError('LOCKED', `raft storage in ${abs} is already open in this process`);
  }
  const path = join(abs, LOCK_FILE);
  // Two attempts: the second follows removing a stale lock.
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fh = await open(path, 'wx');
      try {
        await fh.writeFile(ownerLine());
      } finally {
        await fh.close();
      }
      heldInThisProcess.add(abs);
      return async () => {
        heldInThisProcess.delete(abs);
        await unlink(path).catch(() => {});
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const owner = liveOwner(await readFile(path, 'utf8').catch(() => ''));
    if (owner !== null) throw new RaftStorageError('LOCKED', `raft storage in ${abs} is in use by process ${owner} (${path})`);
    await unlink(path).catch(() => {}); // stale: its owner died
  }
  throw new RaftStorageError('LOCKED', `raft storage in ${abs}: could not take ${path}`);
}
