// control-plane/sim/host-sim.ts -- the production host under a seeded fault
// schedule, in one process: three RaftStores (with every shortcut of
// store/raft-store.ts: the leader sends before its own fsync, commit-only
// Readies are not written, commits ride on the next append), each with its
// desired-state machine, NodeRegistry, AgentServer and Controller (scheduler
// and reconcile inside), wired as control-plane/main.ts wires them; and
// simulated node agents that speak the real protocol (frames encoded and
// validated by shared/protocol/codec.ts, fencing and dedupe by the agent's
// own pure core, node-agent/agent-core.ts). Time is a ManualClock, the
// network between replicas a MemoryNetwork, every disk a MemoryDisk whose
// writes take time and are lost by a crash, every choice a SeededRandom: a
// seed replays exactly (`npm run sim -- --host --seed S --verbose`).
//
// The architecture's invariants (docs/architecture.md) are checked after
// every event of the schedule:
//   * election safety: at most one leader per term;
//   * state machine safety: every replica applies the same command at an index;
//   * no acknowledged write lost: what a proposal resolved with is what every
//     replica applies at its index, and all replicas apply it once healed;
//   * binding before spawn: a spawn leaves a replica only for a unit whose
//     binding to that node is stored on a majority of disks;
//   * fencing: an agent obeys no command of a term below one it has heard;
//   * no unit runs on two nodes at once;
//   * capacity: the requests bound to a node never exceed its capacity;
// and once the faults stop and every process is back: a leader is elected
// and observed converges to desired (every deployment runs its replicas, of
// its current template, on the nodes its bindings name, and nothing else
// runs) within a bound.
//
// Not modelled: the HTTP API, Services, metrics, unit logs, probes, real
// processes and the events' replication (each replica keeps its events
// locally). Pure by construction, not by import: the shells it drives import
// their real defaults (fs, ws), but none of them is reached at run time
// (test/unit/host-sim.test.ts replays a seed and compares traces).

import { decodeStoreData } from '../../shared/codec.ts';
import { ManualClock } from '../../shared/clock.ts';
import { SeededRandom, randomId } from '../../shared/random.ts';
import { unitSpecHash, validateManifest } from '../../shared/manifest.ts';
import type { NodeInfo, UnitReport } from '../../shared/model.ts';
import { decodeAgentMessage, decodeControlPlaneMessage, encodeMessage } from '../../shared/protocol/codec.ts';
import type { AgentMessage, Command, ControlPlaneMessage } from '../../shared/protocol/messages.ts';
import { AgentCore } from '../../node-agent/agent-core.ts';
import { AgentServer, type AgentSocket } from '../agent-server.ts';
import { Controller } from '../controller/controller.ts';
import { EventLog } from '../events.ts';
import type { Mutation } from '../mutations.ts';
import { NodeRegistry } from '../registry/node-registry.ts';
import { Scheduler } from '../scheduler/index.ts';
import type { StoreCommand } from '../store/desired-state.ts';
import { RaftStore, type RaftTiming } from '../store/raft-store.ts';
import { followLeadership, nodeRegistrar } from '../leadership.ts';
import { MemoryNetwork, type MemoryTransport } from './memory-network.ts';
import { MemoryDisk, MemoryStorage } from './memory-storage.ts';

/** Simulated time of the fault phase, by default. */
export const DEFAULT_FAULT_MS = 2000;
/** After the heal: a leader must exist within this long. */
export const LEADER_BOUND_MS = 5000;
/** After the heal (and any crash-loop back-off): observed must equal desired within this long. */
export const CONVERGENCE_BOUND_MS = 15000;
/** A guard against a schedule that never quiesces. */
const MAX_EVENTS = 2_000_000;

/** The replicas' timing in the simulation: production ratios, coarser ticks (fewer events per simulated second). */
export const SIM_RAFT_TIMING: RaftTiming = { tickMs: 50, electionTimeoutTicks: 10, heartbeatTicks: 2 };
const HEARTBEAT_MS = 200;
const NOT_READY_AFTER_MS = 1000;
const RECONNECT_MS = 100;
/** The registry's liveness check period (main.ts: notReadyAfterMs / 20; coarser here, fewer events). */
const LIVENESS_CHECK_MS = 100;

export interface HostSimOptions {
  /** Simulated milliseconds of faults before the heal (default DEFAULT_FAULT_MS). */
  faultMs?: number;
  /** A deliberate bug to switch on (control-plane/mutations.ts). */
  mutation?: Mutation;
  /** One line per event and per log line of every process. */
  trace?: (line: string) => void;
}

export interface HostSimStats {
  events: number;
  simMs: number;
  leaderTerms: number;
  writesAcked: number;
  writesFailed: number;
  replicaCrashes: number;
  agentCrashes: number;
  unitCrashes: number;
  partitions: number;
  spawnsObeyed: number;
  commandsRefused: number;
  snapshots: number;
  convergedAfterMs: number;
}

