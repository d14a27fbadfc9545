// netns/plan.ts -- the pure half of `npm start -- --netns`: which network
// namespaces, links and addresses a cluster gets, and the exact `ip`, `tc`
// and `iptables` command lines that build, cut, slow down and tear down its
// links. Pure: data in, argv arrays and parsed values out (no node:*, no
// clock), so unit tests pin every command; netns/topology.ts and
// netns/links.ts run them.
//
// The picture (base port 7000, so the subnet is 10.213.88.0/24, 7000 % 256 = 88):
//
//   host (root namespace)          mo-7000-hub                   mo-7000-cp-1
//   mo-7000-host 10.213.88.1 ==== mo-7000-up ─┐             ┌─ p0 ==== eth0 10.213.88.11 (cp-1 :7001)
//                                             ├─ br0 bridge ─┤         mo-7000-node-a
//                                                            └─ p3 ==== eth0 10.213.88.21 (node-a)
//
// * One namespace per process (`mo-<basePort>-<name>`) with loopback up and
//   one veth (`eth0`) whose other end (`p<ordinal>`) is a port of the bridge
//   in the hub namespace (`mo-<basePort>-hub`). The host gets one veth into
//   the hub as well (`mo-<basePort>-host`, address .1), so the launcher's
//   readiness probes and the user's `npx mo` reach the replicas.
// * Addresses: replicas .11-.19, agents .21-.254, host .1, in
//   10.213.<basePort % 256>.0/24. That subnet exists only on these links: the
//   launcher refuses to start if the host already routes any part of it (a
//   real network, or another --netns cluster whose base port has the same
//   remainder). Nothing here ever sends to, or routes, any other address.
// * The per-cluster prefix `mo-<basePort>-` names every namespace, so a
//   crashed run's leftovers are found (and removed) by the next start on the
//   same base port, and two clusters on different base ports never touch
//   each other's namespaces.
//
// Link faults live only inside the process namespaces, never on the host:
// * cut A B: iptables DROP in A's namespace for packets to B and in B's for
//   packets to A (OUTPUT chain, tagged `--comment mo-cut`). Packets vanish
//   silently, as in a real partition: connects hang until their timeout,
//   open connections stall; nothing answers with an error. (A blackhole route
//   would fail connects at once with EINVAL, which no real partition does.)
// * loss A B P%: the same place, `-m statistic --mode random --probability`,
//   tagged `mo-loss`: each direction loses P% of its packets.
// * delay A B D: tc netem on A's eth0 for packets to B and on B's for packets
//   to A, so each direction takes D longer (the round trip 2*D). A classful
//   root (htb, default class unshaped) sends only packets for B (u32 match on
//   the destination) through a class whose leaf is netem. Needs the kernel's
//   sch_netem; without it, delay fails with a message saying so (cut and
//   loss do not need tc at all).
// The kernel is the record of what is in force: `status` reads the rules
// back (iptables -S, tc qdisc show) rather than trusting a file.

/** Every address the plan hands out is in 10.213.0.0/16 (private, RFC 1918). */
export const SUBNET_FIRST_OCTETS = '10.213';
export const HOST_HOST_PART = 1;
export const FIRST_REPLICA_HOST_PART = 11;
export const MAX_REPLICAS_IN_NETNS = 9;
export const FIRST_AGENT_HOST_PART = 21;
export const LAST_HOST_PART = 254;
/** .21 to .254: the most agents one /24 holds. */
export const MAX_AGENTS_IN_NETNS = LAST_HOST_PART - FIRST_AGENT_HOST_PART + 1;
/** The interface name inside each process namespace. */
export const PROCESS_IFACE = 'eth0';
export const BRIDGE = 'br0';
/** Namespace names are file names under /var/run/netns (NAME_MAX 255); keep well below. */
export const MAX_NETNS_NAME_CHARS = 200;
export const NETNS_RUN_DIR = '/var/run/netns';
/** iptables comments that mark our rules (status and heal find them by these). */
export const CUT_TAG = 'mo-cut';
export const LOSS_TAG = 'mo-loss';
/** Longest delay one `delay` accepts: beyond a minute nothing is "slow", it is gone (use cut). */
export const MAX_DELAY_MS = 60_000;
/** Rate of the htb classes: high enough to never shape, only to carry netem. */
export const HTB_RATE = '10gbit';
const HTB_QUANTUM = '60000';
/** tc class minors (hex) and filter prefs: one per peer, from its ordinal. */
const CLASS_MINOR_BASE = 0x100;
const FILTER_PREF_BASE = 100;

