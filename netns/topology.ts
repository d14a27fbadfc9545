// netns/topology.ts -- builds and removes a cluster's namespaces and links
// (the plan is netns/plan.ts), keeps `<data-dir>/netns.json` (the layout
// the link-control CLI and the chaos scripts read), and runs the cleanup
// guard that removes everything when the launcher dies, SIGKILL included.
//
// Cleanup, three layers, so no namespace or veth outlives its cluster:
// 1. A clean stop (Ctrl-C, SIGTERM): the launcher stops every process, then
//    calls destroyTopology().
// 2. A crash or SIGKILL of the launcher: the cleanup guard (startCleanupGuard),
//    a /bin/sh of ~1 MB in its own session, blocks reading a pipe whose only
//    writer is the launcher. The kernel closes that pipe when the launcher
//    dies by any means; the guard reads EOF and deletes the host veth and
//    every namespace (plan.ts GUARD_SCRIPT). The processes themselves get
//    SIGTERM from their parent-death signal (launcher/supervisor.ts).
// 3. The guard killed too (or the machine lost power mid-run): the next
//    start on the same base port removes the leftovers (removeStale) --
//    unless their owner still runs or processes still live in them, which
//    it refuses, naming the pids.
//
// Ownership: the host veth is created first and carries the owner's pid and
// start time as its alias (plan.ts claimCommands). `ip link add` fails for
// a name that exists, so two launchers on one base port cannot both build;
// the guard is started only after the claim, so a launcher that lost the
// race never tears down the winner's namespaces.
//
// Why processes enter their namespace with `nsenter --net=/var/run/netns/<ns>`
// rather than `ip netns exec <ns>`: both exec the program (the pid the
// launcher holds is node itself), but `ip netns exec` also unshares the mount
// namespace and remounts /sys, which hides /sys/fs/cgroup from the process
// (and from units an agent starts); nsenter switches the network namespace
// and nothing else. Without nsenter (util-linux) we fall back to
// `ip netns exec`.

import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { findBinary, firstLine, run, runOrThrow } from './exec.ts';
import {
  allNamespaces,
  claimCommands,
  enterCommand,
  guardArgs,
  NetnsError,
  overlappingRoutes,
  parseNetnsList,
  parseOwner,
  setupCommands,
  teardownCommands,
  type NetnsLayout,
  type Owner,
} from './plan.ts';
import { readStat } from '../shared/proc.ts';

export const LAYOUT_FILE = 'netns.json';
/** How long a clean stop waits for the guard to exit after closing its pipe. */
export const GUARD_EXIT_WAIT_MS = 3000;

/** The one line `npm start -- --netns` prints (exit 2) for a user who is not root. */
export const NEEDS_ROOT_MESSAGE = '--netns needs root (network namespaces): run as root or without --netns';

/** undefined when this process can manage network namespaces; else why not (one line). */
export async function netnsUnsupported(): Promise<string | undefined> {
  if (process.platform !== 'linux') return '--netns needs Linux network namespaces';
  if (process.getuid?.() !== 0) return NEEDS_ROOT_MESSAGE;
  if (findBinary('ip') === undefined) return '--netns needs the ip command (iproute2)';
  const probe = await run(['ip', 'netns', 'list']);
  if (probe.code !== 0) return `--netns: \`ip netns list\` fails here: ${firstLine(probe.stderr)}`;
  return undefined;
}

/** How a process is run inside its namespace: `nsenter --net=... --` (or `ip netns exec <ns>`). */
export function enterPrefix(netns: string): string[] {
  return enterCommand(netns, findBinary('nsenter') !== undefined);
}

/** This process as an Owner (pid + start time from /proc/self/stat). */
export function selfOwner(): Owner {
  return { pid: process.pid, startTime: startTimeOf(process.pid) ?? '0' };
}

function startTimeOf(pid: number): string | undefined {
  return readStat(pid)?.startTicks;
}

function ownerAlive(owner: Owner): boolean {
  return owner.pid !== process.pid && startTimeOf(owner.pid) === owner.startTime;
}

export async function listNamespaces(): Promise<string[]> {
  return parseNetnsList(await runOrThrow(['ip', 'netns', 'list']));
}