export interface HostSimResult {
  seed: number;
  ok: boolean;
  failure?: string;
  /** Simulated ms (since the start) at which the failure was seen. */
  failedAtMs?: number;
  stats: HostSimStats;
}

/** What a simulated agent holds of one unit. */
interface SimUnit {
  report: UnitReport;
  /** Timer that moves it on (start, exit). */
  timer: { unref(): unknown } | null;
}

// ---------------------------------------------------------------- sockets

/**
 * One agent <-> replica connection: the replica's end is an AgentSocket the
 * AgentServer accepts; frames are bytes, delivered in order after a
 * latency. A cut holds frames (TCP retransmits) until healed.
 */
class SimConnection {
  open = true;
  cut = false;
  private readonly held: Array<() => void> = [];
  private lastDue = { toServer: -Infinity, toAgent: -Infinity };
  readonly server: ServerEnd;

  constructor(
    readonly sim: HostSimulation,
    readonly replica: SimReplica,
    readonly agent: SimAgent,
  ) {
    this.server = new ServerEnd(this);
  }

  deliver(dir: 'toServer' | 'toAgent', fn: () => void): void {
    if (!this.open) return;
    const run = () => {
      const latency = 0.2 + this.sim.rng.next() * 1.5;
      const due = Math.max(this.sim.clock.now() + latency, this.lastDue[dir]);
      this.lastDue[dir] = due;
      this.sim.clock.timeout(() => {
        if (this.open) fn();
      }, due - this.sim.clock.now());
    };
    if (this.cut) this.held.push(run);
    else run();
  }

  heal(): void {
    this.cut = false;
    for (const run of this.held.splice(0)) run();
  }

  /** Either end closes: both hear it (the replica's AgentServer through 'close'). */
  close(): void {
    if (!this.open) return;
    this.open = false;
    this.held.length = 0;
    this.sim.clock.immediate(() => {
      this.server.emitClose();
      this.agent.connectionClosed(this);
    });
  }
}

class ServerEnd implements AgentSocket {
  readonly OPEN = 1;
  private onMessage: ((data: Buffer, isBinary: boolean) => void) | null = null;
  private onClose: (() => void) | null = null;

  constructor(private readonly conn: SimConnection) {}

  get readyState(): number {
    return this.conn.open ? 1 : 3;
  }

  send(data: Uint8Array): void {
    if (!this.conn.open) return;
    const bytes = Buffer.from(data);
    this.conn.sim.checkOutgoing(this.conn.replica, this.conn.agent, bytes);
    this.conn.deliver('toAgent', () => this.conn.agent.receive(this.conn, bytes));
  }

  close(): void {
    this.conn.close();
  }

  terminate(): void {
    this.conn.close();
  }

  on(event: 'message' | 'close' | 'error', fn: ((data: Buffer, isBinary: boolean) => void) | (() => void) | ((err: Error) => void)): this {
    if (event === 'message') this.onMessage = fn as (data: Buffer, isBinary: boolean) => void;
    else if (event === 'close') this.onClose = fn as () => void;
    return this;
  }

  /** A frame from the agent arrives at the replica. */
  frame(bytes: Buffer): void {
    this.onMessage?.(bytes, true);
  }

  emitClose(): void {
    this.onClose?.();
  }
}

// ---------------------------------------------------------------- agents

class SimAgent {
  up = false;
  pid = 0;
  core: AgentCore;
  units = new Map<string, SimUnit>();
  conns = new Map<string, SimConnection>();
  /** The highest term in any frame heard (welcome, leader, commands), tracked apart from AgentCore. */
  heardTerm = 0;
  private heartbeat: { unref(): unknown } | null = null;

  constructor(
    readonly sim: HostSimulation,
    readonly info: NodeInfo,
  ) {
    this.core = new AgentCore(info, 0);
  }

  start(): void {
    this.up = true;
    this.pid = this.sim.nextPid();
    this.core = new AgentCore(this.info, this.pid);
    this.heardTerm = 0;
    this.units.clear();
    for (const r of this.sim.replicas) this.connect(r);
    this.heartbeat = this.sim.clock.interval(() => {
      const hb = encodeMessage(this.core.heartbeat(this.sim.wall()));
      for (const c of this.conns.values()) c.deliver('toServer', () => c.server.frame(hb));
    }, HEARTBEAT_MS);
  }

  /** SIGKILL: the agent and (orphan guard, pdeathsig) all its units die; the kernel closes its sockets. */
  crash(): void {
    this.up = false;
    this.sim.clock.cancel(this.heartbeat);
    for (const u of this.units.values()) this.sim.clock.cancel(u.timer);
    this.units.clear();
    for (const c of [...this.conns.values()]) c.close();
    this.conns.clear();
  }

