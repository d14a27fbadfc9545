// node-agent/main.ts -- the node agent process (the kubelet of this
// project): one per node. It registers the node with EVERY control-plane
// replica (one WebSocket each), heartbeats to all of them, runs units as
// real child processes on the leader's command, and reports every unit
// state change to all connected replicas at once. Decisions (fencing,
// dedupe, frames) are in agent-core.ts; processes in runtime/; one replica
// connection in control-plane-link.ts. This file wires them and owns the
// process: flags, signals, one readable log line per event on stdout.
//
// Run it as `node --import tsx node-agent/main.ts ...` when the caller must
// hold the agent's own pid (`npx tsx` adds a parent process in between).
//
// Exit: SIGTERM/SIGINT stop every unit with grace and exit 0 (a second
// signal kills them at once). SIGKILL or a crash: the kernel and the orphan
// guard kill every unit (runtime/orphan-guard.ts). Bad flags: exit 2.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { NodeInfo, UnitReport } from '../shared/model.ts';
import type { Command, ControlPlaneMessage, SpawnCommand } from '../shared/protocol/messages.ts';
import { makeLogger } from '../shared/log.ts';
import { AgentCore } from './agent-core.ts';
import { AgentFigures } from './agent-figures.ts';
import { STATS_INTERVAL_MS } from '../shared/protocol/messages.ts';
import { ControlPlaneLink } from './control-plane-link.ts';
import { parseAgentFlags, USAGE } from './flags.ts';
import { UnitCgroups, agentCgroupName } from './runtime/cgroups.ts';
import { GUARD_PID_FILE, OrphanGuard, PREVIOUS_GUARD_WAIT_MS, waitForPreviousGuard } from './runtime/orphan-guard.ts';
import { detectNamespaces } from './runtime/namespaces.ts';
import { PortAllocator } from './runtime/ports.ts';
import { DEFAULT_WARM_SANDBOXES } from './runtime/sandbox-pool.ts';
import { ServiceProxy } from './runtime/service-proxy.ts';
import { DEFAULT_GRACE_PERIOD_MS, UnitSupervisor, type UnitChange } from './runtime/supervisor.ts';
import { LogStreams } from './runtime/log-streams.ts';
import { LogDirectory } from './runtime/unit-log.ts';
import { PendingHold } from './pending-hold.ts';

const MiB = 1024 * 1024;

