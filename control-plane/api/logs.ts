// control-plane/api/logs.ts -- `GET /v1/units/NAME/log`, like the pod log
// endpoint of Kubernetes (same query names: follow, tailLines, sinceSeconds,
// sinceTime, timestamps). Every replica answers it itself, never forwarding
// to the leader: it asks the agent holding the unit over its own agent
// connection (agent-server.ts, log-requests.ts) and streams the lines back
// as text/plain (chunked while following).
//
// Which node: the unit's binding in the desired state; else a node whose
// agent reports the unit; else every connected agent is asked and the first
// that has the log answers (a crashed or deleted unit's log outlives its
// records). A bound node that is NotReady or whose agent is not connected
// here is a 503 naming the node, never an empty 200; no log anywhere is 404.
//
// A stream that breaks after the 200 (the agent's connection closed, the
// agent ended it) ends the body with the trailer `X-Mo-Log-Error: <why>`;
// the client closing the request sends log-close to the agent.

import type http from 'node:http';
import type { LogHandle, LogParams, LogRequestHandlers } from '../log-requests.ts';
import type { NodeRegistry } from '../registry/node-registry.ts';
import { HttpError } from './http-server.ts';

/** How long the agents get to answer before the request fails with 503. */
export const LOG_ANSWER_TIMEOUT_MS = 5000;
/** Bytes of log text waiting for a slow HTTP client before the stream is cut (the agent cannot be paused). */
export const MAX_LOG_RESPONSE_BUFFER_BYTES = 8 * 1024 * 1024;
export const LOG_ERROR_TRAILER = 'X-Mo-Log-Error';

const UNIT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i;
const QUERY_NAMES = ['follow', 'tailLines', 'sinceSeconds', 'sinceTime', 'timestamps'];

export interface UnitLogDeps {
  replicaId: string;
  /** The unit's node in the desired state (null: not bound; undefined: no such unit). */
  boundNode: (name: string) => string | null | undefined;
  registry: NodeRegistry;
  agents: {
    openLog(node: string, params: LogParams, handlers: LogRequestHandlers): LogHandle | string;
    connectedNodes(): string[];
    connected(node: string): boolean;
  };
  now: () => number;
}

function bool(query: URLSearchParams, name: string): boolean {
  const v = query.get(name);
  if (v === null || v === '0' || v === 'false') return false;
  if (v === '' || v === '1' || v === 'true') return true;
  throw new HttpError(400, `${name}: expected true or false, got ${JSON.stringify(v)}`);
}

/** The query of a log request as the agent's log-open parameters (without the name); HttpError 400 naming the parameter. */
export function parseLogQuery(query: URLSearchParams, now: number): Omit<LogParams, 'name'> {
  for (const key of query.keys()) {
    if (!QUERY_NAMES.includes(key)) throw new HttpError(400, `unknown query parameter ${JSON.stringify(key)} (want ${QUERY_NAMES.join(', ')})`);
  }
  const out: Omit<LogParams, 'name'> = { follow: bool(query, 'follow'), timestamps: bool(query, 'timestamps') };
  const tail = query.get('tailLines');
  if (tail !== null && tail !== '-1') {
    if (!/^\d{1,9}$/.test(tail)) throw new HttpError(400, `tailLines: expected a non-negative integer, got ${JSON.stringify(tail)}`);
    out.tailLines = Number(tail);
  }
  const seconds = query.get('sinceSeconds');
  const time = query.get('sinceTime');
  if (seconds !== null && time !== null) throw new HttpError(400, 'sinceSeconds, sinceTime: give at most one of them');
  if (seconds !== null) {
    if (!/^\d{1,12}$/.test(seconds) || Number(seconds) < 1) throw new HttpError(400, `sinceSeconds: expected a positive integer, got ${JSON.stringify(seconds)}`);
    out.sinceMs = Math.max(0, now - Number(seconds) * 1000);
  }
  if (time !== null) {
    const ms = RFC3339.test(time) ? Date.parse(time) : NaN;
    if (!Number.isFinite(ms)) throw new HttpError(400, `sinceTime: expected an RFC 3339 time like 2026-05-01T10:00:00Z, got ${JSON.stringify(time)}`);
    out.sinceMs = Math.max(0, ms);
  }
  return out;
}

