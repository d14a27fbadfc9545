// launcher/command-lines.ts -- the exact argv of every process `npm start`
// runs: one control-plane replica per id, one node agent per node. Pure:
// data in, argv out (no fs, no clock), so the unit tests can pin the flags the
// other processes parse, and the launcher can print a command a person can
// paste into a shell from the repo root to start a dead process again.
//
// Contract with control-plane/main.ts and node-agent/main.ts (their flags):
//   control-plane: --id --listen --peers --data-dir --token --kube-listen --ca-dir
//   node-agent:    --name --cpu --memory [--taint T]... [--label k=v]...
//                  --control-plane --token --state-dir
// With `network` (npm start -- --netns), each argv starts with the command
// that enters the process's namespace (`nsenter --net=... --`), replicas
// listen on their namespace address instead of 127.0.0.1, and peers and
// agents use those addresses; the printed hand command includes the prefix.
// A taint is written like kubectl writes one: `key[=value][:Effect]`, with
// the effect left out when it is NoSchedule (so the default node-c reads
// `--taint gpu-only`).

import type { NodeInfo, Taint } from '../shared/model.ts';

export type ChildKind = 'control-plane' | 'node-agent';

/** One process of the cluster, as the supervisor starts it. */
export interface ChildSpec {
  /** Stream prefix and the name users know it by: `cp-1`, `node-a`. */
  name: string;
  kind: ChildKind;
  /** argv[0] is the program (an absolute node path); the rest its arguments. */
  argv: string[];
  /** The loopback port a replica serves on (control planes only). */
  port?: number;
  /** Environment it starts with, under what the launcher's own environment sets (REPLICA_ENV). */
  env?: Readonly<Record<string, string>>;
}

export interface ClusterLayout {
  /** Absolute path of the node binary: `process.execPath`. */
  nodeExecPath: string;
  /** Data dir as the children see it (they run with cwd = repo root). */
  dataDir: string;
  basePort: number;
  replicas: number;
  token: string;
  nodes: readonly NodeInfo[];
  /** Entry scripts, relative to the repo root; tests swap in a fake child. */
  controlPlaneScript?: string;
  nodeAgentScript?: string;
  /** --netns: addresses and namespace entry per process name; absent = everything on 127.0.0.1. */
  network?: ClusterNetwork;
}

export interface ClusterNetwork {
  /** The address a process listens on and is reached at, by process name. */
  addresses: Readonly<Record<string, string>>;
  /** The argv prefix that runs a process inside its namespace, by process name. */
  enter: Readonly<Record<string, readonly string[]>>;
}

export const CONTROL_PLANE_SCRIPT = 'control-plane/main.ts';
export const NODE_AGENT_SCRIPT = 'node-agent/main.ts';
export const LOOPBACK_HOST = '127.0.0.1';

/** `cp-1` ... `cp-N`: 1-based, like docs/contract.md's `--id cp-1`. */
export function replicaIds(replicas: number): string[] {
  return Array.from({ length: replicas }, (_, i) => `cp-${i + 1}`);
}

/** Replica i (1-based) serves HTTP, peer and agent traffic on basePort + i. */
export function replicaPort(basePort: number, index1: number): number {
  return basePort + index1;
}

export function replicaPorts(basePort: number, replicas: number): number[] {
  return Array.from({ length: replicas }, (_, i) => replicaPort(basePort, i + 1));
}

/** Replica i serves the Kubernetes API over HTTPS on its port + this (7011-7013 by default). */
export const KUBE_PORT_OFFSET = 10;

export function kubePorts(basePort: number, replicas: number): number[] {
  return replicaPorts(basePort, replicas).map((p) => p + KUBE_PORT_OFFSET);
}

/** The Kubernetes API of every replica, for `<data-dir>/kubeconfig`. */
export function kubeServers(basePort: number, replicas: number, network?: ClusterNetwork): Array<{ name: string; server: string }> {
  return replicaIds(replicas).map((id, i) => ({ name: id, server: `https://${hostOf(network, id)}:${replicaPort(basePort, i + 1) + KUBE_PORT_OFFSET}` }));
}

/** What `<data-dir>/config.json` lists and what the CLI talks to. */
export function serverUrls(basePort: number, replicas: number, network?: ClusterNetwork): string[] {
  return replicaIds(replicas).map((id, i) => `http://${hostOf(network, id)}:${replicaPort(basePort, i + 1)}`);
}

function hostOf(network: ClusterNetwork | undefined, name: string): string {
  return network?.addresses[name] ?? LOOPBACK_HOST;
}

function wsUrl(host: string, port: number): string {
  return `ws://${host}:${port}`;
}

/** Joins without node:path so this file stays pure; dataDir has no trailing slash issues. */
function subdir(dataDir: string, ...parts: string[]): string {
  const base = dataDir.length > 1 ? dataDir.replace(/\/+$/, '') : dataDir;
  return [base, ...parts].join('/');
}

