// control-plane/raft-storage/errors.ts -- the one error class of durable Raft
// storage, with a stable code a host can switch on.

export type RaftStorageErrorCode =
  | 'CORRUPT' // the files hold damage the fault model does not explain; refuse to start
  | 'INVALID' // a caller handed us something Raft never should (gap in the log, stale snapshot)
  | 'FAILED' // a write or fsync failed earlier; memory may be ahead of disk, so nothing more is accepted
  | 'LOCKED' // another live DiskStorage (this process or another) owns the directory
  | 'CLOSED'
  | 'QUEUE_FULL';

export class RaftStorageError extends Error {
  constructor(
    readonly code: RaftStorageErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'RaftStorageError';
  }
}
