// control-plane/kube/server.ts -- the Kubernetes API subset over HTTPS
// (docs/kubernetes-api.md): discovery, reads (lists with selectors,
// limit/continue, Tables, watches), writes (create, update, delete with
// cascade, merge / JSON / strategic merge patch, server-side apply, the scale
// subresource, eviction, cordon), pod logs. It is a second face of the /v1
// API on the same replica: the same store, views, log path and rollout
// commands; conversion is in convert.ts, printing in tables.ts.
//
// A follower proxies every request (watches and logs included) to the
// leader's Kubernetes port, as /v1 does to the leader's HTTP port; discovery
// and /version it answers itself. Errors are metav1.Status objects.

import http from 'node:http';
import https from 'node:https';
import { timingSafeEqual } from 'node:crypto';
import { nanoid } from 'nanoid';
import { MAX_REPLICAS, ManifestError, parseManifestObject, unitSpecHash } from '../../shared/manifest.ts';
import { HttpError, readBody, USER_DELETE_REASON, MAX_DELETE_GRACE_SECONDS, type ApiDeps } from '../api/http-server.ts';
import { leaderToRetry, pipeThrough } from '../api/leader-routing.ts';
import { allEndpointsViews, allNodeViews, allServiceViews, compareUnitNames, deploymentView, unitViewByName, type ApiObject, type ViewSource } from '../api/views.ts';
import { Memo, type KubeViews, type Rendered } from '../api/view-cache.ts';
import { Slicer } from '../api/slicer.ts';
import { samePlaces } from '../api/watch-history.ts';
import type { ClusterEvent } from '../events.ts';
import type { ApplyResult, StoreCommand } from '../store/desired-state.ts';
import { NoQuorumError, NotLeaderError } from '../store/store.ts';
import {
  NAMESPACE,
  deploymentIn,
  kubeDeployment,
  kubeEndpoints,
  kubeEvent,
  kubeNamespace,
  kubeNode,
  kubePod,
  kubeReplicaSets,
  kubeService,
  nodeUid,
  serviceIn,
  type KubeObject,
} from './convert.ts';
import { KUBE_VERSION, apiGroup, apiGroupList, apiVersions, resourceList } from './discovery.ts';
import { PatchError, isObject, jsonPatch, mergePatch } from './patch.ts';
import { SCHEMAS, strategicMerge } from './strategic-merge.ts';
import { SelectorError, matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.ts';
import { table, tableHead, tableRow, type IncludeObject } from './tables.ts';
import { sendPieces } from '../api/send-pieces.ts';
import { KubeWatchHub, kubeRendered } from './watch.ts';
import type { LeaderWait } from '../store/leader-wait.ts';

export const MAX_KUBE_WATCHERS = 256;

type Kind = 'Pod' | 'Node' | 'Deployment' | 'ReplicaSet' | 'Event' | 'Service' | 'Endpoints' | 'Namespace';
interface ResourceInfo {
  kind: Kind;
  apiVersion: string;
  namespaced: boolean;
}
const RESOURCES: Record<string, ResourceInfo> = {
  pods: { kind: 'Pod', apiVersion: 'v1', namespaced: true },
  nodes: { kind: 'Node', apiVersion: 'v1', namespaced: false },
  events: { kind: 'Event', apiVersion: 'v1', namespaced: true },
  services: { kind: 'Service', apiVersion: 'v1', namespaced: true },
  endpoints: { kind: 'Endpoints', apiVersion: 'v1', namespaced: true },
  namespaces: { kind: 'Namespace', apiVersion: 'v1', namespaced: false },
  deployments: { kind: 'Deployment', apiVersion: 'apps/v1', namespaced: true },
  replicasets: { kind: 'ReplicaSet', apiVersion: 'apps/v1', namespaced: true },
};
const CORE = ['pods', 'nodes', 'events', 'services', 'endpoints', 'namespaces'];
const APPS = ['deployments', 'replicasets'];

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Gone',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};

/** A metav1.Status. */
export function status(code: number, message: string, details?: Record<string, unknown>, reason?: string): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: code < 400 ? 'Success' : 'Failure',
    message,
    reason: reason ?? REASONS[code] ?? 'Unknown',
    ...(details ? { details } : {}),
    code,
  };
}

class KubeError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly reason?: string,
  ) {
    super(message);
  }
}

function send(res: http.ServerResponse, code: number, body: unknown): void {
  sendText(res, code, JSON.stringify(body));
}

