// shared/model.ts -- the data model both sides speak: resources, taints,
// unit specs, and the observed-state reports agents send. Plain data only:
// no behaviour, no I/O. Units: cpu in millicores, memory in MiB.

import type { TAINT_EFFECTS } from './notation.ts';

export interface Resources {
  cpu: number; // millicores
  memory: number; // MiB
}

/** A taint's effect: one of shared/notation.ts's TAINT_EFFECTS, the one list of them. */
export type TaintEffect = (typeof TAINT_EFFECTS)[number];

export interface Taint {
  key: string;
  value?: string;
  effect: TaintEffect;
}

export interface Toleration {
  key?: string; // empty with operator Exists tolerates every taint
  operator: 'Exists' | 'Equal';
  value?: string;
  effect?: TaintEffect; // empty tolerates every effect
}

export interface EnvVar {
  name: string;
  value: string;
}

/** A port the unit's program listens on (containers[].ports). */
export interface ContainerPort {
  name?: string;
  containerPort: number;
  protocol: 'TCP' | 'UDP';
}

/**
 * A probe as in the Pod spec, with exactly one handler. Ports are resolved
 * to numbers when the manifest is read (a named port becomes its
 * containerPort). Times in whole seconds, as in Kubernetes.
 */
export interface Probe {
  exec?: { command: string[] };
  httpGet?: { path: string; port: number };
  tcpSocket?: { port: number };
  initialDelaySeconds: number;
  periodSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
  successThreshold: number;
}

export interface UnitProbes {
  startup?: Probe;
  readiness?: Probe;
  liveness?: Probe;
}

/**
 * What one unit runs: derived from a Deployment's pod template. Fields
 * added after the first release are optional and absent when the template
 * does not use them, so a spec's hash (its identity) is unchanged for
 * manifests that do not use them.
 */
export interface UnitSpec {
  containerName: string;
  command: string[]; // argv: command[0] is the program
  env: EnvVar[];
  resources: Resources; // requests
  tolerations: Toleration[];
  /** template.metadata.labels */
  labels?: Record<string, string>;
  ports?: ContainerPort[];
  probes?: UnitProbes;
  /** terminationGracePeriodSeconds * 1000; absent: the cluster default (2 s). */
  gracePeriodMs?: number;
  /** Set by `mo rollout restart` (kubectl's restartedAt annotation): a new template, the same program. */
  restartedAt?: string;
  /** resources.limits: what the agent enforces through cgroups (millicores, MiB); absent when none is given. */
  limits?: { cpu?: number; memory?: number };
  /** The pod template's hostPID: true: no PID namespace of its own (it keeps UTS, IPC and mount). */
  hostPID?: true;
}

/** What a node enforces, as its agent found at start (status.conditions; types LimitsEnforced, UnitNamespaces). */
export interface NodeCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/** A node as its agent registers it. */
export interface NodeInfo {
  name: string;
  capacity: Resources;
  taints: Taint[];
  labels: Record<string, string>;
  /** Where the node's Service proxies listen and its units' ports are reached (its InternalIP). */
  address?: string;
  /** What the agent enforces for its units (cgroup limits, namespaces): Node status.conditions. */
  conditions?: NodeCondition[];
}

/** A declared container port and the host port the agent gave it (status.ports). */
export interface UnitPortStatus {
  name?: string;
  containerPort: number;
  hostPort: number;
  hostIP: string;
}

/** A Service (v1) as we accept it: NodePort only, TCP only. */
export interface ServiceManifest {
  apiVersion: 'v1';
  kind: 'Service';
  /** annotations: kept only when the Kubernetes API (control-plane/kube/) writes it (kubectl's last-applied). */
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    type: 'NodePort';
    selector: Record<string, string>;
    ports: ServicePort[];
  };
}

export interface ServicePort {
  name?: string;
  protocol: 'TCP';
  port: number;
  /** A containerPort number, or the name of a container port. */
  targetPort: number | string;
  /** Filled in by the cluster when not given. */
  nodePort?: number;
}

/** What a node's proxy needs: per Service port, its nodePort and where to send connections. */
export interface ProxyTable {
  services: Array<{
    name: string;
    ports: Array<{ name?: string; nodePort: number; endpoints: Array<{ ip: string; port: number; unit: string }> }>;
  }>;
}

/** Phases of a unit (docs/contract.md: status.phase). */
export type UnitPhase = 'Pending' | 'Running' | 'Terminating' | 'Succeeded' | 'Failed' | 'Lost';

/** What an agent reports about one unit it runs or ran: the observed state. */
export interface UnitReport {
  name: string;
  deployment: string;
  phase: 'Pending' | 'Running' | 'Terminating' | 'Succeeded' | 'Failed';
  pid?: number;
  exitCode?: number;
  signal?: string; // e.g. 'SIGKILL' when killed by a signal
  /**
   * Why it ended (or why it is not ready): 'Completed', 'Error',
   * 'StartError', 'LivenessProbeFailed', 'OOMKilled', 'Terminated'.
   */
  reason?: string;
  /** The detail: 'exit code 1 after 0.02s', 'signal SIGKILL after 12.0s', 'spawn sleeeep ENOENT'. */
  message?: string;
  startedAt?: number; // ms since epoch
  finishedAt?: number;
  resources: Resources;
  /** The term of the command that started it (fencing audit). */
  term: number;
  /** Readiness (probes, or Running when it has no readiness probe). */
  ready?: boolean;
  /** Agent clock (ms) of the last change of `ready` to true. */
  readySince?: number;
  /** The spec's identity and the deployment revision it was started for. */
  specHash?: string;
  revision?: number;
  /** Host ports given to the unit's declared ports. */
  ports?: UnitPortStatus[];
}

/** The Deployment manifest subset we accept (validated form). */
export interface DeploymentManifest {
  apiVersion: 'apps/v1';
  kind: 'Deployment';
  /** annotations: kept only when the Kubernetes API (control-plane/kube/) writes it (kubectl's last-applied). */
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    replicas: number;
    template: PodTemplate;
    strategy?: DeploymentStrategy;
    minReadySeconds?: number;
    revisionHistoryLimit?: number;
    progressDeadlineSeconds?: number;
    paused?: boolean;
  };
}

/** maxSurge / maxUnavailable: a count or a percentage of replicas ('25%'). */
export type IntOrPercent = number | string;

export interface DeploymentStrategy {
  type: 'RollingUpdate' | 'Recreate';
  rollingUpdate?: { maxSurge?: IntOrPercent; maxUnavailable?: IntOrPercent };
}

/** Kubernetes' probe as written in a manifest (ports may be names). */
export interface ManifestProbe {
  exec?: { command: string[] };
  httpGet?: { path?: string; port: number | string };
  tcpSocket?: { port: number | string };
  initialDelaySeconds?: number;
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
  successThreshold?: number;
}

export interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: {
    containers: Array<{
      name: string;
      command: string[];
      args?: string[];
      env?: EnvVar[];
      resources?: {
        requests?: { cpu?: string | number; memory?: string | number };
        limits?: { cpu?: string | number; memory?: string | number };
      };
      ports?: ContainerPort[];
      readinessProbe?: ManifestProbe;
      livenessProbe?: ManifestProbe;
      startupProbe?: ManifestProbe;
    }>;
    tolerations?: Toleration[];
    terminationGracePeriodSeconds?: number;
    hostPID?: boolean;
  };
}
