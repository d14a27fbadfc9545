// control-plane/api/views.ts -- how desired and observed state look to a
// user: the Kubernetes-shaped JSON objects of docs/contract.md (kind, metadata,
// spec, status). Pure functions over the store, the registry and a clock
// reading; the HTTP layer and watch streams both render through these.

import { DEFAULT_MAX_SURGE, DEFAULT_MAX_UNAVAILABLE, DEFAULT_PROGRESS_DEADLINE_SECONDS, DEFAULT_REVISION_HISTORY_LIMIT } from '../../shared/manifest.ts';
import type { DeploymentView, EndpointsView, EventView, NodeView, RevisionView, ServiceView, UnitPhase, UnitView } from '../../shared/api-types.ts';
import type { UnitReport } from '../../shared/model.ts';
import type { ClusterEvent } from '../events.ts';
import { isQuickFailure } from '../reconcile/reconcile.ts';
import { serviceEndpoints } from '../services/endpoints.ts';
import type { ObservedNodeState } from '../registry/node-registry.ts';
import { schedulingView, type DeploymentRecord, type DesiredState, type NodeRecord, type UnitRecord } from '../store/desired-state.ts';

/** Any object the API serves; each view below returns its exact shape from shared/api-types.ts. */
export interface ApiObject {
  kind: string;
  metadata: { name: string; [k: string]: unknown };
  spec?: unknown;
  status?: unknown;
  [k: string]: unknown;
}

const iso = (ms: number | undefined | null): string | null => (ms == null ? null : new Date(ms).toISOString());

export interface ViewSource {
  state: DesiredState;
  observed: Map<string, ObservedNodeState>;
  /** The clock reading (availability after minReadySeconds, back-off). Absent: Date.now(). */
  now?: number;
  /**
   * Every (node, report) naming a deployment, from an index (the registry's
   * NodeRegistry.reportsOf), each the very report its node holds: one
   * deployment's counts then read its own reports, not every report of every
   * node. Absent: deploymentIndex walks them all.
   */
  reportsOf?: (deployment: string, visit: (node: ObservedNodeState, report: UnitReport) => void) => void;
}

/** Index observed unit reports by name once per render (O(units)). */
export function observedUnitIndex(observed: Map<string, ObservedNodeState>): Map<string, { node: ObservedNodeState; report: UnitReport }> {
  const idx = new Map<string, { node: ObservedNodeState; report: UnitReport }>();
  for (const node of observed.values()) for (const report of node.units.values()) idx.set(report.name, { node, report });
  return idx;
}

/** A unit's phase, reason and message as the API shows them, with the report they come from (its bound node's). */
export function unitState(
  u: UnitRecord,
  seen: { node: ObservedNodeState; report: UnitReport } | undefined,
  observed: Map<string, ObservedNodeState>,
  deployment?: DeploymentRecord,
  now: number = Date.now(),
): { phase: UnitPhase; reason: string | null; message: string | null; report: UnitReport | undefined } {
  let phase: UnitPhase = 'Pending';
  let report: UnitReport | undefined;
  const node = u.nodeName ? observed.get(u.nodeName) : undefined;
  if (u.nodeName && (!node || !node.ready)) phase = 'Lost';
  if (seen && seen.node.name === u.nodeName) {
    report = seen.report;
    if (phase !== 'Lost') phase = report.phase;
  }
  let reason: string | null = phase === 'Lost' ? 'NodeLost' : (report?.reason ?? (u.nodeName ? null : 'Unschedulable'));
  let message: string | null = phase === 'Lost' ? `node ${u.nodeName} is not ready` : (report?.message ?? null);
  // A failed unit kept while its deployment backs off: Kubernetes' CrashLoopBackOff.
  if (report && phase !== 'Lost' && isQuickFailure(report) && deployment?.backoff) {
    const bo = deployment.backoff;
    reason = 'CrashLoopBackOff';
    const wait = bo.until > now ? `next try in ${Math.ceil((bo.until - now) / 1000)}s (at ${new Date(bo.until).toISOString().slice(11, 19)})` : 'replacing it now';
    message = `back-off ${Math.round((bo.until - bo.at) / 1000)}s restarting failed unit: ${report.reason ?? 'failed'}: ${report.message ?? ''}; ${wait}`.replace(': ;', ';');
  }
  return { phase, reason, message, report };
}