/** `text`: JSON already made. */
function sendText(res: http.ServerResponse, code: number, text: string): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function tokenOk(header: string | undefined, token: string): boolean {
  if (!header || !header.startsWith('Bearer ')) return false;
  const a = Buffer.from(header.slice(7).trim());
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A pod's JSON, with what its ReplicaSet counts of it (null: it counts for none). */
type PodRendered = Rendered & { rs: { deployment: string; specHash: string; ready: boolean } | null };

/** Longest a list answer's parse, selection and rows run before the loop gets a turn. */
const LIST_SLICE_MS = 8;

/**
 * Kept pods and Deployments are forgotten after this long without a list,
 * get or watch of them: ~1.3 KiB a pod, kept only while a Kubernetes
 * client uses them.
 */
export const KEEP_RENDERINGS_MS = 60_000;

export interface KubeDeps extends Pick<ApiDeps, 'store' | 'registry' | 'events' | 'token' | 'now' | 'subscribe' | 'terminateUnit' | 'unitLog'> {
  selfId: string;
  /** The leader's Kubernetes API base URL (https://host:port), or undefined while none is known. */
  leaderUrl: (leaderId: string) => string | undefined;
  /** Holds a request that finds no leader known until one is (or its wait ends); absent: refuse at once. */
  leaderWait?: LeaderWait;
  /** The cluster CA (PEM), to check the leader's certificate when proxying. */
  caPem: string;
  /** host:port this replica is reached at (discovery's serverAddressByClientCIDRs). */
  advertise: string;
  views: KubeViews;
  /** KEEP_RENDERINGS_MS (tests). */
  keepRenderingsMs?: number;
}

export class KubeApi {
  private readonly hub: KubeWatchHub;

  /** Watches open on this API. */
  get watchesOpen(): number {
    return this.hub.open;
  }

  constructor(private readonly deps: KubeDeps) {
    this.hub = new KubeWatchHub({
      render: (r) => this.render(r),
      renderOne: (r, name) => this.renderOne(r, name),
      events: () => this.deps.events.list(),
      onEvent: (fn) => this.deps.events.subscribe(fn),
      eventObject: (e) => this.event(e),
      subscribe: (fn) => this.deps.subscribe(fn),
      isLeader: () => this.deps.store.isLeader(),
      // A Deployment list that showed counts a few ms old is rendered again (view-cache.ts).
      again: (resource) => resource === 'deployments' && this.deploymentsStale,
    });
    // What a pod reads besides its unit's view: its Deployment's uid and its node's address.
    const state = deps.store.state;
    state.onChange((kind, name) => {
      if (kind === 'node') this.podInputs++;
      else if (kind === 'all') {
        this.podInputs++;
        this.uids.clear(); // relearned as deployments change
      } else if (kind === 'deployment') {
        const uid = state.deployments.get(name)?.uid;
        if (this.uids.get(name) === uid) return;
        this.podInputs++;
        if (uid === undefined) this.uids.delete(name);
        else this.uids.set(name, uid);
      }
    });
    deps.registry.onChange((c) => {
      if (c.type === 'node-registered') this.podInputs++;
    });
  }

  /** Bumped when a Deployment's uid or a node's address may have changed (the next pods rendering walks all). */
  private podInputs = 0;
  private readonly uids = new Map<string, string>();
  /**
   * The last pods rendering: the /v1 unit renderings it was made from, the
   * pod made of each (null: a name shown twice, made once), whether that
   * pod is kept (made from its inputs, not afresh), and what else it read.
   */
  private lastPods: { from: readonly Rendered[]; made: Array<PodRendered | null>; kept: boolean[]; inputs: number; nodes: number } | null = null;
  /** Pods renderings made from the last one with units come or gone since, without walking every unit (tests). */
  podsMergedCount = 0;

  get openWatches(): number {
    return this.hub.open;
  }

  /** The request handler of the HTTPS server. */
  handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    this.handle(req, res).catch((err) => this.fail(res, err));
  };

  private fail(res: http.ServerResponse, err: unknown): void {
    if (err instanceof KubeError) return send(res, err.code, status(err.code, err.message, err.details, err.reason));
    if (err instanceof HttpError) return send(res, err.status, status(err.status, err.message));
    if (err instanceof ManifestError) return send(res, 422, invalid(err));
    if (err instanceof PatchError || err instanceof SelectorError) return send(res, err instanceof PatchError ? 422 : 400, status(err instanceof PatchError ? 422 : 400, err.message));
    if (err instanceof NoQuorumError || err instanceof NotLeaderError) return send(res, 503, status(503, err.message));
    console.error(`kube api: internal error: ${(err as Error)?.stack ?? String(err)}`);
    send(res, 500, status(500, `internal error: ${(err as Error)?.message ?? String(err)}`));
  }

  private src(): ViewSource {
    return { state: this.deps.store.state, observed: this.deps.registry.nodes, now: this.deps.now() };
  }

  // ---- rendering -------------------------------------------------------------

  private hostIP(node: string | null): string | undefined {
    if (!node) return undefined;
    return this.deps.registry.nodes.get(node)?.info.address ?? this.deps.store.state.nodes.get(node)?.info.address;
  }

  private readonly podMemo = new Memo<PodRendered>();
  private readonly deploymentMemo = new Memo<Rendered>();
  /** The last Deployment rendering showed counts a few ms old. */
  private deploymentsStale = false;
  /** When pods or Deployments were last rendered (performance.now()), and the timer that forgets them. */
  private lastRendered = 0;
  private forgetTimer: NodeJS.Timeout | null = null;

  /** Pods and Deployments kept now (tests). */
  get kept(): { pods: number; deployments: number } {
    return { pods: this.podMemo.size, deployments: this.deploymentMemo.size };
  }

  /** Pods or Deployments were rendered: they are kept for KEEP_RENDERINGS_MS more, or while a watch of them is open. */
  private used(): void {
    this.lastRendered = performance.now();
    if (this.forgetTimer === null) this.forgetLater(this.deps.keepRenderingsMs ?? KEEP_RENDERINGS_MS);
  }

  private forgetLater(ms: number): void {
    this.forgetTimer = setTimeout(() => {
      this.forgetTimer = null;
      const keep = this.deps.keepRenderingsMs ?? KEEP_RENDERINGS_MS;
      if (['pods', 'replicasets', 'deployments'].some((r) => this.hub.watching(r))) return this.forgetLater(keep);
      const idle = performance.now() - this.lastRendered;
      if (idle < keep) return this.forgetLater(keep - idle);
      this.podMemo.clear();
      this.deploymentMemo.clear();
      this.lastPods = null;
    }, ms);
    this.forgetTimer.unref();
  }

  /**
   * A pod's inputs, when its /v1 view is a kept one of its binding: the
   * view (kept, so the same object while it is unchanged), the record, its
   * Deployment's uid (the ReplicaSet owner) and the node's address. Null:
   * made afresh (a report of a unit not bound there, a view that reads the
   * clock).
   */
  private podKey(r: Rendered): unknown[] | null {
    const rec = this.deps.store.state.units.get(r.name);
    if (!rec || !this.deps.views.keptBound(r)) return null;
    return [r, rec, rec.resourceVersion, this.deps.store.state.deployments.get(rec.deployment)?.uid, this.hostIP(rec.nodeName)];
  }

  private podOf(r: Rendered): PodRendered {
    const st = this.deps.store.state;
    const v = JSON.parse(r.text) as ApiObject;
    const spec = v.spec as { deployment: string; nodeName: string | null };
    const rec = st.units.get(r.name);
    const bound = rec && rec.nodeName === spec.nodeName ? rec : undefined;
    const pod = kubePod(v, bound, st.deployments.get(spec.deployment), this.hostIP(spec.nodeName));
    // A ReplicaSet counts its live pods (not being deleted), and the ready ones.
    const ready = (pod.status as { containerStatuses?: Array<{ ready: boolean }> }).containerStatuses?.[0]?.ready === true;
    const rs = bound && !pod.metadata.deletionTimestamp ? { deployment: bound.deployment, specHash: bound.specHash, ready } : null;
    return { ...kubeRendered(pod), rs };
  }

  /**
   * Every pod: one per unit name (allUnitViews' first), each made again
   * only when its inputs changed. When the units rendering names the same
   * units in the same places as the last time and no Deployment's uid or
   * node's address changed, a pod whose unit's view is the very one of the
   * last rendering (view-cache.ts keeps it while its inputs are the same)
   * is the last pod, without a look at its inputs: at 50,000 pods that look
   * was 40-50 ms per refresh.
   */
  private pods(): PodRendered[] {
    this.used();
    const units = this.deps.views.units();
    const last = this.lastPods;
    const nodes = this.deps.registry.nodes.size;
    if (last !== null && last.inputs === this.podInputs && last.nodes === nodes) {
      if (samePlaces(last.from, units)) return this.podsSince(last, units);
      const merged = this.podsMerged(last, units);
      if (merged !== null) return merged;
    }
    const out: PodRendered[] = [];
    const made: Array<PodRendered | null> = [];
    const kept: boolean[] = [];
    this.podMemo.begin();
    // allUnitViews is in name order: a name shown twice (a binding and another node's report) is adjacent.
    let previous: string | null = null;
    for (const r of units) {
      if (r.name === previous) {
        made.push(null);
        kept.push(false);
        continue;
      }
      previous = r.name;
      const key = this.podKey(r);
      const pod = this.podMemo.get(r.name, key, () => this.podOf(r));
      made.push(pod);
      kept.push(key !== null);
      out.push(pod);
    }
    this.podMemo.end();
    this.lastPods = { from: units, made, kept, inputs: this.podInputs, nodes };
    return out;
  }

  /** pods() from the last rendering: the same units in the same places. */
  private podsSince(last: NonNullable<KubeApi['lastPods']>, units: readonly Rendered[]): PodRendered[] {
    const out: PodRendered[] = [];
    for (let i = 0; i < units.length; i++) {
      const r = units[i];
      if (last.made[i] === null) continue; // shown twice: the same name as the one before
      if (r !== last.from[i] || !last.kept[i]) {
        const key = this.podKey(r);
        last.made[i] = this.podMemo.get(r.name, key, () => this.podOf(r));
        last.kept[i] = key !== null;
      }
      out.push(last.made[i]!);
    }
    last.from = units;
    return out;
  }

  /**
   * pods() from the last rendering when units came or went since: both
   * lists are in the units' order, so one walk of the two pairs each unit
   * with its last place; a pod is made again only for a unit come or
   * changed, and a unit gone is forgotten. Null (a rendering that walks
   * them all) when a name is shown twice or two names share a place in the
   * order. At 50,000 units a unit come or gone had made every unit's key
   * again: about half of a pods watch refresh's 200-262 ms.
   */
  private podsMerged(last: NonNullable<KubeApi['lastPods']>, units: readonly Rendered[]): PodRendered[] | null {
    const from = last.from;
    const out: PodRendered[] = [];
    const made: PodRendered[] = [];
    const kept: boolean[] = [];
    const gone: string[] = [];
    let j = 0;
    for (let i = 0; i < units.length; i++) {
      const r = units[i];
      if (i > 0 && units[i - 1].name === r.name) return null;
      // The last rendering's units before r's place are gone.
      while (j < from.length && from[j].name !== r.name) {
        const c = compareUnitNames(from[j].name, r.name);
        if (c === 0 || last.made[j] === null) return null;
        if (c > 0) break; // r is a unit come
        gone.push(from[j].name);
        j++;
      }
      if (j < from.length && from[j].name === r.name) {
        if (last.made[j] === null) return null;
        if (r === from[j] && last.kept[j]) {
          made.push(last.made[j]!);
          kept.push(true);
          out.push(last.made[j]!);
        } else this.podMade(r, made, kept, out);
        j++;
      } else this.podMade(r, made, kept, out);
    }
    for (; j < from.length; j++) {
      if (last.made[j] === null) return null;
      gone.push(from[j].name);
    }
    for (const name of gone) this.podMemo.forget(name);
    this.lastPods = { from: units, made, kept, inputs: last.inputs, nodes: last.nodes };
    this.podsMergedCount++;
    return out;
  }

  /**
   * podsMerged's pod for a unit come or changed, pushed to its lists. A
   * method, not a closure made in each call: V8 threw the walk's optimized
   * code away when it called a closure it had not seen ("wrong call
   * target", `--trace-deopt`).
   */
  private podMade(r: Rendered, made: PodRendered[], kept: boolean[], out: PodRendered[]): void {
    const key = this.podKey(r);
    const pod = this.podMemo.get(r.name, key, () => this.podOf(r));
    made.push(pod);
    kept.push(key !== null);
    out.push(pod);
  }

  private deploymentOf(r: Rendered): Rendered {
    return kubeRendered(kubeDeployment(this.deps.store.state.deployments.get(r.name)!, JSON.parse(r.text) as ApiObject));
  }

  private deploymentKey(r: Rendered): unknown[] {
    const d = this.deps.store.state.deployments.get(r.name);
    return [r, d, d?.resourceVersion];
  }

  /**
   * One pod or Deployment as render() would make it now, alone; undefined
   * when there is none. A pod from its unit's /v1 view made alone
   * (unitViewByName: one look at each node's reports, not a view of every
   * unit); a Deployment from its /v1 rendering with its counts current
   * (kept, so the next list shows the same). Null for the other resources:
   * a get of one renders their list.
   */
  private renderOne(resource: string, name: string): Rendered | undefined | null {
    if (resource === 'pods') {
      const v = unitViewByName(this.src(), name);
      if (v === undefined) return undefined;
      const { rs: _, ...r } = this.podOf({ name, text: JSON.stringify(v) });
      return r;
    }
    if (resource === 'deployments') {
      const r = this.deps.views.deployment(name);
      if (r === undefined) return undefined;
      this.used();
      return this.deploymentMemo.get(name, this.deploymentKey(r), () => this.deploymentOf(r));
    }
    return null;
  }

  /** One object as a get shows it, or undefined (public for tests). */
  get(resource: string, name: string): KubeObject | undefined {
    return this.hub.find(resource, name);
  }

  /** Every object of `resource`, as the hub takes them (public for tests). */
  render(resource: string): Rendered[] {
    const st = this.deps.store.state;
    switch (resource) {
      case 'pods':
        return this.pods();
      case 'nodes':
        return allNodeViews(this.src()).map((v) => kubeRendered(kubeNode(v)));
      case 'deployments': {
        this.used();
        this.deploymentMemo.begin();
        const views = this.deps.views.deployments();
        this.deploymentsStale = this.deps.views.deploymentsStale();
        const out = views.map((r) => this.deploymentMemo.get(r.name, this.deploymentKey(r), () => this.deploymentOf(r)));
        this.deploymentMemo.end();
        return out;
      }
      case 'replicasets': {
        const counts = new Map<string, Map<string, { live: number; ready: number }>>();
        for (const { rs } of this.pods()) {
          if (rs === null) continue;
          const m = counts.get(rs.deployment) ?? new Map<string, { live: number; ready: number }>();
          const c = m.get(rs.specHash) ?? { live: 0, ready: 0 };
          c.live++;
          if (rs.ready) c.ready++;
          m.set(rs.specHash, c);
          counts.set(rs.deployment, m);
        }
        return [...st.deployments.values()]
          .sort((a, b) => (a.name < b.name ? -1 : 1))
          .flatMap((d) => kubeReplicaSets(d, counts.get(d.name) ?? new Map()))
          .map(kubeRendered);
      }
      case 'services':
        return allServiceViews(this.src()).map((v) => kubeRendered(kubeService(v, st.services.get(v.metadata.name)?.manifest.metadata.annotations)));
      case 'endpoints':
        return allEndpointsViews(this.src()).map((v) => {
          const svc = st.services.get(v.metadata.name);
          return kubeRendered(kubeEndpoints(v, svc ? new Date(svc.creationTimestamp).toISOString() : null));
        });
      case 'namespaces': {
        const first = Math.min(...[...st.nodes.values()].map((n) => n.registeredAt), ...[...st.deployments.values()].map((d) => d.creationTimestamp));
        return [kubeRendered(kubeNamespace(Number.isFinite(first) ? new Date(first).toISOString() : null))];
      }
      default:
        return [];
    }
  }

  /**
   * Make, in slices, the pods or Deployments not made yet (their /v1 views
   * first, the same way), each from its kept /v1 rendering (no rendering
   * of the whole list here: the one that follows, synchronous and of one
   * consistent state, is the only one, and reuses all but what changed
   * meanwhile).
   */
  private async warm(resource: string): Promise<void> {
    if (resource !== 'pods' && resource !== 'replicasets' && resource !== 'deployments') return;
    this.used();
    const units = resource !== 'deployments';
    await this.deps.views.warm(units ? 'units' : 'deployments');
    const st = () => this.deps.store.state;
    const slicer = new Slicer(LIST_SLICE_MS);
    for (const name of units ? [...st().units.keys()] : [...st().deployments.keys()]) {
      if (slicer.due()) await slicer.pause();
      const r = this.deps.views.kept(units ? 'units' : 'deployments', name);
      // None kept (a view that reads the clock, or gone): the rendering makes it.
      if (r === undefined) continue;
      if (units) {
        if (st().units.has(name)) this.podMemo.get(name, this.podKey(r), () => this.podOf(r));
      } else if (st().deployments.has(name)) this.deploymentMemo.get(name, this.deploymentKey(r), () => this.deploymentOf(r));
    }
  }

  private event(e: ClusterEvent): KubeObject {
    const st = this.deps.store.state;
    return kubeEvent(e, (kind, name) =>
      kind === 'Unit' ? st.units.get(name)?.uid : kind === 'Deployment' ? st.deployments.get(name)?.uid : kind === 'Node' ? nodeUid(name) : undefined,
    );
  }

  private one(resource: string, name: string): KubeObject {
    const found = this.hub.find(resource, name);
    if (!found) throw this.notFound(resource, name);
    return found;
  }

  private notFound(resource: string, name: string): KubeError {
    const info = RESOURCES[resource];
    const group = info?.apiVersion.includes('/') ? info.apiVersion.split('/')[0] : '';
    return new KubeError(404, `${resource}${group ? `.${group}` : ''} "${name}" not found`, { name, group, kind: resource });
  }

  // ---- routing ---------------------------------------------------------------

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://x');
    const method = req.method ?? 'GET';
    const p = url.pathname.replace(/\/+$/, '') || '/';
    if (p === '/healthz' || p === '/livez' || p === '/readyz') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return;
    }
    if (!tokenOk(req.headers.authorization, this.deps.token)) {
      throw new KubeError(
        401,
        req.headers.authorization ? 'Unauthorized: invalid bearer token' : 'Unauthorized: send the cluster token (Authorization: Bearer <token>; see <data-dir>/kubeconfig)',
      );
    }
    if (method === 'GET') {
      if (p === '/version') return send(res, 200, KUBE_VERSION);
      if (p === '/api') return send(res, 200, apiVersions(this.deps.advertise));
      if (p === '/apis') return send(res, 200, apiGroupList());
      if (p === '/api/v1') return send(res, 200, resourceList('v1'));
      if (p === '/openapi/v2') {
        // Empty: kubectl then skips client-side validation (the server validates every write).
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 0 });
        res.end();
        return;
      }
      const g = /^\/apis\/([^/]+)(?:\/([^/]+))?$/.exec(p);
      if (g) {
        const doc = g[2] === undefined ? apiGroup(g[1]) : resourceList(`${g[1]}/${g[2]}`);
        if (doc === undefined) throw new KubeError(404, `the server could not find the requested resource (group version ${g[1]}${g[2] ? `/${g[2]}` : ''} is not served)`);
        return send(res, 200, doc);
      }
    }

    const parts = p.split('/').filter(Boolean).map(decodeURIComponent);
    let rest: string[];
    let groupResources: string[];
    if (parts[0] === 'api' && parts[1] === 'v1') {
      rest = parts.slice(2);
      groupResources = CORE;
    } else if (parts[0] === 'apis' && parts[1] === 'apps' && parts[2] === 'v1') {
      rest = parts.slice(3);
      groupResources = APPS;
    } else throw new KubeError(404, `the server could not find the requested resource ${p} (served: /api/v1, /apis/apps/v1)`);

    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [resource, name, sub, ...more] = rest;
    const info = RESOURCES[resource ?? ''];
    if (!info || !groupResources.includes(resource)) {
      throw new KubeError(
        404,
        `the server could not find the requested resource "${resource ?? ''}" in ${parts[0] === 'api' ? 'v1' : 'apps/v1'} (served: ${groupResources.join(', ')})`,
      );
    }
    if (more.length > 0) throw new KubeError(404, `no such path ${p}`);
    if (namespace !== undefined && !info.namespaced) throw new KubeError(404, `${resource} are not namespaced: use /${parts[0] === 'api' ? 'api/v1' : 'apis/apps/v1'}/${resource}`);
    // kube-system exists only as an empty place to list (kubectl cluster-info lists its services).
    if (namespace === 'kube-system' && method === 'GET' && name === undefined && q0(url) === null) {
      return send(res, 200, { kind: `${info.kind}List`, apiVersion: info.apiVersion, metadata: { resourceVersion: '0' }, items: [] });
    }
    if (namespace !== undefined && namespace !== NAMESPACE) {
      throw new KubeError(404, `namespaces "${namespace}" not found (only "default" exists)`, { name: namespace, kind: 'namespaces' });
    }
    if (resource === 'namespaces' && name !== undefined && name !== NAMESPACE)
      throw new KubeError(404, `namespaces "${name}" not found (only "default" exists)`, { name, kind: 'namespaces' });
    if (info.namespaced && namespace === undefined && (name !== undefined || method !== 'GET'))
      throw new KubeError(404, `${resource} live in a namespace: use .../namespaces/default/${resource}`);

    const body = method === 'GET' ? Buffer.alloc(0) : await readBody(req);
    if (!this.deps.store.isLeader() && (await this.proxy(req, res, body))) return;

    if (method === 'GET' && name === undefined) return this.listOrWatch(resource, url.searchParams, req, res);
    if (method === 'GET' && sub === 'log' && resource === 'pods') return this.logs(name!, url.searchParams, req, res);
    if (method === 'GET') {
      await this.deps.store.readBarrier();
      if (sub === undefined || sub === 'status') return this.reply(req, res, 200, resource, this.one(resource, name!));
      if (sub === 'scale' && resource === 'deployments') return send(res, 200, this.scaleOf(name!));
      throw new KubeError(404, `no such subresource ${resource}/${sub}`);
    }
    return this.write(method, resource, name, sub, url.searchParams, req, body, res);
  }

  /** A single object, or a one-row Table when the client asked for Tables. */
  private reply(req: http.IncomingMessage, res: http.ServerResponse, code: number, resource: string, obj: KubeObject): void {
    const t = this.tableRequest(req, new URLSearchParams());
    if (t) return send(res, code, table(RESOURCES[resource].kind, [obj], this.deps.now(), { resourceVersion: String(obj.metadata.resourceVersion ?? '') }, t));
    send(res, code, obj);
  }

  /** The includeObject of a Table request, or undefined when plain objects are wanted. */
  private tableRequest(req: http.IncomingMessage, q: URLSearchParams): IncludeObject | undefined {
    const accept = String(req.headers.accept ?? '');
    if (!/as=Table/.test(accept)) return undefined;
    const inc = q.get('includeObject');
    return inc === 'Object' ? 'Object' : inc === 'None' ? 'None' : 'Metadata';
  }

  private async listOrWatch(resource: string, q: URLSearchParams, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const info = RESOURCES[resource];
    const labels = parseLabelSelector(q.get('labelSelector'));
    const fields = parseFieldSelector(q.get('fieldSelector'), info.kind);
    await this.deps.store.readBarrier();
    const tableInc = this.tableRequest(req, q);
    if (q.get('watch') === 'true' || q.get('watch') === '1') {
      if (this.hub.open >= MAX_KUBE_WATCHERS) throw new KubeError(429, `too many watches open (max ${MAX_KUBE_WATCHERS})`);
      const t = q.get('timeoutSeconds');
      const timeoutMs = t !== null && /^\d{1,7}$/.test(t) ? Number(t) * 1000 : undefined;
      const now = () => this.deps.now();
      // A watch renders the list too (to replay from its version, or to send it as ADDED): what is not made yet first, in slices.
      await this.warm(resource);
      this.hub.watch(
        resource,
        q.get('resourceVersion'),
        req,
        res,
        { labels, fields, timeoutMs, encode: (obj) => (tableInc ? table(info.kind, [obj], now(), { resourceVersion: String(obj.metadata.resourceVersion ?? '') }, tableInc) : obj) },
        (message) => status(410, message, undefined, 'Expired'),
      );
      return;
    }
    // What is not made yet is made in slices first; the list is then one consistent rendering.
    await this.warm(resource);
    const { items, resourceVersion, stamp } = this.hub.list(resource);
    // limit/continue: pages by name; the token names the last one sent.
    const limitRaw = q.get('limit');
    const cont = q.get('continue');
    let after: string | null = null;
    if (cont) {
      try {
        after = (JSON.parse(Buffer.from(cont, 'base64url').toString('utf8')) as { after: string }).after;
        if (typeof after !== 'string') throw new Error('no name');
      } catch {
        throw new KubeError(400, `continue: not a token this server gave (${JSON.stringify(cont.slice(0, 40))})`);
      }
    }
    let limit: number | null = null;
    if (limitRaw !== null && limitRaw !== '' && limitRaw !== '0') {
      if (!/^\d{1,9}$/.test(limitRaw)) throw new KubeError(400, `limit: expected a positive integer, got ${JSON.stringify(limitRaw)}`);
      limit = Number(limitRaw);
    }
    // The objects are parsed only where something reads them (selectors, a Table's cells), in slices:
    // the texts are the rendering of one moment, so the loop may serve others in between.
    const parse = labels.length > 0 || fields.length > 0 || tableInc !== undefined;
    const slicer = new Slicer(LIST_SLICE_MS);
    let selected: Array<{ name: string; text: string; obj: KubeObject | null }> = [];
    for (const it of items) {
      if (slicer.due()) await slicer.pause();
      if (after !== null && !(it.name > after)) continue;
      const text = stamp(it);
      const obj = parse ? (JSON.parse(text) as KubeObject) : null;
      if (obj && !(matchesLabels(labels, obj.metadata.labels as Record<string, string> | undefined) && matchesFields(fields, obj))) continue;
      selected.push({ name: it.name, text, obj });
    }
    const meta: Record<string, unknown> = { resourceVersion };
    if (limit !== null) {
      selected.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      if (selected.length > limit) {
        meta.remainingItemCount = selected.length - limit;
        selected = selected.slice(0, limit);
        meta.continue = Buffer.from(JSON.stringify({ after: selected[selected.length - 1].name }), 'utf8').toString('base64url');
      }
    }
    // A big answer goes out in slices too (api/send-pieces.ts): head, the items' JSON, `]}`.
    if (tableInc) {
      const now = this.deps.now();
      const rows: string[] = [];
      for (const it of selected) {
        if (slicer.due()) await slicer.pause();
        rows.push(JSON.stringify(tableRow(info.kind, it.obj!, now, tableInc)));
      }
      return sendPieces(res, 200, { 'content-type': 'application/json' }, tableHead(info.kind, meta), rows, ']}');
    }
    const head = JSON.stringify({ kind: `${info.kind}List`, apiVersion: info.apiVersion, metadata: meta, items: [] });
    return sendPieces(
      res,
      200,
      { 'content-type': 'application/json' },
      head.slice(0, -2),
      selected.map((it) => it.text),
      ']}',
    );
  }

  private async logs(name: string, q: URLSearchParams, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (!this.deps.unitLog) throw new KubeError(404, 'logs are not served here');
    const query = new URLSearchParams(q);
    const container = query.get('container');
    const rec = this.deps.store.state.units.get(name);
    if (container !== null && rec && container !== rec.spec.containerName)
      throw new KubeError(400, `container ${container} is not valid for pod ${name} (it has one container: ${rec.spec.containerName})`);
    for (const k of ['container', 'pretty', 'insecureSkipTLSVerifyBackend']) query.delete(k);
    for (const k of ['limitBytes', 'previous']) {
      if (query.has(k) && query.get(k) !== 'false') throw new KubeError(400, `${k} is not supported on pod logs (follow, tailLines, sinceSeconds, sinceTime, timestamps)`);
      query.delete(k);
    }
    await this.deps.unitLog(req, res, name, query);
  }

  // ---- writes ----------------------------------------------------------------

  private async propose(cmd: StoreCommand): Promise<ApplyResult & { ok: true }> {
    const r = await this.deps.store.propose(cmd);
    if (!r.ok) throw new KubeError(r.code, r.error);
    return r;
  }

  private parseBody(body: Buffer, contentType: string): unknown {
    if (body.length === 0) throw new KubeError(400, 'the request body is empty');
    const text = body.toString('utf8');
    if (/yaml/.test(contentType)) return parseManifestObject(text);
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new KubeError(400, `the request body is not JSON: ${(e as Error).message}`);
    }
  }

  private patchWith(current: unknown, patch: unknown, contentType: string, kind: string): unknown {
    const type = contentType.split(';')[0].trim();
    switch (type) {
      case 'application/merge-patch+json':
        return mergePatch(current, patch);
      case 'application/json-patch+json':
        return jsonPatch(current, patch);
      case 'application/strategic-merge-patch+json':
        return strategicMerge(current, patch, SCHEMAS[kind] ?? {});
      case 'application/apply-patch+yaml':
        // Server-side apply, simplified: the applied fields merged over the object (nothing is removed).
        return strategicMerge(current, stripManaged(patch), SCHEMAS[kind] ?? {});
      default:
        throw new KubeError(
          415,
          `PATCH needs Content-Type application/strategic-merge-patch+json, application/merge-patch+json, application/json-patch+json or application/apply-patch+yaml, got ${JSON.stringify(contentType)}`,
        );
    }
  }

  private refuseUnsupported(q: URLSearchParams): void {
    const dry = q.get('dryRun');
    if (dry !== null && dry !== '') throw new KubeError(400, `dryRun=${dry} is not supported (writes are always made)`);
  }

  private async write(
    method: string,
    resource: string,
    name: string | undefined,
    sub: string | undefined,
    q: URLSearchParams,
    req: http.IncomingMessage,
    body: Buffer,
    res: http.ServerResponse,
  ): Promise<void> {
    this.refuseUnsupported(q);
    const ct = String(req.headers['content-type'] ?? 'application/json');
    if (resource === 'deployments') return this.writeDeployment(method, name, sub, q, ct, body, res);
    if (resource === 'services' && sub === undefined) return this.writeService(method, name, ct, body, res);
    if (resource === 'pods' && name && method === 'DELETE' && sub === undefined) return this.deletePod(name, q, body, res);
    if (resource === 'pods' && name && method === 'POST' && sub === 'eviction') {
      const ev = this.parseBody(body, ct) as { deleteOptions?: unknown };
      return this.deletePod(name, new URLSearchParams(), Buffer.from(JSON.stringify(isObject(ev?.deleteOptions) ? ev.deleteOptions : {})), res, true);
    }
    if (resource === 'nodes' && name && sub === undefined && (method === 'PATCH' || method === 'PUT')) return this.writeNode(method, name, ct, body, res);
    if (resource === 'pods' && method === 'POST' && name === undefined) throw new KubeError(405, 'pods are made by deployments here: create a Deployment instead');
    throw new KubeError(405, `${method} is not supported on ${resource}${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`);
  }

  private deleteOptions(q: URLSearchParams, body: Buffer): { propagationPolicy?: string; gracePeriodSeconds?: number } {
    let opts: Record<string, unknown> = {};
    if (body.length > 0) {
      const o = this.parseBody(body, 'application/json');
      if (!isObject(o)) throw new KubeError(400, 'DeleteOptions: expected an object');
      opts = o;
    }
    const policy = (q.get('propagationPolicy') ?? opts.propagationPolicy ?? (opts.orphanDependents === true ? 'Orphan' : undefined)) as string | undefined;
    if (policy !== undefined && !['Background', 'Foreground', 'Orphan'].includes(policy))
      throw new KubeError(400, `propagationPolicy: expected Background, Foreground or Orphan, got ${JSON.stringify(policy)}`);
    if (Array.isArray(opts.dryRun) && opts.dryRun.length > 0) throw new KubeError(400, 'dryRun is not supported (writes are always made)');
    if (isObject(opts.preconditions)) throw new KubeError(400, 'DeleteOptions.preconditions are not supported');
    const g = q.get('gracePeriodSeconds') ?? opts.gracePeriodSeconds;
    let grace: number | undefined;
    if (g !== undefined && g !== null) {
      const n = Number(g);
      if (!Number.isInteger(n) || n < 0) throw new KubeError(400, `gracePeriodSeconds: expected an integer >= 0, got ${JSON.stringify(g)}`);
      grace = Math.min(n, MAX_DELETE_GRACE_SECONDS);
    }
    return { propagationPolicy: policy, gracePeriodSeconds: grace };
  }

  private async deletePod(name: string, q: URLSearchParams, body: Buffer, res: http.ServerResponse, eviction = false): Promise<void> {
    const { gracePeriodSeconds } = this.deleteOptions(q, body);
    const before = this.hub.find('pods', name);
    const unit = this.deps.store.state.units.get(name);
    const lostOn = [...this.deps.registry.nodes.values()].filter((n) => !n.ready && n.units.has(name)).map((n) => n.name);
    const force = gracePeriodSeconds === 0;
    if (!unit && !(force && lostOn.length > 0)) {
      if (lostOn.length > 0)
        throw new KubeError(404, `pods "${name}" not found: only the last report of NotReady node ${lostOn.join(', ')} lists it; delete with --grace-period=0 --force to forget it`, {
          name,
          kind: 'pods',
        });
      throw this.notFound('pods', name);
    }
    if (unit) {
      await this.propose({ type: 'unit.delete', at: this.deps.now(), name, reason: USER_DELETE_REASON });
      if (unit.nodeName && this.deps.terminateUnit)
        this.deps.terminateUnit(name, unit.nodeName, gracePeriodSeconds !== undefined ? gracePeriodSeconds * 1000 : unit.spec.gracePeriodMs, USER_DELETE_REASON);
    }
    if (force) for (const node of lostOn) this.deps.registry.forgetUnit(node, name);
    if (eviction) return send(res, 201, status(201, '', { name, kind: 'pods' }, ''));
    send(res, 200, before ?? status(200, '', { name, kind: 'pods' }, ''));
  }

  /** Drops the fields the server fills in from a Deployment that is about to be stored, when they only restate defaults. */
  private unchangedDefaults(prev: KubeObject | undefined, next: ReturnType<typeof deploymentIn>, name: string): ReturnType<typeof deploymentIn> {
    const d = this.deps.store.state.deployments.get(name);
    if (!prev || !d) return next;
    const shown = prev.spec as Record<string, unknown>;
    const spec = { ...next.manifest.spec } as Record<string, unknown>;
    const stored = d.manifest.spec as Record<string, unknown>;
    for (const k of ['strategy', 'minReadySeconds', 'revisionHistoryLimit', 'progressDeadlineSeconds']) {
      if (!(k in stored) && JSON.stringify(spec[k]) === JSON.stringify(shown[k])) delete spec[k];
    }
    return { ...next, manifest: { ...next.manifest, spec: spec as typeof next.manifest.spec } };
  }

  private async applyDeployment(obj: unknown, name: string | undefined, prev: KubeObject | undefined): Promise<{ created: boolean; obj: KubeObject }> {
    let parsed = naming('Deployment', obj, () => deploymentIn(obj));
    if (name !== undefined && parsed.manifest.metadata.name !== name)
      throw new KubeError(400, `metadata.name "${parsed.manifest.metadata.name}" does not match the name in the URL "${name}"`);
    parsed = this.unchangedDefaults(prev, parsed, parsed.manifest.metadata.name);
    const r = await this.propose({
      type: 'deployment.apply',
      at: this.deps.now(),
      uid: nanoid(),
      manifest: parsed.manifest,
      unitSpec: parsed.unitSpec,
      specHash: unitSpecHash(parsed.unitSpec),
    });
    return { created: r.created === true, obj: this.deploymentObject(parsed.manifest.metadata.name) };
  }

  private deploymentObject(name: string): KubeObject {
    const d = this.deps.store.state.deployments.get(name);
    if (!d) throw this.notFound('deployments', name);
    return this.one('deployments', name);
  }

  private scaleOf(name: string): Record<string, unknown> {
    const d = this.deps.store.state.deployments.get(name);
    if (!d) throw this.notFound('deployments', name);
    const obj = this.one('deployments', name);
    const sel = (obj.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    return {
      apiVersion: 'autoscaling/v1',
      kind: 'Scale',
      metadata: { name, namespace: NAMESPACE, uid: d.uid, resourceVersion: obj.metadata.resourceVersion, creationTimestamp: obj.metadata.creationTimestamp },
      spec: { replicas: d.replicas },
      status: {
        replicas: (obj.status as { replicas: number }).replicas,
        selector: Object.entries(sel)
          .map(([k, v]) => `${k}=${v}`)
          .join(','),
      },
    };
  }

  private async writeDeployment(
    method: string,
    name: string | undefined,
    sub: string | undefined,
    q: URLSearchParams,
    ct: string,
    body: Buffer,
    res: http.ServerResponse,
  ): Promise<void> {
    const exists = name !== undefined && this.deps.store.state.deployments.has(name);
    if (sub === 'scale' && name && (method === 'PUT' || method === 'PATCH')) {
      if (!exists) throw this.notFound('deployments', name);
      const input = this.parseBody(body, ct);
      const next = method === 'PUT' ? input : this.patchWith(this.scaleOf(name), input, ct, 'Scale');
      const replicas = isObject(next) && isObject(next.spec) ? next.spec.replicas : undefined;
      if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0 || replicas > MAX_REPLICAS)
        throw new KubeError(422, `spec.replicas: expected an integer 0..${MAX_REPLICAS}, got ${JSON.stringify(replicas)}`);
      await this.propose({ type: 'deployment.scale', at: this.deps.now(), name, replicas });
      return send(res, 200, this.scaleOf(name));
    }
    if (sub === 'status') throw new KubeError(405, "a deployment's status is written by the controller only (GET it)");
    if (sub !== undefined) throw new KubeError(404, `no such subresource deployments/${sub}`);
    if (method === 'POST' && name === undefined) {
      const obj = this.parseBody(body, ct);
      const n = isObject(obj) && isObject(obj.metadata) ? obj.metadata.name : undefined;
      if (typeof n === 'string' && this.deps.store.state.deployments.has(n))
        throw new KubeError(409, `deployments.apps "${n}" already exists`, { name: n, group: 'apps', kind: 'deployments' }, 'AlreadyExists');
      const r = await this.applyDeployment(obj, undefined, undefined);
      return send(res, 201, r.obj);
    }
    if (!name) throw new KubeError(405, `${method} needs a deployment name`);
    if (method === 'PUT') {
      if (!exists) throw this.notFound('deployments', name);
      const r = await this.applyDeployment(this.parseBody(body, ct), name, this.one('deployments', name));
      return send(res, 200, r.obj);
    }
    if (method === 'PATCH') {
      const patch = this.parseBody(body, ct);
      if (!exists) {
        if (ct.startsWith('application/apply-patch+yaml')) {
          const r = await this.applyDeployment(stripManaged(patch), name, undefined);
          return send(res, 201, r.obj);
        }
        throw this.notFound('deployments', name);
      }
      const current = this.one('deployments', name);
      const next = this.patchWith(current, patch, ct, 'Deployment');
      const r = await this.applyDeployment(next, name, current);
      return send(res, 200, r.obj);
    }
    if (method === 'DELETE') {
      const { propagationPolicy } = this.deleteOptions(q, body);
      if (propagationPolicy === 'Orphan')
        throw new KubeError(422, "propagationPolicy Orphan is not supported: a deployment's pods cannot outlive it here (use Background or Foreground)");
      if (!exists) throw this.notFound('deployments', name);
      const before = this.one('deployments', name);
      await this.propose({ type: 'deployment.delete', at: this.deps.now(), name });
      return send(res, 200, before);
    }
    throw new KubeError(405, `${method} is not supported on deployments/${name}`);
  }

  private async writeService(method: string, name: string | undefined, ct: string, body: Buffer, res: http.ServerResponse): Promise<void> {
    const st = this.deps.store.state;
    const put = async (obj: unknown, expectName?: string): Promise<{ created: boolean; name: string }> => {
      const manifest = naming('Service', obj, () => serviceIn(obj));
      if (expectName !== undefined && manifest.metadata.name !== expectName)
        throw new KubeError(400, `metadata.name "${manifest.metadata.name}" does not match the name in the URL "${expectName}"`);
      const r = await this.propose({ type: 'service.apply', at: this.deps.now(), uid: nanoid(), manifest });
      return { created: r.created === true, name: manifest.metadata.name };
    };
    if (method === 'POST' && name === undefined) {
      const obj = this.parseBody(body, ct);
      const n = isObject(obj) && isObject(obj.metadata) ? obj.metadata.name : undefined;
      if (typeof n === 'string' && st.services.has(n)) throw new KubeError(409, `services "${n}" already exists`, { name: n, kind: 'services' }, 'AlreadyExists');
      const r = await put(obj);
      return send(res, 201, this.one('services', r.name));
    }
    if (!name) throw new KubeError(405, `${method} needs a service name`);
    const exists = st.services.has(name);
    if (method === 'PUT') {
      if (!exists) throw this.notFound('services', name);
      await put(this.parseBody(body, ct), name);
      return send(res, 200, this.one('services', name));
    }
    if (method === 'PATCH') {
      const patch = this.parseBody(body, ct);
      if (!exists) {
        if (!ct.startsWith('application/apply-patch+yaml')) throw this.notFound('services', name);
        await put(stripManaged(patch), name);
        return send(res, 201, this.one('services', name));
      }
      await put(this.patchWith(this.one('services', name), patch, ct, 'Service'), name);
      return send(res, 200, this.one('services', name));
    }
    if (method === 'DELETE') {
      if (!exists) throw this.notFound('services', name);
      const before = this.one('services', name);
      await this.propose({ type: 'service.delete', at: this.deps.now(), name });
      return send(res, 200, before);
    }
    throw new KubeError(405, `${method} is not supported on services/${name}`);
  }

  /** Nodes: only spec.unschedulable can change (cordon, uncordon); anything else is refused naming the field. */
  private async writeNode(method: string, name: string, ct: string, body: Buffer, res: http.ServerResponse): Promise<void> {
    const current = this.one('nodes', name);
    const input = this.parseBody(body, ct);
    const next = method === 'PUT' ? input : this.patchWith(current, input, ct, 'Node');
    if (!isObject(next)) throw new KubeError(422, 'expected a Node object');
    const u = isObject(next.spec) ? next.spec.unschedulable : undefined;
    if (u !== undefined && u !== null && typeof u !== 'boolean') throw new KubeError(422, `spec.unschedulable: expected true or false, got ${JSON.stringify(u)}`);
    const differs = firstDifference(withoutUnschedulable(current), withoutUnschedulable(next), '');
    if (differs !== undefined) throw new KubeError(422, `${differs}: cannot be changed on a node (only spec.unschedulable can: kubectl cordon / uncordon)`);
    await this.propose({ type: 'node.cordon', at: this.deps.now(), name, unschedulable: u === true });
    send(res, 200, this.one('nodes', name));
  }

  // ---- followers ---------------------------------------------------------------

  /**
   * Sends the request on to the leader; false if this replica has become the
   * leader meanwhile (handle it here). Waits as the /v1 proxy does
   * (api/leader-routing.ts): for a leader when none is known, and for
   * another one, once, when the leader refused the connection (or, for a
   * read, failed before answering).
   */
  private async proxy(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): Promise<boolean> {
    const forwarded = req.headers['x-mo-forwarded'] !== undefined;
    const wait = forwarded ? undefined : this.deps.leaderWait;
    let leader = wait ? await wait.known() : this.deps.store.leaderId();
    for (let attempt = 1; ; attempt++) {
      if (leader === this.deps.selfId && this.deps.store.isLeader()) return false;
      const base = leader ? this.deps.leaderUrl(leader) : undefined;
      if (!leader || !base || forwarded) {
        throw new KubeError(503, `no leader is known to ${this.deps.selfId} yet (no quorum); try again`);
      }
      const headers: http.OutgoingHttpHeaders = { 'x-mo-forwarded': this.deps.selfId };
      for (const k of ['authorization', 'content-type', 'accept']) if (req.headers[k]) headers[k] = req.headers[k];
      let failed: NodeJS.ErrnoException | undefined;
      await pipeThrough(res, body, {
        method: req.method,
        target: new URL(req.url ?? '/', base),
        headers,
        passHeaders: ['content-type', 'content-length', 'cache-control', 'transfer-encoding'],
        ca: this.deps.caPem,
        freshConnection: req.method !== 'GET',
        onError: (err) => (failed = err),
      });
      if (failed === undefined) return true;
      const next = attempt === 1 && !res.headersSent ? await leaderToRetry(wait, leader, req.method, failed) : undefined;
      if (next !== undefined) {
        leader = next;
        continue;
      }
      send(res, 503, status(503, `the leader ${leader} could not be reached: ${failed.message}`));
      return true;
    }
  }
}

