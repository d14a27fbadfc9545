// control-plane/services/publisher.ts -- the leader keeps every node's
// proxy current: after any change of desired or observed state (coalesced
// to one computation per turn of the event loop), it recomputes the proxy
// table and, when it differs from what it last sent, sends it to every
// connected agent; an agent that says hello gets it at once. The message
// carries the leader's term, so an agent never goes back to an older
// leader's table. Followers send nothing, and neither does a leader that
// has not yet applied its log through an entry of its own term: a restarted
// control plane applies its log only then, and its table from the state
// before that would close every proxy's listeners until the next table.

import type { ServicesMessage } from '../../shared/protocol/messages.ts';
import type { AgentServer } from '../agent-server.ts';
import type { NodeRegistry } from '../registry/node-registry.ts';
import type { DesiredState } from '../store/desired-state.ts';
import { proxyTable } from './endpoints.ts';

export interface ServicePublisherDeps {
  state: DesiredState;
  registry: NodeRegistry;
  agents: AgentServer;
  isLeader: () => boolean;
  /** Leads, and has applied everything committed, through an entry of its own term (RaftStore.caughtUp). */
  caughtUp: () => boolean;
  term: () => number;
  id: string;
}

/** How often a leader that has not caught up yet looks again (its first commit takes a round trip and an fsync). */
export const CAUGHT_UP_RETRY_MS = 5;

export class ServicePublisher {
  private last = '';
  private scheduled = false;
  private retry: NodeJS.Timeout | null = null;

  constructor(private readonly deps: ServicePublisherDeps) {}

  /** Something changed: publish (once) after the current turn. */
  changed(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.publish();
    });
  }

  /** A (re)connected agent gets the current table. */
  hello(node: string): void {
    if (!this.deps.isLeader()) return;
    if (!this.deps.caughtUp()) {
      // Everyone gets the table once it is current, this agent with them.
      this.last = '';
      this.changed();
      return;
    }
    this.deps.agents.sendServices(node, this.message(this.table()));
  }

  /** A new leader sends its table to everyone, even if unchanged. */
  leadershipChanged(): void {
    this.last = '';
    this.changed();
  }

  private table() {
    return proxyTable(this.deps.state, this.deps.registry.nodes);
  }

  private message(table: ReturnType<typeof proxyTable>): ServicesMessage {
    return { v: 1, type: 'services', term: this.deps.term(), leaderId: this.deps.id, table };
  }

  private publish(): void {
    if (!this.deps.isLeader()) return;
    if (!this.deps.caughtUp()) {
      this.retry ??= setTimeout(() => {
        this.retry = null;
        this.changed();
      }, CAUGHT_UP_RETRY_MS);
      return;
    }
    const table = this.table();
    const json = JSON.stringify(table);
    if (json === this.last) return;
    this.last = json;
    this.deps.agents.sendServices(null, this.message(table));
  }
}
