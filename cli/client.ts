// cli/client.ts -- the CLI's HTTP client: talks to any reachable replica,
// follows the leader, and consumes watch streams.
//
// Contracts:
// * Replicas are tried in order, starting with the last one that answered
//   (or the leader a replica named). A replica we could not CONNECT to
//   (refused, no route, connect timeout) is skipped: nothing was sent, so
//   trying the next one is always safe.
// * 307/308 with a Location is re-issued by hand to that URL with the same
//   method, body and Authorization header (fetch would drop the header on a
//   cross-origin redirect, which every leader redirect is).
// * Once a write has been sent, a lost connection or a missing answer is NOT
//   retried elsewhere: its outcome is unknown and the user is told so.
//   Reads are retried on the next replica, also on a 503 (a partitioned
//   replica may know no leader while the others do). So is a write answered
//   503 with outcome "refused": it never entered the log and never will, so
//   sending it again elsewhere cannot apply it twice. A write whose outcome
//   is unknown is not.
// * Watch streams reconnect to the next replica when they break; events the
//   user has already seen (same object and resourceVersion) are not repeated.

import http from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { ApiError, RequestError } from './errors.ts';
import type { ApiView } from '../shared/api-types.ts';
import type { WatchEvent } from './resources.ts';

export const CONNECT_TIMEOUT_MS = 1000;
/** Time for a whole answer once connected; the server fails writes without quorum within a few seconds. */
export const REQUEST_TIMEOUT_MS = 20_000;
export const MAX_REDIRECTS = 5;
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
/** Longest single line accepted on a watch stream. */
export const MAX_WATCH_LINE_BYTES = 8 * 1024 * 1024;
/** How many (object -> resourceVersion) pairs a watch remembers to drop replays after reconnecting. */
export const MAX_WATCH_SEEN_OBJECTS = 10_000;
export const WATCH_BACKOFF_MIN_MS = 200;
export const WATCH_BACKOFF_MAX_MS = 2000;
/** A watch gives up when no replica could be reached for this long. */
export const WATCH_GIVE_UP_MS = 5_000;

export interface ClientOptions {
  servers: string[];
  token?: string;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
}

export interface ApiResponse<T = unknown> {
  status: number;
  body: T;
  /** The origin that finally answered (after redirects). */
  server: string;
}

/** Nothing reached the server: safe to try another replica. */
class ConnectFailure extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

/** The request was sent but no complete answer came back. */
class AnswerLost extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

interface Opened {
  status: number;
  headers: IncomingHttpHeaders;
  res: IncomingMessage;
  /** Clears the answer deadline (used by watch streams, which never end on their own). */
  clearDeadline: () => void;
}

function errorCode(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e?.code ?? e?.message ?? String(err);
}

function withCode(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

function headerString(h: string | string[] | undefined): string | undefined {
  return Array.isArray(h) ? h[0] : h;
}

function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

/** One line from an error answer: the `{"error"}` text, else a short note on what came back. */
function errorMessageOf(status: number, body: string, origin: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: unknown; message?: unknown };
    if (typeof parsed?.error === 'string' && parsed.error !== '') return oneLine(parsed.error);
    if (typeof parsed?.message === 'string' && parsed.message !== '') return oneLine(parsed.message);
  } catch {
    // not JSON: fall through
  }
  const snippet = oneLine(body).slice(0, 200);
  return `HTTP ${status} from ${origin}${snippet ? `: ${snippet}` : ''}`;
}

