// cli/resources.ts -- the resource types the CLI names, their aliases (as in
// kubectl: no, po/pods for units, deploy, ev, svc, ep) and where each lives
// in the HTTP API.
// Also the loose shapes the CLI reads from the server's JSON: every field is
// optional because the CLI must print whatever a (possibly older or newer)
// server sends without crashing.

import { UsageError } from './errors.ts';
import { didYouMean } from './kube.ts';

export type ResourceType = 'nodes' | 'units' | 'deployments' | 'events' | 'services' | 'endpoints';

const ALIASES: Record<string, ResourceType> = {
  node: 'nodes',
  nodes: 'nodes',
  no: 'nodes',
  unit: 'units',
  units: 'units',
  // A unit is this project's pod: kubectl users type these.
  pod: 'units',
  pods: 'units',
  po: 'units',
  deployment: 'deployments',
  deployments: 'deployments',
  deploy: 'deployments',
  'deployment.apps': 'deployments',
  'deployments.apps': 'deployments',
  event: 'events',
  events: 'events',
  ev: 'events',
  service: 'services',
  services: 'services',
  svc: 'services',
  endpoints: 'endpoints',
  ep: 'endpoints',
};

/** The Kind of the objects of each resource, as the server spells it. */
export const KIND: Record<ResourceType, string> = {
  nodes: 'Node',
  units: 'Unit',
  deployments: 'Deployment',
  events: 'Event',
  services: 'Service',
  endpoints: 'Endpoints',
};

/** How a resource is named in messages: `deployment.apps/web`, `unit/web-1`, `node/node-a`. */
export const DISPLAY_PREFIX: Record<ResourceType, string> = {
  nodes: 'node',
  units: 'unit',
  deployments: 'deployment.apps',
  events: 'event',
  services: 'service',
  endpoints: 'endpoints',
};

/**
 * Resolves `deploy`, `units`, ... to a resource type, refusing types the
 * command does not handle. Throws UsageError naming what is accepted.
 */
export function resolveResource(word: string | undefined, allowed: readonly ResourceType[], command: string): ResourceType {
  const want = allowed.map((r) => r).join(', ');
  if (word === undefined) throw new UsageError(`"${command}" needs a resource type (${want})`);
  const type = Object.hasOwn(ALIASES, word.toLowerCase()) ? ALIASES[word.toLowerCase()] : undefined;
  if (type === undefined || !allowed.includes(type)) {
    // The plural names first: a tie ("nods": node or nodes) goes to the type's own name.
    const names = [...allowed, ...Object.keys(ALIASES).filter((a) => allowed.includes(ALIASES[a]) && !a.includes('.'))];
    const hint = type === undefined ? didYouMean(word, names) : '';
    throw new UsageError(`unknown resource type "${word}" for "${command}"${hint} (want ${want})`);
  }
  return type;
}

/**
 * Accepts both `TYPE NAME` and `TYPE/NAME` (kubectl style): returns the
 * positionals with a leading `TYPE/NAME` split in two.
 */
export function splitTypeSlashName(positionals: readonly string[]): string[] {
  const [first, ...rest] = positionals;
  if (first !== undefined && first.includes('/')) {
    const slash = first.indexOf('/');
    return [first.slice(0, slash), first.slice(slash + 1), ...rest];
  }
  return [...positionals];
}

export function resourcePath(type: ResourceType, name?: string): string {
  return name === undefined ? `/v1/${type}` : `/v1/${type}/${encodeURIComponent(name)}`;
}

// ---- loose shapes of what the server returns (docs/contract.md, "JSON shapes") ----

export type Timestamp = string | number | undefined;

export interface ObjectMeta {
  name?: string;
  uid?: string;
  creationTimestamp?: Timestamp;
  resourceVersion?: string | number;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface ResourcePair {
  cpu?: number;
  memory?: number;
}

export interface NodeObject {
  kind?: string;
  metadata?: ObjectMeta;
  spec?: {
    taints?: Array<{ key?: string; value?: string; effect?: string }>;
    unschedulable?: boolean;
    labels?: Record<string, string>;
  };
  status?: {
    ready?: boolean;
    capacity?: ResourcePair;
    allocated?: ResourcePair;
    lastHeartbeatTime?: Timestamp;
    agent?: { pid?: number };
  };
}

export interface SchedulingNode {
  node?: string;
  feasible?: boolean;
  reasons?: string[];
  scores?: Record<string, number> | Array<{ plugin?: string; name?: string; score?: number }>;
  total?: number;
}

export interface UnitObject {
  kind?: string;
  metadata?: ObjectMeta;
  spec?: {
    deployment?: string;
    revision?: number | null;
    nodeName?: string;
    resources?: ResourcePair;
    command?: string[];
  };
  status?: {
    phase?: string;
    ready?: boolean;
    pid?: number;
    exitCode?: number;
    signal?: string | null;
    reason?: string;
    message?: string | null;
    scheduling?: { message?: string; nodes?: SchedulingNode[]; at?: number } | null;
  };
}

export interface ContainerSpec {
  name?: string;
  command?: string[];
  args?: string[];
  env?: Array<{ name?: string; value?: string }>;
  resources?: { requests?: { cpu?: string | number; memory?: string | number } };
}

export interface DeploymentObject {
  kind?: string;
  metadata?: ObjectMeta;
  spec?: {
    replicas?: number;
    paused?: boolean;
    strategy?: { type?: string; rollingUpdate?: { maxSurge?: number | string; maxUnavailable?: number | string } };
    minReadySeconds?: number;
    progressDeadlineSeconds?: number;
    template?: {
      spec?: {
        containers?: ContainerSpec[];
        tolerations?: Array<{ key?: string; operator?: string; value?: string; effect?: string }>;
      };
    };
  };
  status?: {
    replicas?: number;
    readyReplicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
    unavailableReplicas?: number;
    observedGeneration?: number;
    oldReplicas?: number;
    crashLoopBackOff?: number;
    conditions?: Array<{ type?: string; status?: string; reason?: string; message?: string; lastUpdateTime?: Timestamp }>;
  };
}

export interface EventObject {
  kind?: string;
  metadata?: ObjectMeta;
  type?: string;
  reason?: string;
  message?: string;
  involvedObject?: { kind?: string; name?: string };
  source?: string | { component?: string; host?: string };
  timestamp?: Timestamp;
  count?: number;
  firstTimestamp?: Timestamp;
}

export interface ListObject<T> {
  kind?: string;
  items?: T[];
}

export interface ClusterStatus {
  leader?: string;
  replicas?: Array<{
    id?: string;
    url?: string;
    role?: string;
    term?: number;
    commitIndex?: number;
    pid?: number;
    reachable?: boolean;
  }>;
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | string;
  object: unknown;
}

export interface ServiceObject {
  kind?: string;
  metadata?: ObjectMeta;
  spec?: {
    type?: string;
    selector?: Record<string, string>;
    ports?: Array<{ name?: string; port?: number; targetPort?: number | string; nodePort?: number }>;
  };
  status?: {
    endpoints?: Array<{ unit?: string; node?: string; hostIP?: string; hostPort?: number; ready?: boolean }>;
    nodeAddresses?: Array<{ node?: string; address?: string }>;
    message?: string;
  };
}

export interface EndpointsObject {
  kind?: string;
  metadata?: ObjectMeta;
  subsets?: Array<{
    port?: { name?: string | null; port?: number; nodePort?: number };
    addresses?: Array<{ ip?: string; port?: number; unit?: string; nodeName?: string }>;
    notReadyAddresses?: Array<{ ip?: string; port?: number; unit?: string; nodeName?: string }>;
  }>;
}