  connect(r: SimReplica): void {
    if (!this.up || !r.up || this.conns.has(r.id)) return;
    const c = new SimConnection(this.sim, r, this);
    this.conns.set(r.id, c);
    r.agents!.accept(c.server, this.info.name);
    this.send(c, this.core.hello([...this.units.values()].map((u) => u.report)));
  }

  connectionClosed(c: SimConnection): void {
    if (this.conns.get(c.replica.id) === c) this.conns.delete(c.replica.id);
    if (!this.up) return;
    this.sim.clock.timeout(() => this.connect(c.replica), RECONNECT_MS + this.sim.rng.next() * 50);
  }

  private send(c: SimConnection, msg: AgentMessage): void {
    const bytes = encodeMessage(msg);
    c.deliver('toServer', () => c.server.frame(bytes));
  }

  private broadcast(msg: AgentMessage): void {
    const bytes = encodeMessage(msg);
    for (const c of this.conns.values()) c.deliver('toServer', () => c.server.frame(bytes));
  }

  receive(c: SimConnection, bytes: Buffer): void {
    if (!this.up) return;
    const d = decodeControlPlaneMessage(bytes);
    if (!d.ok) return this.sim.fail(`agent ${this.info.name} got a frame it cannot decode from ${c.replica.id}: ${d.error}`);
    const msg: ControlPlaneMessage = d.msg;
    switch (msg.type) {
      case 'welcome':
      case 'leader':
        this.heardTerm = Math.max(this.heardTerm, msg.term);
        this.core.observeLeader(msg.term, msg.leaderId);
        return;
      case 'spawn':
      case 'terminate':
      case 'forget':
        return this.command(c, msg);
      case 'services':
      case 'log-open':
      case 'log-close':
      case 'ping-interval':
        return;
    }
  }

  private command(c: SimConnection, cmd: Command): void {
    const target = cmd.type === 'spawn' ? cmd.unit.name : cmd.name;
    const admission = this.core.admit(cmd);
    if (admission.kind === 'refuse') {
      this.sim.stats.commandsRefused++;
      this.send(c, this.core.refused(cmd.commandId, admission.reason));
      return;
    }
    // Fencing, checked apart from the core that enforces it.
    if (cmd.term < this.heardTerm) this.sim.fail(`fencing: agent ${this.info.name} obeys ${cmd.type} ${target} of term ${cmd.term} after hearing term ${this.heardTerm}`);
    this.heardTerm = Math.max(this.heardTerm, cmd.term);
    const leader = this.sim.leaders.get(cmd.term);
    if (leader !== cmd.leaderId)
      this.sim.fail(`agent ${this.info.name} got ${cmd.type} ${target} in term ${cmd.term} from ${cmd.leaderId}, which never led that term (leader: ${leader ?? 'none'})`);
    if (admission.kind === 'duplicate') {
      const known = this.units.get(target);
      if (known) this.send(c, this.core.unitStatus(known.report));
      return;
    }
    switch (cmd.type) {
      case 'spawn': {
        if (this.units.has(target)) {
          this.send(c, this.core.unitStatus(this.units.get(target)!.report)); // idempotent by name
          return;
        }
        this.sim.stats.spawnsObeyed++;
        this.sim.checkNotRunningElsewhere(target, this.info.name);
        const report: UnitReport = {
          name: target,
          deployment: cmd.unit.deployment,
          phase: 'Pending',
          resources: cmd.unit.spec.resources,
          term: cmd.term,
          specHash: cmd.unit.specHash,
          revision: cmd.unit.revision,
        };
        const u: SimUnit = { report, timer: null };
        this.units.set(target, u);
        this.broadcast(this.core.unitStatus({ ...report }));
        u.timer = this.sim.clock.timeout(
          () => {
            u.timer = null;
            if (u.report.phase !== 'Pending') return;
            u.report = { ...u.report, phase: 'Running', pid: this.sim.nextPid(), startedAt: this.sim.wall(), ready: true, readySince: this.sim.wall() };
            this.broadcast(this.core.unitStatus(u.report));
          },
          1 + this.sim.rng.next() * 20,
        );
        return;
      }
      case 'terminate': {
        const u = this.units.get(target);
        if (!u) {
          this.broadcast(this.core.unitGone(target));
          return;
        }
        if (u.report.phase !== 'Running' && u.report.phase !== 'Pending') {
          this.send(c, this.core.unitStatus(u.report));
          return;
        }
        this.sim.clock.cancel(u.timer);
        u.report = { ...u.report, phase: 'Terminating' };
        this.broadcast(this.core.unitStatus(u.report));
        u.timer = this.sim.clock.timeout(
          () => {
            u.timer = null;
            this.end(u, { phase: 'Succeeded', reason: 'Terminated', message: 'signal SIGTERM', signal: 'SIGTERM' });
          },
          Math.min(cmd.gracePeriodMs, 1 + this.sim.rng.next() * 30),
        );
        return;
      }
      case 'forget': {
        const u = this.units.get(target);
        if (u && (u.report.phase === 'Running' || u.report.phase === 'Pending' || u.report.phase === 'Terminating')) {
          this.send(c, this.core.refused(cmd.commandId, `unit ${target} is still ${u.report.phase}; terminate it first`));
          return;
        }
        this.units.delete(target);
        this.broadcast(this.core.unitGone(target));
        return;
      }
    }
  }

