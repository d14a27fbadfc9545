// control-plane/kube/convert.ts -- our objects in Kubernetes' shapes and back.
// Out: units as core/v1 Pods (phase, conditions, containerStatuses without
// pids), nodes as Nodes, deployments as apps/v1 Deployments with one
// ReplicaSet per revision of their history (named `<deployment>-<hash>`,
// owned through ownerReferences, revision in the
// `deployment.kubernetes.io/revision` annotation, as `kubectl rollout
// history|undo` look for them), events as core/v1 Events, Services and
// Endpoints, the namespace `default`. In: a Deployment or Service as a
// client sends it (after a create, update or patch) to the manifest
// validateManifest/validateService check, with the fields the server itself
// fills in (uid, resourceVersion, status, defaults it shows) taken off first;
// every other unknown field is refused by name there. Pure.

import {
  DEFAULT_MAX_SURGE,
  DEFAULT_MAX_UNAVAILABLE,
  DEFAULT_PROGRESS_DEADLINE_SECONDS,
  DEFAULT_REVISION_HISTORY_LIMIT,
  validateManifest,
  validateService,
  ManifestError,
} from '../../shared/manifest.ts';
import type { DeploymentManifest, PodTemplate, ServiceManifest, UnitSpec } from '../../shared/model.ts';
import type { ClusterEvent } from '../events.ts';
import type { ApiObject } from '../api/views.ts';
import type { DeploymentRecord, UnitRecord } from '../store/desired-state.ts';
import { clone, isObject } from './patch.ts';

export const NAMESPACE = 'default';
export const REVISION_ANNOTATION = 'deployment.kubernetes.io/revision';
export const RESTARTED_AT_ANNOTATION = 'kubectl.kubernetes.io/restartedAt';
export const POD_TEMPLATE_HASH = 'pod-template-hash';
/** What nodes say they run, in `kubectl get nodes` VERSION. */
export const KUBELET_VERSION = 'v1.20.0-mo';

export type KubeObject = { apiVersion: string; kind: string; metadata: { name: string; [k: string]: unknown }; [k: string]: unknown };

const cpu = (m: number) => (m % 1000 === 0 ? String(m / 1000) : `${m}m`);
const mem = (mi: number) => (mi % 1024 === 0 ? `${mi / 1024}Gi` : `${mi}Mi`);

/** A ReplicaSet's name part for a spec hash: 10 characters of [a-z0-9], as Kubernetes' pod-template-hash. */
export function templateHash(specHash: string): string {
  return (
    specHash
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '')
      .slice(0, 10) || '0'
  );
}

export function replicaSetName(deployment: string, specHash: string): string {
  return `${deployment}-${templateHash(specHash)}`;
}

const rsUid = (d: DeploymentRecord, specHash: string) => `${d.uid}-${templateHash(specHash)}`;
export const nodeUid = (name: string) => `node-${name}`;

function selectorOf(d: DeploymentRecord): Record<string, string> {
  const labels = d.manifest.spec.template.metadata?.labels;
  return labels && Object.keys(labels).length > 0 ? { ...labels } : { deployment: d.name };
}

function templateOut(d: DeploymentRecord, template: PodTemplate, unitSpec: UnitSpec, hash?: string): Record<string, unknown> {
  const t = clone(template) as unknown as { metadata?: Record<string, unknown>; spec: unknown };
  const metadata: Record<string, unknown> = { ...(t.metadata ?? {}) };
  const labels = { ...((metadata.labels as Record<string, string> | undefined) ?? {}) };
  if (hash !== undefined) labels[POD_TEMPLATE_HASH] = hash;
  if (Object.keys(labels).length > 0) metadata.labels = labels;
  if (unitSpec.restartedAt) metadata.annotations = { [RESTARTED_AT_ANNOTATION]: unitSpec.restartedAt };
  void d;
  return { metadata, spec: t.spec };
}