/**
 * A 422 Invalid Status for a refused manifest, with the field as a cause
 * (kubectl prints `The Deployment "web" is invalid: <field>: <why>`).
 */
function invalid(err: ManifestError, kind = '', name = ''): Record<string, unknown> {
  const detail = err.message.replace(/^invalid manifest: /, '').replace(err.field === '' ? '' : `${err.field}: `, '');
  return status(422, err.message, { name, kind, causes: [{ reason: 'FieldValueInvalid', message: detail, field: err.field }] });
}

/** Runs a conversion, naming the object in a refusal. */
function naming<T>(kind: string, obj: unknown, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof ManifestError)) throw err;
    const name = isObject(obj) && isObject(obj.metadata) && typeof obj.metadata.name === 'string' ? obj.metadata.name : '';
    throw new KubeError(422, err.message, (invalid(err, kind, name) as { details: Record<string, unknown> }).details, 'Invalid');
  }
}

/** The watch parameter of a request (null: a plain list). */
function q0(url: URL): string | null {
  const w = url.searchParams.get('watch');
  return w === 'true' || w === '1' ? w : null;
}

/** Server-side apply bodies may carry managedFields; they are ours to keep (we keep none). */
function stripManaged(patch: unknown): unknown {
  if (!isObject(patch) || !isObject(patch.metadata)) return patch;
  const m = { ...patch.metadata };
  delete m.managedFields;
  return { ...patch, metadata: m };
}

function withoutUnschedulable(n: unknown): unknown {
  if (!isObject(n)) return n;
  const spec = isObject(n.spec) ? { ...n.spec } : {};
  delete spec.unschedulable;
  const meta = isObject(n.metadata) ? { ...n.metadata } : {};
  delete meta.resourceVersion;
  delete meta.managedFields;
  const out: Record<string, unknown> = { ...n, spec, metadata: meta };
  delete out.status;
  return out;
}

/** The first path where two JSON values differ (undefined: equal). */
function firstDifference(a: unknown, b: unknown, path: string): string | undefined {
  if (isObject(a) && isObject(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[k], b[k], path ? `${path}.${k}` : k);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  return JSON.stringify(a) === JSON.stringify(b) ? undefined : path || 'the object';
}

export function kubeServer(api: KubeApi, tls: { certPem: string; keyPem: string }): https.Server {
  const server = https.createServer({ cert: tls.certPem, key: tls.keyPem }, api.handler);
  server.on('clientError', (_err, socket) => socket.destroy());
  return server;
}