async function main(): Promise<void> {
  // A closed stdout (the launcher went away) must not kill the agent.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});

  const parsed = parseAgentFlags(process.argv.slice(2), process.env, {
    cpuMillicores: os.availableParallelism() * 1000,
    memoryMiB: Math.floor(os.totalmem() / MiB),
    tmpDir: os.tmpdir(),
  });
  if (parsed.ok === 'help') {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  if (!parsed.ok) {
    process.stderr.write(`node-agent: ${parsed.error}\n`);
    process.exit(2);
  }
  const config = parsed.config;
  // One line per event with its time, like the replicas' (the launcher and
  // docker compose prefix each line with the process's name).
  const log = makeLogger();

  try {
    fs.mkdirSync(config.stateDir, { recursive: true });
  } catch (err) {
    process.stderr.write(`node-agent: cannot create state dir ${config.stateDir}: ${(err as Error).message}\n`);
    process.exit(1);
  }

  if (config.address === 'auto') {
    const found = Object.values(os.networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal);
    config.address = found?.address ?? '127.0.0.1';
  }
  // A previous agent of this state directory (the same cgroup parents) may
  // have died a moment ago: its guard is still killing its units and
  // removing their cgroups, and would take ours with them. Wait for it.
  const t0 = Date.now();
  const previous = await waitForPreviousGuard(config.stateDir);
  if (previous === 'ended') log(`waited ${Date.now() - t0} ms for the previous agent's orphan guard to finish its clean-up`);
  if (previous === 'timeout') log(`the previous agent's orphan guard still runs after ${PREVIOUS_GUARD_WAIT_MS} ms; starting anyway`);
  // The dead man's switch first (runtime/orphan-guard.ts): it learns each
  // cgroup parent before the parent exists, so an agent killed at any point
  // of its start leaves no directory behind.
  const guard = new OrphanGuard({ onRestart: (reason) => log(`orphan guard: ${reason}`), pidFile: path.join(config.stateDir, GUARD_PID_FILE) });
  // What this node can enforce for its units (runtime/cgroups.ts), found once
  // at start, said in one line below and reported as the Node's conditions.
  const cgroups = UnitCgroups.detect(agentCgroupName(config.name, config.stateDir), { beforeCreate: (dir) => guard.addCgroupParent(dir) });
  const namespaces = detectNamespaces();
  const node: NodeInfo = {
    name: config.name,
    capacity: config.capacity,
    taints: config.taints,
    labels: config.labels,
    address: config.address,
    conditions: [cgroups.condition, namespaces.condition],
  };
  const ports = new PortAllocator(config.address, config.portRange);
  // Services: the leader's table, served on this node's address; the table
  // of the highest term wins, and the last one keeps serving without a leader.
  const proxy = new ServiceProxy(config.address, log);
  let servicesTerm = -1;
  const core = new AgentCore(node, process.pid);
  // Spawn latency, heartbeat round trips, probe results: sent to every
  // replica in a stats frame, shown on their /metrics (docs/metrics.md).
  const figures = new AgentFigures();
  const links: ControlPlaneLink[] = [];
  // Unit logs (runtime/unit-log.ts) and the log-open streams reading them.
  const logStreams = new LogStreams({ directory: LogDirectory.for(`${config.stateDir}/units`), nodeName: config.name });
  let shuttingDown = false;

  const broadcast = (msg: Parameters<ControlPlaneLink['send']>[0]) => {
    for (const link of links) link.send(msg);
  };
  // A cold start's Pending report waits a moment for its Running (pending-hold.ts): one report per unit, not two.
  const reports = new PendingHold((report) => broadcast(core.unitStatus(report)));

  const supervisor = new UnitSupervisor({
    stateDir: config.stateDir,
    nodeName: config.name,
    guard,
    cgroups,
    namespaces,
    // A unit's namespaces made ahead (runtime/sandbox-pool.ts): a crashed unit's replacement starts in a few ms.
    warmSandboxes: DEFAULT_WARM_SANDBOXES,
    onSandboxProblem: (reason) => log(`warm sandboxes: ${reason}`),
    onSpawnServerProblem: (reason, disabled) => log(`${reason}${disabled ? ': units start by spawning mo-init from now on' : ''}`),
    onProbeResult: (kind, ok) => figures.probe(kind, ok),
    onChange: (report, change) => {
      if (change === 'phase') figures.unitPhase(report.name, report.phase, performance.now());
      // The report first, then the log line.
      reports.report(report);
      logTransition(report, change);
      if (report.phase === 'Succeeded' || report.phase === 'Failed') ports.release(report.name);
    },
  });

  function logTransition(r: UnitReport, change: UnitChange): void {
    if (change === 'readiness') return log(r.ready ? `${r.name} ready` : `${r.name} not ready: ${r.message ?? 'readiness probe failed'}`);
    const detail = `${r.phase}: ${r.reason}${r.message ? `, ${r.message}` : ''}`;
    switch (r.phase) {
      case 'Running':
        return log(`started ${r.name} pid=${r.pid}`);
      case 'Terminating':
        // A terminate command is logged where it is decided; a probe kill is decided in the supervisor.
        if (r.reason === 'LivenessProbeFailed') return log(`stopping ${r.name} pid=${r.pid ?? '-'}: ${r.message}`);
        return;
      case 'Succeeded':
      case 'Failed':
        if (r.reason === 'StartError') return log(`${r.name} failed to start: ${r.message}`);
        if (r.signal) return log(`${r.name} exited signal=${r.signal} (${detail})`);
        return log(`${r.name} exited code=${r.exitCode} (${detail})`);
      case 'Pending':
        return; // logged where it is decided
    }
  }

  // child_process.spawn blocks the event loop for a few ms per process, so a
  // burst of spawn commands is worked off in slices that yield between them:
  // heartbeats keep flowing and the node never looks dead while it is busy.
  const MAX_QUEUED_SPAWNS = 4096;
  const SPAWN_SLICE_MS = 20;
  const spawnQueue: Array<{ link: ControlPlaneLink; cmd: SpawnCommand }> = [];
  let draining = false;
  function drainSpawns(most = Number.POSITIVE_INFINITY): void {
    const until = Date.now() + SPAWN_SLICE_MS;
    for (let taken = 0; spawnQueue.length > 0 && Date.now() < until && taken < most; taken++) {
      const { link, cmd } = spawnQueue.shift()!;
      const target = cmd.unit.name;
      if (shuttingDown) {
        figures.spawnRefused(target);
        link.send(core.refused(cmd.commandId, 'agent is shutting down'));
        continue;
      }
      // Host ports for its declared ports (not for a name already known: a resend).
      const given = supervisor.get(target) ? [] : ports.allocate(target, cmd.unit.spec.ports);
      if (typeof given === 'string') {
        figures.spawnRefused(target);
        log(`refused spawn ${target}: ${given}`);
        link.send(core.refused(cmd.commandId, given));
        continue;
      }
      const res = supervisor.start({
        name: target,
        deployment: cmd.unit.deployment,
        spec: cmd.unit.spec,
        term: cmd.term,
        specHash: cmd.unit.specHash,
        revision: cmd.unit.revision,
        ...(given.length > 0 ? { ports: given } : {}),
      });
      if (!res.ok) ports.release(target);
      if (!res.ok) {
        figures.spawnRefused(target);
        log(`refused spawn ${target}: ${res.error}`);
        link.send(core.refused(cmd.commandId, res.error));
      } else if (!res.created) {
        // A resend: the first spawn, if it is being timed, is still on its way to Running.
        log(`spawn ${target}: already ${res.report.phase}, nothing to do`);
        link.send(core.unitStatus(res.report));
      }
    }
    if (spawnQueue.length > 0 || most !== Number.POSITIVE_INFINITY) setImmediate(drainSpawns);
    else draining = false;
  }

  function onCommand(link: ControlPlaneLink, cmd: Command): void {
    const target = cmd.type === 'spawn' ? cmd.unit.name : cmd.name;
    const admission = core.admit(cmd);
    if (admission.kind === 'refuse') {
      log(`refused ${cmd.type} ${target} from ${cmd.leaderId}: ${admission.reason}`);
      link.send(core.refused(cmd.commandId, admission.reason));
      return;
    }
    if (admission.kind === 'duplicate') {
      const known = supervisor.get(target);
      if (known) link.send(core.unitStatus(known));
      return;
    }
    if (shuttingDown && cmd.type === 'spawn') {
      log(`refused spawn ${target}: agent is shutting down`);
      link.send(core.refused(cmd.commandId, 'agent is shutting down'));
      return;
    }
    switch (cmd.type) {
      case 'spawn': {
        if (spawnQueue.length >= MAX_QUEUED_SPAWNS) {
          link.send(core.refused(cmd.commandId, `spawn queue full (${MAX_QUEUED_SPAWNS})`));
          return;
        }
        if (!supervisor.get(target)) figures.spawnReceived(target, performance.now());
        spawnQueue.push({ link, cmd });
        if (!draining) {
          // The first spawn starts in this task (a crashed unit's replacement waits for no loop
          // turn); what else comes meanwhile (a frame can hold many) follows in slices.
          draining = true;
          drainSpawns(1);
        }
        return;
      }
      case 'terminate': {
        const before = supervisor.get(target);
        if (!before) {
          log(`terminate ${target}: no such unit here; telling the control plane it is gone`);
          broadcast(core.unitGone(target));
          return;
        }
        if (before.phase === 'Succeeded' || before.phase === 'Failed' || before.phase === 'Terminating') {
          link.send(core.unitStatus(before));
          return;
        }
        log(`stopping ${target} pid=${before.pid ?? '-'} (grace ${cmd.gracePeriodMs}ms): ${cmd.reason}`);
        void supervisor.stop(target, cmd.gracePeriodMs);
        return;
      }
      case 'forget': {
        const result = supervisor.forget(target);
        if (result === 'still-running') {
          const reason = `unit ${target} is still ${supervisor.get(target)?.phase}; terminate it first`;
          log(`refused forget ${target}: ${reason}`);
          link.send(core.refused(cmd.commandId, reason));
          return;
        }
        if (result === 'forgotten') log(`forgot ${target}`);
        broadcast(core.unitGone(target));
        return;
      }
    }
  }

  function onMessage(link: ControlPlaneLink, msg: ControlPlaneMessage): void {
    switch (msg.type) {
      case 'welcome': {
        link.replicaId = msg.replicaId;
        log(`connected to ${msg.replicaId} at ${link.url} (term ${msg.term}, leader ${msg.leaderId ?? 'unknown'})`);
        noteLeadership(msg.term, msg.leaderId);
        return;
      }
      case 'leader':
        noteLeadership(msg.term, msg.leaderId);
        return;
      case 'ping-interval':
        return; // the link keeps it (control-plane-link.ts)
      case 'spawn':
      case 'terminate':
      case 'forget':
        onCommand(link, msg);
        return;
      case 'log-open':
        logStreams.open(link, msg);
        return;
      case 'log-close':
        logStreams.close(link, msg.requestId);
        return;
      case 'services':
        if (msg.term < core.highestTerm || msg.term < servicesTerm) return; // an old leader's table
        noteLeadership(msg.term, msg.leaderId);
        servicesTerm = msg.term;
        proxy.apply(msg.table);
        return;
    }
  }

  function noteLeadership(term: number, leaderId: string | null): void {
    const change = core.observeLeader(term, leaderId);
    if (change.termRaised || change.leaderChanged) {
      log(`leader is ${core.leaderId ?? 'unknown'} (highest term seen ${core.highestTerm})`);
    }
  }

  for (const url of config.controlPlaneUrls) {
    const link = new ControlPlaneLink(url, config.token, {
      log,
      onMessage,
      onOpen: (l) => {
        l.send(core.hello(supervisor.list()));
      },
      onClose: (l) => logStreams.closeConnection(l),
      onRoundTrip: (l, seconds) => {
        if (l.replicaId !== null) figures.roundTrip(l.replicaId, seconds);
      },
    });
    links.push(link);
  }

  let beats = 0;
  // The figures ride on the first heartbeat and then on one every STATS_INTERVAL_MS (no frame of their own).
  let statsAt = Number.NEGATIVE_INFINITY;
  const heartbeatTimer = setInterval(() => {
    const now = Date.now();
    const withStats = now - statsAt >= STATS_INTERVAL_MS;
    if (withStats) statsAt = now;
    broadcast(core.heartbeat(now, withStats ? figures.stats(supervisor.list()) : undefined));
    for (const link of links) link.ping(); // when due: at most once per the interval each replica names
  }, config.heartbeatIntervalMs);

  async function shutdown(signal: string): Promise<void> {
    if (shuttingDown) {
      log(`${signal} again: killing all units now`);
      supervisor.killAllNow();
      return;
    }
    shuttingDown = true;
    log(`${signal}: stopping ${supervisor.liveCount()} unit(s) (grace ${DEFAULT_GRACE_PERIOD_MS}ms)`);
    proxy.close();
    await supervisor.stopAll(DEFAULT_GRACE_PERIOD_MS);
    // The orphan guard stays until the cgroups are gone: an agent killed meanwhile (a launcher's
    // SIGKILL after its grace) left its cgroup parent to nobody when the guard had gone first.
    supervisor.close({ keepGuard: true });
    await supervisor.cgroupsRemoved();
    cgroups.removeParents();
    supervisor.releaseGuard();
    clearInterval(heartbeatTimer);
    await Promise.all(links.map((l) => l.stop()));
    log('stopped');
    process.exit(0);
  }
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGHUP', () => void shutdown('SIGHUP'));
  process.on('uncaughtException', (err) => {
    log(`fatal: ${err.stack ?? err.message}`);
    supervisor.killAllNow();
    process.exit(1);
  });

  log(
    `agent pid=${process.pid} cpu=${config.capacity.cpu}m memory=${config.capacity.memory}Mi` +
      ` taints=[${config.taints.map((t) => `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`).join(',')}]` +
      ` state=${config.stateDir} orphan-guard pid=${supervisor.guardPid}` +
      ` pdeathsig=${supervisor.setprivPath ? 'setpriv' : 'off'}`,
  );
  log(
    cgroups.enabled
      ? `limits: enforced through cgroup ${cgroups.setup.version} (${cgroups.condition.message.replace(/^.*under /, 'under ')})`
      : `limits: NOT enforced (${cgroups.disabledReason}); units with limits run without them`,
  );
  log(
    namespaces.enabled
      ? `namespaces: each unit gets its own PID (unless hostPID), UTS, IPC and mount (private /tmp), made by ${namespaces.initPath !== null ? `mo-init (${namespaces.initPath}), cold starts through one mo-init --serve` : 'util-linux unshare'}`
      : `namespaces: none (${namespaces.condition.message.replace(/^units share the node's namespaces: /, '')})`,
  );
  // The spawn server up before the first unit (0.7 MiB, statically linked); its pid is in the guard.
  supervisor.startSpawnServer();
  // A dead agent of this node may have left unit cgroups: kill what is in
  // them and remove them before this agent takes any command.
  void cgroups.cleanLeftovers().then(({ removed, stuck }) => {
    if (removed.length > 0) log(`removed ${removed.length} leftover unit cgroup(s): ${removed.join(', ')}`);
    if (stuck.length > 0) log(`could not remove leftover unit cgroup(s): ${stuck.join(', ')}`);
    for (const link of links) link.start();
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`node-agent: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