/** A deployment view (api/views.ts) and its record as an apps/v1 Deployment. */
export function kubeDeployment(d: DeploymentRecord, view: ApiObject): KubeObject {
  const vs = view.status as Record<string, number | unknown[]>;
  const spec = d.manifest.spec;
  const annotations: Record<string, string> = { ...d.manifest.metadata.annotations, [REVISION_ANNOTATION]: String(d.revision) };
  const updated = vs.updatedReplicas as number;
  const old = (vs.oldReplicas as number) ?? 0;
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: d.name,
      namespace: NAMESPACE,
      uid: d.uid,
      resourceVersion: String(view.metadata.resourceVersion),
      generation: d.generation,
      creationTimestamp: view.metadata.creationTimestamp,
      ...(d.manifest.metadata.labels ? { labels: { ...d.manifest.metadata.labels } } : {}),
      annotations,
    },
    spec: {
      replicas: d.replicas,
      selector: { matchLabels: selectorOf(d) },
      template: templateOut(d, spec.template, d.unitSpec),
      strategy:
        spec.strategy?.type === 'Recreate'
          ? { type: 'Recreate' }
          : {
              type: 'RollingUpdate',
              rollingUpdate: {
                maxSurge: spec.strategy?.rollingUpdate?.maxSurge ?? DEFAULT_MAX_SURGE,
                maxUnavailable: spec.strategy?.rollingUpdate?.maxUnavailable ?? DEFAULT_MAX_UNAVAILABLE,
              },
            },
      minReadySeconds: spec.minReadySeconds ?? 0,
      revisionHistoryLimit: spec.revisionHistoryLimit ?? DEFAULT_REVISION_HISTORY_LIMIT,
      progressDeadlineSeconds: spec.progressDeadlineSeconds ?? DEFAULT_PROGRESS_DEADLINE_SECONDS,
      ...(spec.paused ? { paused: true } : {}),
    },
    status: {
      observedGeneration: d.status.observedGeneration,
      replicas: Math.max(vs.replicas as number, updated + old),
      updatedReplicas: updated,
      readyReplicas: vs.readyReplicas,
      availableReplicas: vs.availableReplicas,
      unavailableReplicas: vs.unavailableReplicas,
      conditions: vs.conditions,
    },
  };
}

/** One ReplicaSet per kept revision; `counts` holds the units per spec hash (live, ready). */
export function kubeReplicaSets(d: DeploymentRecord, counts: Map<string, { live: number; ready: number }>): KubeObject[] {
  const sel = selectorOf(d);
  return d.revisions.map((r) => {
    const hash = templateHash(r.specHash);
    const c = counts.get(r.specHash) ?? { live: 0, ready: 0 };
    const desired = r.specHash === d.specHash ? d.replicas : 0;
    return {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      metadata: {
        name: replicaSetName(d.name, r.specHash),
        namespace: NAMESPACE,
        uid: rsUid(d, r.specHash),
        resourceVersion: String(d.resourceVersion),
        creationTimestamp: new Date(r.createdAt).toISOString(),
        labels: { ...sel, [POD_TEMPLATE_HASH]: hash },
        annotations: { [REVISION_ANNOTATION]: String(r.revision), 'kubernetes.io/change-cause': r.cause },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: d.name, uid: d.uid, controller: true, blockOwnerDeletion: true }],
      },
      spec: {
        replicas: desired,
        selector: { matchLabels: { ...sel, [POD_TEMPLATE_HASH]: hash } },
        template: templateOut(d, r.template, r.unitSpec, hash),
      },
      status: { replicas: c.live, readyReplicas: c.ready, availableReplicas: c.ready, fullyLabeledReplicas: c.live, observedGeneration: d.generation },
    };
  });
}

function resourcesOut(s: UnitSpec): Record<string, unknown> {
  const out: Record<string, unknown> = { requests: { cpu: cpu(s.resources.cpu), memory: mem(s.resources.memory) } };
  if (s.limits) {
    const l: Record<string, string> = {};
    if (s.limits.cpu !== undefined) l.cpu = cpu(s.limits.cpu);
    if (s.limits.memory !== undefined) l.memory = mem(s.limits.memory);
    out.limits = l;
  }
  return out;
}

