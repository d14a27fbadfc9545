// control-plane/api/leader-routing.ts -- how every replica answers with the
// cluster's view: a follower proxies /v1 requests to the leader (watch
// streams included, piped through), and /v1/cluster asks every replica for
// its own status. A request is forwarded at most once (x-mo-forwarded), so
// two replicas that briefly disagree on the leader cannot bounce it.

import http from 'node:http';
import https from 'node:https';
import { NoQuorumError, type ReplicatedStore } from '../store/store.ts';
import type { LeaderWait } from '../store/leader-wait.ts';
import { sendJson } from './http-server.ts';
import type { ClusterStatusView, ReplicaStatusView } from '../../shared/api-types.ts';

export const FORWARD_TIMEOUT_MS = 10000;
export const STATUS_TIMEOUT_MS = 700;

export function httpUrlOf(wsUrl: string): string {
  return wsUrl.replace(/^ws/, 'http');
}

export interface ForwardDeps {
  store: ReplicatedStore;
  peers: Map<string, string>;
  selfId: string;
  reachable: () => number;
  /** Holds a request that finds no leader known until one is (or its wait ends); absent: refuse at once. */
  leaderWait?: LeaderWait;
}

/**
 * Forwards a request to the leader; false if this replica leads (handle it
 * here). With no leader known it waits for one (d.leaderWait) before it
 * refuses. A leader that refuses the connection (it has just died, and this
 * replica has not yet heard) got nothing, so the request waits for another
 * leader and goes there, once; so does a read whose forward failed in any
 * way before an answer began. A request another replica forwarded is
 * neither held nor sent on.
 */
export async function forwardToLeader(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer, d: ForwardDeps): Promise<boolean> {
  const forwarded = req.headers['x-mo-forwarded'] !== undefined;
  const isWrite = req.method !== 'GET';
  let leader = forwarded || !d.leaderWait ? d.store.leaderId() : await d.leaderWait.known();
  for (let attempt = 1; ; attempt++) {
    if (leader === d.selfId) return false;
    if (!leader || forwarded) {
      const waited = !forwarded && d.leaderWait && d.leaderWait.maxWaitMs > 0 ? ` within ${d.leaderWait.maxWaitMs} ms` : '';
      const why = `no leader elected${waited} (${d.selfId} reaches ${d.reachable()} of ${d.peers.size} replicas)`;
      if (isWrite) throw new NoQuorumError(`no quorum: ${why}; the write was refused and will never apply`, 'refused');
      sendJson(res, 503, { error: `no quorum: ${why}` });
      return true;
    }
    const base = d.peers.get(leader);
    if (!base) return false;
    const target = new URL(req.url ?? '/', httpUrlOf(base));
    const headers: http.OutgoingHttpHeaders = { 'x-mo-forwarded': d.selfId };
    if (req.headers.authorization) headers.authorization = req.headers.authorization;
    if (req.headers['content-type']) headers['content-type'] = req.headers['content-type'];
    let failed: NodeJS.ErrnoException | undefined;
    // wss:// peers (--tls): their HTTP is https, checked against the CA this process trusts (NODE_EXTRA_CA_CERTS).
    await pipeThrough(res, body, {
      method: req.method,
      target,
      headers,
      passHeaders: ['content-type', 'content-length', 'cache-control', 'location'],
      extraHeaders: { 'x-mo-leader': leader },
      timeoutMs: FORWARD_TIMEOUT_MS,
      freshConnection: isWrite,
      onError: (err) => (failed = err),
    });
    if (failed === undefined) return true;
    const next = attempt === 1 && !res.headersSent ? await leaderToRetry(d.leaderWait, leader, req.method, failed) : undefined;
    if (next !== undefined) {
      leader = next;
      continue;
    }
    const msg = isWrite
      ? `no quorum: the leader ${leader} could not be reached (${failed.message}); the write's outcome is unknown if it was sent`
      : `leader ${leader} could not be reached: ${failed.message}`;
    sendJson(res, 503, { error: msg });
    return true;
  }
}

/**
 * After a forward to `leader` failed before its answer began: the leader to
 * send it to instead (null: none is known), or undefined when it must not be
 * sent again. Only what cannot have applied goes again: a read, or a write
 * whose connect was refused (writes go on connections of their own,
 * PipeOptions.freshConnection, so a dead leader refuses the connect rather
 * than reset a kept-alive one after it may have read the write). Waits, as
 * for a request that found no leader, for one other than `leader`.
 */
