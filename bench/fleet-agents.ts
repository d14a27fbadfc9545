// bench/fleet-agents.ts -- one worker process of the fleet simulator
// (bench/fleet.ts): COUNT simulated node agents, each holding one WebSocket
// to EVERY replica, speaking the real protocol with the real code: the
// agent's link (node-agent/control-plane-link.ts: connect, token, reconnect
// with back-off, frame validation), its pure decision core
// (node-agent/agent-core.ts: fencing by term, command dedupe, the frames),
// its figures (node-agent/agent-figures.ts, on a heartbeat) and the shared
// msgpack codec. What is simulated is only the process work: a spawn makes
// a unit that is Pending and then Running (with a made-up pid) 2 ms later,
// a terminate reports Terminating and then Succeeded, a forget reports
// unit-gone, as node-agent/runtime/supervisor.ts would; reports go to every
// replica through the agent's own PendingHold (node-agent/pending-hold.ts),
// so a Pending overtaken by its Running within the hold is not sent.
//
// Each agent heartbeats (with a WebSocket ping when the interval each
// replica names is due and, every STATS_INTERVAL_MS, its figures, as the
// real agent does) at its own phase of the interval, so
// the fleet's frames are spread over time as real agents' are. The worker
// reports to its parent (IPC) once a second: links open, units held,
// commands, and how late its own timers ran (so a false NotReady can be told
// apart from a simulator that fell behind).
//
// The worker runs at the leader's nice value (control-plane/priority.ts; the
// followers run 5 steps above it): it stands for thousands of other
// machines, and at the default nice 0 the replicas (then all at -5) were
// ahead of it on this machine's 2 cores; after a leader
// failover, while every replica was busiest, hundreds of simulated agents'
// heartbeats then came more than the NotReady timeout late (438 NotReady in
// one run of npm run bench -- --only fleet).
//
//   node --import tsx bench/fleet-agents.ts --urls ws://..,ws://.. --token T
//        --first 0 --count 2500 [--heartbeat-ms 1000] [--cpu 8000 --memory 16384]

import { monitorEventLoopDelay } from 'node:perf_hooks';
import { AgentCore } from '../node-agent/agent-core.ts';
import { AgentFigures } from '../node-agent/agent-figures.ts';
import { ControlPlaneLink, type ReconnectPacing } from '../node-agent/control-plane-link.ts';
import { PendingHold } from '../node-agent/pending-hold.ts';
import type { NodeInfo, UnitReport } from '../shared/model.ts';
import { STATS_INTERVAL_MS, type AgentMessage, type Command, type ControlPlaneMessage } from '../shared/protocol/messages.ts';
import { parseCommandLine, wholeNumber } from '../shared/flags.ts';
import { DEFAULT_REPLICA_NICE, setOwnPriority } from '../control-plane/priority.ts';

/** What the worker tells its parent once a second. */
export interface FleetWorkerReport {
  type: 'report';
  agents: number;
  /** Links open now (agents x replicas when all is well). */
  linksOpen: number;
  /** Links that got a welcome at least once. */
  welcomed: number;
  unitsRunning: number;
  spawns: number;
  terminates: number;
  refused: number;
  /** Link closes seen since the start (a replica killed, or a reconnect). */
  closes: number;
  /** The longest gap between two heartbeats of one agent since the last report, ms. */
  maxHeartbeatGapMs: number;
  /** This worker's event-loop delay since the last report: p99 and max, ms. */
  loopP99Ms: number;
  loopMaxMs: number;
}

/** The prefix of every simulated node's name; the node's index follows, zero-padded. */
export const FLEET_NODE_PREFIX = 'fleet-';

export function fleetNodeName(i: number): string {
  return `${FLEET_NODE_PREFIX}${String(i).padStart(5, '0')}`;
}

/** Timer resolution of the heartbeat wheel: each tick sends the agents whose phase falls in it. */
const TICK_MS = 20;
/** The longest the connect loop waits for one batch's links to open before it starts the next. */
const CONNECT_WAIT_MS = 2000;

