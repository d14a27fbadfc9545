// control-plane/main.ts -- one control-plane replica as an OS process: the
// shell that wires the pure parts (desired-state machine, scheduler,
// reconciler) to their effects (disk, HTTP, WebSocket, timers).
//
//   npx tsx control-plane/main.ts --id cp-1 --listen 127.0.0.1:7001 \
//       --peers cp-1=ws://127.0.0.1:7001,... --data-dir DIR --token T
//
// One port serves the HTTP API, the agents' WebSocket (/agent) and, with
// several replicas, the Raft peers' WebSocket (/raft).

import type { ReplicaSelfView } from '../shared/api-types.ts';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseCommandLine, signedInteger, wholeNumber } from '../shared/flags.ts';
import { makeLogger, writeOut } from '../shared/log.ts';
import { AgentServer } from './agent-server.ts';
import { ApiServer } from './api/http-server.ts';
import { Controller, DEFAULT_CONTROLLER_OPTIONS } from './controller/controller.ts';
import { EventLog } from './events.ts';
import { ServicePublisher } from './services/publisher.ts';
import { NodeRegistry } from './registry/node-registry.ts';
import { Scheduler } from './scheduler/index.ts';
import { DEFAULT_RAFT_TIMING, RaftStore, SNAPSHOT_EVERY_ENTRIES } from './store/raft-store.ts';
import { LeaderWait } from './store/leader-wait.ts';
import type { ReplicatedStore } from './store/store.ts';
import { forwardToLeader, gatherClusterStatus } from './api/leader-routing.ts';
import { serveUnitLog } from './api/logs.ts';
import { ReplicaMetrics } from './api/metrics.ts';
import { makeDashboard } from './api/dashboard.ts';
import { EventLoopWindows } from './event-loop-windows.ts';
import { startRestCollection } from './rest-collect.ts';
import { ensureCa, servingCert } from './kube/certs.ts';
import { kubeconfigText } from './kube/kubeconfig.ts';
import { KubeApi, kubeServer } from './kube/server.ts';
import { isDnsLabel } from '../shared/notation.ts';
import { followLeadership, nodeRegistrar } from './leadership.ts';
import { DEFAULT_REPLICA_NICE, MAX_NICE, MIN_NICE, RolePriority } from './priority.ts';

const log = makeLogger();

function usage(msg: string): never {
  process.stderr.write(
    `control-plane: ${msg}\nusage: control-plane/main.ts --id ID --listen HOST:PORT [--peers id=ws://host:port,...] [--data-dir DIR] [--token T]\n       [--not-ready-after-ms 1000] [--heartbeat-interval-ms 200] [--max-actions-per-pass 500] [--resync-interval-ms 1000]\n       [--grace-period-ms 2000] [--snapshot-every 10000] [--nice -10]\n       [--kube-listen HOST:PORT [--ca-dir DIR] [--kube-san NAME,...] [--kube-advertise https://HOST:PORT]] [--tls true]\n       control-plane/main.ts --make-ca DIR\n`,
  );
  process.exit(2);
}

function intFlag(name: string, v: string | undefined, dflt: number, min = 1): number {
  if (v === undefined) return dflt;
  const n = wholeNumber(v, min);
  if (n === undefined) usage(`--${name}: expected an integer >= ${min}, got "${v}"`);
  return n;
}

function niceFlag(v: string | undefined): number {
  if (v === undefined) return DEFAULT_REPLICA_NICE;
  const n = signedInteger(v, MIN_NICE, MAX_NICE);
  if (n === undefined) usage(`--nice: expected an integer ${MIN_NICE}..${MAX_NICE}, got "${v}"`);
  return n;
}

interface Config {
  id: string;
  host: string;
  port: number;
  peers: Map<string, string>;
  dataDir: string;
  token: string;
  notReadyAfterMs: number;
  heartbeatIntervalMs: number;
  maxActionsPerPass: number;
  resyncIntervalMs: number;
  gracePeriodMs: number;
  snapshotEvery: number;
  /** The nice value the replica asks for on every thread (priority.ts). */
  nice: number;
  /** The main port (/v1, /agent, /raft) over TLS with a certificate of the cluster CA (docs/kubernetes-api.md, "TLS"). */
  tls: boolean;
  /** More names and addresses for this replica's serving certificates (--kube-san). */
  sans: string[];
  /** The Kubernetes API (control-plane/kube/): HTTPS on this address; absent: not served. */
  kube?: { host: string; port: number; caDir: string; sans: string[]; advertise?: string };
}