export async function leaderToRetry(wait: LeaderWait | undefined, leader: string, method: string | undefined, err: NodeJS.ErrnoException): Promise<string | null | undefined> {
  if (!wait || (method !== 'GET' && err.code !== 'ECONNREFUSED')) return undefined;
  const next = await wait.known(leader);
  return next === leader ? undefined : next;
}

/** docs/contract.md's `mo cluster status` object, from every replica's own word. */
export async function gatherClusterStatus(peers: Map<string, string>, selfId: string, token: string, self: () => Record<string, unknown>): Promise<ClusterStatusView> {
  const rows = await Promise.all(
    [...peers.entries()].map(async ([id, ws]): Promise<ReplicaStatusView> => {
      const url = httpUrlOf(ws);
      try {
        const s =
          id === selfId
            ? self()
            : ((await (await fetch(`${url}/v1/replica`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(STATUS_TIMEOUT_MS) })).json()) as Record<
                string,
                unknown
              >);
        return { id, url, role: String(s.role), term: Number(s.term), commitIndex: Number(s.commitIndex), appliedIndex: Number(s.appliedIndex), pid: Number(s.pid), reachable: true };
      } catch {
        return { id, url, role: 'unknown', term: null, commitIndex: null, appliedIndex: null, pid: null, reachable: false };
      }
    }),
  );
  // The leader of the highest term any replica reports (a stale leader that
  // has not heard of the new term yet may still call itself leader).
  const leaders = rows.filter((r) => r.role === 'leader').sort((a, b) => (b.term ?? 0) - (a.term ?? 0));
  return { leader: leaders[0]?.id ?? '', replicas: rows };
}

export interface PipeOptions {
  method: string | undefined;
  target: URL;
  headers: http.OutgoingHttpHeaders;
  /** The upstream's response headers passed back; the others are dropped. */
  passHeaders: readonly string[];
  /** Response headers added to the upstream's. */
  extraHeaders?: http.OutgoingHttpHeaders;
  /** The CA the upstream's certificate must chain to (https only; default: the process's trust). */
  ca?: string;
  /** An upstream silent this long before its answer starts is given up. */
  timeoutMs?: number;
  /**
   * A connection of its own rather than a kept-alive one. A write sent on
   * a kept-alive connection to a leader that has just died fails with a
   * reset, and the reset does not tell whether the leader read it first; on
   * a new connection a dead leader refuses the connect, so the write
   * certainly was not sent and can go to the next leader.
   */
  freshConnection?: boolean;
  /** Answers the client when the upstream failed before its answer started. */
  onError: (err: Error) => void;
}

/**
 * Sends one request upstream with `body` and pipes the answer back (a watch
 * stream included, for as long as the client stays); a client that leaves
 * stops the upstream. The /v1 forwarder and the Kubernetes API's share it.
 */
export function pipeThrough(res: http.ServerResponse, body: Buffer, o: PipeOptions): Promise<void> {
  return new Promise<void>((resolve) => {
    const headers = { ...o.headers };
    if (body.length) headers['content-length'] = body.length;
    const options: https.RequestOptions = { method: o.method, headers, timeout: o.timeoutMs };
    if (o.freshConnection) options.agent = false;
    if (o.ca !== undefined) options.ca = o.ca;
    const up = (o.target.protocol === 'https:' ? https : http).request(o.target, options, (upRes) => {
      const h: http.OutgoingHttpHeaders = { ...o.extraHeaders };
      for (const k of o.passHeaders) if (upRes.headers[k]) h[k] = upRes.headers[k];
      res.writeHead(upRes.statusCode ?? 502, h);
      upRes.pipe(res);
      upRes.on('end', resolve);
      upRes.on('error', () => {
        res.destroy();
        resolve();
      });
    });
    // A watch stream lives until the client leaves: stop the upstream too.
    res.on('close', () => up.destroy());
    if (o.timeoutMs !== undefined) {
      up.on('timeout', () => {
        if (!res.headersSent) up.destroy(new Error(`no answer within ${o.timeoutMs} ms`));
      });
    }
    up.on('error', (err) => {
      if (!res.headersSent) o.onError(err);
      else res.destroy();
      resolve();
    });
    up.end(body);
  });
}