  /** A unit's process exits on its own (a crash). */
  crashUnit(name: string): void {
    const u = this.units.get(name);
    if (!u || u.report.phase !== 'Running') return;
    this.sim.clock.cancel(u.timer);
    this.end(u, { phase: 'Failed', reason: 'Error', message: 'exit code 1', exitCode: 1 });
  }

  private end(u: SimUnit, outcome: Partial<UnitReport> & { phase: 'Succeeded' | 'Failed' }): void {
    u.report = { ...u.report, ...outcome, ready: false, finishedAt: this.sim.wall() };
    this.broadcast(this.core.unitStatus(u.report));
  }

  liveUnits(): SimUnit[] {
    return [...this.units.values()].filter((u) => u.report.phase === 'Pending' || u.report.phase === 'Running' || u.report.phase === 'Terminating');
  }
}

// ---------------------------------------------------------------- replicas

class SimReplica {
  up = false;
  disk = new MemoryDisk();
  storage: MemoryStorage | null = null;
  store: RaftStore<MemoryTransport> | null = null;
  registry: NodeRegistry | null = null;
  agents: AgentServer | null = null;
  controller: Controller | null = null;
  private liveness: { unref(): unknown } | null = null;
  incarnation = 0;

  constructor(
    readonly sim: HostSimulation,
    readonly id: string,
  ) {}

  /** Start (or restart from its disk): the wiring of control-plane/main.ts. */
  async start(): Promise<void> {
    const sim = this.sim;
    const clock = sim.clock;
    const id = this.id;
    const inc = ++this.incarnation;
    const log = (line: string) => sim.trace(`${id}: ${line}`);
    const now = () => sim.wall();
    this.storage = await MemoryStorage.open(this.disk, { clock, writeDelayMs: () => 0.1 + sim.rng.next() * 3 });
    const storage = this.storage;
    const store = await RaftStore.open<MemoryTransport>({
      id,
      peers: new Map(sim.replicaIds.map((p) => [p, `sim://${p}`])),
      dataDir: `sim://${id}`,
      token: 'sim',
      log,
      timing: SIM_RAFT_TIMING,
      snapshotEvery: sim.snapshotEvery,
      clock,
      random: sim.rng,
      storage: async () => storage,
      transport: sim.net.transport(id, sim.replicaIds),
      mutation: sim.mutation,
    });
    if (inc !== this.incarnation) return;
    this.store = store;
    sim.watchApplies(this, store);
    const registry = new NodeRegistry(NOT_READY_AFTER_MS);
    this.registry = registry;
    const events = new EventLog(id, now);
    const agents = new AgentServer({
      replicaId: id,
      token: 'sim',
      registry,
      now,
      heartbeatIntervalMs: HEARTBEAT_MS,
      leadership: () => ({ term: store.term(), leaderId: store.leaderId() }),
      log,
      onFrame: () => store.pulse(),
      clock,
    });
    this.agents = agents;
    const controller = new Controller({
      store,
      registry,
      agents,
      events,
      scheduler: new Scheduler(),
      now,
      log,
      clock,
      random: sim.rng,
      mutation: sim.mutation,
      // maxBindingsPerPass 3 (production: 2,000): the simulated clusters are small, and this splits their
      // passes into scopes of a deployment or two, so the bounded passes are what the seeds check.
      options: { maxActionsPerPass: 500, resyncIntervalMs: 1000, spawnTimeoutMs: 3000, terminateGracePeriodMs: 2000, maxBindingsPerPass: 3 },
    });
    this.controller = controller;
    const registerNode = nodeRegistrar({ store, registry, now, log });
    registry.onChange((c) => {
      if (c.type === 'node-registered' && store.isLeader()) registerNode(c.node);
      controller.registryChanged(c);
    });
    store.state.onChange((kind, name) => controller.storeChanged(kind, name));
    followLeadership({ store, registry, agents, controller, now, log, onRoleChange: (s) => sim.noteRole(this, s.role, s.term) }, registerNode);
    this.liveness = clock.interval(() => registry.checkLiveness(now()), LIVENESS_CHECK_MS);
    controller.start();
    this.up = true;
    for (const a of sim.agents) a.connect(this);
  }