function config(): Config {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseCommandLine(
      process.argv.slice(2),
      {
        id: { type: 'string' },
        listen: { type: 'string' },
        peers: { type: 'string' },
        'data-dir': { type: 'string' },
        token: { type: 'string' },
        'not-ready-after-ms': { type: 'string' },
        'heartbeat-interval-ms': { type: 'string' },
        'max-actions-per-pass': { type: 'string' },
        'resync-interval-ms': { type: 'string' },
        'grace-period-ms': { type: 'string' },
        'snapshot-every': { type: 'string' },
        nice: { type: 'string' },
        'kube-listen': { type: 'string' },
        'ca-dir': { type: 'string' },
        'kube-san': { type: 'string' },
        'kube-advertise': { type: 'string' },
        tls: { type: 'string' },
        'make-ca': { type: 'string' },
      },
      { wording: { unknown: (flag) => `unknown flag ${flag}` } },
    ));
  } catch (e) {
    usage((e as Error).message);
  }
  const env = process.env;
  if (values['make-ca'] !== undefined) {
    // One-shot: make (or keep) the cluster CA in DIR and exit, so processes can trust it from their start (NODE_EXTRA_CA_CERTS).
    const dir = path.resolve(values['make-ca']);
    ensureCa(dir);
    writeOut(`cluster CA in ${path.join(dir, 'ca.crt')}\n`);
    process.exit(0);
  }
  const id = values.id ?? env.MO_ID;
  if (!id || !isDnsLabel(id)) usage(`--id: expected a name like cp-1, got ${JSON.stringify(id ?? '')}`);
  const listen = values.listen ?? env.MO_LISTEN ?? '127.0.0.1:7001';
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m || Number(m[2]) > 65535) usage(`--listen: expected HOST:PORT, got "${listen}"`);
  const peers = new Map<string, string>();
  const peersText = values.peers ?? env.MO_PEERS ?? '';
  for (const part of peersText.split(',').filter(Boolean)) {
    const pm = /^([^=]+)=(wss?:\/\/.+)$/.exec(part.trim());
    if (!pm) usage(`--peers: expected id=ws://host:port, got "${part}"`);
    peers.set(pm[1], pm[2]);
  }
  if (peers.size > 0 && !peers.has(id)) usage(`--peers must include this replica's own id ${id}`);
  const tlsFlag = values.tls ?? env.MO_TLS ?? 'false';
  if (!['true', 'false', '1', '0'].includes(tlsFlag)) usage(`--tls: expected true or false, got "${tlsFlag}"`);
  const tls = tlsFlag === 'true' || tlsFlag === '1';
  for (const [peer, url] of peers) {
    if (tls !== url.startsWith('wss://')) usage(`--peers: ${peer}=${url}: ${tls ? 'with --tls every peer is reached with wss://' : 'wss:// needs --tls true on every replica'}`);
  }
  const dataDir = path.resolve(values['data-dir'] ?? env.MO_DATA_DIR ?? `.mo/${id}`);
  fs.mkdirSync(dataDir, { recursive: true });
  let token = values.token ?? env.MO_TOKEN;
  if (!token) {
    const file = path.join(dataDir, 'token');
    if (fs.existsSync(file)) token = fs.readFileSync(file, 'utf8').trim();
    else {
      token = randomBytes(24).toString('hex');
      fs.writeFileSync(file, token + '\n', { mode: 0o600 });
      log(`generated a cluster token into ${file}`);
    }
  }
  const sans = (values['kube-san'] ?? env.MO_KUBE_SANS ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  let kube: Config['kube'];
  const kubeListen = values['kube-listen'] ?? env.MO_KUBE_LISTEN;
  if (kubeListen) {
    const km = /^(.*):(\d+)$/.exec(kubeListen);
    if (!km || Number(km[2]) > 65535) usage(`--kube-listen: expected HOST:PORT, got "${kubeListen}"`);
    const advertise = values['kube-advertise'] ?? env.MO_KUBE_ADVERTISE;
    if (advertise !== undefined && !/^https:\/\/[^/]+$/.test(advertise)) usage(`--kube-advertise: expected https://HOST:PORT, got "${advertise}"`);
    kube = {
      host: km[1],
      port: Number(km[2]),
      caDir: path.resolve(values['ca-dir'] ?? env.MO_CA_DIR ?? path.dirname(dataDir)),
      sans,
      advertise,
    };
  }
  return {
    kube,
    tls,
    sans,
    id,
    host: m[1],
    port: Number(m[2]),
    peers,
    dataDir,
    token,
    notReadyAfterMs: intFlag('not-ready-after-ms', values['not-ready-after-ms'] ?? env.MO_NOT_READY_AFTER_MS, 1000),
    heartbeatIntervalMs: intFlag('heartbeat-interval-ms', values['heartbeat-interval-ms'] ?? env.MO_HEARTBEAT_INTERVAL_MS, 200),
    maxActionsPerPass: intFlag('max-actions-per-pass', values['max-actions-per-pass'] ?? env.MO_MAX_ACTIONS_PER_PASS, DEFAULT_CONTROLLER_OPTIONS.maxActionsPerPass),
    resyncIntervalMs: intFlag('resync-interval-ms', values['resync-interval-ms'] ?? env.MO_RESYNC_INTERVAL_MS, DEFAULT_CONTROLLER_OPTIONS.resyncIntervalMs),
    gracePeriodMs: intFlag('grace-period-ms', values['grace-period-ms'] ?? env.MO_GRACE_PERIOD_MS, DEFAULT_CONTROLLER_OPTIONS.terminateGracePeriodMs, 0),
    snapshotEvery: intFlag('snapshot-every', values['snapshot-every'] ?? env.MO_SNAPSHOT_EVERY, SNAPSHOT_EVERY_ENTRIES),
    nice: niceFlag(values.nice ?? env.MO_NICE),
  };
}