/** A simulated unit reports Running this long after its spawn arrived (a fresh process's start). */
const SIM_START_MS = 2;
/** Made-up pids start here (above any real pid_max default), one per unit. */
const FIRST_SIM_PID = 5_000_000;

let nextPid = FIRST_SIM_PID;

/**
 * The simulated agents' reconnect pacing (the real agent's: 100 ms after a
 * close, then 50 ms doubling to 1 s). After the bench's leader SIGKILL a
 * worker's 2,500 links to the dead replica all retried it at the agent's
 * pace: about five connection attempts each in the first 1.5 s, which held
 * the worker's event loop 1.4-2.6 s, its heartbeats to the live replicas
 * went out 3.1-3.5 s apart, and the new leader saw 496 and 1,205 nodes
 * NotReady (2 runs): the simulator, not the cluster, had fallen behind. A
 * fleet of separate machines pays nothing of the kind, so the simulator
 * spreads its retries out instead (at random over 0.1-2.1 s after a close,
 * then 1 s doubling to 5 s).
 */
const SIM_RECONNECT: ReconnectPacing = { afterCloseMs: () => 100 + Math.random() * 2000, minDelayMs: 1000, maxDelayMs: 5000 };

class SimAgent {
  readonly core: AgentCore;
  readonly figures = new AgentFigures();
  readonly links: ControlPlaneLink[] = [];
  readonly units = new Map<string, UnitReport>();
  welcomed = new Set<string>();
  lastBeatAt = 0;
  private statsAt = Number.NEGATIVE_INFINITY;

  constructor(
    readonly info: NodeInfo,
    urls: string[],
    token: string,
    readonly counters: { spawns: number; terminates: number; refused: number; closes: number },
  ) {
    this.core = new AgentCore(info, process.pid);
    for (const url of urls) {
      const link = new ControlPlaneLink(
        url,
        token,
        {
          log: () => {},
          onOpen: (l) => {
            l.send(this.core.hello([...this.units.values()]));
          },
          onMessage: (l, msg) => this.onMessage(l, msg),
          onClose: () => {
            this.counters.closes++;
          },
          onRoundTrip: (l, seconds) => {
            if (l.replicaId !== null) this.figures.roundTrip(l.replicaId, seconds);
          },
        },
        SIM_RECONNECT,
      );
      this.links.push(link);
    }
  }

