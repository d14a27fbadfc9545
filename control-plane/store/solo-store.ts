// control-plane/store/solo-store.ts -- a ReplicatedStore of one: the
// replica is always the leader of term 1, and a command commits once it is
// appended to the write-ahead log and fsynced. Used for `--replicas 1`; the
// Raft store (raft-store.ts) replaces it for 3 or 5 replicas behind the same
// interface. Writes are group-committed: proposals that arrive while an
// fsync is in flight share the next one.

import { pack, unpack } from 'msgpackr';
import { DiskStorage } from '../raft-storage/index.ts';
import { DesiredState, type ApplyResult, type StoreCommand } from './desired-state.ts';
import type { ReplicaStatus, ReplicatedStore } from './store.ts';

export const MAX_BATCH_ENTRIES = 256;

interface Pending {
  cmd: StoreCommand;
  resolve: (r: ApplyResult) => void;
  reject: (e: Error) => void;
}

export class SoloStore implements ReplicatedStore {
  readonly state = new DesiredState();
  private lastIndex = 0;
  private queue: Pending[] = [];
  private flushing = false;
  private listeners: Array<() => void> = [];

  private constructor(readonly id: string, private readonly disk: DiskStorage) {}

  static async open(id: string, dir: string): Promise<SoloStore> {
    const disk = await DiskStorage.open(dir);
    const s = new SoloStore(id, disk);
    const { snapshot, entries } = await disk.load();
    if (snapshot) {
      s.state.restore(unpack(snapshot.data));
      s.lastIndex = snapshot.meta.index;
    }
    for (const e of entries) {
      if (e.data.length > 0) s.state.apply(e.index, unpack(e.data) as StoreCommand);
      s.lastIndex = e.index;
    }
    return s;
  }

  propose(cmd: StoreCommand): Promise<ApplyResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ cmd, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH_ENTRIES);
        const entries = batch.map((p, i) => ({ term: 1, index: this.lastIndex + 1 + i, kind: 'normal' as const, data: pack(p.cmd) }));
        try {
          await this.disk.save({ term: 1, vote: this.id, commit: this.lastIndex + batch.length }, entries);
        } catch (err) {
          for (const p of batch) p.reject(err as Error);
          continue;
        }
        for (let i = 0; i < batch.length; i++) {
          this.lastIndex++;
          batch[i].resolve(this.state.apply(this.lastIndex, batch[i].cmd));
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  readBarrier(): Promise<void> {
    return Promise.resolve();
  }
  isLeader(): boolean {
    return true;
  }
  term(): number {
    return 1;
  }
  leaderId(): string {
    return this.id;
  }
  status(): ReplicaStatus {
    return { id: this.id, role: 'leader', term: 1, commitIndex: this.lastIndex, appliedIndex: this.state.appliedIndex, leaderId: this.id };
  }
  onRoleChange(fn: () => void): void {
    this.listeners.push(fn);
  }
  async close(): Promise<void> {
    await this.disk.close();
  }
}