/** Header-safe one line. */
function trailerText(s: string): string {
  return s.replace(/[^\x20-\x7e]/g, '?').slice(0, 500);
}

/** Serve one log request; resolves when the response is over. Throws HttpError before anything is sent. */
export async function serveUnitLog(req: http.IncomingMessage, res: http.ServerResponse, name: string | undefined, query: URLSearchParams, deps: UnitLogDeps): Promise<void> {
  if (req.method !== 'GET') throw new HttpError(405, `${req.method} is not supported on a unit's log (GET it)`);
  if (name === undefined || !UNIT_NAME_PATTERN.test(name)) throw new HttpError(400, `invalid unit name ${JSON.stringify(name ?? '')}`);
  const params: LogParams = { name, ...parseLogQuery(query, deps.now()) };

  const bound = deps.boundNode(name) ?? deps.registry.findUnit(name)?.node ?? null;
  let candidates: string[];
  if (bound !== null) {
    const obs = deps.registry.nodes.get(bound);
    if (obs && !obs.ready) throw new HttpError(503, `log of unit ${name} is unavailable: node ${bound} is NotReady`);
    if (!deps.agents.connected(bound)) throw new HttpError(503, `log of unit ${name} is unavailable: node ${bound}'s agent is not connected to ${deps.replicaId}`);
    candidates = [bound];
  } else {
    candidates = deps.agents.connectedNodes();
  }
  if (candidates.length === 0) throw new HttpError(404, `no log for unit ${name}`);

  await new Promise<void>((resolve, reject) => {
    const attempts = new Map<string, LogHandle>();
    const failures: string[] = [];
    let winner: string | null = null;
    let over = false;

    const done = () => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      for (const h of attempts.values()) h.close();
      attempts.clear();
      resolve();
    };

    /** No agent has it (or none answered): an error answer. */
    const fail = () => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      for (const h of attempts.values()) h.close();
      attempts.clear();
      const other = failures.find((f) => !f.startsWith('no log for unit'));
      if (other === undefined) reject(new HttpError(404, bound !== null && failures.length === 1 ? failures[0] : `no log for unit ${name}`));
      else reject(new HttpError(503, `log of unit ${name} is unavailable: ${other}`));
    };

    const choose = (node: string) => {
      winner = node;
      for (const [n, h] of attempts) if (n !== node) h.close();
      clearTimeout(timer);
      res.writeHead(200, {
        'content-type': 'text/plain; charset=utf-8',
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
        'x-mo-node': node,
        trailer: LOG_ERROR_TRAILER,
      });
      res.flushHeaders();
    };

    const handlersFor = (node: string): LogRequestHandlers => ({
      onData: (data) => {
        if (over) return;
        if (winner === null) choose(node);
        if (winner !== node) return;
        res.write(data);
        if (res.writableLength > MAX_LOG_RESPONSE_BUFFER_BYTES) {
          // A reader this slow would make us buffer without bound: cut it.
          res.destroy();
          done();
        }
      },
      onEnd: (error) => {
        if (over) return;
        attempts.delete(node);
        if (winner === null && error === undefined) choose(node); // it has the log, and it is empty
        if (winner === node) {
          if (error !== undefined) res.addTrailers({ [LOG_ERROR_TRAILER]: trailerText(error) });
          res.end();
          done();
          return;
        }
        if (winner !== null) return; // a loser we already closed
        failures.push(error ?? `node ${node} ended the stream`);
        if (attempts.size === 0) fail();
      },
    });

    const timer = setTimeout(() => {
      for (const node of attempts.keys()) failures.push(`node ${node}'s agent did not answer within ${LOG_ANSWER_TIMEOUT_MS} ms`);
      fail();
    }, LOG_ANSWER_TIMEOUT_MS);

    // The client left: stop the agents' streams.
    res.on('close', done);

    for (const node of candidates) {
      const h = deps.agents.openLog(node, params, handlersFor(node));
      if (typeof h === 'string') failures.push(h);
      else attempts.set(node, h);
    }
    if (attempts.size === 0) fail();
  });
}