export function unitView(
  u: UnitRecord,
  seen: { node: ObservedNodeState; report: UnitReport } | undefined,
  observed: Map<string, ObservedNodeState>,
  deployment?: DeploymentRecord,
  now: number = Date.now(),
): UnitView {
  const { phase, reason, message, report } = unitState(u, seen, observed, deployment, now);
  const labels: Record<string, string> = { ...(u.spec.labels ?? {}), deployment: u.deployment };
  return {
    kind: 'Unit',
    metadata: {
      name: u.name,
      uid: u.uid,
      creationTimestamp: iso(u.creationTimestamp),
      resourceVersion: String(u.resourceVersion),
      labels,
    },
    spec: {
      deployment: u.deployment,
      revision: u.revision,
      nodeName: u.nodeName,
      command: u.spec.command,
      env: u.spec.env,
      resources: u.spec.resources,
      tolerations: u.spec.tolerations,
      ...(u.spec.ports ? { ports: u.spec.ports } : {}),
      ...(u.spec.gracePeriodMs !== undefined ? { terminationGracePeriodSeconds: u.spec.gracePeriodMs / 1000 } : {}),
    },
    status: {
      phase,
      ready: report !== undefined && phase === 'Running' && report.ready !== false,
      ports: report?.ports ?? [],
      pid: report?.pid ?? null,
      exitCode: report?.exitCode ?? null,
      signal: report?.signal ?? null,
      reason,
      message,
      startTime: iso(report?.startedAt),
      finishTime: iso(report?.finishedAt),
      term: report?.term ?? null,
      scheduling: schedulingView(u.scheduling),
    },
  };
}

/** A unit an agent still reports although no binding wants it any more
 *  (scaled down, deleted, replaced while its node was away): shown until
 *  the agent has stopped and forgotten it. */
/** An unbound unit's phase, reason and message as the API shows them. */
export function orphanUnitState(report: UnitReport, node: string, nodeReady = true): { phase: UnitPhase; reason: string | null; message: string | null } {
  const live = report.phase === 'Running' || report.phase === 'Pending' || report.phase === 'Terminating';
  // On a NotReady node nobody knows (a dead machine runs nothing; a
  // partitioned one is told to stop it when it returns).
  if (live && !nodeReady) return { phase: 'Lost', reason: 'NodeLost', message: `node ${node} is not ready; replaced` };
  return {
    phase: live ? 'Terminating' : report.phase,
    reason: report.reason ?? (live ? 'Terminating' : null),
    message: report.message ?? (live ? 'not bound: being stopped' : null),
  };
}

/** A unit an agent still reports although no binding wants it any more
 *  (scaled down, deleted, replaced while its node was away): shown until
 *  the agent has stopped and forgotten it. */
export function orphanUnitView(report: UnitReport, node: string, nodeReady = true): UnitView {
  const { phase, reason, message } = orphanUnitState(report, node, nodeReady);
  return {
    kind: 'Unit',
    metadata: { name: report.name, uid: null, creationTimestamp: iso(report.startedAt), resourceVersion: '0', labels: { deployment: report.deployment } },
    spec: { deployment: report.deployment, revision: report.revision ?? null, nodeName: node, resources: report.resources },
    status: {
      phase,
      ready: false,
      pid: report.pid ?? null,
      exitCode: report.exitCode ?? null,
      signal: report.signal ?? null,
      reason,
      message,
      startTime: iso(report.startedAt),
      finishTime: iso(report.finishedAt),
      term: report.term,
      scheduling: null,
    },
  };
}