interface UnitStatusView {
  phase: string;
  ready: boolean;
  reason: string | null;
  message: string | null;
  exitCode: number | null;
  signal: string | null;
  startTime: string | null;
  finishTime: string | null;
  scheduling: { message?: string } | null;
  ports?: Array<{ containerPort: number; hostPort: number; hostIP: string; name?: string }>;
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };

/**
 * A unit view (api/views.ts) as a core/v1 Pod. `rec` is its binding (absent
 * for a unit an agent still stops after it was deleted: shown Terminating),
 * `d` its deployment, `hostIP` its node's address.
 */
export function kubePod(view: ApiObject, rec: UnitRecord | undefined, d: DeploymentRecord | undefined, hostIP: string | undefined): KubeObject {
  const st = view.status as UnitStatusView;
  const vspec = view.spec as { deployment: string; nodeName: string | null; revision: number | null };
  const spec = rec?.spec;
  // A unit still stopping after its binding went keeps the ReplicaSet of its revision (drain counts it as controlled).
  const specHash = rec?.specHash ?? d?.revisions.find((r) => r.revision === vspec.revision)?.specHash;
  const terminating = rec === undefined || st.phase === 'Terminating';
  const lost = st.phase === 'Lost';
  const phase = lost ? 'Unknown' : st.phase === 'Terminating' ? 'Running' : st.phase;
  const containerName = spec?.containerName ?? vspec.deployment;
  const labels: Record<string, string> = { ...((view.metadata.labels as Record<string, string>) ?? {}) };
  if (specHash) labels[POD_TEMPLATE_HASH] = templateHash(specHash);
  const created = view.metadata.creationTimestamp as string | null;
  const scheduled = vspec.nodeName !== null;
  const running = st.phase === 'Running' || st.phase === 'Terminating';
  const ended = st.phase === 'Succeeded' || st.phase === 'Failed';
  let state: Record<string, unknown> = {};
  let lastState: Record<string, unknown> = {};
  const terminated = {
    exitCode: st.exitCode ?? (st.signal ? 128 + (SIGNALS[st.signal] ?? 0) : 0),
    ...(st.signal ? { signal: SIGNALS[st.signal] ?? 0 } : {}),
    reason: st.reason ?? (st.phase === 'Succeeded' ? 'Completed' : 'Error'),
    ...(st.message ? { message: st.message } : {}),
    startedAt: st.startTime,
    finishedAt: st.finishTime,
  };
  if (running) state = { running: { startedAt: st.startTime } };
  else if (ended && st.reason === 'CrashLoopBackOff') {
    state = { waiting: { reason: 'CrashLoopBackOff', message: st.message ?? '' } };
    lastState = { terminated: { ...terminated, reason: 'Error' } };
  } else if (ended) state = { terminated };
  else if (lost) state = { waiting: { reason: 'NodeLost', message: st.message ?? '' } };
  else state = { waiting: { reason: 'ContainerCreating' } };
  const t = st.startTime ?? created;
  const cond = (type: string, ok: boolean, reason?: string, message?: string) => ({
    type,
    status: lost ? 'Unknown' : ok ? 'True' : 'False',
    lastProbeTime: null,
    lastTransitionTime: t,
    ...(reason ? { reason } : {}),
    ...(message ? { message } : {}),
  });
  const conditions = scheduled
    ? [cond('Initialized', true), cond('Ready', st.ready), cond('ContainersReady', st.ready), cond('PodScheduled', true)]
    : [
        {
          type: 'PodScheduled',
          status: 'False',
          lastProbeTime: null,
          lastTransitionTime: created,
          reason: 'Unschedulable',
          message: st.scheduling?.message ?? st.message ?? 'no node fits',
        },
      ];
  const ownerReferences =
    d && specHash
      ? [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: replicaSetName(d.name, specHash), uid: rsUid(d, specHash), controller: true, blockOwnerDeletion: true }]
      : undefined;
  const containers = [
    {
      name: containerName,
      image: '',
      command: spec?.command ?? [],
      ...(spec && spec.env.length > 0 ? { env: spec.env.map((e) => ({ name: e.name, value: e.value })) } : {}),
      ...(spec ? { resources: resourcesOut(spec) } : {}),
      ...(spec?.ports ? { ports: spec.ports.map((p) => ({ ...p })) } : {}),
    },
  ];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: view.metadata.name,
      namespace: NAMESPACE,
      ...(rec ? { uid: rec.uid } : {}),
      resourceVersion: String(view.metadata.resourceVersion),
      creationTimestamp: created,
      labels,
      ...(terminating ? { deletionTimestamp: st.finishTime ?? created, deletionGracePeriodSeconds: spec?.gracePeriodMs !== undefined ? spec.gracePeriodMs / 1000 : 2 } : {}),
      ...(ownerReferences ? { ownerReferences } : {}),
    },
    spec: {
      ...(vspec.nodeName ? { nodeName: vspec.nodeName } : {}),
      containers,
      restartPolicy: 'Always',
      ...(spec?.gracePeriodMs !== undefined ? { terminationGracePeriodSeconds: spec.gracePeriodMs / 1000 } : {}),
      ...(spec && spec.tolerations.length > 0 ? { tolerations: spec.tolerations.map((x) => ({ ...x })) } : {}),
      ...(spec?.hostPID ? { hostPID: true } : {}),
      schedulerName: 'default-scheduler',
    },
    status: {
      phase,
      // As a kubelet does: a pod-level reason only for a lost node (unschedulable is the PodScheduled condition's, back-off the container's).
      ...(lost ? { reason: 'NodeLost' } : {}),
      ...(st.message ? { message: st.message } : {}),
      conditions,
      ...(hostIP ? { hostIP, podIP: hostIP, podIPs: [{ ip: hostIP }] } : {}),
      ...(st.startTime ? { startTime: st.startTime } : {}),
      ...(scheduled
        ? {
            containerStatuses: [
              {
                name: containerName,
                ready: st.ready,
                started: running,
                restartCount: 0,
                image: '',
                imageID: '',
                ...(st.startTime ? { containerID: `mo://${vspec.nodeName}/${view.metadata.name}` } : {}),
                state,
                lastState,
              },
            ],
          }
        : {}),
      // Every unit has requests (defaults when none are given): never BestEffort.
      qosClass: spec?.limits && spec.limits.cpu === spec.resources.cpu && spec.limits.memory === spec.resources.memory ? 'Guaranteed' : 'Burstable',
    },
  };
}