  /** SIGKILL: writes not yet durable are lost (a prefix may have made it), sockets close. */
  crash(): void {
    if (!this.up) return;
    this.up = false;
    this.incarnation++;
    this.controller?.stop();
    this.sim.clock.cancel(this.liveness);
    this.storage?.crash(this.sim.rng.int(2) === 0 ? 0 : this.sim.rng.int((this.storage?.pendingOps ?? 0) + 1));
    // close() cancels the store's timers and its transport; its disk is already gone (crash above), so
    // nothing it still has in flight reaches the MemoryDisk.
    void this.store?.close().catch(() => undefined);
    for (const a of this.sim.agents) a.conns.get(this.id)?.close();
    this.store = null;
    this.registry = null;
    this.agents = null;
    this.controller = null;
    this.storage = null;
  }
}

// ---------------------------------------------------------------- the run

interface AckedWrite {
  index: number;
  digest: string;
  what: string;
}

export class HostSimulation {
  readonly clock = new ManualClock(1_700_000_000_000);
  readonly rng: SeededRandom;
  readonly net: MemoryNetwork;
  readonly replicaIds = ['cp-1', 'cp-2', 'cp-3'];
  readonly replicas: SimReplica[];
  readonly agents: SimAgent[];
  readonly leaders = new Map<number, string>();
  readonly stats: HostSimStats = {
    events: 0,
    simMs: 0,
    leaderTerms: 0,
    writesAcked: 0,
    writesFailed: 0,
    replicaCrashes: 0,
    agentCrashes: 0,
    unitCrashes: 0,
    partitions: 0,
    spawnsObeyed: 0,
    commandsRefused: 0,
    snapshots: 0,
    convergedAfterMs: -1,
  };
  readonly mutation: Mutation | undefined;
  readonly snapshotEvery: number;
  /** Index -> what was applied there, by whichever replica applied it first. */
  private readonly appliedAt = new Map<number, string>();
  private readonly acked: AckedWrite[] = [];
  private failure: string | null = null;
  private failedAtMs = 0;
  private pid = 1000;
  private readonly start: number;
  private writeSeq = 0;
  /** Something was applied since the last state check. */
  private applied = false;

  constructor(
    readonly seed: number,
    private readonly options: HostSimOptions,
  ) {
    this.rng = new SeededRandom(seed);
    this.net = new MemoryNetwork({ clock: this.clock, random: this.rng });
    this.mutation = options.mutation;
    this.snapshotEvery = 20 + this.rng.int(200);
    this.replicas = this.replicaIds.map((id) => new SimReplica(this, id));
    const cpu = 1000 + 500 * this.rng.int(3);
    this.agents = ['node-a', 'node-b', 'node-c'].map((name) => new SimAgent(this, { name, capacity: { cpu, memory: 2048 }, taints: [], labels: {} }));
    this.start = this.clock.now();
  }

  trace(line: string): void {
    this.options.trace?.(`${((this.clock.now() - this.start) / 1000).toFixed(3)} ${line}`);
  }

  /** The wall clock of the simulated processes: whole milliseconds, as Date.now() gives them. */
  wall(): number {
    return Math.floor(this.clock.now());
  }

  nextPid(): number {
    return ++this.pid;
  }

  fail(why: string): void {
    if (this.failure !== null) return;
    this.failure = why;
    this.failedAtMs = this.clock.now() - this.start;
    this.trace(`VIOLATION: ${why}`);
  }

  noteRole(r: SimReplica, role: string, term: number): void {
    if (role !== 'leader') return;
    const was = this.leaders.get(term);
    if (was === undefined) {
      this.leaders.set(term, r.id);
      this.stats.leaderTerms++;
      this.trace(`${r.id} leads term ${term}`);
    } else if (was !== r.id) {
      this.fail(`election safety: ${was} and ${r.id} both lead term ${term}`);
    }
  }

  /** State machine safety: record what every replica applies at every index. */
  watchApplies(r: SimReplica, store: RaftStore<MemoryTransport>): void {
    const state = store.state;
    const apply = state.apply.bind(state);
    state.apply = (index: number, cmd: StoreCommand) => {
      this.applied = true;
      const digest = JSON.stringify(cmd);
      const was = this.appliedAt.get(index);
      if (was === undefined) this.appliedAt.set(index, digest);
      else if (was !== digest) this.fail(`state machine safety: ${r.id} applies at index ${index} ${short(digest)}, another replica applied ${short(was)}`);
      return apply(index, cmd);
    };
  }

