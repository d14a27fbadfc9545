// shared/api-types.ts -- the JSON objects of the HTTP API (docs/contract.md,
// "JSON shapes (the HTTP API)"), declared once. The server's views
// (control-plane/api/views.ts) are typed by them, so a field the server stops
// sending or sends in another shape fails the type check of every reader:
// the CLI (cli/resources.ts re-exports them), chaos (chaos/api-client.ts) and
// the tests. Types only: nothing here runs.
//
// Timestamps are ISO-8601 strings (null when unknown); resource versions are
// decimal strings; cpu is in millicores and memory in MiB.

import type { DeploymentManifest, NodeCondition, Resources, Taint, Toleration, UnitPortStatus, UnitReport } from './model.ts';

export type Timestamp = string | null;

/** The names of the resources `/v1/<resource>` serves. */
export type ResourceName = 'nodes' | 'units' | 'deployments' | 'events' | 'services' | 'endpoints';

/** One node's outcome in a scheduling decision, as kept on the unit (status.scheduling.nodes). */
export type SchedulingNodeView = {
  node: string;
  feasible: boolean;
  /** Why the node was rejected (empty when feasible). */
  reasons: string[];
  /** Unweighted 0..100 per score plugin, by plugin name (a map, never a list). */
  scores?: Record<string, number>;
  /** Weighted sum of `scores`. */
  total?: number;
};

/** The scheduler's decision for a unit: one line, and the nodes it looked at. */
export type SchedulingView = {
  message: string;
  nodes: SchedulingNodeView[];
  /** When it was decided, ms since the epoch. */
  at: number;
};

export type NodeView = {
  kind: 'Node';
  metadata: { name: string; creationTimestamp: Timestamp; resourceVersion: string; labels: Record<string, string> };
  spec: { taints: Taint[]; unschedulable: boolean };
  status: {
    ready: boolean;
    addresses: Array<{ type: 'InternalIP'; address: string }>;
    capacity: Resources;
    allocated: Resources;
    lastHeartbeatTime: Timestamp;
    agent: { pid: number | null; connected: boolean };
    /** Units Running or Pending on the node, as its agent reports them. */
    units: number;
    conditions: NodeCondition[];
  };
};

export type UnitPhase = UnitReport['phase'] | 'Lost';

export type UnitView = {
  kind: 'Unit';
  metadata: { name: string; uid: string | null; creationTimestamp: Timestamp; resourceVersion: string; labels: Record<string, string> };
  spec: {
    deployment: string;
    revision: number | null;
    nodeName: string | null;
    command?: string[];
    env?: Array<{ name: string; value: string }>;
    resources: Resources;
    tolerations?: Toleration[];
    ports?: Array<{ name?: string; containerPort: number }>;
    terminationGracePeriodSeconds?: number;
  };
  status: {
    phase: UnitPhase;
    ready: boolean;
    ports?: UnitPortStatus[];
    pid: number | null;
    exitCode: number | null;
    signal: string | null;
    reason: string | null;
    message: string | null;
    startTime: Timestamp;
    finishTime: Timestamp;
    term: number | null;
    scheduling: SchedulingView | null;
  };
};

export type DeploymentCondition = {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastUpdateTime: Timestamp;
  lastTransitionTime: Timestamp;
};

export type DeploymentView = {
  apiVersion: 'apps/v1';
  kind: 'Deployment';
  metadata: {
    name: string;
    uid: string;
    creationTimestamp: Timestamp;
    resourceVersion: string;
    generation: number;
    labels: Record<string, string>;
    annotations: Record<string, string>;
  };
  spec: {
    replicas: number;
    template: DeploymentManifest['spec']['template'];
    strategy: { type: 'Recreate' } | { type: 'RollingUpdate'; rollingUpdate: { maxSurge: number | string; maxUnavailable: number | string } };
    minReadySeconds: number;
    revisionHistoryLimit: number;
    progressDeadlineSeconds: number;
    paused?: true;
  };
  status: {
    observedGeneration: number;
    replicas: number;
    updatedReplicas: number;
    readyReplicas: number;
    availableReplicas: number;
    unavailableReplicas: number;
    /** Units of older revisions still running or stopping (0 once a rollout is done). */
    oldReplicas: number;
    /** Failed units waiting out the crash-loop back-off. */
    crashLoopBackOff: number;
    conditions: DeploymentCondition[];
  };
};