export type ProcessKind = 'control-plane' | 'node-agent';

export interface ProcessNet {
  /** The name users know it by: `cp-1`, `node-a`. */
  name: string;
  kind: ProcessKind;
  /** Its network namespace: `mo-7000-cp-1`. */
  netns: string;
  /** Its address on eth0 (no prefix length): `10.213.88.11`. */
  address: string;
  /** The bridge port in the hub namespace: `p0`. */
  hubVeth: string;
  /** Position in `processes`: gives tc class and filter numbers. */
  ordinal: number;
  /** The port a replica serves on (replicas only). */
  port?: number;
}

/** What `<data-dir>/netns.json` holds; everything the link-control CLI and the chaos scripts need. */
export interface NetnsLayout {
  version: 1;
  basePort: number;
  /** `mo-7000-`: every namespace of this cluster starts with it. */
  prefix: string;
  /** `10.213.88.0/24`. */
  subnet: string;
  prefixLength: 24;
  hub: string;
  bridge: string;
  /** The host's veth (root namespace) and its address; `uplink` is its other end, a bridge port in the hub. */
  host: { veth: string; address: string; uplink: string };
  processes: ProcessNet[];
}

/** A problem the user must fix (bad name, too many nodes, unknown process, bad value): one line. */
export class NetnsError extends Error {
  override readonly name = 'NetnsError';
}

export interface PlanInput {
  basePort: number;
  /** In start order; replicas get .11+, agents .21+. */
  processes: ReadonlyArray<{ name: string; kind: ProcessKind; port?: number }>;
}

const PROCESS_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const RESERVED_NAMES = new Set(['hub', 'host']);

export function clusterPrefix(basePort: number): string {
  return `mo-${basePort}-`;
}

/** The third octet of the cluster's subnet. */
export function subnetOctet(basePort: number): number {
  return basePort % 256;
}

export function subnetOf(basePort: number): string {
  return `${SUBNET_FIRST_OCTETS}.${subnetOctet(basePort)}.0/24`;
}

export function hostVethName(basePort: number): string {
  return `${clusterPrefix(basePort)}host`;
}

/** Lays out the namespaces and addresses of a cluster. Throws NetnsError naming what does not fit. */
export function planTopology(input: PlanInput): NetnsLayout {
  const { basePort } = input;
  if (!Number.isInteger(basePort) || basePort < 1 || basePort > 65535) {
    throw new NetnsError(`base port must be a whole number between 1 and 65535, got ${basePort}`);
  }
  const prefix = clusterPrefix(basePort);
  const net = `${SUBNET_FIRST_OCTETS}.${subnetOctet(basePort)}`;
  const seen = new Set<string>();
  let replicas = 0;
  let agents = 0;
  const processes = input.processes.map((p, ordinal): ProcessNet => {
    if (!PROCESS_NAME.test(p.name)) {
      throw new NetnsError(`process name "${p.name}" cannot name a network namespace (lower-case letters, digits, '-' and '.')`);
    }
    if (RESERVED_NAMES.has(p.name)) throw new NetnsError(`process name "${p.name}" is reserved in --netns mode (the ${p.name} namespace)`);
    if (seen.has(p.name)) throw new NetnsError(`process name "${p.name}" is used twice`);
    seen.add(p.name);
    const netns = prefix + p.name;
    if (netns.length > MAX_NETNS_NAME_CHARS) throw new NetnsError(`process name "${p.name.slice(0, 40)}..." is too long for a namespace name`);
    let hostPart: number;
    if (p.kind === 'control-plane') {
      if (replicas >= MAX_REPLICAS_IN_NETNS) throw new NetnsError(`--netns holds at most ${MAX_REPLICAS_IN_NETNS} replicas`);
      hostPart = FIRST_REPLICA_HOST_PART + replicas++;
    } else {
      if (agents >= MAX_AGENTS_IN_NETNS) {
        throw new NetnsError(`--netns holds at most ${MAX_AGENTS_IN_NETNS} node agents (one /24 subnet), got more`);
      }
      hostPart = FIRST_AGENT_HOST_PART + agents++;
    }
    const entry: ProcessNet = { name: p.name, kind: p.kind, netns, address: `${net}.${hostPart}`, hubVeth: `p${ordinal}`, ordinal };
    if (p.port !== undefined) entry.port = p.port;
    return entry;
  });
  return {
    version: 1,
    basePort,
    prefix,
    subnet: subnetOf(basePort),
    prefixLength: 24,
    hub: `${prefix}hub`,
    bridge: BRIDGE,
    host: { veth: hostVethName(basePort), address: `${net}.${HOST_HOST_PART}`, uplink: `${prefix}up` },
    processes,
  };
}

