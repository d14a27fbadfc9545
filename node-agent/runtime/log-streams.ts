// node-agent/runtime/log-streams.ts -- the agent's answer to `log-open`:
// reads a unit's log (rotated file, then current file), applies `since` and
// `tailLines`, and sends the lines back on the connection that asked, as
// log-data frames of whole lines, then one log-end. With `follow` it
// subscribes in-process to the unit's live writer (unit-log.ts) and keeps
// sending new lines until the unit has ended and everything is sent, or a
// log-close comes, or the connection closes.
//
// Bounds: at most MAX_LOG_STREAMS_PER_CONNECTION streams per connection; a
// stream has at most MAX_IN_FLIGHT_LOG_FRAMES frames handed to the socket
// and not yet written (WebSocket backpressure: the next frame waits for the
// socket's write callback); what waits behind them is at most one snapshot
// of the log (2 files, each capped) and then new lines, MAX_PENDING_LOG_CHARS
// in all, beyond which a follower that cannot keep up is ended with an error.
//
// The snapshot is read synchronously and the subscription made in the same
// tick: the writer is synchronous too, so no line is lost or repeated
// between the files and the live records.

import * as fs from 'node:fs';
import { MAX_LOG_CHUNK_CHARS, type AgentMessage, type LogOpenMessage } from '../../shared/protocol/messages.ts';
import { parseRecord, type LogDirectory, type LogRecord } from './unit-log.ts';

/** Concurrent log streams one control-plane connection may hold open. */
export const MAX_LOG_STREAMS_PER_CONNECTION = 16;
/** log-data frames of one stream sent to the socket but not yet written out. */
export const MAX_IN_FLIGHT_LOG_FRAMES = 2;
/** Chars a stream may have waiting behind its in-flight frames before a follower is ended as too
 *  slow (the snapshot of a log counts too: at most 2 files of MAX_UNIT_LOG_BYTES, so it always fits). */
export const MAX_PENDING_LOG_CHARS = 6 * 1024 * 1024;

const UNIT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

/** Where a stream's frames go: one control-plane connection. */
export interface LogConnection {
  /** Send one frame; onWritten runs once it left for the socket (err: it never will). False: not sent. */
  sendLog(msg: AgentMessage, onWritten: (err?: Error) => void): boolean;
}

export interface ReadOptions {
  tailLines?: number;
  sinceMs?: number;
}

/** The stored lines of a unit, oldest first, after since and tail; null when there is no log. */
export function readUnitLog(dir: LogDirectory, name: string, opts: ReadOptions = {}): LogLine[] | null {
  if (!UNIT_NAME_PATTERN.test(name)) return null;
  const texts: string[] = [];
  let found = false;
  for (const p of [dir.rotatedPath(name), dir.currentPath(name)]) {
    try {
      texts.push(fs.readFileSync(p, 'utf8'));
      found = true;
    } catch {
      // missing: rotated file not there yet, or deleted by retention
    }
  }
  if (!found && !dir.live(name)) return null;
  const lines: LogLine[] = [];
  for (const text of texts) {
    let start = 0;
    while (start < text.length) {
      let nl = text.indexOf('\n', start);
      if (nl === -1) nl = text.length;
      const raw = text.slice(start, nl);
      start = nl + 1;
      const rec = parseRecord(raw);
      if (opts.sinceMs !== undefined && (rec === null || rec.time < opts.sinceMs)) continue;
      lines.push(rec ? { stamp: rec.stamp, text: rec.text } : { stamp: null, text: raw });
    }
  }
  if (opts.tailLines !== undefined && lines.length > opts.tailLines) return lines.slice(lines.length - opts.tailLines);
  return lines;
}

export interface LogLine {
  /** RFC 3339 time, null for a line that is not a record (not written by this agent's format). */
  stamp: string | null;
  text: string;
}

/** One output line with its '\n', within a log-data frame's limit. */
export function renderLine(line: LogLine, timestamps: boolean): string {
  const out = timestamps && line.stamp !== null ? `${line.stamp} ${line.text}` : line.text;
  return (out.length >= MAX_LOG_CHUNK_CHARS ? out.slice(0, MAX_LOG_CHUNK_CHARS - 1) : out) + '\n';
}

class Stream {
  private readonly queue: string[] = [];
  private head = 0;
  private pendingChars = 0;
  private inFlight = 0;
  private sourceDone = false;
  private done = false;
  private unsubscribe: () => void = () => {};

  constructor(
    private readonly owner: LogStreams,
    readonly conn: LogConnection,
    readonly requestId: string,
    private readonly timestamps: boolean,
  ) {}

