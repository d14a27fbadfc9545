// launcher/main.ts -- `npm start`: a local cluster on one machine (see
// docs/contract.md, "npm start: a local cluster on one machine"). Reads the flags, prepares
// the data dir (token, config.json for `npx mo`), checks the ports, starts
// the control-plane replicas and the node agents as separate processes,
// streams their output, prints the next steps once a leader is known, and
// on Ctrl-C / SIGTERM stops every process it started before exiting 0.
//
// Exit status: 0 after a clean stop (or --help); 1 the cluster could not be
// started (port taken, data dir in use or unwritable); 2 bad usage.
//
// --netns (root only): every process runs in its own network namespace on a
// private bridge (netns/plan.ts has the picture and the address plan), so
// `npm run net -- cut cp-1 node-a` can partition any two of them. The
// launcher builds the namespaces before the processes start, writes
// `<data-dir>/netns.json` for `npm run net` and the chaos scripts, and
// removes everything on the way out; a cleanup guard does it if the
// launcher is SIGKILLed (netns/topology.ts).
//
// Test hook (not part of docs/contract.md): MO_LAUNCHER_CP_SCRIPT and
// MO_LAUNCHER_AGENT_SCRIPT replace control-plane/main.ts and
// node-agent/main.ts (paths relative to the repo root) with the same flags;
// test/e2e/launcher.test.ts points them at test/fixtures/fake-child.ts.

import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NodeInfo } from '../shared/model.ts';
import { LESSON_NODES, parseNodesFile } from '../shared/nodes-file.ts';
import { LAUNCHER_USAGE, parseLauncherArgs, UsageError, type LauncherOptions } from './args.ts';
import { DataDirError, ensureToken, lockDataDir, writeClientConfig } from './cluster-files.ts';
import { KUBE_PORT_OFFSET, clusterCommands, kubePorts, kubeServers, nodeAddress, replicaIds, replicaPorts, serverUrls, type ChildSpec, type ClusterNetwork } from './command-lines.ts';
import { ensureCa } from '../control-plane/kube/certs.ts';
import { kubeconfigText } from '../control-plane/kube/kubeconfig.ts';
import { describePortProblem, firstBusyPort } from './ports.ts';
import { waitForCluster } from './readiness.ts';
import { LogStream, shouldUseColor } from './stream.ts';
import { PDEATHSIG_WRAPPER, pdeathsigWrapperWorks, Supervisor } from './supervisor.ts';
import { bundleProcesses } from './bundle.ts';
import { NetnsError, planTopology, type NetnsLayout } from '../netns/plan.ts';
import {
  createTopology,
  destroyTopology,
  enterPrefix,
  netnsUnsupported,
  NEEDS_ROOT_MESSAGE,
  removeLayout,
  startCleanupGuard,
  writeLayout,
  type CleanupGuard,
} from '../netns/topology.ts';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
/**
 * One Ctrl-C can reach the launcher more than once (the terminal signals the
 * whole foreground group, and npm and tsx forward what they get); signals this
 * close to the first count as the same one. A human's second Ctrl-C is slower.
 */
const SAME_SIGNAL_WINDOW_MS = 700;
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Thrown for a problem that stops the start; main prints `launcher: <message>` and exits with `exitCode`. */
class StartError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
  ) {
    super(message);
  }
}

/** Paths the user typed are relative to where they typed them (npm runs us in the repo root but keeps INIT_CWD). */
function userCwd(): string {
  return process.env.INIT_CWD ?? process.cwd();
}

/** The data dir as children see it (cwd = repo root): relative when inside the repo, for readable command lines. */
function dataDirForChildren(absolute: string): string {
  const rel = relative(REPO_ROOT, absolute);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? rel : absolute;
}

/** A path as the user would type it from where they are: relative below their cwd, absolute elsewhere. */
function shortPath(absolute: string): string {
  const rel = relative(userCwd(), absolute);
  if (rel === '') return '.';
  return rel.startsWith('..') || isAbsolute(rel) ? absolute : rel;
}