/** A 503 that says the write never entered the log (`{"outcome": "refused"}`). */
function refusedWrite(body: string): boolean {
  try {
    return (JSON.parse(body) as { outcome?: unknown })?.outcome === 'refused';
  } catch {
    return false;
  }
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Client {
  readonly servers: string[];
  private readonly token: string | undefined;
  private readonly connectTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  /** The origin to try first: the last one that answered, or a leader a replica named. */
  private preferred: string | undefined;

  constructor(opts: ClientOptions) {
    this.servers = opts.servers.slice();
    this.token = opts.token;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  }

  async get<T>(path: string): Promise<T> {
    return (await this.request<T>('GET', path)).body;
  }

  /**
   * Sends one call to the cluster and returns the parsed 2xx answer.
   * Throws ApiError for an error answer, RequestError when no replica answered.
   */
  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<ApiResponse<T>> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const isRead = method === 'GET';
    const unreachable: string[] = [];
    let firstUnavailable: ApiError | undefined;

    for (const base of this.serverOrder()) {
      let url = new URL(path, base + '/');
      for (let hop = 0; ; hop++) {
        let answer: { status: number; headers: IncomingHttpHeaders; text: string };
        try {
          answer = await this.exchange(url, method, payload);
        } catch (err) {
          if (err instanceof ConnectFailure) {
            unreachable.push(`${url.origin} (${err.code})`);
            break;
          }
          if (err instanceof AnswerLost) {
            if (isRead) {
              unreachable.push(`${url.origin} (${err.code})`);
              break;
            }
            throw new RequestError(`${method} ${url.pathname}: no answer from ${url.origin} after the request was sent (${err.code}); the change may or may not have applied`);
          }
          throw err;
        }
        const location = headerString(answer.headers.location);
        if (isRedirect(answer.status) && location) {
          if (hop >= MAX_REDIRECTS) throw new RequestError(`too many redirects (last to ${location})`);
          url = new URL(location, url);
          continue;
        }
        this.remember(url.origin, answer.headers);
        if (answer.status >= 200 && answer.status < 300) {
          return { status: answer.status, body: parseBody<T>(answer.text, url.origin), server: url.origin };
        }
        const err = new ApiError(errorMessageOf(answer.status, answer.text, url.origin), answer.status, url.href);
        if (answer.status === 503 && (isRead || refusedWrite(answer.text))) {
          firstUnavailable ??= err;
          break;
        }
        throw err;
      }
    }
    if (firstUnavailable) throw firstUnavailable;
    throw new RequestError(`unreachable servers: ${unreachable.join(', ')}`);
  }

  /**
   * Follows `path?watch=1` and calls onEvent for every event, for as long as
   * the process lives. When a stream breaks it reconnects to the next
   * replica; onNotice gets one line describing each break. Returns never;
   * throws ApiError for a refusal (401, 404, ...) and RequestError when no
   * replica could be reached for WATCH_GIVE_UP_MS.
   */
  async watch(path: string, onEvent: (ev: WatchEvent) => void, onNotice: (line: string) => void): Promise<never> {
    // Exact: every line carries the stream's resourceVersion; after a break
    // the watch resumes from the last one, so nothing is missed or repeated.
    // A replica that cannot resume from it (another replica's, or too old)
    // answers 410: list again and tell only what changed since we last said.
    const seen = new Map<string, string>(); // key -> the object as last told (JSON)
    const last = new Map<string, ApiView>(); // key -> the object as last told
    let resourceVersion: string | undefined;
    let backoffMs = WATCH_BACKOFF_MIN_MS;
    let downSince: number | undefined;
    let lastBroken: string | undefined;

    const deliver = (ev: WatchEvent) => {
      const key = watchKey(ev.object);
      if (ev.type === 'DELETED') {
        if (!seen.has(key)) return;
        seen.delete(key);
        last.delete(key);
        onEvent(ev);
        return;
      }
      const text = JSON.stringify(ev.object);
      const before = seen.get(key);
      if (before === text) return; // told already
      seen.delete(key);
      seen.set(key, text);
      last.set(key, ev.object);
      if (seen.size > MAX_WATCH_SEEN_OBJECTS) {
        const oldest = seen.keys().next().value as string;
        seen.delete(oldest);
        last.delete(oldest);
      }
      onEvent({ type: ev.type === 'ADDED' && before !== undefined ? 'MODIFIED' : ev.type, object: ev.object });
    };

    const relist = async (): Promise<void> => {
      const list = await this.get<{ items?: ApiView[]; metadata?: { resourceVersion?: unknown } }>(path);
      const keys = new Set<string>();
      for (const item of list.items ?? []) {
        keys.add(watchKey(item));
        deliver({ type: 'ADDED', object: item });
      }
      for (const [key, obj] of [...last]) if (!keys.has(key)) deliver({ type: 'DELETED', object: obj });
      const v = list.metadata?.resourceVersion;
      resourceVersion = typeof v === 'string' ? v : undefined;
    };

    for (;;) {
      const unreachable: string[] = [];
      let streamed = false;
      // After a break, start with the replica after the one that broke.
      let order = this.serverOrder();
      if (lastBroken !== undefined && order.length > 1) {
        const i = order.indexOf(lastBroken);
        if (i !== -1) order = [...order.slice(i + 1), ...order.slice(0, i + 1)];
      }
      for (const base of order) {
        const watchPath = path + (path.includes('?') ? '&' : '?') + 'watch=1' + (resourceVersion !== undefined ? `&resourceVersion=${encodeURIComponent(resourceVersion)}` : '');
        const at = { url: new URL(watchPath, base + '/') };
        const opened = await this.openFollowingRedirects(at, unreachable);
        if (opened === null) continue;
        const url = at.url;
        if (opened.status === 410) {
          // Cannot resume from our version here: list again, then watch from the list's.
          await readAll(opened.res).catch(() => '');
          opened.clearDeadline();
          await relist();
          streamed = true;
          backoffMs = 0;
          break;
        }
        if (opened.status < 200 || opened.status >= 300) {
          const text = await readAll(opened.res).catch(() => '');
          opened.clearDeadline();
          const err = new ApiError(errorMessageOf(opened.status, text, url.origin), opened.status, url.href);
          if (opened.status >= 500) {
            unreachable.push(`${url.origin} (${err.message})`);
            continue;
          }
          throw err;
        }
        opened.clearDeadline();
        this.remember(url.origin, opened.headers);
        downSince = undefined;
        backoffMs = WATCH_BACKOFF_MIN_MS;
        const why = await readLines(opened.res, (line) => {
          let ev: unknown;
          try {
            ev = JSON.parse(line);
          } catch {
            onNotice(`watch: skipped a line that is not JSON from ${url.origin}`);
            return;
          }
          const e = ev as Partial<WatchEvent> & { resourceVersion?: unknown };
          if (typeof e?.type !== 'string' || e.object === undefined) {
            onNotice(`watch: skipped a line without type/object from ${url.origin}`);
            return;
          }
          if (typeof e.resourceVersion === 'string') resourceVersion = e.resourceVersion;
          deliver({ type: e.type, object: e.object });
        });
        streamed = true;
        lastBroken = url.origin;
        if (this.preferred === url.origin) this.preferred = undefined;
        onNotice(`watch: stream from ${url.origin} ${why}; reconnecting`);
        break;
      }
      if (!streamed) {
        downSince ??= Date.now();
        if (Date.now() - downSince >= WATCH_GIVE_UP_MS) {
          throw new RequestError(`unreachable servers: ${unreachable.join(', ')}`);
        }
      }
      await sleep(backoffMs);
      backoffMs = Math.min(Math.max(backoffMs, WATCH_BACKOFF_MIN_MS) * 2, WATCH_BACKOFF_MAX_MS);
    }
  }

  /**
   * Opens a streamed GET (a unit's log) on the first replica that answers
   * 2xx: any replica will do, and one that cannot (503) is skipped like for
   * other reads. `endless`: no answer deadline once the headers came (a
   * followed log never ends by itself). Throws ApiError for a refusal,
   * RequestError when no replica answered.
   */
  async stream(path: string, endless: boolean): Promise<{ res: IncomingMessage; server: string }> {
    const unreachable: string[] = [];
    let firstUnavailable: ApiError | undefined;
    for (const base of this.serverOrder()) {
      const at = { url: new URL(path, base + '/') };
      const opened = await this.openFollowingRedirects(at, unreachable);
      if (opened === null) continue;
      const url = at.url;
      if (opened.status >= 200 && opened.status < 300) {
        if (endless) opened.clearDeadline();
        else opened.res.once('close', opened.clearDeadline);
        this.remember(url.origin, opened.headers);
        return { res: opened.res, server: url.origin };
      }
      const text = await readAll(opened.res).catch(() => '');
      opened.clearDeadline();
      const err = new ApiError(errorMessageOf(opened.status, text, url.origin), opened.status, url.href);
      if (opened.status !== 503) throw err;
      firstUnavailable ??= err;
    }
    if (firstUnavailable) throw firstUnavailable;
    throw new RequestError(`unreachable servers: ${unreachable.join(', ')}`);
  }

  /**
   * A streamed GET of `at.url`, redirects (a follower pointing at the leader)
   * re-issued by hand up to MAX_REDIRECTS; `at.url` ends as the URL that
   * answered. A replica that cannot be reached (or dropped the answer) is
   * noted in `unreachable` and gives null: the caller tries the next one.
   */
  private async openFollowingRedirects(at: { url: URL }, unreachable: string[]): Promise<Opened | null> {
    try {
      for (let hop = 0; ; hop++) {
        const opened = await this.open(at.url, 'GET', undefined);
        const location = headerString(opened.headers.location);
        if (!isRedirect(opened.status) || !location || hop >= MAX_REDIRECTS) return opened;
        opened.clearDeadline();
        opened.res.resume();
        at.url = new URL(location, at.url);
      }
    } catch (err) {
      if (err instanceof ConnectFailure || err instanceof AnswerLost) {
        unreachable.push(`${at.url.origin} (${err.code})`);
        return null;
      }
      throw err;
    }
  }

  /** Servers in the order to try them: the preferred one first, each once. */
  private serverOrder(): string[] {
    const order = this.preferred ? [this.preferred, ...this.servers] : [...this.servers];
    return [...new Set(order)];
  }

  private remember(origin: string, headers: IncomingHttpHeaders): void {
    this.preferred = origin;
    const leader = headerString(headers['x-mo-leader']);
    if (leader) {
      try {
        const u = new URL(leader);
        if (u.protocol === 'http:' || u.protocol === 'https:') this.preferred = u.origin;
      } catch {
        // a leader id rather than a URL: nothing to prefer
      }
    }
  }

  /** One request and its whole answer, within requestTimeoutMs. */
  private async exchange(url: URL, method: string, payload: string | undefined): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
    const opened = await this.open(url, method, payload);
    try {
      const text = await readAll(opened.res);
      return { status: opened.status, headers: opened.headers, text };
    } catch (err) {
      throw new AnswerLost(errorCode(err));
    } finally {
      opened.clearDeadline();
    }
  }

  /**
   * Opens a request and resolves at the answer's headers. Rejects with
   * ConnectFailure when no connection was made, AnswerLost when it broke or
   * timed out after that. The deadline keeps running until clearDeadline.
   */
  private async open(url: URL, method: string, payload: string | undefined): Promise<Opened> {
    // node:https (and TLS with it) only for an https server: loading it was
    // ~6% of every `mo get nodes` (a CPU profile), most of which talk http.
    const mod = url.protocol === 'https:' ? (await import('node:https')).default : http;
    return new Promise<Opened>((resolvePromise, reject) => {
      const headers: Record<string, string> = { accept: 'application/json' };
      if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
      if (payload !== undefined) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = String(Buffer.byteLength(payload));
      }
      let connected = false;
      let settled = false;
      let deadline: NodeJS.Timeout | undefined;
      const clearDeadline = () => {
        if (deadline) clearTimeout(deadline);
        deadline = undefined;
      };
      const req = mod.request(url, { method, headers, agent: false });
      const connectTimer = setTimeout(() => {
        req.destroy(withCode('ETIMEDOUT', `connect timeout after ${this.connectTimeoutMs} ms`));
      }, this.connectTimeoutMs);
      const onConnected = () => {
        if (connected) return;
        connected = true;
        clearTimeout(connectTimer);
        deadline = setTimeout(() => {
          req.destroy(withCode('ETIMEDOUT', `no answer within ${this.requestTimeoutMs} ms`));
        }, this.requestTimeoutMs);
      };
      req.on('socket', (socket) => {
        if ((socket as { connecting?: boolean }).connecting === false) onConnected();
        else socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', onConnected);
      });
      req.on('error', (err) => {
        clearTimeout(connectTimer);
        clearDeadline();
        if (settled) return;
        settled = true;
        const code = errorCode(err);
        reject(connected ? new AnswerLost(code) : new ConnectFailure(code));
      });
      req.on('response', (res) => {
        settled = true;
        resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, res, clearDeadline });
      });
      req.end(payload);
    });
  }
}