export function allUnitViews(src: ViewSource): UnitView[] {
  const idx = observedUnitIndex(src.observed);
  const out: UnitView[] = [];
  const now = src.now ?? Date.now();
  for (const u of src.state.units.values()) out.push(unitView(u, idx.get(u.name), src.observed, src.state.deployments.get(u.deployment), now));
  for (const [name, seen] of idx) {
    if (src.state.units.get(name)?.nodeName === seen.node.name) continue;
    out.push(orphanUnitView(seen.report, seen.node.name, seen.node.ready));
  }
  return out.sort(byUnitName);
}

/**
 * The first object named `name` in allUnitViews(src), made alone: its
 * record's view, else the view of a report nobody's record explains. One
 * look at each node's reports for the name, not a view of every unit.
 */
export function unitViewByName(src: ViewSource, name: string): UnitView | undefined {
  // observedUnitIndex's pick: the last node, in the registry's order, that reports the name.
  let seen: { node: ObservedNodeState; report: UnitReport } | undefined;
  for (const node of src.observed.values()) {
    const report = node.units.get(name);
    if (report) seen = { node, report };
  }
  const u = src.state.units.get(name);
  if (u) return unitView(u, seen, src.observed, src.state.deployments.get(u.deployment), src.now ?? Date.now());
  return seen ? orphanUnitView(seen.report, seen.node.name, seen.node.ready) : undefined;
}

function byUnitName(a: UnitView, b: UnitView): number {
  return compareUnitNames(a.metadata.name, b.metadata.name);
}

/** The unit list's order of two names (splitName): by the deployment part, then the number; 0 for two names in one place. */
export function compareUnitNames(a: string, b: string): number {
  const [pa, na] = splitName(a);
  const [pb, nb] = splitName(b);
  return pa < pb ? -1 : pa > pb ? 1 : na - nb;
}

/** A unit name as the unit list orders it: the deployment part, then the number as a number (web-2 before web-10). */
export function splitName(n: string): [string, number] {
  const i = n.lastIndexOf('-');
  const num = Number(n.slice(i + 1));
  return i > 0 && Number.isInteger(num) ? [n.slice(0, i), num] : [n, 0];
}

/** How many of a node's reported units are Running or Pending. */
function liveUnits(units: Map<string, UnitReport>): number {
  let n = 0;
  for (const u of units.values()) if (u.phase === 'Running' || u.phase === 'Pending') n++;
  return n;
}

export function nodeView(name: string, rec: NodeRecord | undefined, obs: ObservedNodeState | undefined, allocated: { cpu: number; memory: number }): NodeView {
  const info = rec?.info ?? obs?.info;
  return {
    kind: 'Node',
    metadata: {
      name,
      creationTimestamp: iso(rec?.registeredAt),
      resourceVersion: String(rec?.resourceVersion ?? 0),
      labels: info?.labels ?? {},
    },
    spec: { taints: info?.taints ?? [], unschedulable: rec?.unschedulable ?? false },
    status: {
      ready: obs?.ready ?? false,
      addresses: info?.address ? [{ type: 'InternalIP', address: info.address }] : [],
      capacity: info?.capacity ?? { cpu: 0, memory: 0 },
      allocated,
      lastHeartbeatTime: iso(obs?.lastHeartbeatMs),
      agent: { pid: obs?.agentPid ?? null, connected: obs?.connected ?? false },
      units: obs ? liveUnits(obs.units) : 0,
      // What the agent enforces for its units (LimitsEnforced, UnitNamespaces), as it said at start.
      conditions: (obs?.info ?? info)?.conditions ?? [],
    },
  };
}

/** One node's view, made alone (as `GET /v1/nodes/NAME` asks), or undefined when neither the store nor the registry knows it. */
export function nodeViewByName(src: ViewSource, name: string): NodeView | undefined {
  const rec = src.state.nodes.get(name);
  const obs = src.observed.get(name);
  return rec || obs ? nodeView(name, rec, obs, src.state.requestsOn(name)) : undefined;
}