/** Pids of the processes in a namespace (`ip netns pids`); [] when it has none or is gone. */
export async function namespacePids(netns: string): Promise<number[]> {
  const result = await run(['ip', 'netns', 'pids', netns]);
  if (result.code !== 0) return [];
  return result.stdout
    .split(/\s+/)
    .filter((w) => /^\d+$/.test(w))
    .map(Number);
}

async function hostVethAlias(veth: string): Promise<{ exists: boolean; alias?: string }> {
  const result = await run(['ip', '-j', 'link', 'show', 'dev', veth]);
  if (result.code !== 0) return { exists: false };
  try {
    const links = JSON.parse(result.stdout) as Array<{ ifalias?: string }>;
    return { exists: true, alias: links[0]?.ifalias };
  } catch {
    return { exists: true };
  }
}

/**
 * Removes what a crashed run on this base port left: namespaces with the
 * cluster's prefix and its host veth. Throws NetnsError when they are not
 * leftovers: their owner still runs, or processes still live in them.
 * Returns what it removed.
 */
export async function removeStale(layout: NetnsLayout): Promise<string[]> {
  const veth = await hostVethAlias(layout.host.veth);
  const owner = parseOwner(veth.alias);
  if (owner !== undefined && ownerAlive(owner)) {
    throw new NetnsError(`another --netns cluster on base port ${layout.basePort} is running (pid ${owner.pid}); stop it or use another --base-port`);
  }
  const stale = (await listNamespaces()).filter((ns) => ns.startsWith(layout.prefix));
  for (const ns of stale) {
    const pids = await namespacePids(ns);
    if (pids.length > 0) {
      throw new NetnsError(
        `namespace ${ns} from an earlier run still has processes (pids ${pids.slice(0, 10).join(', ')}); ` +
          `stop them (kill ${pids.slice(0, 10).join(' ')}) or use another --base-port`,
      );
    }
  }
  const removed: string[] = [];
  if (veth.exists) {
    await runOrThrow(['ip', 'link', 'del', layout.host.veth], 'removing a stale host veth');
    removed.push(layout.host.veth);
  }
  for (const ns of stale) {
    await runOrThrow(['ip', 'netns', 'del', ns], 'removing a stale namespace');
    removed.push(ns);
  }
  return removed;
}

/** Throws NetnsError when the host already routes any part of the cluster's subnet. */
export async function checkSubnetFree(layout: NetnsLayout): Promise<void> {
  const out = await runOrThrow(['ip', '-j', '-4', 'route', 'show', 'table', 'all']);
  let routes: Array<{ dst?: string; dev?: string; type?: string }>;
  try {
    routes = JSON.parse(out) as typeof routes;
  } catch {
    throw new NetnsError('cannot read the host routes (`ip -j -4 route show table all` printed no JSON)');
  }
  const clash = overlappingRoutes(routes, layout.subnet, layout.host.veth);
  if (clash.length > 0) {
    throw new NetnsError(
      `the cluster's subnet ${layout.subnet} overlaps the host's route ${clash[0]}; ` + `use another --base-port (the subnet's third number is the base port mod 256)`,
    );
  }
}

export interface CreateOptions {
  /** Written into the host veth's alias; default: this process. */
  owner?: Owner;
  /** Called right after the claim succeeded, before anything else is built (start the guard here). */
  onClaimed?: () => void;
}

/**
 * Builds the topology: stale leftovers removed, subnet checked, host veth
 * claimed, namespaces, bridge, veths and addresses made. On any failure after
 * the claim it removes what it built and throws NetnsError.
 */
export async function createTopology(layout: NetnsLayout, options: CreateOptions = {}): Promise<void> {
  await removeStale(layout);
  await checkSubnetFree(layout);
  const claim = claimCommands(layout, options.owner ?? selfOwner());
  const first = await run(['ip', ...claim[0]]);
  if (first.code !== 0) {
    const said = firstLine(first.stderr);
    if (/exists/i.test(said)) {
      throw new NetnsError(`another --netns cluster on base port ${layout.basePort} is starting right now; use another --base-port`);
    }
    throw new NetnsError(`cannot create the host veth ${layout.host.veth}: ${said}`);
  }
  try {
    options.onClaimed?.();
    for (const args of [...claim.slice(1), ...setupCommands(layout)]) {
      await runOrThrow(['ip', ...args], 'building the cluster network');
    }
  } catch (err) {
    await destroyTopology(layout);
    throw err;
  }
}

