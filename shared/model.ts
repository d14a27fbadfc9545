// shared/model.ts -- the data model both sides speak: resources, taints,
// unit specs, and the observed-state reports agents send. Plain data only:
// no behaviour, no I/O. Units: cpu in millicores, memory in MiB.

export interface Resources {
  cpu: number; // millicores
  memory: number; // MiB
}

export type TaintEffect = 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';

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

/** What one unit runs: derived from a Deployment's pod template. */
export interface UnitSpec {
  containerName: string;
  command: string[]; // argv: command[0] is the program
  env: EnvVar[];
  resources: Resources; // requests
  tolerations: Toleration[];
}

/** A node as its agent registers it. */
export interface NodeInfo {
  name: string;
  capacity: Resources;
  taints: Taint[];
  labels: Record<string, string>;
}

/** Phases of a unit (contract: status.phase). */
export type UnitPhase = 'Pending' | 'Running' | 'Terminating' | 'Succeeded' | 'Failed' | 'Lost';

/** What an agent reports about one unit it runs or ran: the observed state. */
export interface UnitReport {
  name: string;
  deployment: string;
  phase: 'Pending' | 'Running' | 'Terminating' | 'Succeeded' | 'Failed';
  pid?: number;
  exitCode?: number;
  signal?: string; // e.g. 'SIGKILL' when killed by a signal
  reason?: string; // 'Completed', 'Error', 'Killed', 'SpawnFailed: ENOENT ...'
  startedAt?: number; // ms since epoch
  finishedAt?: number;
  resources: Resources;
  /** The term of the command that started it (fencing audit). */
  term: number;
}

/** The Deployment manifest subset we accept (validated form). */
export interface DeploymentManifest {
  apiVersion: 'apps/v1';
  kind: 'Deployment';
  metadata: { name: string; labels?: Record<string, string> };
  spec: {
    replicas: number;
    template: PodTemplate;
  };
}

export interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: {
    containers: Array<{
      name: string;
      command: string[];
      args?: string[];
      env?: EnvVar[];
      resources?: { requests?: { cpu?: string | number; memory?: string | number } };
    }>;
    tolerations?: Toleration[];
  };
}