/** kubectl notation: `key`, `key=value`, `key:NoExecute`, `key=value:PreferNoSchedule` (shared/notation.ts). */
import { formatTaint } from '../shared/notation.ts';
export { formatTaint };

/**
 * V8 flags of every control-plane replica.
 *
 * Semi-spaces of up to 16 MiB: V8's own default on 64-bit machines (Node
 * 20), written out so that another Node's default does not move it. From
 * 2026-12-04 to 2026-12-07 replicas ran with 2 MiB, for their RSS at rest
 * (a young generation grown to 32 MiB stayed committed after a burst). A
 * replica that comes to rest now collects by itself (rest-collect.ts), and
 * V8 shrinks its young generation back to 1 MiB at a full collection made
 * after ~5 s of little allocation, which that collection is (a replica
 * after 2,000 writes: 32 MiB, then 1 MiB at rest, as
 * test/e2e/rest-trim.test.ts checks). So the cap bought nothing at rest:
 * `--only big-state` with 10,000 deployments, the leader 107.4 and 121.2
 * MiB 30 s after the fill in two runs, the followers 89.5-96.9 (with the
 * cap, 4 runs: 109.7-120.5 and 90.5-100.6). Under load it cost CPU: a scavenge pays for its roots (a
 * replica's thousands of sockets, the old generation's pointers into the
 * young one) whatever its size, and 2 MiB filled many times a second. The
 * 5,000-agent fleet (`--only fleet --duration 20` with
 * MO_REPLICA_V8_FLAGS='--trace-gc --max-semi-space-size=N', one run each): 1,123-1,941 scavenges taking 7.9-10.0 s per replica with 2 MiB,
 * 5.1-6.2 s with 4, 3.7-5.6 s with 8, 143-249 taking 2.6-3.3 s with 16; the
 * leader at steady state 23.0, 22.4, 21.0 and 20.4% of a core, the
 * followers 15.8-17.0, 15.4-15.6, 15.0 and 13.4-13.6%. The price is RSS
 * while busy: the replica with 1,000 units right after the apply 117.0 MiB
 * (95.6 with the cap), an idle one 64.6 (61.8), the leader with 10,000
 * units 151.3 and 198.4 in two runs (`--only unit-memory`; 150.4 with the
 * cap that day, 173.6 in an earlier full run); and single scavenges of up
 * to 54-65 ms where 15-23 ms were with the cap (`--only snapshot-catch-up`,
 * much surviving).
 *
 * And no memory reducer: once allocation slows after a burst (50,000 units
 * placed, then the fleet's steady state), V8 runs a collection to shrink
 * the heap that compacts far more pages than a regular one; its pause was
 * 85-94 ms of a replica's main thread (--trace-gc), and on 2 shared cores
 * every event-loop stop over 100 ms of the fleet's steady state (101-1,407
 * ms in three 300 s runs) fell in the second of one. Without it, a 300 s
 * steady state had no stop over 97 ms; the heap is collected when it
 * reaches V8's limit instead, so RSS stays higher between collections
 * (a follower 345 MiB after the fleet's steady state, not 222-229; the
 * replica with 1,000 units 96 MiB, not 78): docs/benchmarks.md. A replica
 * that comes to rest still collects a burst's garbage: it runs a full
 * collection itself once its loop is quiet (control-plane/rest-collect.ts).
 */
export const REPLICA_V8_FLAGS: readonly string[] = ['--max-semi-space-size=16', '--no-memory-reducer'];

/**
 * Environment of every control-plane replica, for glibc's malloc (other C
 * libraries ignore it). A value the environment already sets is kept.
 *
 * MALLOC_MMAP_THRESHOLD_: malloc serves an allocation of 128 KiB or more
 * with its own mmap, and gives it back at free; but each such free raises
 * that threshold to the freed size (up to 32 MiB), so once a replica had
 * freed a snapshot's buffers (megabytes), its later buffers came from the
 * main heap, whose freed middle stays resident. Fixing the threshold at
 * glibc's own default keeps large buffers out of that heap. An ad-hoc probe
 * of the big-state bench's fill (10,000 deployments, 3 replicas,
 * /proc/PID/smaps 30 s after; 1 run each): the main heap 20-21 MiB instead
 * of 37-59, RSS 123-133 MiB instead of 146-179.
 *
 * GLIBC_TUNABLES: fewer page faults per write. With the default trim
 * threshold (128 KiB) malloc gave its heap's top back to the kernel after
 * nearly every burst and faulted it in again at the next: at concurrency
 * 16 the leader took 3.8-4.8 minor faults per acknowledged write and each
 * follower 2.1-3.0, and on a VM a fault can cost 15 us (a 4 KiB page
 * touched afresh, measured with a C probe here: 4-10% of a write's CPU).
 * A trim threshold of 8 MiB keeps that top; transparent huge pages for
 * malloc's heap (hugetlb=1: madvise, so only where the system allows it)
 * fault 2 MiB at a time; at most 2 arenas, or each of the thread pool's
 * threads would keep 8 MiB of its own. Measured ad hoc (3 replicas, 16
 * writers, alternated 3 times): 1.3-1.6 faults per write on the leader and
 * 0.75-0.99 on a follower, the cluster's CPU per write about a tenth lower.
 * `npm run bench -- --only writes` at concurrency 16, two runs with and one
 * without: 0.93 and 0.96 ms of CPU per write over the replicas against
 * 1.10, 1,562 and 1,505 writes/s against 1,333. The cost is RSS: an idle
 * replica 58-60 MiB instead of 55-56, the leader with 10,000 units 175-180
 * instead of 164 (`--only unit-memory`); at rest with 10,000 deployments
 * 101.5-129.9 MiB (`--only big-state`).
 */