/** Every namespace of the layout, the hub first (it must exist before any veth into it). */
export function allNamespaces(layout: NetnsLayout): string[] {
  return [layout.hub, ...layout.processes.map((p) => p.netns)];
}

export function findProcess(layout: NetnsLayout, name: string): ProcessNet {
  const found = layout.processes.find((p) => p.name === name);
  if (found === undefined) {
    throw new NetnsError(`no process "${name}" in this cluster (there are: ${layout.processes.map((p) => p.name).join(', ')})`);
  }
  return found;
}

/** The argv prefix that runs a program in a process's namespace (see netns/topology.ts for why nsenter). */
export function enterCommand(netns: string, useNsenter: boolean): string[] {
  return useNsenter ? ['nsenter', `--net=${NETNS_RUN_DIR}/${netns}`, '--'] : ['ip', 'netns', 'exec', netns];
}

// ---- building and tearing down -------------------------------------------

/**
 * Who owns a cluster's namespaces, written as the alias of its host veth:
 * a pid plus that process's start time (field 22 of /proc/<pid>/stat), so a
 * recycled pid never passes for the owner.
 */
export interface Owner {
  pid: number;
  startTime: string;
}

export function formatOwner(owner: Owner): string {
  return `mo-netns-owner pid=${owner.pid} start=${owner.startTime}`;
}

export function parseOwner(alias: string | undefined): Owner | undefined {
  const m = /^mo-netns-owner pid=(\d+) start=(\d+)$/.exec(alias ?? '');
  return m ? { pid: Number(m[1]), startTime: m[2] } : undefined;
}

/**
 * The claim: the host veth pair, made first. `ip link add` of a name that
 * exists fails, so of two launchers racing for one base port exactly one
 * gets it; its alias names the owner for later starts to check.
 */
export function claimCommands(layout: NetnsLayout, owner: Owner): string[][] {
  const { host } = layout;
  return [
    ['link', 'add', host.veth, 'type', 'veth', 'peer', 'name', host.uplink],
    ['link', 'set', host.veth, 'alias', formatOwner(owner)],
  ];
}

/** `ip` argument lists (without the leading `ip`) that build the rest, in order, after claimCommands. */
export function setupCommands(layout: NetnsLayout): string[][] {
  const { hub, bridge, host } = layout;
  const cmds: string[][] = [];
  for (const ns of allNamespaces(layout)) cmds.push(['netns', 'add', ns]);
  cmds.push(
    ['-n', hub, 'link', 'add', bridge, 'type', 'bridge'],
    ['-n', hub, 'link', 'set', bridge, 'up'],
    ['-n', hub, 'link', 'set', 'lo', 'up'],
    ['link', 'set', host.uplink, 'netns', hub],
    ['-n', hub, 'link', 'set', host.uplink, 'master', bridge, 'up'],
    ['addr', 'add', `${host.address}/${layout.prefixLength}`, 'dev', host.veth],
    ['link', 'set', host.veth, 'up'],
  );
  for (const p of layout.processes) {
    cmds.push(
      // Made inside the hub with the peer born inside the process namespace:
      // neither name ever exists in the root namespace, so clusters cannot clash.
      ['-n', hub, 'link', 'add', p.hubVeth, 'type', 'veth', 'peer', 'name', PROCESS_IFACE, 'netns', p.netns],
      ['-n', hub, 'link', 'set', p.hubVeth, 'master', bridge, 'up'],
      ['-n', p.netns, 'link', 'set', 'lo', 'up'],
      ['-n', p.netns, 'addr', 'add', `${p.address}/${layout.prefixLength}`, 'dev', PROCESS_IFACE],
      ['-n', p.netns, 'link', 'set', PROCESS_IFACE, 'up'],
    );
  }
  return cmds;
}