/**
 * Removes the host veth and every namespace of the layout. Never throws:
 * returns the problems (one line each) other than "already gone".
 */
export async function destroyTopology(layout: NetnsLayout): Promise<string[]> {
  const problems: string[] = [];
  for (const args of teardownCommands(layout)) {
    const result = await run(['ip', ...args]);
    const said = firstLine(result.stderr);
    if (result.code !== 0 && !/cannot find|no such|does not exist/i.test(said)) problems.push(`ip ${args.join(' ')}: ${said}`);
  }
  return problems;
}

/** True while any namespace of the layout, or its host veth, still exists. */
export async function topologyExists(layout: NetnsLayout): Promise<boolean> {
  const names = new Set(await listNamespaces());
  if (allNamespaces(layout).some((ns) => names.has(ns))) return true;
  return (await hostVethAlias(layout.host.veth)).exists;
}

// ---- netns.json ----------------------------------------------------------------

export function writeLayout(dataDir: string, layout: NetnsLayout): string {
  const path = join(dataDir, LAYOUT_FILE);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(layout, null, 2)}\n`);
  renameSync(tmp, path);
  return path;
}

export function removeLayout(dataDir: string): void {
  rmSync(join(dataDir, LAYOUT_FILE), { force: true });
}

/** Reads `<dataDir>/netns.json`; NetnsError naming the problem when it is missing or not a layout. */
export function readLayout(dataDir: string): NetnsLayout {
  const path = join(dataDir, LAYOUT_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new NetnsError(`no ${path}: is a cluster running with \`npm start -- --netns\` on this data dir?`);
    }
    throw new NetnsError(`cannot read ${path}: ${(err as Error).message}`);
  }
  let layout: NetnsLayout;
  try {
    layout = JSON.parse(text) as NetnsLayout;
  } catch {
    throw new NetnsError(`${path} is not JSON`);
  }
  if (layout?.version !== 1 || !Array.isArray(layout.processes) || typeof layout.hub !== 'string') {
    throw new NetnsError(`${path} is not a netns layout (version 1)`);
  }
  return layout;
}

// ---- the cleanup guard ----------------------------------------------------------

export interface CleanupGuard {
  readonly pid: number | undefined;
  /** Closes the pipe (the guard then deletes everything and exits); resolves when it has exited. */
  close(): Promise<void>;
}

/**
 * Starts the guard for `layout` (see the header). `onDied` hears when the
 * guard died while the launcher still runs; it is started again at once.
 */
export function startCleanupGuard(layout: NetnsLayout, onDied: (reason: string) => void = () => {}): CleanupGuard {
  const ip = findBinary('ip') ?? 'ip';
  let child: ChildProcess | null = null;
  let closed = false;
  let exited: Promise<void> = Promise.resolve();

  const launch = (): void => {
    const proc = spawn('/bin/sh', guardArgs(layout, ip), { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    child = proc;
    exited = new Promise((resolve) => {
      proc.once('exit', () => resolve());
      proc.once('error', () => resolve());
    });
    // The guard must not keep the launcher's event loop alive on its own.
    proc.unref();
    (proc.stdin as Socket | null)?.unref();
    proc.stdin?.on('error', () => {});
    const died = (reason: string): void => {
      if (closed || child !== proc) return;
      child = null;
      onDied(reason);
      if (proc.pid !== undefined) launch();
    };
    proc.once('error', (err) => died(`cleanup guard could not start: ${err.message}`));
    proc.once('exit', (code, signal) => died(`cleanup guard exited (${signal ?? `code ${code}`})`));
  };
  launch();

  return {
    get pid() {
      return child?.pid;
    },
    async close() {
      if (closed) return exited;
      closed = true;
      child?.stdin?.end();
      child = null;
      await Promise.race([exited, new Promise((r) => setTimeout(r, GUARD_EXIT_WAIT_MS).unref())]);
    },
  };
}