function parseBody<T>(text: string, origin: string): T {
  if (text.trim() === '') return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new RequestError(`${origin} answered with something that is not JSON`);
  }
}

function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_RESPONSE_BYTES) {
        res.destroy(withCode('E2BIG', `answer larger than ${MAX_RESPONSE_BYTES} bytes`));
        return;
      }
      chunks.push(c);
    });
    res.on('end', () => resolvePromise(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(withCode('ECONNRESET', 'answer aborted')));
  });
}

/** Feeds each non-empty line to onLine; resolves with why the stream stopped. */
function readLines(res: IncomingMessage, onLine: (line: string) => void): Promise<string> {
  return new Promise((resolvePromise) => {
    let buffered = '';
    let done = false;
    const finish = (why: string) => {
      if (done) return;
      done = true;
      resolvePromise(why);
    };
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buffered += chunk;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, nl).trim();
        buffered = buffered.slice(nl + 1);
        if (line !== '') onLine(line);
      }
      if (buffered.length > MAX_WATCH_LINE_BYTES) {
        res.destroy();
        finish(`sent a line longer than ${MAX_WATCH_LINE_BYTES} bytes`);
      }
    });
    res.on('end', () => {
      const rest = buffered.trim();
      if (rest !== '') onLine(rest);
      finish('ended');
    });
    res.on('error', (err) => finish(`broke (${errorCode(err)})`));
    res.on('aborted', () => finish('broke (ECONNRESET)'));
    res.on('close', () => finish('closed'));
  });
}

/**
 * Identity of a watched object: kind + uid (or name). Objects without one
 * (events may carry no metadata) are identified by their whole JSON text,
 * so an exact replay is still recognised.
 */
function watchKey(obj: unknown): string {
  const o = obj as { kind?: unknown; metadata?: { name?: unknown; uid?: unknown } } | null;
  const id = o?.metadata?.uid ?? o?.metadata?.name;
  if (typeof id !== 'string' && typeof id !== 'number') return `json:${JSON.stringify(obj)}`;
  return `${String(o?.kind ?? '')}/${String(id)}`;
}

function watchVersion(obj: unknown): string {
  const v = (obj as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
  return typeof v === 'string' || typeof v === 'number' ? String(v) : 'none';
}