/**
 * `ip` argument lists that remove the topology. Deleting a namespace's name
 * frees it once no process is left in it, and with it the veths it holds;
 * the host veth goes first so the host route disappears at once.
 */
export function teardownCommands(layout: NetnsLayout): string[][] {
  return [
    ['link', 'del', layout.host.veth],
    ...allNamespaces(layout)
      .reverse()
      .map((ns) => ['netns', 'del', ns]),
  ];
}

/**
 * The cleanup guard: a /bin/sh that blocks reading its stdin (a pipe whose
 * only writer is the launcher) and, at EOF -- the launcher exited, or was
 * SIGKILLed and the kernel closed its end -- deletes the host veth and every
 * namespace. Arguments: $1 the ip binary, $2 the host veth, then namespaces.
 * It ignores INT/TERM/HUP/PIPE so the Ctrl-C that stops the launcher cannot
 * stop it before its work is done; its only way out of the loop is EOF.
 */
export const GUARD_SCRIPT = `
trap '' INT TERM HUP PIPE
while IFS= read -r _line; do :; done
ip=$1; veth=$2; shift 2
"$ip" link del "$veth" 2>/dev/null
for ns in "$@"; do "$ip" netns del "$ns" 2>/dev/null; done
exit 0
`;

export function guardArgs(layout: NetnsLayout, ipPath: string): string[] {
  return ['-c', GUARD_SCRIPT, 'mo-netns-guard', ipPath, layout.host.veth, ...allNamespaces(layout).reverse()];
}

/** Names from `ip netns list` output (`name` or `name (id: 3)` per line). */
export function parseNetnsList(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((name) => name !== '');
}

// ---- the subnet check ------------------------------------------------------

function ipToNumber(ip: string): number | undefined {
  const parts = ip.split('.');
  if (parts.length !== 4) return undefined;
  let n = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined;
    n = n * 256 + Number(part);
  }
  return n;
}

/** [first, last] address of a `a.b.c.d/len` (or a bare address = /32). */
export function cidrRange(cidr: string): [number, number] | undefined {
  const [ip, lenText] = cidr.split('/');
  const len = lenText === undefined ? 32 : Number(lenText);
  const base = ipToNumber(ip ?? '');
  if (base === undefined || !Number.isInteger(len) || len < 0 || len > 32) return undefined;
  const size = 2 ** (32 - len);
  const first = base - (base % size);
  return [first, first + size - 1];
}

/**
 * Routes of the host (`ip -j -4 route show table all`, parsed) that overlap
 * `subnet`. Ignored: default routes (they overlap everything) and the
 * routes of `ownVeth` (ours, when the check runs again).
 */
export function overlappingRoutes(routes: ReadonlyArray<{ dst?: string; dev?: string; type?: string }>, subnet: string, ownVeth: string): string[] {
  const mine = cidrRange(subnet);
  if (mine === undefined) return [];
  const out: string[] = [];
  for (const r of routes) {
    if (r.dst === undefined || r.dst === 'default' || r.dev === ownVeth) continue;
    const range = cidrRange(r.dst);
    if (range === undefined || (range[0] === 0 && range[1] === 2 ** 32 - 1)) continue;
    if (range[0] <= mine[1] && mine[0] <= range[1]) out.push(`${r.type && r.type !== 'unicast' ? `${r.type} ` : ''}${r.dst}${r.dev ? ` dev ${r.dev}` : ''}`);
  }
  return out;
}