interface NodeStatusView {
  ready: boolean;
  addresses: Array<{ type: string; address: string }>;
  capacity: { cpu: number; memory: number };
  allocated: { cpu: number; memory: number };
  lastHeartbeatTime: string | null;
  conditions: Array<{ type: string; status: string; reason: string; message: string }>;
}

/** A node view as a core/v1 Node. */
export function kubeNode(view: ApiObject): KubeObject {
  const st = view.status as NodeStatusView;
  const sp = view.spec as { taints: Array<{ key: string; value?: string; effect: string }>; unschedulable: boolean };
  const name = view.metadata.name;
  const capacity = { cpu: cpu(st.capacity.cpu), memory: mem(st.capacity.memory), pods: '110' };
  // Heartbeats arrive every 200 ms; shown to the 10 s (as often as a kubelet reports) so a watch of nodes is not a flood.
  const beat = st.lastHeartbeatTime ?? (view.metadata.creationTimestamp as string | null);
  const hb = beat === null ? null : new Date(Math.floor(Date.parse(beat) / 10_000) * 10_000).toISOString();
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      uid: nodeUid(name),
      resourceVersion: String(view.metadata.resourceVersion),
      creationTimestamp: view.metadata.creationTimestamp,
      labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', ...((view.metadata.labels as Record<string, string>) ?? {}) },
    },
    spec: {
      ...(sp.unschedulable ? { unschedulable: true } : {}),
      ...(sp.taints.length > 0 ? { taints: sp.taints.map((x) => ({ key: x.key, ...(x.value ? { value: x.value } : {}), effect: x.effect })) } : {}),
    },
    status: {
      capacity,
      allocatable: capacity,
      conditions: [
        {
          type: 'Ready',
          status: st.ready ? 'True' : hb ? 'Unknown' : 'False',
          lastHeartbeatTime: hb,
          lastTransitionTime: hb,
          reason: st.ready ? 'AgentReady' : 'NodeStatusUnknown',
          message: st.ready ? 'the node agent is sending heartbeats' : 'the node agent stopped sending heartbeats',
        },
        ...st.conditions.map((c) => ({ ...c, lastHeartbeatTime: hb, lastTransitionTime: hb })),
      ],
      addresses: [...st.addresses, { type: 'Hostname', address: name }],
      nodeInfo: {
        kubeletVersion: KUBELET_VERSION,
        kubeProxyVersion: KUBELET_VERSION,
        operatingSystem: 'linux',
        architecture: 'amd64',
        osImage: 'mini-orchestrator node agent',
        kernelVersion: '',
        containerRuntimeVersion: 'mo-agent://0.1.0',
        machineID: '',
        systemUUID: '',
        bootID: '',
      },
    },
  };
}

