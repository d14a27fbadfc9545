// control-plane/kube/discovery.ts -- what kubectl reads before every command:
// /version, /api, /apis and the resource lists of each group version, naming
// exactly what is served (resources, subresources, verbs, short names).
// `policy` is listed with pods/eviction so `kubectl drain` evicts through it.
// Pure.

export const KUBE_VERSION = {
  major: '1',
  minor: '20',
  gitVersion: 'v1.20.0-mo',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2026-01-01T00:00:00Z',
  goVersion: 'node',
  compiler: 'node',
  platform: 'linux/amd64',
};

interface Res {
  name: string;
  singularName: string;
  namespaced: boolean;
  kind: string;
  verbs: string[];
  shortNames?: string[];
  group?: string;
  version?: string;
  categories?: string[];
}

const READ = ['get', 'list', 'watch'];
const RW = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];

export const CORE_RESOURCES: Res[] = [
  { name: 'namespaces', singularName: '', namespaced: false, kind: 'Namespace', verbs: ['get', 'list', 'watch'], shortNames: ['ns'] },
  { name: 'nodes', singularName: '', namespaced: false, kind: 'Node', verbs: ['get', 'list', 'patch', 'update', 'watch'], shortNames: ['no'] },
  { name: 'nodes/status', singularName: '', namespaced: false, kind: 'Node', verbs: ['get'] },
  { name: 'pods', singularName: '', namespaced: true, kind: 'Pod', verbs: ['delete', 'get', 'list', 'watch'], shortNames: ['po'], categories: ['all'] },
  { name: 'pods/log', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] },
  { name: 'pods/status', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] },
  { name: 'pods/eviction', singularName: '', namespaced: true, group: 'policy', version: 'v1beta1', kind: 'Eviction', verbs: ['create'] },
  { name: 'events', singularName: '', namespaced: true, kind: 'Event', verbs: READ, shortNames: ['ev'] },
  { name: 'services', singularName: '', namespaced: true, kind: 'Service', verbs: RW, shortNames: ['svc'], categories: ['all'] },
  { name: 'endpoints', singularName: '', namespaced: true, kind: 'Endpoints', verbs: READ, shortNames: ['ep'] },
];

export const APPS_RESOURCES: Res[] = [
  { name: 'deployments', singularName: '', namespaced: true, kind: 'Deployment', verbs: RW, shortNames: ['deploy'], categories: ['all'] },
  { name: 'deployments/scale', singularName: '', namespaced: true, group: 'autoscaling', version: 'v1', kind: 'Scale', verbs: ['get', 'patch', 'update'] },
  { name: 'deployments/status', singularName: '', namespaced: true, kind: 'Deployment', verbs: ['get'] },
  { name: 'replicasets', singularName: '', namespaced: true, kind: 'ReplicaSet', verbs: READ, shortNames: ['rs'], categories: ['all'] },
];

const group = (name: string, versions: string[]) => ({
  name,
  versions: versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
  preferredVersion: { groupVersion: `${name}/${versions[0]}`, version: versions[0] },
});

export function apiVersions(serverAddress: string): unknown {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] };
}

export function apiGroupList(): unknown {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: [group('apps', ['v1']), group('policy', ['v1beta1'])] };
}

/** The APIResourceList of a group version, or undefined when it is not served. */
export function resourceList(groupVersion: string): unknown {
  const list = groupVersion === 'v1' ? CORE_RESOURCES : groupVersion === 'apps/v1' ? APPS_RESOURCES : groupVersion === 'policy/v1beta1' ? [] : undefined;
  if (list === undefined) return undefined;
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion, resources: list.map((r) => ({ ...r, storageVersionHash: '' })) };
}

/** `/apis/<group>`: one group's versions. */
export function apiGroup(name: string): unknown {
  if (name === 'apps') return { kind: 'APIGroup', apiVersion: 'v1', ...group('apps', ['v1']) };
  if (name === 'policy') return { kind: 'APIGroup', apiVersion: 'v1', ...group('policy', ['v1beta1']) };
  return undefined;
}