// ---- link faults -------------------------------------------------------------

/** A program and its arguments, to run in the root namespace. */
export type Command = string[];

function inNs(netns: string, argv: string[]): Command {
  return ['ip', 'netns', 'exec', netns, ...argv];
}

function dropRuleSpec(to: ProcessNet, tag: string, probability?: number): string[] {
  const spec = ['-d', `${to.address}/32`];
  if (probability !== undefined) spec.push('-m', 'statistic', '--mode', 'random', '--probability', formatProbability(probability));
  spec.push('-m', 'comment', '--comment', tag, '-j', 'DROP');
  return spec;
}

/** iptables prints probabilities with 11 decimals; we write the same so -D finds what -A added. */
export function formatProbability(p: number): string {
  return p.toFixed(11);
}

/** Appends the DROP rule in `from`'s namespace for packets to `to`. */
export function cutOneWay(from: ProcessNet, to: ProcessNet): Command {
  return inNs(from.netns, ['iptables', '-w', '-A', 'OUTPUT', ...dropRuleSpec(to, CUT_TAG)]);
}

export function lossOneWay(from: ProcessNet, to: ProcessNet, percent: number): Command {
  return inNs(from.netns, ['iptables', '-w', '-A', 'OUTPUT', ...dropRuleSpec(to, LOSS_TAG, percent / 100)]);
}

/** Lists the OUTPUT rules of a namespace (parsed by parseDropRules). */
export function listRulesCommand(p: ProcessNet): Command {
  return inNs(p.netns, ['iptables', '-w', '-S', 'OUTPUT']);
}

export interface DropRule {
  kind: 'cut' | 'loss';
  /** Destination address. */
  to: string;
  /** Loss only: 0 < percent < 100. */
  percent?: number;
  /** The rule as `iptables -S` printed it, minus `-A OUTPUT` (what -D needs). */
  spec: string[];
}

/** Our rules from `iptables -S OUTPUT` output; anyone else's are left alone. */
export function parseDropRules(text: string): DropRule[] {
  const out: DropRule[] = [];
  for (const line of text.split('\n')) {
    const words = line.trim().split(/\s+/);
    if (words[0] !== '-A' || words[1] !== 'OUTPUT') continue;
    const spec = words.slice(2);
    const comment = spec[spec.indexOf('--comment') + 1];
    if (!spec.includes('--comment') || (comment !== CUT_TAG && comment !== LOSS_TAG)) continue;
    const dst = spec[spec.indexOf('-d') + 1];
    if (!spec.includes('-d') || dst === undefined) continue;
    const to = dst.replace(/\/32$/, '');
    if (comment === CUT_TAG) {
      out.push({ kind: 'cut', to, spec });
    } else {
      const prob = Number(spec[spec.indexOf('--probability') + 1]);
      out.push({ kind: 'loss', to, percent: Math.round(prob * 100 * 1000) / 1000, spec });
    }
  }
  return out;
}

export function deleteRuleCommand(p: ProcessNet, rule: DropRule): Command {
  return inNs(p.netns, ['iptables', '-w', '-D', 'OUTPUT', ...rule.spec]);
}

/** tc class minor (hex, as tc reads it) for packets to `to`. */
export function delayClassMinor(to: ProcessNet): string {
  return (CLASS_MINOR_BASE + to.ordinal).toString(16);
}

export function delayFilterPref(to: ProcessNet): number {
  return FILTER_PREF_BASE + to.ordinal;
}

/** The classful root under which per-destination netem classes hang; class 1:1 (default) is unshaped. */
export function delayRootCommands(from: ProcessNet): Command[] {
  const dev = ['dev', PROCESS_IFACE];
  return [
    ['tc', '-n', from.netns, 'qdisc', 'add', ...dev, 'root', 'handle', '1:', 'htb', 'default', '1'],
    ['tc', '-n', from.netns, 'class', 'add', ...dev, 'parent', '1:', 'classid', '1:1', 'htb', 'rate', HTB_RATE, 'quantum', HTB_QUANTUM],
  ];
}