const EVENT_KIND: Record<ClusterEvent['involvedObject']['kind'], { kind: string; apiVersion: string; namespaced: boolean }> = {
  Unit: { kind: 'Pod', apiVersion: 'v1', namespaced: true },
  Node: { kind: 'Node', apiVersion: 'v1', namespaced: false },
  Deployment: { kind: 'Deployment', apiVersion: 'apps/v1', namespaced: true },
  Replica: { kind: 'Replica', apiVersion: 'mo/v1', namespaced: false },
};

/** A cluster event as a core/v1 Event; `uidOf` gives the involved object's uid while it exists. */
export function kubeEvent(e: ClusterEvent, uidOf: (kind: string, name: string) => string | undefined): KubeObject {
  const k = EVENT_KIND[e.involvedObject.kind];
  const uid = uidOf(e.involvedObject.kind, e.involvedObject.name);
  const at = new Date(e.timestamp).toISOString();
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: {
      name: `${e.involvedObject.name}.${e.seq}`,
      namespace: NAMESPACE,
      uid: `event-${e.seq}`,
      resourceVersion: String(e.seq),
      creationTimestamp: new Date(e.firstTimestamp).toISOString(),
    },
    involvedObject: { kind: k.kind, apiVersion: k.apiVersion, name: e.involvedObject.name, ...(k.namespaced ? { namespace: NAMESPACE } : {}), ...(uid ? { uid } : {}) },
    reason: e.reason,
    message: e.message,
    type: e.type,
    source: { component: 'mo-control-plane', host: e.source },
    firstTimestamp: new Date(e.firstTimestamp).toISOString(),
    lastTimestamp: at,
    count: e.count,
    reportingComponent: 'mo-control-plane',
    reportingInstance: e.source,
  };
}

/** A Service view as a core/v1 Service. */
export function kubeService(view: ApiObject, annotations: Record<string, string> | undefined): KubeObject {
  const spec = view.spec as ServiceManifest['spec'];
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: view.metadata.name,
      namespace: NAMESPACE,
      uid: view.metadata.uid,
      resourceVersion: String(view.metadata.resourceVersion),
      creationTimestamp: view.metadata.creationTimestamp,
      ...(isObject(view.metadata.labels) && Object.keys(view.metadata.labels).length > 0 ? { labels: view.metadata.labels } : {}),
      ...(annotations ? { annotations: { ...annotations } } : {}),
    },
    spec: { type: spec.type, selector: { ...spec.selector }, ports: spec.ports.map((p) => ({ ...p })), externalTrafficPolicy: 'Cluster', sessionAffinity: 'None' },
    status: { loadBalancer: {} },
  };
}