/**
 * Every node's view, its allocation read from the store's index of requests
 * by node (DesiredState.requestsOn, checked against a walk of every unit in
 * desired-state.test.ts): O(nodes). A walk of every unit here took 28 of
 * the ~45 ms of one list of 5,000 nodes with 50,000 units (in process), and
 * the fleet bench lists them every second while a new leader settles.
 */
export function allNodeViews(src: ViewSource): NodeView[] {
  const names = new Set([...src.state.nodes.keys(), ...src.observed.keys()]);
  return [...names].sort().map((n) => nodeView(n, src.state.nodes.get(n), src.observed.get(n), src.state.requestsOn(n)));
}

/**
 * What deployments' counts read, gathered once per rendering in one pass
 * over the units and one over the reports: each deployment's bound units,
 * and the reports of units no binding of their deployment wants (still
 * running or stopping). Without it every deployment walked every unit: a
 * list of 10,000 deployments beside 1,000 units was 10 million steps.
 */
export interface DeploymentIndex {
  /** Reports no unit record of their deployment explains (a unit that report names is not that deployment's), by deployment. */
  unbound: Map<string, Array<{ node: ObservedNodeState; report: UnitReport }>>;
}

/**
 * What a rendering of many deployments shares: one walk over the reports
 * for the few no record explains. A deployment's own units come from the
 * store's index (DesiredState.unitsOf) and their reports from their nodes,
 * so nothing is allocated per unit or per report: with 50,000 units the
 * earlier index (every report and unit copied into maps per rendering,
 * and again per warm-up slice) held the leader 0.5-1.2 s for each
 * GET /v1/deployments (fleet bench profiles).
 */
export function deploymentIndex(src: ViewSource): DeploymentIndex {
  const byKey = new Map<string, { node: ObservedNodeState; report: UnitReport }>();
  for (const node of src.observed.values()) for (const report of node.units.values()) keepUnbound(byKey, src, node, report);
  const unbound = new Map<string, Array<{ node: ObservedNodeState; report: UnitReport }>>();
  for (const seen of byKey.values()) {
    const list = unbound.get(seen.report.deployment);
    if (list) list.push(seen);
    else unbound.set(seen.report.deployment, [seen]);
  }
  return { unbound };
}

/**
 * Into `byKey`, a report no unit record of its deployment explains, once per
 * (deployment, unit name): of several nodes reporting one, the node whose
 * name sorts last (an order that does not depend on how the reports are
 * walked: deploymentIndex's walk and reportsOf's give the same).
 */
function keepUnbound(byKey: Map<string, { node: ObservedNodeState; report: UnitReport }>, src: ViewSource, node: ObservedNodeState, report: UnitReport): void {
  if (src.state.units.get(report.name)?.deployment === report.deployment) return;
  const key = `${report.deployment}\u0000${report.name}`;
  const kept = byKey.get(key);
  if (kept === undefined || kept.node.name < node.name) byKey.set(key, { node, report });
}

/** `d`'s reports that no unit record of it explains, from src.reportsOf (one deployment's reports), else from `di`. */
function unboundOf(d: DeploymentRecord, src: ViewSource, di: DeploymentIndex | undefined): Iterable<{ node: ObservedNodeState; report: UnitReport }> {
  if (di !== undefined || src.reportsOf === undefined) return (di ?? deploymentIndex(src)).unbound.get(d.name) ?? [];
  const byKey = new Map<string, { node: ObservedNodeState; report: UnitReport }>();
  src.reportsOf(d.name, (node, report) => keepUnbound(byKey, src, node, report));
  return byKey.values();
}

/**
 * A deployment's unit counts as its status tells them (the reconcile loop
 * counts the same way). `di`: the index a rendering of many deployments
 * shares; without it, `d`'s own reports from src.reportsOf (or a walk of
 * all of them when there is no reportsOf).
 */
