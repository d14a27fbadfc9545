// chaos/api-client.ts -- a small HTTP client of the cluster's API for the
// chaos tools: tries each replica in turn (the last one that answered
// first), every call bounded by a timeout, so a SIGSTOPped replica costs a
// timeout and never a hang. It also says, for writes, whether an answer
// means the write was acknowledged, refused, or has an unknown outcome.

import type { ApiErrorView, ApiGetView } from '../shared/api-types.ts';
import type { WriteOutcome } from './checker.ts';

/** One answer: its status, the body parsed as JSON (null when it was not JSON), the text. */
export interface ApiAnswer<T = unknown> {
  status: number;
  json: T | null;
  text: string;
  url: string;
}

export class ApiClient {
  private preferred = 0;

  constructor(
    readonly urls: string[],
    private readonly token: string,
  ) {}

  /** One call to one replica. Throws on network errors and timeouts. */
  async callOne<T = unknown>(url: string, method: string, p: string, body?: unknown, timeoutMs = 2000): Promise<ApiAnswer<T>> {
    const r = await fetch(url + p, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'follow',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await r.text();
    let json: T | null = null;
    try {
      // Typed as the API's own views (shared/api-types.ts) say, as every reader of the API is.
      json = JSON.parse(text) as T;
    } catch {
      /* not JSON */
    }
    return { status: r.status, json, text, url };
  }

  /** A read: the first replica that answers 200 wins; null if none did. */
  async read<P extends string>(p: P, timeoutMs = 1500): Promise<ApiAnswer<ApiGetView<P>> | null> {
    for (let k = 0; k < this.urls.length; k++) {
      const i = (this.preferred + k) % this.urls.length;
      try {
        const a = await this.callOne<ApiGetView<P>>(this.urls[i], 'GET', p, undefined, timeoutMs);
        if (a.status === 200) {
          this.preferred = i;
          return a;
        }
      } catch {
        /* next replica */
      }
    }
    return null;
  }

  /** A write, sent once to one replica (the preferred one, or the next after
   *  a connection refusal, which proves the request never arrived). Returns
   *  the outcome as a linearizability checker must count it. */
  async write(method: string, p: string, body: unknown, timeoutMs = 6000): Promise<{ outcome: WriteOutcome; detail: string }> {
    for (let k = 0; k < this.urls.length; k++) {
      const i = (this.preferred + k) % this.urls.length;
      let a: ApiAnswer<ApiErrorView>;
      try {
        // Only an error answer's body is read (a success is counted by its status).
        a = await this.callOne<ApiErrorView>(this.urls[i], method, p, body, timeoutMs);
      } catch (e) {
        const err = e as Error & { cause?: { code?: string } };
        // Nothing was sent: try the next replica.
        if (err.cause?.code === 'ECONNREFUSED') continue;
        return { outcome: 'unknown', detail: `${this.urls[i]}: ${err.name === 'TimeoutError' ? `no answer in ${timeoutMs} ms` : (err.cause?.code ?? err.message)}` };
      }
      if (a.status >= 200 && a.status < 300) {
        this.preferred = i;
        return { outcome: 'ack', detail: `${a.status} from ${a.url}` };
      }
      const msg = `${a.status} ${a.json?.error ?? a.text.slice(0, 120)}`;
      if (a.status >= 400 && a.status < 500) return { outcome: 'refused', detail: msg };
      if (a.status === 503 && a.json?.outcome === 'refused') return { outcome: 'refused', detail: msg };
      // 503 "not the leader" / "no leader elected yet" before any proposal is
      // a refusal too; try the next replica then.
      if (a.status === 503 && a.json?.outcome === undefined && /^(not the leader|no leader elected yet)/.test(a.json?.error ?? '')) {
        if (k === this.urls.length - 1) return { outcome: 'refused', detail: msg };
        continue;
      }
      return { outcome: 'unknown', detail: msg };
    }
    return { outcome: 'refused', detail: 'no replica accepted a connection' };
  }
}