  start(lines: LogLine[], follow: ReturnType<LogDirectory['live']>, sinceMs: number | undefined): void {
    for (const l of lines) {
      const s = renderLine(l, this.timestamps);
      this.queue.push(s);
      this.pendingChars += s.length;
    }
    if (follow && !follow.closed) {
      this.unsubscribe = follow.subscribe({
        onRecord: (r: LogRecord) => {
          if (this.done || (sinceMs !== undefined && r.time < sinceMs)) return;
          const s = renderLine(r, this.timestamps);
          this.queue.push(s);
          this.pendingChars += s.length;
          if (this.pendingChars > MAX_PENDING_LOG_CHARS) {
            this.end(`log reader fell behind by more than ${MAX_PENDING_LOG_CHARS} chars; stream ended`);
            return;
          }
          this.pump();
        },
        onClose: () => {
          this.sourceDone = true;
          this.pump();
        },
      });
    } else this.sourceDone = true;
    this.pump();
  }

  /** Send what the socket can take now; the end once everything is out. */
  private pump(): void {
    while (!this.done && this.inFlight < MAX_IN_FLIGHT_LOG_FRAMES && this.head < this.queue.length) {
      let data = '';
      while (this.head < this.queue.length && data.length + this.queue[this.head].length <= MAX_LOG_CHUNK_CHARS) {
        data += this.queue[this.head++];
      }
      this.pendingChars -= data.length;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      this.inFlight++;
      const sent = this.conn.sendLog({ v: 1, type: 'log-data', requestId: this.requestId, data }, (err) => {
        this.inFlight--;
        if (err) this.abandon();
        else this.pump();
      });
      if (!sent) return this.abandon();
    }
    if (!this.done && this.sourceDone && this.head >= this.queue.length) this.end();
  }

  /** Send log-end (with an error or not) and stop. */
  end(error?: string): void {
    if (this.done) return;
    this.finish();
    this.conn.sendLog(error === undefined ? { v: 1, type: 'log-end', requestId: this.requestId } : { v: 1, type: 'log-end', requestId: this.requestId, error }, () => {});
  }

  /** Stop without a word: log-close came, or the connection is gone. */
  abandon(): void {
    if (!this.done) this.finish();
  }

  private finish(): void {
    this.done = true;
    this.unsubscribe();
    this.queue.length = 0;
    this.head = 0;
    this.owner.forget(this);
  }
}

export interface LogStreamsOptions {
  directory: LogDirectory;
  nodeName: string;
}

/** Every open log stream of the agent, by connection and request id. */
export class LogStreams {
  private readonly byConn = new Map<LogConnection, Map<string, Stream>>();

  constructor(private readonly opts: LogStreamsOptions) {}

  open(conn: LogConnection, msg: LogOpenMessage): void {
    const end = (error: string) => conn.sendLog({ v: 1, type: 'log-end', requestId: msg.requestId, error }, () => {});
    let streams = this.byConn.get(conn);
    if (streams?.has(msg.requestId)) return void end(`log request ${msg.requestId} is already open on this connection`);
    if (streams && streams.size >= MAX_LOG_STREAMS_PER_CONNECTION) {
      return void end(`too many log streams on this connection (max ${MAX_LOG_STREAMS_PER_CONNECTION})`);
    }
    const dir = this.opts.directory;
    const lines = readUnitLog(dir, msg.name, { tailLines: msg.tailLines, sinceMs: msg.sinceMs });
    if (lines === null) return void end(`no log for unit ${msg.name} on node ${this.opts.nodeName}`);
    if (!streams) {
      streams = new Map();
      this.byConn.set(conn, streams);
    }
    const stream = new Stream(this, conn, msg.requestId, msg.timestamps);
    streams.set(msg.requestId, stream);
    stream.start(lines, msg.follow ? dir.live(msg.name) : undefined, msg.sinceMs);
  }

  /** log-close: stop sending (no log-end: the asker is gone). */
  close(conn: LogConnection, requestId: string): void {
    this.byConn.get(conn)?.get(requestId)?.abandon();
  }

  /** The connection closed: drop its streams. */
  closeConnection(conn: LogConnection): void {
    const streams = this.byConn.get(conn);
    if (!streams) return;
    for (const s of [...streams.values()]) s.abandon();
    this.byConn.delete(conn);
  }

  /** Open streams (all connections). */
  get size(): number {
    let n = 0;
    for (const m of this.byConn.values()) n += m.size;
    return n;
  }

  /** @internal */
  forget(stream: Stream): void {
    const streams = this.byConn.get(stream.conn);
    if (!streams || streams.get(stream.requestId) !== stream) return;
    streams.delete(stream.requestId);
    if (streams.size === 0) this.byConn.delete(stream.conn);
  }
}