  start(): void {
    for (const l of this.links) l.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.links.map((l) => l.stop()));
  }

  broadcast(msg: AgentMessage): void {
    for (const l of this.links) l.send(msg);
  }

  beat(now: number): number {
    const gap = this.lastBeatAt === 0 ? 0 : now - this.lastBeatAt;
    this.lastBeatAt = now;
    // As node-agent/main.ts: the figures ride on one heartbeat every STATS_INTERVAL_MS, the first included.
    const withStats = now - this.statsAt >= STATS_INTERVAL_MS;
    if (withStats) this.statsAt = now;
    this.broadcast(this.core.heartbeat(Date.now(), withStats ? this.figures.stats(this.units.values()) : undefined));
    for (const l of this.links) l.ping(); // when due, as node-agent/main.ts
    return gap;
  }

  /** As node-agent/main.ts: a Pending report waits a moment for the Running that overtakes it. */
  private readonly reports = new PendingHold((r) => this.broadcast(this.core.unitStatus(r)));

  private report(u: UnitReport): void {
    this.figures.unitPhase(u.name, u.phase, performance.now());
    this.reports.report({ ...u });
  }

  private onMessage(link: ControlPlaneLink, msg: ControlPlaneMessage): void {
    switch (msg.type) {
      case 'welcome':
        link.replicaId = msg.replicaId;
        this.welcomed.add(msg.replicaId);
        this.core.observeLeader(msg.term, msg.leaderId);
        return;
      case 'leader':
        this.core.observeLeader(msg.term, msg.leaderId);
        return;
      case 'services':
        if (msg.term >= this.core.highestTerm) this.core.observeLeader(msg.term, msg.leaderId);
        return;
      case 'spawn':
      case 'terminate':
      case 'forget':
        return this.onCommand(link, msg);
      case 'log-open':
        link.send({ v: 1, type: 'log-end', requestId: msg.requestId, error: `no log for unit ${msg.name} on ${this.info.name} (a simulated node)` });
        return;
      case 'log-close':
      case 'ping-interval': // the link keeps it
        return;
    }
  }

  private onCommand(link: ControlPlaneLink, cmd: Command): void {
    const admission = this.core.admit(cmd);
    const target = cmd.type === 'spawn' ? cmd.unit.name : cmd.name;
    if (admission.kind === 'refuse') {
      this.counters.refused++;
      link.send(this.core.refused(cmd.commandId, admission.reason));
      return;
    }
    const known = this.units.get(target);
    if (admission.kind === 'duplicate') {
      if (known) link.send(this.core.unitStatus({ ...known }));
      return;
    }
    switch (cmd.type) {
      case 'spawn': {
        if (known) {
          link.send(this.core.unitStatus({ ...known }));
          return;
        }
        this.counters.spawns++;
        this.figures.spawnReceived(target, performance.now());
        const u: UnitReport = {
          name: target,
          deployment: cmd.unit.deployment,
          phase: 'Pending',
          pid: nextPid++,
          resources: { ...cmd.unit.spec.resources },
          term: cmd.term,
          ready: false,
          specHash: cmd.unit.specHash,
          revision: cmd.unit.revision,
        };
        this.units.set(target, u);
        this.report(u);
        setTimeout(() => {
          if (this.units.get(target) !== u || u.phase !== 'Pending') return;
          const now = Date.now();
          u.phase = 'Running';
          u.startedAt = now;
          u.ready = true;
          u.readySince = now;
          this.report(u);
        }, SIM_START_MS);
        return;
      }
      case 'terminate': {
        if (!known) {
          this.broadcast(this.core.unitGone(target));
          return;
        }
        if (known.phase !== 'Pending' && known.phase !== 'Running') {
          link.send(this.core.unitStatus({ ...known }));
          return;
        }
        this.counters.terminates++;
        known.phase = 'Terminating';
        known.ready = false;
        this.report(known);
        setTimeout(() => {
          if (this.units.get(target) !== known) return;
          const now = Date.now();
          known.phase = 'Succeeded';
          known.reason = 'Terminated';
          known.signal = 'SIGTERM';
          known.message = `stopped within grace period ${cmd.gracePeriodMs}ms: ran ${((now - (known.startedAt ?? now)) / 1000).toFixed(1)}s`;
          known.finishedAt = now;
          delete known.pid;
          this.report(known);
        }, SIM_START_MS);
        return;
      }
      case 'forget': {
        if (known && (known.phase === 'Pending' || known.phase === 'Running' || known.phase === 'Terminating')) {
          link.send(this.core.refused(cmd.commandId, `unit ${target} is still ${known.phase}; terminate it first`));
          return;
        }
        this.units.delete(target);
        this.broadcast(this.core.unitGone(target));
        return;
      }
    }
  }
}

