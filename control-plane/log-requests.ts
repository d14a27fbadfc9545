// control-plane/log-requests.ts -- the log requests this replica has open
// on its agent connections (agent-server.ts owns the sockets): a log-open
// goes out with a fresh requestId, and the agent's log-data / log-end
// frames come back to the handlers of that id. A frame is taken only from
// the connection the request went out on. When that connection closes, every
// request on it ends with an error, so a reader never waits on a dead agent.

import { nanoid } from 'nanoid';
import type { LogDataMessage, LogEndMessage, LogOpenMessage } from '../shared/protocol/messages.ts';

/** Log requests (streams) one replica may have open at once, over all agents. */
export const MAX_LOG_REQUESTS = 256;

export interface LogRequestHandlers {
  /** Whole lines, as the agent sent them. */
  onData(data: string): void;
  /** The end: all sent (error undefined), or why not. Called once; no onData after it. */
  onEnd(error?: string): void;
}

export type LogParams = Omit<LogOpenMessage, 'v' | 'type' | 'requestId'>;

export interface LogHandle {
  readonly requestId: string;
  /** Stop: tells the agent (log-close) if the stream is still open. Idempotent. */
  close(): void;
}

interface Pending<C> {
  conn: C;
  node: string;
  handlers: LogRequestHandlers;
}

/** `C` is the connection type (the ws in agent-server.ts; anything in tests). */
export class LogRequests<C> {
  private readonly open = new Map<string, Pending<C>>();

  constructor(private readonly send: (conn: C, msg: LogOpenMessage | { v: 1; type: 'log-close'; requestId: string }) => boolean) {}

  get size(): number {
    return this.open.size;
  }

  /** Send a log-open on `conn`; an error string when it could not go out. */
  start(conn: C, node: string, params: LogParams, handlers: LogRequestHandlers): LogHandle | string {
    if (this.open.size >= MAX_LOG_REQUESTS) return `too many log streams open on this replica (max ${MAX_LOG_REQUESTS})`;
    const requestId = nanoid();
    const msg: LogOpenMessage = { v: 1, type: 'log-open', requestId, ...params };
    if (params.tailLines === undefined) delete msg.tailLines;
    if (params.sinceMs === undefined) delete msg.sinceMs;
    this.open.set(requestId, { conn, node, handlers });
    if (!this.send(conn, msg)) {
      this.open.delete(requestId);
      return `the connection to node ${node}'s agent is not open`;
    }
    return {
      requestId,
      close: () => {
        const p = this.open.get(requestId);
        if (!p) return;
        this.open.delete(requestId);
        this.send(p.conn, { v: 1, type: 'log-close', requestId });
      },
    };
  }

  /** A log-data or log-end frame from `conn`. */
  receive(conn: C, msg: LogDataMessage | LogEndMessage): void {
    const p = this.open.get(msg.requestId);
    if (!p || p.conn !== conn) return; // closed by us already, or not this connection's
    if (msg.type === 'log-data') {
      p.handlers.onData(msg.data);
      return;
    }
    this.open.delete(msg.requestId);
    p.handlers.onEnd(msg.error);
  }

  /** `conn` closed: its requests end with an error. */
  connectionClosed(conn: C): void {
    for (const [id, p] of [...this.open]) {
      if (p.conn !== conn) continue;
      this.open.delete(id);
      p.handlers.onEnd(`the connection to node ${p.node}'s agent closed`);
    }
  }
}