/** An Endpoints view (api/views.ts) as core/v1 Endpoints: one subset per port. */
export function kubeEndpoints(view: ApiObject, createdAt: string | null = null): KubeObject {
  const subsets = (
    view.subsets as Array<{
      port: { name: string | null; port: number };
      addresses: Array<{ ip: string; port: number; unit: string; nodeName: string }>;
      notReadyAddresses: Array<{ ip: string; port: number; unit: string; nodeName: string }>;
    }>
  ).flatMap((s) => {
    // Units of one node share its address: one subset per (port, hostPort) pair keeps each address's port exact.
    const byPort = new Map<number, { addresses: unknown[]; notReadyAddresses: unknown[] }>();
    const add = (a: { ip: string; port: number; unit: string; nodeName: string }, ready: boolean) => {
      const e = byPort.get(a.port) ?? { addresses: [], notReadyAddresses: [] };
      (ready ? e.addresses : e.notReadyAddresses).push({ ip: a.ip, nodeName: a.nodeName, targetRef: { kind: 'Pod', name: a.unit, namespace: NAMESPACE } });
      byPort.set(a.port, e);
    };
    for (const a of s.addresses) add(a, true);
    for (const a of s.notReadyAddresses) add(a, false);
    return [...byPort].map(([port, e]) => ({
      ...(e.addresses.length > 0 ? { addresses: e.addresses } : {}),
      ...(e.notReadyAddresses.length > 0 ? { notReadyAddresses: e.notReadyAddresses } : {}),
      ports: [{ ...(s.port.name ? { name: s.port.name } : {}), port, protocol: 'TCP' }],
    }));
  });
  return {
    apiVersion: 'v1',
    kind: 'Endpoints',
    metadata: { name: view.metadata.name, namespace: NAMESPACE, resourceVersion: String(view.metadata.resourceVersion), creationTimestamp: createdAt },
    subsets,
  };
}

export function kubeNamespace(createdAt: string | null): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: NAMESPACE, uid: 'namespace-default', resourceVersion: '1', creationTimestamp: createdAt, labels: { 'kubernetes.io/metadata.name': NAMESPACE } },
    spec: { finalizers: ['kubernetes'] },
    status: { phase: 'Active' },
  };
}

// ---- in: what a client sends, to what the store takes ------------------------

/** Metadata the server fills in: accepted from a client (it sends back what it read) and dropped. */
const SERVER_METADATA = ['uid', 'resourceVersion', 'generation', 'creationTimestamp', 'selfLink', 'managedFields', 'deletionTimestamp', 'deletionGracePeriodSeconds'];

function dropNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (!isObject(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = dropNulls(x);
  return out;
}

function metadataIn(obj: Record<string, unknown>, path = 'metadata'): Record<string, unknown> {
  if (!isObject(obj.metadata)) return obj;
  const m = { ...obj.metadata };
  for (const k of SERVER_METADATA) delete m[k];
  if (m.namespace !== undefined && m.namespace !== NAMESPACE) throw new ManifestError(`${path}.namespace`, `only the namespace "default" exists, got ${JSON.stringify(m.namespace)}`);
  delete m.namespace;
  if (Array.isArray(m.finalizers) && m.finalizers.length === 0) delete m.finalizers;
  if (isObject(m.labels) && Object.keys(m.labels).length === 0) delete m.labels;
  return { ...obj, metadata: m };
}

/** Annotations of a Deployment we keep (last-applied and the user's); the revision is ours to set. */
function annotationsIn(m: Record<string, unknown>): Record<string, string> | undefined {
  if (!isObject(m.annotations)) return undefined;
  const a = { ...(m.annotations as Record<string, string>) };
  delete a[REVISION_ANNOTATION];
  return Object.keys(a).length > 0 ? a : undefined;
}

/**
 * A Deployment as a client sends it, to the manifest and UnitSpec the store
 * takes. The pod template's `kubectl.kubernetes.io/restartedAt` annotation
 * becomes the UnitSpec's restartedAt (so `kubectl rollout restart` rolls
 * the units, as `mo rollout restart` does). Throws ManifestError naming the
 * field at fault.
 */
export function deploymentIn(input: unknown): { manifest: DeploymentManifest; unitSpec: UnitSpec; annotations?: Record<string, string> } {
  if (!isObject(input)) throw new ManifestError('', 'expected a Deployment object');
  let obj: Record<string, unknown> = dropNulls(clone(input)) as Record<string, unknown>;
  delete obj.status;
  obj = metadataIn(obj);
  const meta = (obj.metadata ?? {}) as Record<string, unknown>;
  const annotations = annotationsIn(meta);
  delete meta.annotations;
  let restartedAt: string | undefined;
  const spec = isObject(obj.spec) ? obj.spec : undefined;
  const template = spec && isObject(spec.template) ? spec.template : undefined;
  if (template) {
    if (isObject(template.metadata)) {
      const tm: Record<string, unknown> = { ...template.metadata };
      for (const k of SERVER_METADATA) delete tm[k];
      if (isObject(tm.annotations)) {
        const a: Record<string, unknown> = { ...tm.annotations };
        if (typeof a[RESTARTED_AT_ANNOTATION] === 'string') restartedAt = a[RESTARTED_AT_ANNOTATION];
        delete a[RESTARTED_AT_ANNOTATION];
        if (Object.keys(a).length === 0) delete tm.annotations;
        else tm.annotations = a;
      }
      if (isObject(tm.labels)) {
        const l = { ...tm.labels };
        delete l[POD_TEMPLATE_HASH];
        tm.labels = l;
      }
      if (Object.keys(tm).length === 0) delete template.metadata;
      else template.metadata = tm;
    }
    if (isObject(template.spec)) {
      const ps = template.spec;
      // Kubernetes' pod defaults, as a real cluster's object carries them.
      if (ps.restartPolicy === 'Always') delete ps.restartPolicy;
      if (ps.schedulerName === 'default-scheduler') delete ps.schedulerName;
      if (ps.dnsPolicy === 'ClusterFirst') delete ps.dnsPolicy;
      if (isObject(ps.securityContext) && Object.keys(ps.securityContext).length === 0) delete ps.securityContext;
      if (Array.isArray(ps.containers)) {
        for (const c of ps.containers) {
          if (!isObject(c)) continue;
          if (isObject(c.resources) && Object.keys(c.resources).length === 0) delete c.resources;
          if (c.terminationMessagePath === '/dev/termination-log') delete c.terminationMessagePath;
          if (c.terminationMessagePolicy === 'File') delete c.terminationMessagePolicy;
          if (c.image === '') delete c.image;
        }
      }
    }
  }
  if (spec && isObject(spec.selector) && isObject(spec.selector.matchLabels)) {
    const ml = { ...spec.selector.matchLabels };
    delete ml[POD_TEMPLATE_HASH];
    spec.selector = { ...spec.selector, matchLabels: ml };
  }
  const { manifest, unitSpec } = validateManifest(obj);
  const out: DeploymentManifest = annotations ? { ...manifest, metadata: { ...manifest.metadata, annotations } } : manifest;
  return { manifest: out, unitSpec: restartedAt ? { ...unitSpec, restartedAt } : unitSpec, annotations };
}

/** A Service as a client sends it, to the manifest the store takes (server fields dropped). */
export function serviceIn(input: unknown): ServiceManifest {
  if (!isObject(input)) throw new ManifestError('', 'expected a Service object');
  let obj = dropNulls(clone(input)) as Record<string, unknown>;
  delete obj.status;
  obj = metadataIn(obj);
  const meta = (obj.metadata ?? {}) as Record<string, unknown>;
  const annotations = annotationsIn(meta);
  if (isObject(obj.spec)) {
    const s = obj.spec;
    if (s.externalTrafficPolicy === 'Cluster') delete s.externalTrafficPolicy;
    if (s.sessionAffinity === 'None') delete s.sessionAffinity;
  }
  const manifest = validateService(obj);
  return annotations ? { ...manifest, metadata: { ...manifest.metadata, annotations } } : manifest;
}