async function main(): Promise<void> {
  const fail = (msg: string): never => {
    process.stderr.write(`fleet-agents: ${msg}\n`);
    process.exit(2);
  };
  setOwnPriority(DEFAULT_REPLICA_NICE); // as the replicas (see the header); refused without root, like theirs
  let values;
  try {
    ({ values } = parseCommandLine(process.argv.slice(2), {
      urls: { type: 'string' },
      token: { type: 'string' },
      first: { type: 'string', default: '0' },
      count: { type: 'string' },
      'heartbeat-ms': { type: 'string', default: '1000' },
      cpu: { type: 'string', default: '8000' },
      memory: { type: 'string', default: '16384' },
    }));
  } catch (err) {
    return fail((err as Error).message);
  }
  const urls = (values.urls ?? '').split(',').filter(Boolean);
  if (urls.length === 0) fail('--urls: expected ws://host:port,... of every replica');
  if (!values.token) fail('--token: required');
  const int = (name: string, v: string | undefined, min: number): number => {
    const n = v === undefined ? undefined : wholeNumber(v, min);
    return n ?? fail(`--${name}: expected an integer >= ${min}, got "${v}"`);
  };
  const first = int('first', values.first, 0);
  const count = int('count', values.count, 1);
  const heartbeatMs = int('heartbeat-ms', values['heartbeat-ms'], TICK_MS);
  const capacity = { cpu: int('cpu', values.cpu, 1), memory: int('memory', values.memory, 1) };

  const counters = { spawns: 0, terminates: 0, refused: 0, closes: 0 };
  const agents: SimAgent[] = [];
  for (let i = 0; i < count; i++) {
    const name = fleetNodeName(first + i);
    agents.push(new SimAgent({ name, capacity, taints: [], labels: { zone: `zone-${(first + i) % 3}`, fleet: 'sim' } }, urls, values.token!, counters));
  }
  // The heartbeat wheel: agent k beats when (t mod interval) crosses its phase.
  const slots = Math.max(1, Math.round(heartbeatMs / TICK_MS));
  const bySlot: SimAgent[][] = Array.from({ length: slots }, () => []);
  agents.forEach((a, k) => bySlot[Math.floor((k * slots) / agents.length)].push(a));
  let maxGap = 0;
  let tick = 0;
  const t0 = performance.now();
  const wheel = (): void => {
    // Catch up on every slot whose time has come (a late timer sends the missed ones now).
    const due = Math.floor((performance.now() - t0) / TICK_MS);
    for (; tick <= due; tick++) {
      const now = performance.now();
      for (const a of bySlot[tick % slots]) {
        const gap = a.beat(now);
        if (gap > maxGap) maxGap = gap;
      }
    }
  };
  const wheelTimer = setInterval(wheel, TICK_MS);

  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const reportTimer = setInterval(() => {
    let linksOpen = 0;
    let welcomed = 0;
    let unitsRunning = 0;
    for (const a of agents) {
      for (const l of a.links) if (l.isOpen) linksOpen++;
      welcomed += a.welcomed.size;
      for (const u of a.units.values()) if (u.phase === 'Running') unitsRunning++;
    }
    const r: FleetWorkerReport = {
      type: 'report',
      agents: agents.length,
      linksOpen,
      welcomed,
      unitsRunning,
      ...counters,
      maxHeartbeatGapMs: Math.round(maxGap),
      loopP99Ms: loop.percentile(99) / 1e6,
      loopMaxMs: loop.max / 1e6,
    };
    maxGap = 0;
    loop.reset();
    process.send?.(r);
  }, 1000);

  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    clearInterval(wheelTimer);
    clearInterval(reportTimer);
    await Promise.race([Promise.all(agents.map((a) => a.stop())), new Promise((r) => setTimeout(r, 3000))]);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  // The parent went away: do not linger.
  process.on('disconnect', () => void stop());

  // Connect gradually (a fleet does not boot in one millisecond): 100 agents
  // every 20 ms, and a batch only once the one before it has its links open
  // (or after CONNECT_WAIT_MS), so the worker's own loop is not buried
  // under hundreds of handshakes at once (with batches every 20 ms
  // regardless, its timers ran up to 4.8 s late while the fleet connected).
  // The wheel above already runs, so an agent beats from its first open
  // link on, as node-agent/main.ts does; a wheel started after this loop
  // (10-15 s here) had left the first agents silent that long: thousands of
  // NotReady announced while the fleet registered, the simulator's doing.
  for (let i = 0; i < agents.length && !stopping; i += 100) {
    const batch = agents.slice(i, i + 100);
    for (const a of batch) a.start();
    const until = performance.now() + CONNECT_WAIT_MS;
    do await new Promise((r) => setTimeout(r, 20));
    while (!stopping && performance.now() < until && !batch.every((a) => a.links.every((l) => l.isOpen)));
  }
}

void main();
