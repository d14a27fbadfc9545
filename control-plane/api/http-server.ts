// control-plane/api/http-server.ts -- the HTTP API of docs/contract.md on one
// replica: resources (nodes, units, deployments, events), watch streams of
// JSON lines, writes that answer only once durable (committed and applied),
// and the cluster status. Every error is `{"error": "<one line>"}` with a
// fitting status; no input can crash the process.
//
// Followers do not serve /v1 themselves: `forward` (set by main) proxies the
// request to the leader, so every replica answers with the cluster's view.

import http from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { nanoid } from 'nanoid';
import { MAX_REPLICAS, ManifestError, unitSpecHash, validateManifest, validateService } from '../../shared/manifest.ts';
import type { EventLog } from '../events.ts';
import type { NodeRegistry } from '../registry/node-registry.ts';
import type { ApplyResult, StoreCommand } from '../store/desired-state.ts';
import { NoQuorumError, NotLeaderError, type ReplicatedStore } from '../store/store.ts';
import { GoneError, WatchHub } from './watch.ts';
import { sendPieces } from './send-pieces.ts';
import { ViewCache, renderAll, type Rendered } from './view-cache.ts';
import {
  allDeploymentViews,
  allNodeViews,
  nodeViewByName,
  allUnitViews,
  deploymentView,
  unitViewByName,
  eventView,
  revisionViews,
  allServiceViews,
  allEndpointsViews,
  type ApiObject,
  type ViewSource,
} from './views.ts';

export const MAX_BODY_BYTES = 1024 * 1024;
export const MAX_WATCHERS = 256;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface ApiDeps {
  store: ReplicatedStore;
  registry: NodeRegistry;
  events: EventLog;
  token: string;
  now: () => number;
  /** GET /v1/cluster: the status object of docs/contract.md. */
  clusterStatus: () => Promise<unknown>;
  /** This replica's own status (GET /v1/replica), for peers' /v1/cluster. */
  replicaStatus: () => unknown;
  /** This replica's event-loop windows closed after a wall-clock ms (GET /v1/replica?eventLoopSince=T), for `npm run bench`. */
  eventLoop?: (since: number) => unknown;
  /** Proxy to the leader when this replica is not it; returns true if handled. */
  forward?: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => Promise<boolean>;
  /** A change signal for watch streams (desired or observed state changed). */
  subscribe: (fn: () => void) => () => void;
  /** GET /v1/units/NAME/log, answered by this replica itself (api/logs.ts). */
  unitLog?: (req: http.IncomingMessage, res: http.ServerResponse, name: string, query: URLSearchParams) => Promise<void>;
  /** GET / and /ui/*: the dashboard's files (api/dashboard.ts), without a token; false: not one of its paths. */
  dashboard?: (req: http.IncomingMessage, res: http.ServerResponse, pathname: string) => boolean;
  /** GET /metrics, answered by this replica itself (api/metrics.ts), and a record of every answered request. */
  metrics?: { serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void>; observeRequest(method: string, url: string, code: number, seconds: number): void };
  /** On the leader: stop a deleted unit with the grace period the user asked for (undefined: the default). */
  terminateUnit?: (unit: string, node: string, gracePeriodMs: number | undefined, reason: string) => void;
}

/** Why a unit stops when a user deletes it (to the agent, in events and logs). */
export const USER_DELETE_REASON = 'deleted by the user';

/** Longest grace period a delete may ask for (an hour, as the manifest allows). */
export const MAX_DELETE_GRACE_SECONDS = 3600;

type Resource = 'nodes' | 'units' | 'deployments' | 'events' | 'services' | 'endpoints';
const RESOURCES = new Set<Resource>(['nodes', 'units', 'deployments', 'events', 'services', 'endpoints']);
const KIND: Record<Resource, string> = { nodes: 'Node', units: 'Unit', deployments: 'Deployment', events: 'Event', services: 'Service', endpoints: 'Endpoints' };

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** `?gracePeriodSeconds=S` of a delete, in ms; undefined when absent. */
function graceQuery(q: URLSearchParams): number | undefined {
  const raw = q.get('gracePeriodSeconds');
  if (raw === null) return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(n) || n < 0 || n > MAX_DELETE_GRACE_SECONDS) {
    throw new HttpError(400, `gracePeriodSeconds: expected an integer 0..${MAX_DELETE_GRACE_SECONDS}, got ${JSON.stringify(raw)}`);
  }
  return n * 1000;
}