  /** Binding before spawn: a spawn leaves replica r only for a unit bound to that node on a majority of disks. */
  checkOutgoing(r: SimReplica, agent: SimAgent, bytes: Buffer): void {
    const d = decodeControlPlaneMessage(bytes);
    if (!d.ok) return this.fail(`${r.id} sent agent ${agent.info.name} a frame that does not validate: ${d.error}`);
    const msg = d.msg;
    if (msg.type !== 'spawn') return;
    const name = msg.unit.name;
    const node = agent.info.name;
    const u = r.store?.state.units.get(name);
    if (!u || u.nodeName !== node) return this.fail(`binding before spawn: ${r.id} sends spawn ${name} to ${node} but has not applied that binding`);
    const index = u.resourceVersion;
    let stored = 0;
    for (const other of this.replicas) {
      const disk = other.disk;
      if (disk.snapshotIndex >= index) {
        stored++;
        continue;
      }
      const e = disk.entryAt(index);
      if (!e || e.kind !== 'normal') continue;
      const cmd = decodeStoreData(e.data, `raft log entry ${e.index}`) as StoreCommand;
      if (JSON.stringify(cmd) === this.appliedAt.get(index)) stored++;
    }
    if (stored * 2 <= this.replicas.length)
      this.fail(`binding before spawn: ${r.id} sends spawn ${name} to ${node} while its binding (index ${index}) is on ${stored} of ${this.replicas.length} disks`);
  }

  checkNotRunningElsewhere(unit: string, node: string): void {
    for (const a of this.agents) {
      if (a.info.name === node || !a.up) continue;
      const u = a.units.get(unit);
      if (u && (u.report.phase === 'Running' || u.report.phase === 'Pending' || u.report.phase === 'Terminating')) {
        this.fail(`unit ${unit} starts on ${node} while it still runs on ${a.info.name}`);
      }
    }
  }

  /** The checks of every step that read state rather than watch an action. */
  private checkState(): void {
    if (!this.applied) return;
    this.applied = false;
    for (const r of this.replicas) {
      const store = r.store;
      if (!r.up || !store) continue;
      const state = store.state;
      for (const rec of state.nodes.values()) {
        const used = state.allocatedOn(rec.info.name);
        if (used.cpu > rec.info.capacity.cpu || used.memory > rec.info.capacity.memory) {
          this.fail(`capacity: ${r.id} has ${used.cpu}m/${used.memory}Mi bound to ${rec.info.name}, capacity ${rec.info.capacity.cpu}m/${rec.info.capacity.memory}Mi`);
        }
      }
    }
  }

  private leader(): SimReplica | null {
    let best: SimReplica | null = null;
    for (const r of this.replicas) if (r.up && r.store?.isLeader() && (!best || r.store.term() > best.store!.term())) best = r;
    return best;
  }

  // ------------------------------------------------------------ clients

