// control-plane/raft-storage/index.ts -- the public face of durable Raft
// storage: DiskStorage (the RaftStorage of ../raft/types.ts on real files) and
// its error type. The record and segment formats stay internal.

export {
  DiskStorage,
  DEFAULT_SEGMENT_MAX_BYTES,
  GROUP_COMMIT_MAX_BYTES,
  GROUP_COMMIT_MAX_SAVES,
  MAX_QUEUED_OPS,
  type DiskStorageOptions,
  type SaveUpdate,
  type StorageStats,
} from './disk-storage.ts';
export { RaftStorageError, type RaftStorageErrorCode } from './errors.ts';