async function main(): Promise<void> {
  const cfg = config();
  // Ahead of the workload on shared CPUs (priority.ts): first, so every thread made later inherits
  // it; the full value while it leads.
  const priority = new RolePriority(cfg.nice, log);
  priority.start();
  const now = () => Date.now();
  const registry = new NodeRegistry(cfg.notReadyAfterMs);
  // How long this process's event loop stops, per second (for `npm run bench`).
  const loopWindows = new EventLoopWindows();
  loopWindows.start();
  // A burst's garbage given back once the replica rests (rest-collect.ts), with the
  // renderings no watch needs (set once the API is up).
  let releaseAtRest: () => string | null = () => null;
  const stopRestCollection = startRestCollection(log, () => releaseAtRest());
  const peers = cfg.peers.size > 0 ? cfg.peers : new Map([[cfg.id, `${cfg.tls ? 'wss' : 'ws'}://${cfg.host}:${cfg.port}`]]);
  const caDir = cfg.kube?.caDir ?? path.resolve(process.env.MO_CA_DIR ?? path.dirname(cfg.dataDir));
  const mainTls = cfg.tls ? mainPortTls(cfg, caDir) : undefined;
  // The Kubernetes API (control-plane/kube/), with --kube-listen.
  let kubeApi: KubeApi | undefined;
  // /metrics (api/metrics.ts): made first, so the Raft shell and the
  // controller report into it from their start; it reads the rest lazily.
  const metrics = new ReplicaMetrics({
    replicaId: cfg.id,
    raft: () => store.status(),
    source: () => ({ state: store.state, observed: registry.nodes, now: now() }),
    openWatches: (): number => api.openWatches + (kubeApi?.openWatches ?? 0),
    pendingProposals: (): number => raftStore.pendingProposals,
    agentConnected: (node) => agents.connected(node),
  });
  const raftStore = await RaftStore.open({
    id: cfg.id,
    peers,
    dataDir: path.join(cfg.dataDir, 'raft'),
    token: cfg.token,
    log,
    snapshotEvery: cfg.snapshotEvery,
    observer: metrics.raftObserver,
  });
  const store: ReplicatedStore = raftStore;
  // A follower that knows no leader holds a request for up to the longest
  // election timeout before it refuses it (store/leader-wait.ts).
  const leaderWait = new LeaderWait(store, 2 * DEFAULT_RAFT_TIMING.electionTimeoutTicks * DEFAULT_RAFT_TIMING.tickMs);
  const events = new EventLog(cfg.id, now, {
    ring: store.state.events,
    isLeader: () => store.isLeader(),
    commit: async (batch) => {
      await store.propose({ type: 'events.record', at: now(), events: batch });
    },
    onDropped: (count, why) => log(`events: ${count} not recorded: ${why}`),
  });
  store.state.onEvent((e) => events.applied(e));
  const changeListeners = new Set<() => void>();
  const changed = () => {
    for (const fn of changeListeners) fn();
  };

  const agents = new AgentServer({
    replicaId: cfg.id,
    token: cfg.token,
    registry,
    now,
    heartbeatIntervalMs: cfg.heartbeatIntervalMs,
    leadership: () => ({ term: store.term(), leaderId: store.leaderId() }),
    log,
    onHello: (node) => services.hello(node),
    onStats: (node, stats) => metrics.agentStats(node, stats),
    // A leader whose timers wait behind a long round of I/O callbacks still heartbeats.
    onFrame: () => raftStore.pulse(),
  });
  const services = new ServicePublisher({
    state: store.state,
    registry,
    agents,
    isLeader: () => store.isLeader(),
    caughtUp: () => store.caughtUp(),
    term: () => store.term(),
    id: cfg.id,
  });
  const controller = new Controller({
    store,
    registry,
    agents,
    events,
    scheduler: new Scheduler(),
    now,
    log,
    observer: metrics.controllerObserver,
    options: {
      maxActionsPerPass: cfg.maxActionsPerPass,
      resyncIntervalMs: cfg.resyncIntervalMs,
      spawnTimeoutMs: DEFAULT_CONTROLLER_OPTIONS.spawnTimeoutMs,
      terminateGracePeriodMs: cfg.gracePeriodMs,
    },
  });

  // Observed changes: the stream a user watches, and triggers for the loop.
  // Every replica records events (a new leader keeps the history it saw);
  // only the leader narrates them in the log, so the stream tells each
  // thing once.
  const narrate = (line: string) => {
    if (store.isLeader()) log(line);
  };
  registry.onChange((c) => {
    switch (c.type) {
      case 'node-registered':
        narrate(
          `node ${c.node} registered: cpu=${c.info.capacity.cpu}m memory=${c.info.capacity.memory}Mi${c.info.taints.length ? ' taints=' + c.info.taints.map((t) => t.key).join(',') : ''}`,
        );
        if (store.isLeader()) registerNode(c.node);
        break;
      case 'node-ready':
        narrate(`node ${c.node} Ready`);
        events.record('Normal', 'NodeReady', 'Node', c.node, `node ${c.node} is Ready (heartbeats arriving)`);
        break;
      case 'node-not-ready':
        narrate(`node ${c.node} NotReady: ${c.why}`);
        events.record('Warning', 'NodeNotReady', 'Node', c.node, `node ${c.node} is NotReady: ${c.why}`);
        break;
      case 'unit': {
        const u = c.unit;
        if (c.previous?.phase === u.phase) {
          // Readiness changes (probes) are news too; a first ready on start is not.
          if (u.phase === 'Running' && c.previous.ready !== u.ready && (c.previous.ready !== undefined || !u.ready)) {
            narrate(`unit ${u.name} on ${c.node}: ${u.ready ? 'Ready' : `NotReady${u.message ? `: ${u.message}` : ''}`}`);
            if (!u.ready) events.record('Warning', 'Unhealthy', 'Unit', u.name, `not ready on ${c.node}${u.message ? `: ${u.message}` : ''}`);
          }
          break;
        }
        const ended = u.phase === 'Failed' || u.phase === 'Succeeded';
        const how = u.message ?? (u.signal ? `signal ${u.signal}` : `exit code ${u.exitCode}`);
        const what = u.phase === 'Running' ? `Running pid=${u.pid}` : ended ? `${u.phase} (${u.reason ? `${u.reason}: ` : ''}${how})` : u.phase;
        if (u.phase !== 'Pending') narrate(`unit ${u.name} on ${c.node}: ${what}`);
        if (u.phase === 'Running') events.record('Normal', 'Started', 'Unit', u.name, `started on ${c.node} with pid ${u.pid}`);
        if (u.phase === 'Failed') events.record('Warning', u.reason === 'LivenessProbeFailed' ? 'Killing' : 'Crashed', 'Unit', u.name, `${u.reason ?? 'failed'} on ${c.node}: ${how}`);
        break;
      }
      case 'unit-gone':
        break;
    }
    changed();
    controller.registryChanged(c);
    services.changed();
  });
  store.state.onChange((kind, name) => {
    changed();
    controller.storeChanged(kind, name);
    services.changed();
  });

  // A follower steps back only while every replica is up (priority.ts). A leader's death
  // reaches its followers as a role change (they campaign when its link closes); any other
  // link is checked once a second.
  const everyPeerUp = () => raftStore.transport.connectedPeers().length + 1 >= peers.size;
  const priorityCheck = setInterval(() => priority.update(store.isLeader(), everyPeerUp()), 1000);
  priorityCheck.unref();

  // Leadership (control-plane/leadership.ts): only the leader acts.
  const registerNode = nodeRegistrar({ store, registry, now, log });
  followLeadership(
    {
      store,
      registry,
      agents,
      controller,
      now,
      log,
      onRoleChange: (s) => {
        priority.update(s.role === 'leader', everyPeerUp());
        changed();
      },
      onElected: (s) => {
        events.record('Normal', 'LeaderElected', 'Replica', cfg.id, `${cfg.id} leads term ${s.term}`);
        services.leadershipChanged();
      },
    },
    registerNode,
  );

  const api = new ApiServer({
    store,
    registry,
    events,
    token: cfg.token,
    now,
    clusterStatus: () => gatherClusterStatus(peers, cfg.id, cfg.token, replicaStatus),
    forward: (req, res, body) => forwardToLeader(req, res, body, { store, peers, selfId: cfg.id, reachable: () => raftStore.transport.connectedPeers().length + 1, leaderWait }),
    replicaStatus: () => replicaStatus(),
    eventLoop: (since) => loopWindows.since(since),
    subscribe: (fn) => {
      changeListeners.add(fn);
      return () => changeListeners.delete(fn);
    },
    metrics,
    dashboard: makeDashboard(),
    terminateUnit: (unit, node, gracePeriodMs, reason) => controller.terminateUnit(unit, node, gracePeriodMs, reason),
    unitLog: (req, res, name, query) => serveUnitLog(req, res, name, query, { replicaId: cfg.id, boundNode: (n) => store.state.units.get(n)?.nodeName, registry, agents, now }),
  });
  releaseAtRest = () => api.releaseRenderings((kubeApi?.watchesOpen ?? 0) > 0);
  const replicaStatus = () => {
    const s = store.status();
    return { id: cfg.id, role: s.role, term: s.term, commitIndex: s.commitIndex, appliedIndex: s.appliedIndex, leader: s.leaderId, pid: process.pid } satisfies ReplicaSelfView;
  };

  let kubeHttps: http.Server | undefined;
  if (cfg.kube) {
    const k = cfg.kube;
    const ca = clusterCa(k.caDir);
    const tls = servingCert(ca, cfg.id, [k.host, cfg.host, '127.0.0.1', 'localhost', cfg.id, ...k.sans]);
    // Peers serve their Kubernetes API at the same offset from their main port as this replica.
    const offset = k.port - cfg.port;
    const advertise = (k.advertise ?? `https://${k.host === '0.0.0.0' || k.host === '::' ? '127.0.0.1' : k.host}:${k.port}`).replace(/^https:\/\//, '');
    kubeApi = new KubeApi({
      store,
      registry,
      events,
      token: cfg.token,
      now,
      subscribe: (fn) => {
        changeListeners.add(fn);
        return () => changeListeners.delete(fn);
      },
      terminateUnit: (unit, node, gracePeriodMs, reason) => controller.terminateUnit(unit, node, gracePeriodMs, reason),
      unitLog: (req, res, name, query) => serveUnitLog(req, res, name, query, { replicaId: cfg.id, boundNode: (n) => store.state.units.get(n)?.nodeName, registry, agents, now }),
      selfId: cfg.id,
      leaderWait,
      leaderUrl: (leader) => {
        const u = peers.get(leader);
        if (!u) return undefined;
        const p = new URL(u.replace(/^ws/, 'http'));
        return `https://${p.hostname}:${Number(p.port) + offset}`;
      },
      caPem: ca.certPem,
      advertise,
      views: api.kubeViews,
    });
    kubeHttps = kubeServer(kubeApi, tls);
    const srv = kubeHttps;
    await new Promise<void>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(k.port, k.host, () => resolve());
    }).catch((e: NodeJS.ErrnoException) => {
      process.stderr.write(`control-plane: cannot listen on ${k.host}:${k.port} (--kube-listen): ${e.code === 'EADDRINUSE' ? 'address in use' : e.message}\n`);
      process.exit(1);
    });
    const server = `https://${advertise}`;
    fs.writeFileSync(path.join(cfg.dataDir, 'kubeconfig'), kubeconfigText({ clusterName: 'mo', servers: [{ name: cfg.id, server }], caPem: ca.certPem, token: cfg.token }), {
      mode: 0o600,
    });
    log(`${cfg.id} serves the Kubernetes API on ${server} (CA ${path.join(k.caDir, 'ca.crt')}; kubeconfig ${path.join(cfg.dataDir, 'kubeconfig')})`);
  }

  // With --tls the same handlers behind a TLS listener: /v1, the agents' and the peers' WebSockets (wss).
  const server: http.Server = mainTls ? https.createServer(mainTls, (req, res) => api.server.emit('request', req, res)) : api.server;
  if (mainTls) server.on('clientError', (_err, socket) => socket.destroy());
  server.on('upgrade', (req, socket, head) => {
    // Node's HTTP server stops watching a socket once it emits 'upgrade': a client refused here
    // (a wrong token: 401) that then resets its connection raised an unhandled 'error' that ended
    // this replica. Accepted sockets get ws's own handler as well.
    socket.on('error', () => socket.destroy());
    if (!agents.handleUpgrade(req, socket, head) && !raftStore.transport.handleUpgrade(req, socket, head)) socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(cfg.port, cfg.host, () => resolve());
  }).catch((e: NodeJS.ErrnoException) => {
    process.stderr.write(`control-plane: cannot listen on ${cfg.host}:${cfg.port}: ${e.code === 'EADDRINUSE' ? 'address in use' : e.message}\n`);
    process.exit(1);
  });
  log(`${cfg.id} listening on ${cfg.tls ? 'https' : 'http'}://${cfg.host}:${cfg.port} (pid ${process.pid}, data ${cfg.dataDir})`);
  log(`${cfg.id} is a follower of term ${store.term()} among ${[...peers.keys()].join(', ')}; waiting for a leader`);
  const liveness = setInterval(() => registry.checkLiveness(now()), Math.max(10, Math.floor(cfg.notReadyAfterMs / 20)));
  controller.start();

  let stopping = false;
  const shutdown = (sig: string) => {
    if (stopping) return;
    stopping = true;
    log(`${cfg.id} stopping (${sig})`);
    clearInterval(liveness);
    stopRestCollection();
    controller.stop();
    agents.close();
    server.closeAllConnections();
    server.close();
    kubeHttps?.closeAllConnections();
    kubeHttps?.close();
    void store.close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

/** The cluster CA of `dir` (kube/certs.ts), or exit with the reason in one line. */
function clusterCa(dir: string): ReturnType<typeof ensureCa> {
  try {
    return ensureCa(dir);
  } catch (err) {
    process.stderr.write(`control-plane: cannot make or read the cluster CA in ${dir} (--ca-dir): ${(err as Error).message}\n`);
    process.exit(1);
  }
}

/**
 * The main port's certificate with --tls. This process (its peer connections
 * and forwards) and every client must trust the CA from their start:
 * NODE_EXTRA_CA_CERTS naming ca.crt, made beforehand (`--make-ca DIR`, or
 * the first start without --tls).
 */
function mainPortTls(cfg: Config, caDir: string): { cert: string; key: string } {
  const caFile = path.join(caDir, 'ca.crt');
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  const trusted = extra !== undefined && fs.existsSync(extra) ? fs.readFileSync(extra, 'utf8') : '';
  if (!fs.existsSync(path.join(caDir, 'ca.key')))
    usage(`--tls: no cluster CA in ${caDir} yet: make it first (control-plane/main.ts --make-ca ${caDir}) and start with NODE_EXTRA_CA_CERTS=${caFile}`);
  const ca = clusterCa(caDir);
  if (!trusted.replace(/\s+/g, '').includes(ca.certPem.replace(/\s+/g, ''))) {
    usage(`--tls: this process does not trust the cluster CA: start it with NODE_EXTRA_CA_CERTS=${caFile} (Node reads it at start; peers' certificates are checked against it)`);
  }
  const t = servingCert(ca, cfg.id, [cfg.host, '127.0.0.1', 'localhost', cfg.id, ...cfg.sans]);
  return { cert: t.certPem, key: t.keyPem };
}

main().catch((err) => {
  process.stderr.write(`control-plane: fatal: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
