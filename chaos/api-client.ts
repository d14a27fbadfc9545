// chaos/api-client.ts -- a small HTTP client of the cluster's API for the
// chaos tools: tries each replica in turn (the last one that answered
// first), every call bounded by a timeout, so a SIGSTOPped replica costs a
// timeout and never a hang. It also says, for writes, whether an answer
// means the write was acknowledged, refused, or has an unknown outcome.

import type { Taint, Toleration } from '../shared/model.ts';
import type { WriteOutcome } from './checker.ts';

/** The fields of an API object the chaos tools read; all but the name may be missing. */
export interface ApiObject {
  metadata: { name: string; uid?: string | null };
  spec?: {
    replicas?: number;
    deployment?: string;
    nodeName?: string | null;
    resources?: { cpu?: number; memory?: number };
    tolerations?: Toleration[];
    taints?: Taint[];
    template?: { spec?: { containers?: Array<{ env?: Array<{ name?: string; value?: string }> }> } };
  };
  status?: {
    ready?: boolean;
    capacity?: { cpu: number; memory: number };
    allocated?: { cpu: number; memory: number } | null;
    agent?: { pid?: number | null };
    phase?: string;
    pid?: number | null;
    term?: number | null;
    startTime?: string | null;
  };
}

/** An answer's JSON as the chaos tools read it: a list, one object, the cluster status, or an error. */
export interface ApiJson extends Partial<ApiObject> {
  items?: ApiObject[];
  leader?: string;
  /** GET /v1/replica: this replica's own status. */
  id?: string;
  role?: string;
  term?: number;
  pid?: number;
  replicas?: Array<{ id: string; role?: string; term?: number; pid?: number; reachable?: boolean }>;
  error?: string;
  outcome?: string;
}

export interface ApiAnswer {
  status: number;
  /** The parsed body, or null when it was not JSON. */
  json: ApiJson | null;
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
  async callOne(url: string, method: string, p: string, body?: unknown, timeoutMs = 2000): Promise<ApiAnswer> {
    const r = await fetch(url + p, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'follow',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await r.text();
    let json: ApiJson | null = null;
    try {
      json = JSON.parse(text) as ApiJson;
    } catch {
      /* not JSON */
    }
    return { status: r.status, json, text, url };
  }

  /** A read: the first replica that answers 200 wins; null if none did. */
  async read(p: string, timeoutMs = 1500): Promise<ApiAnswer | null> {
    for (let k = 0; k < this.urls.length; k++) {
      const i = (this.preferred + k) % this.urls.length;
      try {
        const a = await this.callOne(this.urls[i], 'GET', p, undefined, timeoutMs);
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
      let a: ApiAnswer;
      try {
        a = await this.callOne(this.urls[i], method, p, body, timeoutMs);
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