/** One revision of `mo rollout history`, oldest first. */
export type RevisionView = {
  revision: number;
  current: boolean;
  cause: string;
  createdAt: Timestamp;
  specHash: string;
  template: DeploymentManifest['spec']['template'];
  command: string[];
  env: Array<{ name: string; value: string }>;
};

export type EventView = {
  kind: 'Event';
  metadata: { name: string; creationTimestamp: Timestamp; resourceVersion: string };
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  involvedObject: { kind: 'Node' | 'Unit' | 'Deployment' | 'Replica'; name: string };
  /** The replica that recorded it, e.g. 'cp-1'. */
  source: string;
  timestamp: Timestamp;
  count: number;
  firstTimestamp: Timestamp;
  lastTimestamp: Timestamp;
};

export type ServiceEndpointView = { unit: string; node: string; hostIP: string; hostPort: number; ready: boolean; port: string | number };

export type ServiceView = {
  apiVersion: 'v1';
  kind: 'Service';
  metadata: { name: string; uid: string; creationTimestamp: Timestamp; resourceVersion: string; labels: Record<string, string> };
  spec: {
    type?: string;
    selector: Record<string, string>;
    ports: Array<{ name?: string; port: number; targetPort: number | string; nodePort?: number; protocol?: string }>;
  };
  status: {
    endpoints: ServiceEndpointView[];
    /** Where to connect: every Ready node's address, on the nodePort. */
    nodeAddresses: Array<{ node: string; address: string }>;
    /** Why there is no endpoint, when there is none. */
    message?: string;
  };
};

export type EndpointAddress = { ip: string; port: number; unit: string; nodeName: string };

export type EndpointsView = {
  apiVersion: 'v1';
  kind: 'Endpoints';
  metadata: { name: string; resourceVersion: string };
  subsets: Array<{
    port: { name: string | null; port: number; nodePort?: number; targetPort: number | string };
    addresses: EndpointAddress[];
    notReadyAddresses: EndpointAddress[];
  }>;
};

/** Any object of the API. */
export type ApiView = NodeView | UnitView | DeploymentView | EventView | ServiceView | EndpointsView;

/** GET /v1/<resource>: the list, and the version a watch continues from. */
export type ListView<T> = { kind: string; apiVersion?: string; items: T[]; metadata?: { resourceVersion: string } };

/** One line of a watch stream (`?watch=1`). */
export type WatchEventView<T = ApiView> = { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T };

/** One replica in GET /v1/cluster (null where an unreachable replica could not say). */
export type ReplicaStatusView = {
  id: string;
  url: string;
  role: string;
  term: number | null;
  commitIndex: number | null;
  appliedIndex?: number | null;
  pid: number | null;
  reachable: boolean;
};

/** GET /v1/cluster: `mo cluster status`. */
export type ClusterStatusView = { leader: string; replicas: ReplicaStatusView[] };

/** GET /v1/replica: one replica's own status, as it knows it (a peer's /v1/cluster row is made from it). */
export type ReplicaSelfView = {
  id: string;
  role: string;
  term: number;
  commitIndex: number;
  appliedIndex: number;
  leader: string | null;
  pid: number;
};

/**
 * Every error answer: one line naming the cause. A 503 for a write that
 * found no quorum says whether it was refused before it was proposed, or
 * its outcome is unknown (it may still commit).
 */
export type ApiErrorView = { error: string; code?: string; outcome?: 'refused' | 'unknown' };

/** The answer to a GET of `path` (200), by path: what a typed client reads. */
export type ApiGetView<P extends string> = P extends '/v1/cluster'
  ? ClusterStatusView
  : P extends '/v1/replica'
    ? ReplicaSelfView
    : P extends `/v1/${infer R}`
      ? R extends `${infer Resource}/${string}`
        ? ItemView<Resource>
        : R extends ResourceName
          ? ListView<ItemView<R>>
          : unknown
      : unknown;

/** One object of `/v1/<resource>`. */
type ItemView<R extends string> = R extends 'nodes'
  ? NodeView
  : R extends 'units'
    ? UnitView
    : R extends 'deployments'
      ? DeploymentView
      : R extends 'events'
        ? EventView
        : R extends 'services'
          ? ServiceView
          : R extends 'endpoints'
            ? EndpointsView
            : unknown;

/** Any part of an API object (a test's fixture states only the fields it checks, each in its true shape). */
export type DeepPartial<T> = T extends ReadonlyArray<infer E> ? DeepPartial<E>[] : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;