export function deploymentCounts(d: DeploymentRecord, src: ViewSource, di?: DeploymentIndex) {
  const now = src.now ?? Date.now();
  const minReadyMs = (d.manifest.spec.minReadySeconds ?? 0) * 1000;
  let replicas = 0;
  let updated = 0;
  let ready = 0;
  let available = 0;
  let backoff = 0;
  let oldAlive = 0;
  for (const u of src.state.unitsOf(d.name)?.values() ?? []) {
    const node = u.nodeName ? src.observed.get(u.nodeName) : undefined;
    if (u.nodeName && !node?.ready) continue; // lost: being replaced
    // Its bound node's report, as the reconcile loop reads it.
    const report = node?.units.get(u.name);
    const isNew = u.specHash === d.specHash;
    if (report?.phase === 'Terminating') {
      if (!isNew) oldAlive++;
      continue;
    }
    if (report && (report.phase === 'Failed' || report.phase === 'Succeeded')) {
      if (!isQuickFailure(report)) continue; // replaced at once
      backoff++;
    }
    replicas++;
    if (isNew) updated++;
    else if (!report || report.phase === 'Running' || report.phase === 'Pending') oldAlive++;
    if (report?.phase === 'Running' && report.ready !== false) {
      ready++;
      if ((report.readySince ?? report.startedAt ?? 0) + minReadyMs <= now) available++;
    }
  }
  for (const seen of unboundOf(d, src, di)) {
    if (!seen.node.ready) continue;
    const live = seen.report.phase === 'Running' || seen.report.phase === 'Pending' || seen.report.phase === 'Terminating';
    if (live && seen.report.specHash !== undefined && seen.report.specHash !== d.specHash) oldAlive++;
  }
  return { replicas, updated, ready, available, backoff, oldAlive };
}

export function deploymentView(d: DeploymentRecord, src: ViewSource, di?: DeploymentIndex): DeploymentView {
  return deploymentViewOf(d, deploymentCounts(d, src, di));
}

/** A deployment's view from its record and its counts (all it depends on). */
export function deploymentViewOf(d: DeploymentRecord, c: ReturnType<typeof deploymentCounts>): DeploymentView {
  const spec = d.manifest.spec;
  const strategy =
    spec.strategy?.type === 'Recreate'
      ? { type: 'Recreate' as const }
      : {
          type: 'RollingUpdate' as const,
          rollingUpdate: {
            maxSurge: spec.strategy?.rollingUpdate?.maxSurge ?? DEFAULT_MAX_SURGE,
            maxUnavailable: spec.strategy?.rollingUpdate?.maxUnavailable ?? DEFAULT_MAX_UNAVAILABLE,
          },
        };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: d.name,
      uid: d.uid,
      creationTimestamp: iso(d.creationTimestamp),
      resourceVersion: String(d.resourceVersion),
      generation: d.generation,
      labels: d.manifest.metadata.labels ?? {},
      annotations: { 'deployment.kubernetes.io/revision': String(d.revision) },
    },
    spec: {
      replicas: d.replicas,
      template: d.manifest.spec.template,
      strategy,
      minReadySeconds: spec.minReadySeconds ?? 0,
      revisionHistoryLimit: spec.revisionHistoryLimit ?? DEFAULT_REVISION_HISTORY_LIMIT,
      progressDeadlineSeconds: spec.progressDeadlineSeconds ?? DEFAULT_PROGRESS_DEADLINE_SECONDS,
      ...(spec.paused ? { paused: true } : {}),
    },
    status: {
      observedGeneration: d.status.observedGeneration,
      replicas: c.replicas,
      updatedReplicas: c.updated,
      readyReplicas: c.ready,
      availableReplicas: c.available,
      unavailableReplicas: Math.max(0, d.replicas - c.available),
      /** Units of older revisions still running or stopping (0 once a rollout is done). */
      oldReplicas: c.oldAlive,
      /** Failed units waiting out the crash-loop back-off. */
      crashLoopBackOff: c.backoff,
      conditions: d.status.conditions.map((x) => ({ ...x, lastUpdateTime: iso(x.lastUpdateTime), lastTransitionTime: iso(x.lastTransitionTime) })),
    },
  };
}