/** Class, netem leaf and filter for packets from `from` to `to` (run after delayRootCommands). */
export function delayOneWay(from: ProcessNet, to: ProcessNet, delayMs: number): Command[] {
  const dev = ['dev', PROCESS_IFACE];
  const minor = delayClassMinor(to);
  return [
    ['tc', '-n', from.netns, 'class', 'add', ...dev, 'parent', '1:', 'classid', `1:${minor}`, 'htb', 'rate', HTB_RATE, 'quantum', HTB_QUANTUM],
    ['tc', '-n', from.netns, 'qdisc', 'add', ...dev, 'parent', `1:${minor}`, 'handle', `${minor}:`, 'netem', 'delay', `${delayMs}ms`],
    [
      'tc',
      '-n',
      from.netns,
      'filter',
      'add',
      ...dev,
      'parent',
      '1:',
      'pref',
      String(delayFilterPref(to)),
      'protocol',
      'ip',
      'u32',
      'match',
      'ip',
      'dst',
      `${to.address}/32`,
      'flowid',
      `1:${minor}`,
    ],
  ];
}

/** Removes the delay from `from` to `to` (filter, then the class with its netem leaf). */
export function undelayOneWay(from: ProcessNet, to: ProcessNet): Command[] {
  const dev = ['dev', PROCESS_IFACE];
  return [
    ['tc', '-n', from.netns, 'filter', 'del', ...dev, 'parent', '1:', 'pref', String(delayFilterPref(to))],
    ['tc', '-n', from.netns, 'class', 'del', ...dev, 'classid', `1:${delayClassMinor(to)}`],
  ];
}

export function delayRootRemoveCommand(from: ProcessNet): Command {
  return ['tc', '-n', from.netns, 'qdisc', 'del', 'dev', PROCESS_IFACE, 'root'];
}

export function qdiscShowCommand(from: ProcessNet): Command {
  return ['tc', '-n', from.netns, 'qdisc', 'show', 'dev', PROCESS_IFACE];
}

export interface DelayRule {
  /** The peer's ordinal (from the class minor). */
  toOrdinal: number;
  /** As tc prints it: `200ms`, `1s`. */
  delay: string;
}

/** Our netem leaves from `tc qdisc show dev eth0`, plus whether our htb root is there. */
export function parseQdiscs(text: string): { hasRoot: boolean; delays: DelayRule[] } {
  let hasRoot = false;
  const delays: DelayRule[] = [];
  for (const line of text.split('\n')) {
    if (/^qdisc htb 1: root\b/.test(line)) hasRoot = true;
    const m = /^qdisc netem \S+ parent 1:([0-9a-f]+)\b.*?\bdelay (\S+)/.exec(line);
    if (m) delays.push({ toOrdinal: parseInt(m[1], 16) - CLASS_MINOR_BASE, delay: m[2] });
  }
  return { hasRoot, delays };
}

// ---- values from the command line ------------------------------------------

/** `200ms`, `1.5s`, `200` (ms) -> milliseconds; throws NetnsError. */
export function parseDelay(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(text.trim());
  if (!m) throw new NetnsError(`delay wants a duration like 200ms or 1.5s, got "${text}"`);
  const ms = Math.round(Number(m[1]) * (m[2] === 's' ? 1000 : 1));
  if (ms <= 0 || ms > MAX_DELAY_MS) throw new NetnsError(`delay must be more than 0 and at most ${MAX_DELAY_MS / 1000}s, got "${text}"`);
  return ms;
}

/** `30%`, `30`, `0.5%` -> percent; 0 < p <= 100 (100% is a one-way cut by other means: use cut). */
export function parseLoss(text: string): number {
  const m = /^(\d+(?:\.\d+)?)%?$/.exec(text.trim());
  if (!m) throw new NetnsError(`loss wants a percentage like 30%, got "${text}"`);
  const p = Number(m[1]);
  if (p <= 0 || p >= 100) throw new NetnsError(`loss must be more than 0% and less than 100% (100% is a cut), got "${text}"`);
  return p;
}