function loadNodes(options: LauncherOptions): NodeInfo[] {
  if (options.nodesFile === undefined) return LESSON_NODES.map((n) => structuredClone(n));
  const path = resolve(userCwd(), options.nodesFile);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new StartError(`--nodes ${options.nodesFile}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`, 2);
  }
  let nodes: NodeInfo[];
  try {
    nodes = parseNodesFile(text);
  } catch (err) {
    // Parser messages may quote the file over several lines; the user gets the first, which names the cause.
    const firstLine = (err as Error).message.split('\n')[0].trim();
    throw new StartError(`--nodes ${options.nodesFile}: ${firstLine}`, 2);
  }
  if (nodes.length === 0) throw new StartError(`--nodes ${options.nodesFile}: the list has no nodes`, 2);
  // Names are stream prefixes and state-dir names: they must not collide with each other or a replica.
  const taken = new Set(['launcher', ...replicaIds(options.replicas)]);
  for (const node of nodes) {
    if (taken.has(node.name)) throw new StartError(`--nodes ${options.nodesFile}: node name "${node.name}" is used twice or clashes with a replica`, 2);
    taken.add(node.name);
  }
  return nodes;
}

/** --netns: the namespaces and addresses of every process; NetnsError becomes a usage error (a name that cannot be a namespace). */
function planNetwork(options: LauncherOptions, nodes: readonly NodeInfo[]): { layout: NetnsLayout; network: ClusterNetwork } {
  let layout: NetnsLayout;
  try {
    layout = planTopology({
      basePort: options.basePort,
      processes: [
        ...replicaIds(options.replicas).map((name, i) => ({ name, kind: 'control-plane' as const, port: replicaPorts(options.basePort, options.replicas)[i] })),
        ...nodes.map((n) => ({ name: n.name, kind: 'node-agent' as const })),
      ],
    });
  } catch (err) {
    if (err instanceof NetnsError) throw new StartError(`--netns: ${err.message}`, 2);
    throw err;
  }
  const addresses: Record<string, string> = {};
  const enter: Record<string, string[]> = {};
  for (const p of layout.processes) {
    addresses[p.name] = p.address;
    enter[p.name] = enterPrefix(p.netns);
  }
  return { layout, network: { addresses, enter } };
}

function printBanner(
  log: LogStream,
  info: {
    leader?: string;
    replicas: number;
    nodes: number;
    servers: string[];
    dataDir: string;
    pids: Map<string, number>;
    specs: ChildSpec[];
    /** The cluster token, for the dashboard link that logs in. */
    token?: string;
    netns?: { dataDirFlag: string; a: string; b: string };
  },
): void {
  const configPath = join(info.dataDir, 'config.json');
  const defaultConfig = resolve(userCwd(), '.mo', 'config.json');
  const moPrefix = resolve(configPath) === defaultConfig ? '' : `MO_CONFIG=${resolve(configPath)} `;
  const leader = info.leader !== undefined ? `, leader ${info.leader}` : '';
  log.launcher(`==== cluster is up: ${info.replicas} control-plane replica(s)${leader}, ${info.nodes} node agent(s) ====`);
  log.launcher(`  API:    ${info.servers.join('  ')}`);
  if (info.token !== undefined && info.servers[0] !== undefined) {
    log.launcher(`  dashboard: ${info.servers[0]}/#token=${encodeURIComponent(info.token)}  (any replica serves it; the link logs this browser tab in)`);
  }
  log.launcher(`  config: ${configPath} (the CLI reads it; the token is in ${join(info.dataDir, 'token')})`);
  log.launcher(
    `  kubectl: KUBECONFIG=${resolve(join(info.dataDir, 'kubeconfig'))} kubectl get nodes  (the Kubernetes API, HTTPS on ports ${info.servers.map((u) => Number(new URL(u).port) + KUBE_PORT_OFFSET).join(', ')})`,
  );
  log.launcher('next, in another terminal in this folder:');
  for (const cmd of [
    'npx mo get nodes',
    'npx mo apply -f examples/web.yaml',
    'npx mo get units -o wide',
    'npx mo describe deployment web',
    'npx mo get events -w',
    'npx mo cluster status',
  ]) {
    log.launcher(`  ${moPrefix}${cmd}`);
  }
  const victim = info.specs.find((s) => s.name === 'node-b') ?? info.specs.find((s) => s.kind === 'node-agent');
  const victimPid = victim !== undefined ? info.pids.get(victim.name) : undefined;
  if (victim !== undefined && victimPid !== undefined) {
    log.launcher(`  kill -9 ${victimPid}    # ${victim.name} dies: its units are rescheduled on the other nodes`);
  }
  const leaderPid = info.leader !== undefined ? info.pids.get(info.leader) : undefined;
  if (info.replicas > 1 && leaderPid !== undefined) {
    log.launcher(`  kill -9 ${leaderPid}    # the leader ${info.leader} dies: the others elect a new one`);
  }
  if (info.netns !== undefined) {
    const net = `npm run net --${info.netns.dataDirFlag}`;
    log.launcher(`  ${net} cut ${info.netns.a} ${info.netns.b}    # partition: ${info.netns.a} and ${info.netns.b} no longer reach each other`);
    log.launcher(`  ${net} isolate ${info.netns.a}    # cut ${info.netns.a} off from everyone (heal ${info.netns.a} / heal-all undo it)`);
    log.launcher(`  ${net} status    # namespaces, addresses, faults in force`);
  }
  log.launcher('Ctrl-C stops everything.');
}

