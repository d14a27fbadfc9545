// control-plane/store/store.ts -- the interface between the control plane and
// whatever replicates its desired state. The API and the controllers only
// ever call `propose` (which resolves once the command is committed AND
// applied to `state`) and read `state`; they never learn whether one replica
// or a Raft group sits behind it.

import type { ApplyResult, DesiredState, StoreCommand } from './desired-state.ts';

export type Role = 'leader' | 'follower' | 'candidate';

export interface ReplicaStatus {
  id: string;
  role: Role;
  term: number;
  commitIndex: number;
  appliedIndex: number;
  leaderId: string | null;
}

/** A write that cannot reach a quorum. `outcome` tells the user whether it
 *  can still apply: 'refused' = never entered the log; 'unknown' = proposed,
 *  then timed out (it may still commit once a quorum returns). */
export class NoQuorumError extends Error {
  readonly code = 503;
  constructor(
    message: string,
    readonly outcome: 'refused' | 'unknown',
  ) {
    super(message);
    this.name = 'NoQuorumError';
  }
}

export class NotLeaderError extends Error {
  readonly code = 503;
  constructor(readonly leaderId: string | null) {
    super(leaderId ? `not the leader (leader is ${leaderId})` : 'no leader elected yet');
    this.name = 'NotLeaderError';
  }
}

export interface ReplicatedStore {
  readonly id: string;
  readonly state: DesiredState;
  /** Resolve with the apply result once committed and applied here.
   *  Rejects with NotLeaderError or NoQuorumError. */
  propose(cmd: StoreCommand): Promise<ApplyResult>;
  /** Resolve once this replica may serve a linearizable read (read index). */
  readBarrier(): Promise<void>;
  isLeader(): boolean;
  /**
   * This replica leads, has committed an entry of its term, and has applied
   * everything committed: its state holds every write acknowledged so far
   * (what a read barrier would wait for, short of confirming the leadership).
   */
  caughtUp(): boolean;
  term(): number;
  leaderId(): string | null;
  status(): ReplicaStatus;
  /** Called on every role/term/leader change. */
  onRoleChange(fn: () => void): void;
  close(): Promise<void>;
}
