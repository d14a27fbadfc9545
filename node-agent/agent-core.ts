// node-agent/agent-core.ts -- the agent's pure decision core: fencing,
// leadership, command dedupe and the frames the agent sends. Pure: no
// node:* imports, no clock, no timers, no randomness; time comes in as data.
// main.ts (the shell) feeds it every frame from every replica and does what
// it answers.
//
// Fencing (architecture invariant 3): the core remembers the highest term it
// has seen, from commands, `welcome` and `leader` frames. A command whose
// term is lower is refused with `stale term T < highest seen H`, so a
// deposed leader can start or stop nothing once the agent heard of a newer
// term. Raising the term on a `welcome`/`leader` from any replica is safe
// because terms only grow in Raft and the control plane uses pre-vote, so a
// partitioned replica cannot inflate its term and fence out the real leader.
//
// Dedupe: a command id seen before (a resend after a reconnect, or the same
// command through two paths) is not executed twice. The memory is bounded
// (MAX_REMEMBERED_COMMAND_IDS, oldest forgotten first); the commands are
// idempotent by unit name anyway, so forgetting an old id is harmless.

import type { NodeInfo, UnitReport } from '../shared/model.ts';
import type { AgentStats, Command, CommandRefusedMessage, HeartbeatMessage, HelloMessage, UnitGoneMessage, UnitStatusMessage } from '../shared/protocol/messages.ts';

/** How many recent command ids the agent remembers for dedupe. */
export const MAX_REMEMBERED_COMMAND_IDS = 4096;

export type Admission = { kind: 'execute' } | { kind: 'refuse'; reason: string } | { kind: 'duplicate' };

export interface LeadershipChange {
  /** The highest term went up. */
  termRaised: boolean;
  /** The leader we believe in changed (including to or from unknown). */
  leaderChanged: boolean;
}

export class AgentCore {
  private term = 0;
  private leader: string | null = null;
  private heartbeatSeq = 0;
  /** Insertion-ordered: the first entry is the oldest id. */
  private readonly seenCommandIds = new Set<string>();

  constructor(
    readonly node: NodeInfo,
    readonly agentPid: number,
  ) {}

  get highestTerm(): number {
    return this.term;
  }

  get leaderId(): string | null {
    return this.leader;
  }

  /**
   * Leadership news from a `welcome` or `leader` frame. A lower term is
   * ignored (old news); the same term may name the leader we did not know.
   */
  observeLeader(term: number, leaderId: string | null): LeadershipChange {
    if (term < this.term) return { termRaised: false, leaderChanged: false };
    if (term > this.term) {
      const leaderChanged = leaderId !== this.leader;
      this.term = term;
      this.leader = leaderId;
      return { termRaised: true, leaderChanged };
    }
    // Same term: Raft has at most one leader per term, so only learn it.
    if (leaderId !== null && leaderId !== this.leader) {
      this.leader = leaderId;
      return { termRaised: false, leaderChanged: true };
    }
    return { termRaised: false, leaderChanged: false };
  }

  /**
   * Decide whether to execute a command. Order matters: fencing first (a
   * stale command is refused even if its id is new), then dedupe. An
   * admitted command raises the highest term and names its sender leader.
   */
  admit(cmd: Command): Admission {
    if (cmd.term < this.term) {
      return { kind: 'refuse', reason: `stale term ${cmd.term} < highest seen ${this.term}` };
    }
    this.observeLeader(cmd.term, cmd.leaderId);
    if (this.seenCommandIds.has(cmd.commandId)) return { kind: 'duplicate' };
    this.seenCommandIds.add(cmd.commandId);
    while (this.seenCommandIds.size > MAX_REMEMBERED_COMMAND_IDS) {
      const oldest = this.seenCommandIds.values().next().value as string;
      this.seenCommandIds.delete(oldest);
    }
    return { kind: 'execute' };
  }

  hello(units: UnitReport[]): HelloMessage {
    return { v: 1, type: 'hello', node: this.node, agentPid: this.agentPid, units, highestTerm: this.term };
  }

  /** The next heartbeat, with the agent's figures when given; seq grows by one per call, across all replicas. */
  heartbeat(nowMs: number, stats?: AgentStats): HeartbeatMessage {
    this.heartbeatSeq += 1;
    const msg: HeartbeatMessage = { v: 1, type: 'heartbeat', seq: this.heartbeatSeq, sentAt: nowMs };
    if (stats) msg.stats = stats;
    return msg;
  }

  unitStatus(unit: UnitReport): UnitStatusMessage {
    return { v: 1, type: 'unit-status', unit };
  }

  unitGone(name: string): UnitGoneMessage {
    return { v: 1, type: 'unit-gone', name };
  }

  refused(commandId: string, reason: string): CommandRefusedMessage {
    return { v: 1, type: 'command-refused', commandId, reason };
  }
}