function tokenOk(header: string | undefined, token: string): boolean {
  if (!header || !header.startsWith('Bearer ')) return false;
  const a = Buffer.from(header.slice(7).trim());
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The request body, at most MAX_BODY_BYTES. Plain 'data'/'end' listeners:
 *  a stream's async iterator costs a few promise hops per request, which
 *  shows on the write path. */
export function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooBig = false;
    req.on('data', (chunk: Buffer) => {
      if (tooBig) return; // keep reading (and dropping) so the 413 can be answered
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        tooBig = true;
        reject(new HttpError(413, `request body exceeds ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!tooBig) resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    });
    req.on('error', reject);
    req.on('close', () => {
      if (!req.complete) reject(new HttpError(400, 'the connection closed before the request body was complete'));
    });
  });
}

function parseJson(body: Buffer): unknown {
  if (body.length === 0) throw new HttpError(400, 'request body is empty (expected JSON)');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new HttpError(400, `invalid JSON: ${(e as Error).message}`);
  }
}

export class ApiServer {
  readonly server: http.Server;
  private watchers = 0;

  constructor(private readonly deps: ApiDeps) {
    this.server = http.createServer((req, res) => {
      const metrics = this.deps.metrics;
      if (metrics) {
        const t0 = process.hrtime.bigint();
        res.once('close', () => metrics.observeRequest(req.method ?? 'GET', req.url ?? '/', res.statusCode, Number(process.hrtime.bigint() - t0) / 1e9));
      }
      this.handle(req, res).catch((err) => this.fail(res, err));
    });
    this.server.on('clientError', (_err, socket) => socket.destroy());
    // The view cache keeps each deployment's counts until a change touches them (view-cache.ts).
    this.views.follow(deps.store.state, deps.registry);
  }

  /** Watch streams open now (for /metrics). */
  get openWatches(): number {
    return this.watchers;
  }

  private src(): ViewSource {
    const registry = this.deps.registry;
    return { state: this.deps.store.state, observed: registry.nodes, now: this.deps.now(), reportsOf: (d, visit) => registry.reportsOf(d, visit) };
  }

  private fail(res: http.ServerResponse, err: unknown): void {
    if (err instanceof HttpError) return sendJson(res, err.status, { error: err.message });
    if (err instanceof ManifestError) return sendJson(res, 400, { error: err.message });
    if (err instanceof NoQuorumError) return sendJson(res, 503, { error: err.message, outcome: err.outcome });
    if (err instanceof NotLeaderError) return sendJson(res, 503, { error: err.message });
    console.error(`api: internal error: ${(err as Error)?.stack ?? String(err)}`);
    sendJson(res, 500, { error: `internal error: ${(err as Error)?.message ?? String(err)}` });
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const method = req.method ?? 'GET';
    if (url.pathname === '/healthz') return sendJson(res, 200, { ok: true });
    if (url.pathname === '/readyz') {
      const leader = this.deps.store.leaderId();
      return leader ? sendJson(res, 200, { ok: true, leader }) : sendJson(res, 503, { error: 'no leader known yet' });
    }
    // The dashboard page loads without a token (it asks for one; every API call sends it).
    if (this.deps.dashboard && this.deps.dashboard(req, res, url.pathname)) return;
    if (!tokenOk(req.headers.authorization, this.deps.token)) {
      throw new HttpError(401, req.headers.authorization ? 'invalid token' : 'missing token: send Authorization: Bearer <token>');
    }
    // Metrics are this replica's own: not forwarded to the leader.
    if (url.pathname === '/metrics' && this.deps.metrics) return this.deps.metrics.serve(req, res);
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] !== 'v1') throw new HttpError(404, `no such path ${url.pathname}`);
    if (parts[1] === 'replica' && parts.length === 2) {
      const since = url.searchParams.get('eventLoopSince');
      if (since === null || !this.deps.eventLoop) return sendJson(res, 200, this.deps.replicaStatus());
      const t = Number(since);
      if (since.trim() === '' || !Number.isFinite(t) || t < 0) throw new HttpError(400, `eventLoopSince: expected a wall-clock time in ms (Date.now()), got ${JSON.stringify(since)}`);
      return sendJson(res, 200, { ...(this.deps.replicaStatus() as Record<string, unknown>), eventLoop: this.deps.eventLoop(t) });
    }
    if (parts[1] === 'cluster' && parts.length === 2) return sendJson(res, 200, await this.deps.clusterStatus());
    // Logs come from this replica's own agent connections: not forwarded to the leader.
    if (parts[1] === 'units' && parts[3] === 'log' && parts.length === 4 && this.deps.unitLog) return this.deps.unitLog(req, res, parts[2], url.searchParams);

    const body = method === 'GET' || method === 'DELETE' ? Buffer.alloc(0) : await readBody(req);
    if (!this.deps.store.isLeader() && this.deps.forward) {
      if (await this.deps.forward(req, res, body)) return;
    }

    const resource = parts[1] as Resource;
    if (!RESOURCES.has(resource)) throw new HttpError(404, `unknown resource "${parts[1] ?? ''}" (nodes, units, deployments, events, services, endpoints)`);
    const name = parts[2];

    if (resource === 'deployments' && name && parts.length === 4 && parts[3] !== 'scale') return this.rollout(method, name, parts[3], body, res);

    if (method === 'GET') {
      if (parts.length > 3) throw new HttpError(404, `no such path ${url.pathname}`);
      if (!this.deps.store.isLeader()) throw new NotLeaderError(this.deps.store.leaderId());
      await this.deps.store.readBarrier();
      if (name === undefined && (url.searchParams.get('watch') === '1' || url.searchParams.get('watch') === 'true')) {
        if (this.watchers >= MAX_WATCHERS) throw new HttpError(429, `too many watchers (max ${MAX_WATCHERS})`);
        await this.views.warm(resource, () => this.src());
        try {
          this.hub.watch(resource, url.searchParams.get('resourceVersion'), req, res);
        } catch (err) {
          if (err instanceof GoneError) throw new HttpError(410, err.message);
          throw err;
        }
        this.watchers++;
        req.on('close', () => this.watchers--);
        return;
      }
      if (name === undefined) {
        // What is not rendered yet is rendered in slices first: a big first list never stops the loop.
        await this.views.warm(resource, () => this.src());
        // And a big answer goes out in slices (send-pieces.ts).
        const { head, items, tail } = this.hub.listParts(resource, `${KIND[resource]}List`);
        return sendPieces(res, 200, { 'content-type': 'application/json' }, head, items, tail);
      }
      return sendJson(res, 200, this.one(resource, name));
    }

    if (resource === 'services' && name && method === 'PUT' && parts.length === 3) {
      const manifest = validateService(parseJson(body));
      if (manifest.metadata.name !== name) throw new HttpError(400, `metadata.name "${manifest.metadata.name}" does not match the URL name "${name}"`);
      const r = await this.write({ type: 'service.apply', at: this.deps.now(), uid: nanoid(), manifest });
      return sendJson(res, r.created ? 201 : 200, this.one('services', name));
    }
    if (resource === 'services' && name && method === 'DELETE' && parts.length === 3) {
      const before = this.list('services').find((o) => o.metadata.name === name);
      await this.write({ type: 'service.delete', at: this.deps.now(), name });
      return sendJson(res, 200, before ?? { kind: 'Service', metadata: { name } });
    }
    if (resource === 'deployments' && name && method === 'PUT' && parts.length === 3) {
      const obj = parseJson(body);
      const { manifest, unitSpec } = validateManifest(obj);
      if (manifest.metadata.name !== name) throw new HttpError(400, `metadata.name "${manifest.metadata.name}" does not match the URL name "${name}"`);
      const r = await this.write({ type: 'deployment.apply', at: this.deps.now(), uid: nanoid(), manifest, unitSpec, specHash: unitSpecHash(unitSpec) });
      return sendJson(res, r.created ? 201 : 200, this.one('deployments', name));
    }
    if (resource === 'deployments' && name && parts[3] === 'scale' && parts.length === 4 && (method === 'PATCH' || method === 'PUT')) {
      const obj = parseJson(body) as { replicas?: unknown; spec?: { replicas?: unknown } };
      const replicas = obj?.replicas ?? obj?.spec?.replicas;
      if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0 || replicas > MAX_REPLICAS) {
        throw new HttpError(400, `replicas: expected an integer 0..${MAX_REPLICAS}, got ${JSON.stringify(replicas)}`);
      }
      await this.write({ type: 'deployment.scale', at: this.deps.now(), name, replicas });
      return sendJson(res, 200, this.one('deployments', name));
    }
    if ((resource === 'deployments' || resource === 'units') && name && method === 'DELETE' && parts.length === 3) {
      const before = this.find(resource, name);
      if (resource === 'deployments') await this.write({ type: 'deployment.delete', at: this.deps.now(), name });
      else {
        const unit = this.deps.store.state.units.get(name);
        // ?force=true (kubectl's --force): also forget what a NotReady node last
        // reported of the unit (listed as Lost), without waiting for it to
        // stop; grace 0 unless one is given. If that node comes back still
        // running it, the reconcile loop stops it (it is not bound there).
        const force = ['true', '1'].includes(url.searchParams.get('force') ?? '');
        const grace = graceQuery(url.searchParams) ?? (force ? 0 : undefined);
        const lostOn = [...this.deps.registry.nodes.values()].filter((n) => !n.ready && n.units.has(name)).map((n) => n.name);
        if (!unit && !(force && lostOn.length > 0)) {
          if (lostOn.length > 0) {
            throw new HttpError(404, `units "${name}" not found: only the last report of NotReady node ${lostOn.join(', ')} lists it (Lost); delete with force=true to forget it`);
          }
          throw new HttpError(404, `units "${name}" not found`);
        }
        if (unit) {
          await this.write({ type: 'unit.delete', at: this.deps.now(), name, reason: USER_DELETE_REASON });
          // Always our own terminate, so the agent and the events say why, and
          // the reconcile pass sees it in flight instead of sending "not bound".
          if (unit.nodeName && this.deps.terminateUnit) this.deps.terminateUnit(name, unit.nodeName, grace ?? unit.spec.gracePeriodMs, USER_DELETE_REASON);
        }
        if (force) for (const node of lostOn) this.deps.registry.forgetUnit(node, name);
      }
      return sendJson(res, 200, before ?? { kind: KIND[resource], metadata: { name } });
    }
    if (resource === 'nodes' && name && method === 'PATCH' && parts.length === 3) {
      const obj = parseJson(body) as { unschedulable?: unknown; spec?: { unschedulable?: unknown } };
      const u = obj?.unschedulable ?? obj?.spec?.unschedulable;
      if (typeof u !== 'boolean') throw new HttpError(400, `unschedulable: expected true or false, got ${JSON.stringify(u)}`);
      await this.write({ type: 'node.cordon', at: this.deps.now(), name, unschedulable: u });
      return sendJson(res, 200, this.one('nodes', name));
    }
    throw new HttpError(405, `${method} is not supported on ${url.pathname}`);
  }

  /**
   * A deployment's rollout: `GET .../revisions` (the history), `POST
   * .../undo` (body `{"toRevision": N}`, optional), `.../restart`,
   * `.../pause`, `.../resume`.
   */
  private async rollout(method: string, name: string, verb: string, body: Buffer, res: http.ServerResponse): Promise<void> {
    const now = this.deps.now();
    if (verb === 'revisions') {
      if (method !== 'GET') throw new HttpError(405, `${method} is not supported on revisions (GET)`);
      if (!this.deps.store.isLeader()) throw new NotLeaderError(this.deps.store.leaderId());
      await this.deps.store.readBarrier();
      const d = this.deps.store.state.deployments.get(name);
      if (!d) throw new HttpError(404, `deployments "${name}" not found`);
      return sendJson(res, 200, { kind: 'RevisionList', deployment: name, current: d.revision, items: revisionViews(d) });
    }
    if (method !== 'POST') throw new HttpError(method === 'GET' ? 404 : 405, `${method} is not supported on deployments/${name}/${verb}`);
    switch (verb) {
      case 'undo': {
        const obj = body.length === 0 ? {} : (parseJson(body) as { toRevision?: unknown });
        const to = obj?.toRevision ?? 0;
        if (typeof to !== 'number' || !Number.isInteger(to) || to < 0)
          throw new HttpError(400, `toRevision: expected an integer >= 0 (0: the previous revision), got ${JSON.stringify(to)}`);
        await this.write({ type: 'deployment.undo', at: now, name, toRevision: to });
        break;
      }
      case 'restart':
        await this.write({ type: 'deployment.restart', at: now, name });
        break;
      case 'pause':
      case 'resume':
        await this.write({ type: 'deployment.pause', at: now, name, paused: verb === 'pause' });
        break;
      default:
        throw new HttpError(404, `no such action "${verb}" on deployments (revisions, undo, restart, pause, resume, scale)`);
    }
    return sendJson(res, 200, this.one('deployments', name));
  }

  private async write(cmd: StoreCommand): Promise<ApplyResult & { ok: true }> {
    const r = await this.deps.store.propose(cmd);
    if (!r.ok) throw new HttpError(r.code, r.error);
    return r;
  }

  private one(resource: Resource, name: string): ApiObject {
    const o = this.find(resource, name);
    if (!o) throw new HttpError(404, `${resource} "${name}" not found`);
    return o;
  }

  /** One object's view; a deployment's, a unit's or a node's is made alone, not by rendering every one of them. */
  private find(resource: Resource, name: string): ApiObject | undefined {
    if (resource === 'deployments') {
      const d = this.deps.store.state.deployments.get(name);
      return d ? deploymentView(d, this.src()) : undefined;
    }
    if (resource === 'units') return unitViewByName(this.src(), name);
    if (resource === 'nodes') return nodeViewByName(this.src(), name);
    return this.list(resource).find((x) => x.metadata.name === name);
  }

  list(resource: Resource): ApiObject[] {
    switch (resource) {
      case 'nodes':
        return allNodeViews(this.src());
      case 'units':
        return allUnitViews(this.src());
      case 'deployments':
        return allDeploymentViews(this.src());
      case 'events':
        return this.deps.events.list().map(eventView);
      case 'services':
        return allServiceViews(this.src());
      case 'endpoints':
        return allEndpointsViews(this.src());
    }
  }

  /** Units and deployments keep each object's JSON while its inputs are unchanged (view-cache.ts). */
  private readonly views = new ViewCache();

  /** The same renderings, for the Kubernetes API (its pods and Deployments are made from them). */
  readonly kubeViews = this.views.kubeViews(() => this.src());

  private render(resource: Resource): Rendered[] {
    if (resource === 'units') return this.views.units(this.src());
    if (resource === 'deployments') return this.views.deploymentList(this.src());
    return renderAll(this.list(resource));
  }

  /**
   * At rest (rest-collect.ts): the watch histories no watch follows go, and
   * when no watch is open at all (`othersWatching`: the Kubernetes API's),
   * every object's JSON too; the next list renders afresh. Returns what
   * went, for the log, or null.
   */
  releaseRenderings(othersWatching: boolean): string | null {
    const unwatched = this.hub.release();
    if (!unwatched || othersWatching) return null;
    this.views.release();
    return 'renderings released (no watch open)';
  }

  /** Lists with resourceVersions and exact, resumable watches (watch.ts). */
  private readonly hub = new WatchHub({
    render: (resource) => this.render(resource as Resource),
    events: () => this.deps.events.list(),
    onEvent: (fn) => this.deps.events.subscribe(fn),
    eventView,
    subscribe: (fn) => this.deps.subscribe(fn),
    again: (resource) => resource === 'deployments' && this.views.renderedStale,
    isLeader: () => this.deps.store.isLeader(),
  });
}
