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

// ---- what the server returns: the API's own types (shared/api-types.ts) ----
// One declaration for the server's views, the CLI, chaos and the tests; the
// names below are the CLI's words for them.

export type {
  ClusterStatusView as ClusterStatus,
  DeploymentView as DeploymentObject,
  EndpointsView as EndpointsObject,
  EventView as EventObject,
  ListView as ListObject,
  NodeView as NodeObject,
  SchedulingNodeView as SchedulingNode,
  ServiceView as ServiceObject,
  UnitView as UnitObject,
  WatchEventView as WatchEvent,
} from '../shared/api-types.ts';

/** A time as the API sends it (ISO-8601), or missing. */
export type Timestamp = string | number | null | undefined;