/** The revision history, oldest first, as `mo rollout history` shows it. */
export function revisionViews(d: DeploymentRecord): RevisionView[] {
  return d.revisions.map((r) => ({
    revision: r.revision,
    current: r.revision === d.revision,
    cause: r.cause,
    createdAt: iso(r.createdAt),
    specHash: r.specHash,
    template: r.template,
    command: r.unitSpec.command,
    env: r.unitSpec.env,
  }));
}

export function allDeploymentViews(src: ViewSource): DeploymentView[] {
  const di = deploymentIndex(src);
  return [...src.state.deployments.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((d) => deploymentView(d, src, di));
}

export function eventView(e: ClusterEvent): EventView {
  return {
    kind: 'Event',
    metadata: { name: `${e.involvedObject.name}.${e.seq}`, creationTimestamp: iso(e.timestamp), resourceVersion: String(e.seq) },
    type: e.type,
    reason: e.reason,
    message: e.message,
    involvedObject: e.involvedObject,
    source: e.source,
    timestamp: iso(e.timestamp),
    count: e.count,
    firstTimestamp: iso(e.firstTimestamp),
    lastTimestamp: iso(e.timestamp),
  };
}

/** A Service: as applied (nodePorts filled in), and its endpoints in status. */
export function allServiceViews(src: ViewSource): ServiceView[] {
  return [...src.state.services.values()]
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .map((svc): ServiceView => {
      const ports = serviceEndpoints(svc, src.state, src.observed);
      const all = new Map<string, { unit: string; node: string; hostIP: string; hostPort: number; ready: boolean; port: string | number }>();
      for (const { port, endpoints } of ports) for (const e of endpoints) all.set(`${e.unit}/${port.port}`, { ...e, port: port.name ?? port.port });
      const endpoints = [...all.values()];
      return {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: {
          name: svc.name,
          uid: svc.uid,
          creationTimestamp: iso(svc.creationTimestamp),
          resourceVersion: String(svc.resourceVersion),
          labels: svc.manifest.metadata.labels ?? {},
        },
        spec: svc.manifest.spec,
        status: {
          endpoints,
          // Where to connect: every Ready node's address, on the nodePort.
          nodeAddresses: [...src.observed.values()].filter((n) => n.ready && n.info.address).map((n) => ({ node: n.name, address: n.info.address! })),
          ...(endpoints.length === 0
            ? {
                message: `no unit matches selector ${Object.entries(svc.manifest.spec.selector)
                  .map(([k, v]) => `${k}=${v}`)
                  .join(',')} with the target port`,
              }
            : {}),
        },
      };
    });
}

/** Kubernetes' Endpoints object per Service: ready and not-ready addresses per port. */
export function allEndpointsViews(src: ViewSource): EndpointsView[] {
  return [...src.state.services.values()]
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .map((svc): EndpointsView => ({
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: svc.name, resourceVersion: String(svc.resourceVersion) },
      subsets: serviceEndpoints(svc, src.state, src.observed).map(({ port, endpoints }) => ({
        port: { name: port.name ?? null, port: port.port, nodePort: port.nodePort, targetPort: port.targetPort },
        addresses: endpoints.filter((e) => e.ready).map((e) => ({ ip: e.hostIP, port: e.hostPort, unit: e.unit, nodeName: e.node })),
        notReadyAddresses: endpoints.filter((e) => !e.ready).map((e) => ({ ip: e.hostIP, port: e.hostPort, unit: e.unit, nodeName: e.node })),
      })),
    }));
}