  private manifest(name: string, replicas: number, variant: number) {
    const cpu = 100 * (1 + this.rng.int(3));
    return validateManifest({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name },
      spec: {
        replicas,
        template: { spec: { containers: [{ name, command: ['sleep', String(3600 + variant)], resources: { requests: { cpu: `${cpu}m`, memory: '64Mi' } } }] } },
      },
    });
  }

  private clientWrite(): void {
    const r = this.leader() ?? this.rng.pick(this.replicas);
    const store = r.store;
    if (!r.up || !store) return;
    const name = this.rng.pick(['web', 'api']);
    const seq = ++this.writeSeq;
    let cmd: StoreCommand;
    const roll = this.rng.next();
    if (roll < 0.55 || !store.state.deployments.has(name)) {
      const { manifest, unitSpec } = this.manifest(name, 1 + this.rng.int(4), this.rng.int(3));
      cmd = { type: 'deployment.apply', at: this.wall(), uid: randomId(this.rng), manifest, unitSpec, specHash: unitSpecHash(unitSpec) };
    } else if (roll < 0.95) {
      cmd = { type: 'deployment.scale', at: this.wall(), name, replicas: this.rng.int(5) };
    } else {
      cmd = { type: 'deployment.delete', at: this.wall(), name };
    }
    const what = `write #${seq} ${cmd.type} ${name} via ${r.id}`;
    this.trace(what);
    const digest = JSON.stringify(cmd);
    store.propose(cmd).then(
      () => {
        // The proposal resolved: its entry was applied on r at some index; find it by content.
        this.stats.writesAcked++;
        const index = this.indexOf(digest);
        if (index === null) return this.fail(`no acknowledged write lost: ${what} was acknowledged but no replica applied it`);
        this.acked.push({ index, digest, what });
        this.trace(`${what}: acknowledged at index ${index}`);
      },
      (e: Error) => {
        this.stats.writesFailed++;
        this.trace(`${what}: ${e.message}`);
      },
    );
  }

  private indexOf(digest: string): number | null {
    let found: number | null = null;
    for (const [i, d] of this.appliedAt) if (d === digest && (found === null || i > found)) found = i;
    return found;
  }

  // ------------------------------------------------------------ faults

  private async fault(): Promise<void> {
    const rng = this.rng;
    const roll = rng.next();
    const upReplicas = this.replicas.filter((r) => r.up);
    const downReplicas = this.replicas.filter((r) => !r.up);
    if (roll < 0.3) return this.clientWrite();
    if (roll < 0.4 && upReplicas.length > 0) {
      const r = rng.chance(0.5) ? (this.leader() ?? rng.pick(upReplicas)) : rng.pick(upReplicas);
      this.trace(`FAULT crash ${r.id}`);
      this.stats.replicaCrashes++;
      r.crash();
      return;
    }
    if (roll < 0.5 && downReplicas.length > 0) {
      const r = rng.pick(downReplicas);
      this.trace(`FAULT restart ${r.id}`);
      await r.start();
      return;
    }
    if (roll < 0.58) {
      const isolated = rng.pick(this.replicaIds);
      const rest = this.replicaIds.filter((x) => x !== isolated);
      this.trace(`FAULT partition ${isolated} | ${rest.join(',')}`);
      this.stats.partitions++;
      this.net.partition([[isolated], rest]);
      return;
    }
    if (roll < 0.64) {
      this.trace('FAULT heal the network');
      this.net.heal();
      for (const a of this.agents) for (const c of a.conns.values()) c.heal();
      return;
    }
    if (roll < 0.68) {
      const [a, b] = [rng.pick(this.replicaIds), rng.pick(this.replicaIds)];
      if (a !== b) {
        this.trace(`FAULT reset link ${a}-${b}`);
        this.net.reset(a, b);
      }
      return;
    }
    if (roll < 0.74) {
      const a = rng.pick(this.agents);
      if (a.up) {
        this.trace(`FAULT crash agent ${a.info.name}`);
        this.stats.agentCrashes++;
        a.crash();
      } else {
        this.trace(`FAULT restart agent ${a.info.name}`);
        a.start();
      }
      return;
    }
    if (roll < 0.8) {
      const a = rng.pick(this.agents);
      const c = [...a.conns.values()];
      if (c.length > 0) {
        const conn = rng.pick(c);
        this.trace(`FAULT cut ${a.info.name} <-> ${conn.replica.id}`);
        conn.cut = true;
      }
      return;
    }
    if (roll < 0.86) {
      const a = rng.pick(this.agents);
      const running = [...a.units.values()].filter((u) => u.report.phase === 'Running');
      if (running.length > 0) {
        const u = rng.pick(running);
        this.trace(`FAULT unit ${u.report.name} on ${a.info.name} exits 1`);
        this.stats.unitCrashes++;
        a.crashUnit(u.report.name);
      }
      return;
    }
    // otherwise: time passes
  }

  // ------------------------------------------------------------ driving

  /** Run timers until the clock reaches `until` (or a failure); checks after every one. */
  private async runUntil(until: number, stop?: () => boolean): Promise<void> {
    for (;;) {
      if (this.failure !== null) return;
      if (stop?.()) return;
      const next = this.clock.nextAt();
      if (next === null || next > until) {
        if (this.clock.now() < until) this.clock.skip(until - this.clock.now());
        return;
      }
      this.clock.runNext();
      await drain();
      this.stats.events++;
      if (this.stats.events > MAX_EVENTS) return this.fail(`more than ${MAX_EVENTS} events: the schedule does not quiesce`);
      this.checkState();
    }
  }

  /** Observed equals desired, as the leader's committed state describes it. */
  private converged(): string | null {
    const leader = this.leader();
    if (!leader || !leader.store) return 'no leader';
    const state = leader.store.state;
    const st = leader.store.status();
    if (st.appliedIndex < st.commitIndex) return `the leader applied ${st.appliedIndex} of ${st.commitIndex} committed entries`;
    const running = new Map<string, { node: string; u: SimUnit }>();
    for (const a of this.agents) for (const u of a.liveUnits()) running.set(u.report.name, { node: a.info.name, u });
    for (const d of state.deployments.values()) {
      let ok = 0;
      for (const u of state.units.values()) {
        if (u.deployment !== d.name) continue;
        const seen = running.get(u.name);
        if (u.nodeName && seen && seen.node === u.nodeName && seen.u.report.phase === 'Running' && u.specHash === d.specHash) ok++;
      }
      if (ok !== d.replicas) return `${d.name}: ${ok} of ${d.replicas} units running as bound, on the current template`;
    }
    for (const [name, { node }] of running) {
      const u = state.units.get(name);
      if (!u || u.nodeName !== node) return `unit ${name} runs on ${node} without a binding there`;
      const d = state.deployments.get(u.deployment);
      if (!d) return `unit ${name} runs for deleted deployment ${u.deployment}`;
    }
    for (const r of this.replicas) {
      if (!r.store) return `${r.id} is down`;
      if (r.store.state.appliedIndex !== state.appliedIndex) return `${r.id} applied ${r.store.state.appliedIndex}, the leader ${state.appliedIndex}`;
    }
    return null;
  }

  async run(): Promise<HostSimResult> {
    try {
      for (const r of this.replicas) await r.start();
      for (const a of this.agents) a.start();
      const faultMs = this.options.faultMs ?? DEFAULT_FAULT_MS;
      const faultEnd = this.clock.now() + faultMs;
      // A first deployment once a leader is there, so every seed has work to place.
      await this.runUntil(this.clock.now() + 1500, () => this.leader() !== null);
      this.clientWrite();
      while (this.failure === null && this.clock.now() < faultEnd) {
        await this.fault();
        await this.runUntil(Math.min(faultEnd, this.clock.now() + 20 + this.rng.next() * 300));
      }
      if (this.failure === null) await this.heal();
    } catch (e) {
      this.fail(`the simulation threw: ${(e as Error).stack ?? e}`);
    }
    const ok = this.failure === null;
    this.stats.simMs = Math.round(this.clock.now() - this.start);
    this.stats.snapshots = this.replicas.filter((r) => r.disk.snapshot !== null).length;
    for (const r of this.replicas) r.crash();
    for (const a of this.agents) a.crash();
    return { seed: this.seed, ok, failure: this.failure ?? undefined, failedAtMs: ok ? undefined : Math.round(this.failedAtMs), stats: this.stats };
  }

  private async heal(): Promise<void> {
    this.trace('HEAL: network healed, every replica and agent restarted');
    this.net.heal();
    for (const a of this.agents) for (const c of a.conns.values()) c.heal();
    for (const r of this.replicas) if (!r.up) await r.start();
    for (const a of this.agents) if (!a.up) a.start();
    const healedAt = this.clock.now();
    await this.runUntil(healedAt + LEADER_BOUND_MS, () => this.leader() !== null);
    if (this.failure !== null) return;
    // The leader has committed an entry of its term (a read barrier passes) and so applied everything acknowledged before.
    const b: { state: 'waiting' | 'passed' | 'failed' } = { state: 'failed' };
    while (b.state !== 'passed' && this.failure === null && this.clock.now() < healedAt + LEADER_BOUND_MS) {
      const l = this.leader();
      if (!l?.store) {
        await this.runUntil(this.clock.now() + 50);
        continue;
      }
      b.state = 'waiting';
      l.store.readBarrier().then(
        () => (b.state = 'passed'),
        () => (b.state = 'failed'),
      );
      await this.runUntil(healedAt + LEADER_BOUND_MS, () => b.state !== 'waiting');
    }
    if (this.failure !== null) return;
    if (b.state !== 'passed') return this.fail(`liveness: no leader confirmed by a quorum ${LEADER_BOUND_MS} ms after the heal`);
    // A crash loop's back-off delays the replacement on purpose: the bound starts when it ends.
    const backoffEnd = Math.max(healedAt, ...[...this.leader()!.store!.state.deployments.values()].map((d) => d.backoff?.until ?? 0));
    const deadline = Math.max(healedAt, backoffEnd) + CONVERGENCE_BOUND_MS;
    let why: string | null = 'not checked';
    let checkedAt = -Infinity;
    await this.runUntil(deadline, () => {
      // Every 20 simulated ms is often enough to see the moment, and keeps the check off the hot path.
      if (this.clock.now() - checkedAt < 20) return false;
      checkedAt = this.clock.now();
      why = this.converged();
      return why === null;
    });
    if (why !== null && this.failure === null) why = this.converged();
    if (this.failure !== null) return;
    if (why !== null) return this.fail(`convergence: ${((deadline - healedAt) / 1000).toFixed(1)} s after the heal, observed != desired: ${why}`);
    this.stats.convergedAfterMs = Math.round(this.clock.now() - healedAt);
    // No acknowledged write lost: every replica applied past every acknowledged index, and the same command there.
    const leader = this.leader()!;
    for (const w of this.acked) {
      if (this.appliedAt.get(w.index) !== w.digest)
        return this.fail(`no acknowledged write lost: ${w.what} (index ${w.index}) was replaced by ${short(this.appliedAt.get(w.index) ?? 'nothing')}`);
      for (const r of this.replicas) {
        if (r.store!.state.appliedIndex < w.index) return this.fail(`no acknowledged write lost: ${r.id} never applied ${w.what} (index ${w.index})`);
      }
    }
    const snap = JSON.stringify(leader.store!.state.snapshot());
    for (const r of this.replicas) {
      if (JSON.stringify(r.store!.state.snapshot()) !== snap)
        return this.fail(`replicas disagree: ${r.id}'s desired state differs from the leader's at index ${leader.store!.state.appliedIndex}`);
    }
  }
}

/** Let every microtask the last event started run to its end (a macrotask turn; nothing else is scheduled for real). */
function drain(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function short(s: string): string {
  return s.length > 140 ? `${s.slice(0, 140)}...` : s;
}

export function runHostSimulation(seed: number, options: HostSimOptions = {}): Promise<HostSimResult> {
  return new HostSimulation(seed, options).run();
}