async function run(): Promise<number> {
  let options: LauncherOptions;
  try {
    options = parseLauncherArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) throw new StartError(err.message, 2);
    throw err;
  }
  if (options.help) {
    process.stdout.write(LAUNCHER_USAGE);
    return 0;
  }
  if (options.netns) {
    const why = await netnsUnsupported();
    if (why !== undefined) throw new StartError(why, why === NEEDS_ROOT_MESSAGE ? 2 : 1);
  }
  const nodes = loadNodes(options);
  const planned = options.netns ? planNetwork(options, nodes) : undefined;
  const dataDirAbs = resolve(userCwd(), options.dataDir);
  const dataDir = dataDirForChildren(dataDirAbs);

  let releaseLock: () => void;
  try {
    releaseLock = lockDataDir(dataDirAbs);
  } catch (err) {
    if (err instanceof DataDirError) throw new StartError(err.message, 1);
    throw new StartError(`cannot use data dir ${dataDir}: ${(err as Error).message}`, 1);
  }
  // --netns: set once the namespaces exist; the finally below removes them on every way out.
  let guard: CleanupGuard | undefined;
  let built = false;
  const removeNetwork = async (): Promise<string[]> => {
    if (planned === undefined) return [];
    const problems = built ? await destroyTopology(planned.layout) : [];
    built = false;
    removeLayout(dataDirAbs);
    await guard?.close();
    return problems;
  };
  try {
    // In --netns mode the replicas listen in namespaces of their own, where every port is free.
    const busy = planned === undefined ? await firstBusyPort([...replicaPorts(options.basePort, options.replicas), ...kubePorts(options.basePort, options.replicas)]) : undefined;
    if (busy !== undefined) throw new StartError(describePortProblem(busy, options.basePort), 1);

    let token: string;
    const servers = serverUrls(options.basePort, options.replicas, planned?.network);
    try {
      token = ensureToken(dataDirAbs).token;
      writeClientConfig(
        dataDirAbs,
        servers,
        token,
        nodes.map((n, i) => ({ name: n.name, address: nodeAddress({ network: planned?.network }, i, n.name) })),
      );
      // The Kubernetes API's CA (made here on the first start, before any replica signs with it) and a kubeconfig for kubectl.
      const ca = ensureCa(dataDirAbs);
      const kubeconfig = join(dataDirAbs, 'kubeconfig');
      writeFileSync(`${kubeconfig}.tmp`, kubeconfigText({ clusterName: 'mo', servers: kubeServers(options.basePort, options.replicas, planned?.network), caPem: ca.certPem, token }), {
        mode: 0o600,
      });
      renameSync(`${kubeconfig}.tmp`, kubeconfig);
      for (const id of replicaIds(options.replicas)) mkdirSync(join(dataDirAbs, id), { recursive: true });
      for (const node of nodes) mkdirSync(join(dataDirAbs, 'agents', node.name), { recursive: true });
    } catch (err) {
      throw new StartError((err as Error).message, 1);
    }

    const bundled = process.env.MO_LAUNCHER_CP_SCRIPT || process.env.MO_LAUNCHER_AGENT_SCRIPT ? null : await bundleProcesses(REPO_ROOT);
    const specs = clusterCommands({
      nodeExecPath: process.execPath,
      dataDir,
      basePort: options.basePort,
      replicas: options.replicas,
      token,
      nodes,
      controlPlaneScript: process.env.MO_LAUNCHER_CP_SCRIPT || bundled?.controlPlane,
      nodeAgentScript: process.env.MO_LAUNCHER_AGENT_SCRIPT || bundled?.nodeAgent,
      network: planned?.network,
    });
    // Once the reader of the stream is gone (`npm start | head`, a closed pipe), writes are dropped, not retried.
    let outputOpen = true;
    const sink = { write: (text: string): void => void (outputOpen && process.stdout.write(text)) };
    const log = new LogStream(
      sink,
      specs.map((s) => s.name),
      shouldUseColor(process.stdout.isTTY, process.env),
    );
    const pdeathsig = pdeathsigWrapperWorks();
    const supervisor = new Supervisor({
      cwd: REPO_ROOT,
      env: process.env,
      log,
      restartAfterMs: options.restartAfterMs,
      wrapper: pdeathsig ? PDEATHSIG_WRAPPER : [],
    });

    const clusterWait = new AbortController();
    let firstStopSignalAt: number | undefined;
    let resolveStopRequested!: () => void;
    const stopRequested = new Promise<void>((r) => (resolveStopRequested = r));
    const requestStop = (why: string): void => {
      if (firstStopSignalAt === undefined) {
        firstStopSignalAt = Date.now();
        log.launcher(`${why}: stopping the cluster (Ctrl-C again to kill everything at once)`);
        clusterWait.abort();
        resolveStopRequested();
        return;
      }
      if (Date.now() - firstStopSignalAt < SAME_SIGNAL_WINDOW_MS) return;
      log.launcher(`${why} again: SIGKILL to every process of the cluster`);
      supervisor.killAll();
    };
    for (const sig of STOP_SIGNALS) process.on(sig, () => requestStop(sig));
    // Whoever reads the stream went away: nobody can watch the cluster, so stop it (once, gracefully).
    process.stdout.on('error', () => {
      if (!outputOpen) return;
      outputOpen = false;
      requestStop('output closed');
    });

    if (planned !== undefined) {
      const { layout } = planned;
      try {
        await createTopology(layout, {
          onClaimed: () => {
            guard = startCleanupGuard(layout, (reason) => log.launcher(`netns: ${reason}; started a new one`));
          },
        });
      } catch (err) {
        if (err instanceof NetnsError) throw new StartError(`--netns: ${err.message}`, 1);
        throw err;
      }
      built = true;
      writeLayout(dataDirAbs, layout);
      log.launcher(
        `netns: ${layout.processes.length} namespaces ${layout.prefix}<name> on a bridge in ${layout.hub}, subnet ${layout.subnet} ` +
          `(host ${layout.host.address} on ${layout.host.veth}); layout in ${shortPath(join(dataDirAbs, 'netns.json'))}; ` +
          `cleanup guard pid ${guard?.pid ?? '?'}`,
      );
    }
    log.launcher(
      `data dir ${shortPath(dataDirAbs)}; ${options.replicas} replica(s) on ` +
        `${planned !== undefined ? servers.map((u) => u.replace(/^http:\/\//, '')).join(', ') : `ports ${replicaPorts(options.basePort, options.replicas).join(', ')}`}; ${nodes.length} node(s)` +
        (options.restartAfterMs !== undefined ? `; --restart-after ${options.restartAfterMs / 1000} s` : '') +
        (pdeathsig ? '' : '; setpriv not found: children outlive a SIGKILLed launcher'),
    );
    for (const spec of specs) supervisor.start(spec);

    void waitForCluster({
      servers,
      token,
      signal: clusterWait.signal,
      onSlow: (missing) => log.launcher(`still waiting for the cluster: ${missing}`),
    }).then((up) => {
      if (up === undefined) return;
      printBanner(log, {
        leader: up.leader,
        replicas: options.replicas,
        nodes: nodes.length,
        servers,
        token,
        dataDir: shortPath(dataDirAbs),
        pids: supervisor.pids(),
        specs,
        netns:
          planned !== undefined && planned.layout.processes.length > options.replicas
            ? {
                dataDirFlag: resolve(dataDirAbs) === resolve(userCwd(), '.mo') ? '' : ` --data-dir ${shortPath(dataDirAbs)}`,
                a: 'cp-1',
                b: planned.layout.processes[options.replicas].name,
              }
            : undefined,
      });
    });

    await stopRequested;
    await supervisor.stop();
    log.launcher('stopped: every process of the cluster has exited');
    if (planned !== undefined) {
      const problems = await removeNetwork();
      for (const problem of problems) log.launcher(`netns: could not remove: ${problem}`);
      log.launcher(problems.length === 0 ? `netns: removed the namespaces ${planned.layout.prefix}* and ${planned.layout.host.veth}` : 'netns: some parts are left (above)');
    }
    return 0;
  } finally {
    await removeNetwork();
    releaseLock();
  }
}

run().then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof StartError) {
      process.stderr.write(`launcher: ${err.message}\n`);
      process.exit(err.exitCode);
    }
    // A bug: say so; children still die with us (pdeathsig).
    process.stderr.write(`launcher: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
