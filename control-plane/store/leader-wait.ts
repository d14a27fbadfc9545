// control-plane/store/leader-wait.ts -- a follower's short wait for a
// leader it does not know yet.
//
// A follower learns of a new leader from that leader's first append, a few
// ms after the election; and when its link to the leader closes it forgets
// the leader at once and an election follows within ~100 ms. A request that
// reaches a follower in that gap would be refused (503, "no leader") though
// a leader is a moment away; so would one it forwards to a leader that has
// just died (connection refused) before it hears of the death. The follower
// proxies (/v1 and the Kubernetes API) wait here instead, for at most one
// longest election timeout, and refuse only if no (other) leader is known
// by then: a replica cut off from the majority still refuses, that much
// later.

import type { ReplicatedStore } from './store.ts';

export class LeaderWait {
  private readonly waiting = new Set<() => void>();

  constructor(
    private readonly store: Pick<ReplicatedStore, 'leaderId' | 'onRoleChange'>,
    /** The longest wait, in ms: 0 refuses at once, as without a wait. */
    readonly maxWaitMs: number,
  ) {
    store.onRoleChange(() => {
      if (this.store.leaderId() === null) return;
      for (const wake of [...this.waiting]) wake();
    });
  }

  /** Requests waiting now (tests). */
  get pending(): number {
    return this.waiting.size;
  }

  /**
   * The leader this replica knows, unless it is `except` (one that could not
   * be reached); otherwise the first other one it learns of within
   * maxWaitMs; otherwise what it knows then (null, or `except` still).
   */
  known(except?: string): Promise<string | null> {
    const wanted = () => {
      const l = this.store.leaderId();
      return l !== null && l !== except;
    };
    if (wanted() || this.maxWaitMs <= 0) return Promise.resolve(this.store.leaderId());
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.waiting.delete(wake);
        resolve(this.store.leaderId());
      };
      const wake = () => {
        if (wanted()) finish();
      };
      const timer = setTimeout(finish, this.maxWaitMs);
      this.waiting.add(wake);
    });
  }
}