export const REPLICA_ENV: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: '131072',
  GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=8388608:glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2',
};

/** Bundled entries (dist/*.mjs, see bundle.ts) run on plain node; sources through tsx. */
function nodeArgs(layout: ClusterLayout, name: string, script: string, v8Flags: readonly string[] = []): string[] {
  const enter = layout.network?.enter[name] ?? [];
  return script.endsWith('.mjs') ? [...enter, layout.nodeExecPath, ...v8Flags, script] : [...enter, layout.nodeExecPath, ...v8Flags, '--import', 'tsx', script];
}

export function controlPlaneCommands(layout: ClusterLayout): ChildSpec[] {
  const ids = replicaIds(layout.replicas);
  const peers = ids.map((id, i) => `${id}=${wsUrl(hostOf(layout.network, id), replicaPort(layout.basePort, i + 1))}`).join(',');
  return ids.map((id, i) => {
    const port = replicaPort(layout.basePort, i + 1);
    return {
      name: id,
      kind: 'control-plane' as const,
      port,
      env: REPLICA_ENV,
      argv: [
        ...nodeArgs(layout, id, layout.controlPlaneScript ?? CONTROL_PLANE_SCRIPT, REPLICA_V8_FLAGS),
        '--id',
        id,
        '--listen',
        `${hostOf(layout.network, id)}:${port}`,
        '--peers',
        peers,
        '--data-dir',
        subdir(layout.dataDir, id),
        '--token',
        layout.token,
        // The Kubernetes API (control-plane/kube/), its CA shared by all replicas in the data dir.
        '--kube-listen',
        `${hostOf(layout.network, id)}:${port + KUBE_PORT_OFFSET}`,
        '--ca-dir',
        layout.dataDir,
      ],
    };
  });
}

/** Host ports each agent hands its units, in disjoint slices per node on one machine. */
export const UNIT_PORT_BASE = 20000;
export const UNIT_PORTS_PER_NODE = 500;

/**
 * Where node i's Service proxy listens and its units are reached: its own
 * loopback address (127.0.1.<i+1>) so every node can listen on the same
 * nodePort on one machine; under --netns, its namespace's address.
 */
export function nodeAddress(layout: Pick<ClusterLayout, 'network'>, index: number, name: string): string {
  return layout.network?.addresses[name] ?? `127.0.1.${index + 1}`;
}

export function nodeAgentCommands(layout: ClusterLayout): ChildSpec[] {
  const controlPlanes = replicaIds(layout.replicas)
    .map((id, i) => wsUrl(hostOf(layout.network, id), replicaPort(layout.basePort, i + 1)))
    .join(',');
  return layout.nodes.map((node, index) => {
    const argv = [
      ...nodeArgs(layout, node.name, layout.nodeAgentScript ?? NODE_AGENT_SCRIPT),
      '--name',
      node.name,
      '--cpu',
      String(node.capacity.cpu),
      '--memory',
      String(node.capacity.memory),
    ];
    for (const taint of node.taints) argv.push('--taint', formatTaint(taint));
    for (const [key, value] of Object.entries(node.labels)) argv.push('--label', `${key}=${value}`);
    argv.push(
      '--control-plane',
      controlPlanes,
      '--token',
      layout.token,
      '--state-dir',
      subdir(layout.dataDir, 'agents', node.name),
      '--address',
      nodeAddress(layout, index, node.name),
      '--port-range',
      `${UNIT_PORT_BASE + index * UNIT_PORTS_PER_NODE}-${UNIT_PORT_BASE + (index + 1) * UNIT_PORTS_PER_NODE - 1}`,
    );
    return { name: node.name, kind: 'node-agent' as const, argv };
  });
}

/** Replicas first: agents retry until a replica answers, so order only shortens start-up. */
export function clusterCommands(layout: ClusterLayout): ChildSpec[] {
  return [...controlPlaneCommands(layout), ...nodeAgentCommands(layout)];
}

const SHELL_SAFE = /^[A-Za-z0-9_\/.,:=@%+-]+$/;

/** POSIX-shell quoting: safe words stay bare, everything else goes in single quotes. */
export function shellQuote(argv: readonly string[]): string {
  return argv.map((arg) => (SHELL_SAFE.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`)).join(' ');
}
