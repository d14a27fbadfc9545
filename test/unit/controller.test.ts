// test/unit/controller.test.ts -- the reconcile loop's driver
// (control-plane/controller/controller.ts) on a manual clock: its resync,
// spawn time-out and back-off run on the injected Clock, so every wait here
// is simulated time, exact, and needs no sleep. The store is a one-replica
// ReplicatedStore over the real DesiredState; the agent server is replaced by
// a recorder that checks, at the moment of every spawn, that the unit's
// binding to that node is already applied (committed) in the store.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../shared/clock.ts';
import { SeededRandom } from '../../shared/random.ts';
import { unitSpecHash, validateManifest } from '../../shared/manifest.ts';
import type { Command } from '../../shared/protocol/messages.ts';
import type { AgentServer } from '../../control-plane/agent-server.ts';
import { commitGated, Controller, IDLE_SWEEP_MAX_GAP_MS, idleResyncsSkipped, LAZY_PASS_SPACING_MS, MIN_PASS_SPACING_MS } from '../../control-plane/controller/controller.ts';
import { EventLog } from '../../control-plane/events.ts';
import { NodeRegistry } from '../../control-plane/registry/node-registry.ts';
import { Scheduler } from '../../control-plane/scheduler/index.ts';
import { DesiredState, type ApplyResult, type StoreCommand } from '../../control-plane/store/desired-state.ts';
import { NotLeaderError, type ReplicaStatus, type ReplicatedStore } from '../../control-plane/store/store.ts';

/** One replica that commits a proposal in the next microtask. */
class LocalStore implements ReplicatedStore {
  readonly id = 'cp-1';
  readonly state = new DesiredState();
  leader = true;
  currentTerm = 3;
  private index = 0;
  private readonly listeners: Array<() => void> = [];
  /** An entry already in the log ahead of the next unit.create (proposed earlier, applied first). */
  aheadOfCreate: StoreCommand | null = null;
  /** `barriers` when the last unit.create was proposed. */
  barriersAtCreate = 0;
  propose(cmd: StoreCommand): Promise<ApplyResult> {
    if (!this.leader) return Promise.reject(new NotLeaderError(null));
    if (cmd.type === 'unit.create') this.barriersAtCreate = this.barriers;
    return Promise.resolve().then(() => {
      if (cmd.type === 'unit.create' && this.aheadOfCreate) {
        this.state.apply(++this.index, this.aheadOfCreate);
        this.aheadOfCreate = null;
      }
      return this.state.apply(++this.index, cmd);
    });
  }
  /** Read barriers asked for. */
  barriers = 0;
  /** caughtUp() answers this while leading (a new leader's first entry not yet committed: false). */
  committedInTerm = true;
  readBarrier(): Promise<void> {
    this.barriers++;
    return this.leader ? Promise.resolve() : Promise.reject(new NotLeaderError(null));
  }
  isLeader(): boolean {
    return this.leader;
  }
  caughtUp(): boolean {
    return this.leader && this.committedInTerm;
  }
  term(): number {
    return this.currentTerm;
  }
  leaderId(): string | null {
    return this.leader ? this.id : null;
  }
  status(): ReplicaStatus {
    return { id: this.id, role: this.leader ? 'leader' : 'follower', term: this.currentTerm, commitIndex: this.index, appliedIndex: this.index, leaderId: this.leaderId() };
  }
  onRoleChange(fn: () => void): void {
    this.listeners.push(fn);
  }
  async close(): Promise<void> {}
}

const NODES = ['node-a', 'node-b'];

function setup(maxBindingsPerPass?: number) {
  const clock = new ManualClock(1_700_000_000_000);
  const now = () => Math.floor(clock.now());
  /** Each time the controller reads the clock, it moves on by this much: its passes then take that long to plan. */
  const slow = { msPerRead: 0 };
  const controllerNow = () => {
    const t = now();
    clock.skip(slow.msPerRead);
    return t;
  };
  const store = new LocalStore();
  const registry = new NodeRegistry(1000);
  const sent: Array<{ node: string; cmd: Command; at: number; boundThen: string | null | undefined }> = [];
  const agents = {
    send: (node: string, cmd: Command) => {
      const name = cmd.type === 'spawn' ? cmd.unit.name : cmd.name;
      sent.push({ node, cmd, at: clock.now(), boundThen: store.state.units.get(name)?.nodeName });
      return true;
    },
  } as unknown as AgentServer;
  /** Clock time of every pass the leader ran. */
  const passes: number[] = [];
  /** The controller's log lines. */
  const logs: string[] = [];
  /** Start (clock time) and duration in ms of every pass. */
  const passLog: Array<{ at: number; ms: number }> = [];
  const controller = new Controller({
    store,
    registry,
    agents,
    observer: { pass: (seconds) => (passes.push(clock.now()), passLog.push({ at: clock.now() - seconds * 1000, ms: seconds * 1000 })), scheduled: () => {}, placed: () => {} },
    events: new EventLog('cp-1', now),
    scheduler: new Scheduler(),
    now: controllerNow,
    log: (line: string) => logs.push(line),
    clock,
    random: new SeededRandom(1),
    options: { maxActionsPerPass: 100, resyncIntervalMs: 1000, spawnTimeoutMs: 3000, terminateGracePeriodMs: 2000, maxBindingsPerPass },
  });
  // As control-plane/main.ts wires them.
  registry.onChange((c) => controller.registryChanged(c));
  store.state.onChange((kind, name) => controller.storeChanged(kind, name));
  let index = 0;
  for (const name of NODES) {
    const info = { name, capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} };
    store.state.apply(++index, { type: 'node.register', at: now(), node: info });
    registry.hello(info, 100, [], 0, now());
  }
  // Heartbeats and the liveness check, on the same clock.
  const silent = new Set<string>();
  clock.interval(() => {
    for (const n of NODES) if (!silent.has(n)) registry.heartbeat(n, now());
  }, 200);
  clock.interval(() => registry.checkLiveness(now()), 50);

  /** Run every timer due in the next `ms`, letting each one's promises settle. */
  const advance = async (ms: number) => {
    const until = clock.now() + ms;
    for (;;) {
      await new Promise((r) => setImmediate(r));
      const next = clock.nextAt();
      if (next === null || next > until) break;
      clock.runNext();
    }
    clock.skip(until - clock.now());
  };
  const manifestOf = (replicas: number, cpu = '300m') =>
    validateManifest({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: { replicas, template: { spec: { containers: [{ name: 'web', command: ['sleep', '3600'], resources: { requests: { cpu, memory: '64Mi' } } }] } } },
    });
  const deploy = async (replicas: number) => {
    const { manifest, unitSpec } = validateManifest({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: { replicas, template: { spec: { containers: [{ name: 'web', command: ['sleep', '3600'], resources: { requests: { cpu: '300m', memory: '64Mi' } } }] } } },
    });
    await store.propose({ type: 'deployment.apply', at: now(), uid: 'u-web', manifest, unitSpec, specHash: unitSpecHash(unitSpec) });
  };
  const running = (node: string, cmd: Command) => {
    assert.equal(cmd.type, 'spawn');
    if (cmd.type !== 'spawn') return;
    registry.unitStatus(node, {
      name: cmd.unit.name,
      deployment: cmd.unit.deployment,
      phase: 'Running',
      pid: 4242,
      resources: cmd.unit.spec.resources,
      term: cmd.term,
      ready: true,
      specHash: cmd.unit.specHash,
      revision: cmd.unit.revision,
    });
  };
  /** Deploy 2 replicas, report both spawned units Running, then let `settleMs` of clock time pass. */
  const twoRunning = async (settleMs: number) => {
    await deploy(2);
    await advance(20);
    for (const s of sent.filter((x) => x.cmd.type === 'spawn')) running(s.node, s.cmd);
    await advance(settleMs);
  };
  return { clock, store, registry, controller, sent, advance, deploy, manifestOf, running, twoRunning, silent, passes, passLog, logs, slow };
}

const spawns = (sent: ReturnType<typeof setup>['sent']) => sent.filter((s) => s.cmd.type === 'spawn');

test('a new deployment: bindings are committed first, then each spawn goes to its bound node with the leader term', async () => {
  const h = setup();
  h.controller.start();
  await h.deploy(3);
  await h.advance(20);
  const sp = spawns(h.sent);
  assert.equal(sp.length, 3, JSON.stringify(h.sent.map((s) => s.cmd.type)));
  for (const s of sp) {
    assert.equal(s.boundThen, s.node, `spawn of ${s.cmd.type === 'spawn' ? s.cmd.unit.name : ''} sent before its binding to ${s.node} was committed`);
    assert.equal(s.cmd.term, 3);
    assert.equal(s.cmd.leaderId, 'cp-1');
  }
  assert.deepEqual(new Set(sp.map((s) => s.node)), new Set(NODES), 'spread over both nodes');
  h.controller.stop();
});

test('a follower sends nothing; once it leads, its next pass acts', async () => {
  const h = setup();
  h.store.leader = false;
  h.controller.start();
  const { manifest, unitSpec } = validateManifest({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: { replicas: 1, template: { spec: { containers: [{ name: 'web', command: ['sleep', '1'] }] } } },
  });
  h.store.state.apply(10, { type: 'deployment.apply', at: 1, uid: 'u', manifest, unitSpec, specHash: unitSpecHash(unitSpec) });
  await h.advance(2500);
  assert.deepEqual(h.sent, []);
  h.store.leader = true;
  await h.advance(1000); // the resync's next pass
  assert.equal(spawns(h.sent).length, 1);
  h.controller.stop();
});

test('a state replaced whole (a snapshot restored: one notice, all): the next pass acts on what it holds now, at once', async () => {
  const h = setup();
  h.controller.start();
  await h.twoRunning(3000);
  const before = spawns(h.sent).length;
  assert.equal(before, 2);
  // The same state, then web scaled to 3, as a snapshot from the leader would bring it.
  const next = new DesiredState();
  next.restore(structuredClone(h.store.state.snapshot()));
  next.apply(next.appliedIndex + 1, { type: 'deployment.scale', at: 1, name: 'web', replicas: 3 });
  h.store.state.restore(structuredClone(next.snapshot()));
  await h.advance(50);
  assert.equal(spawns(h.sent).length, before + 1, 'the third unit spawned within 50 ms of clock time');
  h.controller.stop();
});

test('a spawn no agent answers is sent again after spawnTimeoutMs of clock time, not before', async () => {
  const h = setup();
  h.controller.start();
  await h.deploy(1);
  await h.advance(20);
  assert.equal(spawns(h.sent).length, 1);
  const first = spawns(h.sent)[0];
  await h.advance(2900);
  assert.equal(spawns(h.sent).length, 1, 'resent before the spawn timeout');
  await h.advance(1200);
  const again = spawns(h.sent);
  assert.equal(again.length, 2, 'resent once the timeout passed (at the next resync)');
  assert.equal(again[1].node, first.node);
  assert.notEqual(again[1].cmd.commandId, first.cmd.commandId);
  assert.ok(again[1].at - first.at >= 3000, `resent after ${again[1].at - first.at} ms`);
  h.controller.stop();
});

test('many deployments without units are split into passes: each deployment counts as one unit toward the budget', async () => {
  const h = setup(10);
  h.controller.start();
  await h.advance(50);
  const before = h.passes.length;
  // 25 applied in one task: every one of them pending for the next pass.
  for (let i = 0; i < 25; i++) {
    const { manifest, unitSpec } = validateManifest({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: `d-${i}` },
      spec: { replicas: 0, template: { spec: { containers: [{ name: 'c', command: ['sleep', '1'] }] } } },
    });
    h.store.state.apply(100 + i, { type: 'deployment.apply', at: 1, uid: `u-${i}`, manifest, unitSpec, specHash: unitSpecHash(unitSpec) });
  }
  await h.advance(200);
  // At most 10 per pass: 3 passes at least (one, before deployments counted as one each).
  assert.ok(h.passes.length - before >= 3, `the 25 took ${h.passes.length - before} pass(es)`);
  h.controller.stop();
});

test("a unit made Pending before its node's agent restarted, and bound after: an unanswered spawn is sent again, not taken for one the old agent ran", async () => {
  const h = setup();
  h.controller.start();
  h.silent.add('node-a');
  h.silent.add('node-b');
  await h.advance(1300); // both NotReady
  await h.deploy(1);
  await h.advance(20);
  const [pending] = [...h.store.state.units.values()];
  assert.equal(pending.nodeName, null, 'no Ready node: the unit waits, Pending');
  assert.equal(spawns(h.sent).length, 0);
  // node-a's agent comes back as a new process: its reports count from now, after the unit was made.
  h.silent.delete('node-a');
  h.registry.hello({ name: 'node-a', capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} }, 101, [], 0, Math.floor(h.clock.now()));
  await h.advance(20);
  assert.equal(h.store.state.units.get(pending.name)?.nodeName, 'node-a', 'bound once node-a is Ready');
  assert.equal(spawns(h.sent).length, 1);
  await h.advance(4200); // past spawnTimeoutMs with no answer
  const sp = spawns(h.sent);
  assert.deepEqual(
    sp.map((s) => (s.cmd.type === 'spawn' ? `${s.cmd.unit.name}->${s.node}` : '')),
    [`${pending.name}->node-a`, `${pending.name}->node-a`],
    'the same unit sent again; it was bound after the agent started, so it is not lost with the earlier agent',
  );
  assert.deepEqual([...h.store.state.units.keys()], [pending.name]);
  h.controller.stop();
});

test('a sweep longer than the resync interval is not started over by the ticks during it: an idle loop goes quiet', async () => {
  // One deployment of one unit costs a pass its budget of 2: a sweep of 120 such deployments is 120
  // passes, at least MIN_PASS_SPACING_MS apart, so it lasts longer than the 1 s resync interval.
  const h = setup(2);
  h.controller.start();
  for (let i = 0; i < 120; i++) {
    const { manifest, unitSpec } = validateManifest({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: `d${i}` },
      spec: { replicas: 1, template: { spec: { containers: [{ name: 'c', command: ['sleep', '3600'], resources: { requests: { cpu: '10m', memory: '4Mi' } } }] } } },
    });
    await h.store.propose({ type: 'deployment.apply', at: Math.floor(h.clock.now()), uid: `u-d${i}`, manifest, unitSpec, specHash: unitSpecHash(unitSpec) });
  }
  await h.advance(3000);
  const sp = spawns(h.sent);
  assert.equal(sp.length, 120, 'every deployment got its unit');
  for (const s of sp) h.running(s.node, s.cmd);
  await h.advance(6000); // the reports' passes, the status writes, a sweep that finds the loop idle
  const before = h.passes.length;
  await h.advance(20000);
  const swept = h.passes.length - before;
  // Idle: at most the sweep under way and the one each 10th tick asks for (121 passes each). Swept
  // without pause it would be ~2,000 (every tick during a sweep asked for the next).
  assert.ok(swept <= 2 * 121, `an idle loop sweeps at most every 10th resync tick: ${swept} passes in 20 s`);
  assert.ok(swept >= 121, `the safety-net sweep still runs: ${swept} passes in 20 s`);
  h.controller.stop();
});

test('an idle loop skips its resync passes but every 10th; a report, or an agent process restarting, brings passes back', async () => {
  const h = setup();
  h.controller.start();
  await h.twoRunning(1500); // the Running reports' passes, the status write, and the resync's sweep that finds the loop idle
  const settled = h.passes.length;
  await h.advance(8000);
  assert.equal(h.passes.length, settled, `no pass while nothing can change: ${h.passes.slice(settled).map((t) => t - h.passes[0])}`);
  await h.advance(3000);
  assert.equal(h.passes.length, settled + 1, 'the 10th resync tick sweeps anyway');
  // An agent process that restarted with the same units: the next tick runs a pass (reports now count from its start).
  const idleAgain = h.passes.length;
  const [unit] = [...h.store.state.units.values()];
  const reports = [...h.registry.nodes.get(unit.nodeName!)!.units.values()];
  h.registry.hello({ name: unit.nodeName!, capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} }, 101, reports, 0, Math.floor(h.clock.now()));
  await h.advance(1000);
  assert.ok(h.passes.length > idleAgain, 'a pass within a resync interval of the agent restart');
  // A crash is answered at once, and while its replacement's spawn is unanswered every tick runs a pass.
  await h.advance(3000);
  h.sent.length = 0;
  h.registry.unitStatus(unit.nodeName!, { ...reports.find((r) => r.name === unit.name)!, phase: 'Failed', signal: 'SIGKILL', finishedAt: Math.floor(h.clock.now()) });
  await h.advance(20);
  assert.equal(spawns(h.sent).length, 1, 'the replacement spawned at once');
  const busy = h.passes.length;
  await h.advance(3000);
  assert.ok(h.passes.length >= busy + 3, `a pass each second while a spawn awaits its answer (${h.passes.length - busy})`);
  h.controller.stop();
});

test("an idle loop's safety-net sweeps take at most about 1% of the leader: a costly sweep comes less often", async () => {
  assert.equal(idleResyncsSkipped(0, 1000), 9, 'a cheap sweep: every 10th tick');
  assert.equal(idleResyncsSkipped(450, 1000), 44, 'a sweep of 0.45 s: every 45th');
  assert.equal(idleResyncsSkipped(5000, 1000), IDLE_SWEEP_MAX_GAP_MS / 1000 - 1, 'never more than a minute apart');
  const h = setup();
  h.controller.start();
  await h.twoRunning(1500); // settled, and a sweep that found the loop idle
  // From now on every pass plans for at least 400 ms of the clock.
  h.slow.msPerRead = 400;
  const before = h.passes.length;
  await h.advance(12_000);
  assert.ok(h.passes.length > before, 'the next safety-net sweep came within 10 s, as before');
  const costly = h.passes.at(-1)!;
  await h.advance(35_000);
  const early = h.passes.filter((t) => t > costly);
  assert.deepEqual(early, [], 'no sweep within 35 s of one that took 0.4 s or more (every 10 s, it would be 4% of the leader)');
  await h.advance(30_000);
  assert.ok(
    h.passes.some((t) => t > costly),
    'the safety net still sweeps, within a minute',
  );
  h.controller.stop();
});

test('a node that falls silent: its unit is unbound and replaced on the other node, the new binding committed before the spawn', async () => {
  const h = setup();
  h.controller.start();
  await h.twoRunning(100);
  const onA = [...h.store.state.units.values()].find((u) => u.nodeName === 'node-a')!;
  assert.ok(onA, 'one unit on node-a');
  h.sent.length = 0;
  h.silent.add('node-a');
  await h.advance(900);
  assert.ok(h.store.state.units.has(onA.name), 'still bound within the heartbeat timeout');
  await h.advance(800);
  assert.ok(!h.store.state.units.has(onA.name), `${onA.name} unbound once node-a is NotReady`);
  const sp = spawns(h.sent);
  assert.equal(sp.length, 1, JSON.stringify(h.sent.map((s) => `${s.cmd.type}->${s.node}`)));
  assert.equal(sp[0].node, 'node-b');
  assert.equal(sp[0].boundThen, 'node-b', 'the replacement binding was committed before its spawn');
  h.controller.stop();
});

test('a unit that crashes puts its deployment in back-off: no replacement until the back-off ends on the clock', async () => {
  const h = setup();
  h.controller.start();
  await h.deploy(1);
  await h.advance(20);
  const [s] = spawns(h.sent);
  h.running(s.node, s.cmd);
  await h.advance(50);
  h.sent.length = 0;
  const name = s.cmd.type === 'spawn' ? s.cmd.unit.name : '';
  h.registry.unitStatus(s.node, { name, deployment: 'web', phase: 'Failed', exitCode: 1, reason: 'Error', resources: { cpu: 300, memory: 64 }, term: 3 });
  await h.advance(100);
  const d = h.store.state.deployments.get('web')!;
  assert.ok(d.backoff, 'back-off recorded in the desired state');
  const until = d.backoff.until;
  assert.equal(spawns(h.sent).length, 0, 'nothing respawned during the back-off');
  await h.advance(until - h.clock.now() - 50);
  assert.equal(spawns(h.sent).length, 0, 'nothing respawned just before the back-off ends');
  await h.advance(1200);
  assert.ok(spawns(h.sent).length >= 1, 'respawned once the back-off ended');
  h.controller.stop();
});

test("an apply that lands in the log ahead of a pass's creates does not give them resources the scheduler never checked", async () => {
  // Found by seed 90040 of the production-host simulation: a create named no spec, so the state machine
  // gave the unit the deployment's spec at apply time; an apply proposed earlier (900m, uncommitted while
  // the pass planned with 300m) landed first, and 3 x 900m went onto two nodes of 1000m.
  const h = setup();
  h.controller.start();
  const bigger = h.manifestOf(3, '900m');
  h.store.aheadOfCreate = { type: 'deployment.apply', at: 0, uid: 'u-web', manifest: bigger.manifest, unitSpec: bigger.unitSpec, specHash: unitSpecHash(bigger.unitSpec) };
  await h.deploy(3);
  await h.advance(20);
  assert.equal(h.store.aheadOfCreate, null, 'the apply landed ahead of a create');
  const perNode = new Map<string, number>();
  for (const u of h.store.state.units.values()) if (u.nodeName) perNode.set(u.nodeName, (perNode.get(u.nodeName) ?? 0) + u.spec.resources.cpu);
  for (const [node, cpu] of perNode) assert.ok(cpu <= 1000, `${node} has ${cpu}m bound, capacity 1000m`);
  const first = [...h.store.state.units.values()].filter((u) => u.revision === 1);
  assert.ok(first.length > 0 && first.every((u) => u.spec.resources.cpu === 300), "the pass's units run the 300m revision it scheduled");
  h.controller.stop();
});

test('under a stream of reports, a pass waits 4x the time its predecessor spent planning; after a quiet moment it starts at once', async () => {
  const h = setup();
  const starts = h.passLog;
  h.controller.start();
  await h.twoRunning(200);
  // From now on every plan costs 25 ms of clock time (a big deployment's pass): reconcile reads the reports through reportsOf.
  const reportsOf = h.registry.reportsOf.bind(h.registry);
  h.registry.reportsOf = (d, visit) => {
    h.clock.skip(25);
    reportsOf(d, visit);
  };
  const [unit] = [...h.store.state.units.values()];
  const report = h.registry.nodes.get(unit.nodeName!)!.units.get(unit.name)!;
  const from = starts.length;
  const t0 = h.clock.now();
  // A report that changes every 5 ms for 2 s: each asks for a pass.
  for (let i = 0; i < 400; i++) {
    h.registry.unitStatus(unit.nodeName!, { ...report, ready: i % 2 === 0 });
    await h.advance(5);
  }
  const streamMs = h.clock.now() - t0;
  const stream = starts.slice(from);
  assert.ok(stream.length >= 5, `passes during the stream: ${stream.length}`);
  for (let i = 1; i < stream.length; i++) {
    const gap = stream[i].at - stream[i - 1].at;
    assert.ok(gap >= 4 * stream[i - 1].ms - 1e-6, `pass ${i} started ${gap} ms after one that planned for ${stream[i - 1].ms} ms`);
  }
  // Planning took about a fifth of the stream's time (4x spacing), not the whole of it.
  const planned = stream.reduce((s, p) => s + p.ms, 0);
  assert.ok(planned <= 0.3 * streamMs, `planning took ${planned} ms of ${streamMs}`);
  // Quiet for a second; then one change: its pass starts at once, whatever the last one cost.
  await h.advance(1000);
  const quiet = starts.length;
  const at = h.clock.now();
  h.registry.unitStatus(unit.nodeName!, { ...report, ready: false, phase: 'Failed', signal: 'SIGKILL', finishedAt: Math.floor(at) });
  await h.advance(0);
  await h.advance(1);
  assert.ok(starts.length > quiet, 'a pass after the quiet moment');
  assert.ok(starts[quiet].at - at <= 1, `it started ${starts[quiet].at - at} ms after the change`);
  h.controller.stop();
});

test("reports that can only move a calm deployment's counts: a pass at most every LAZY_PASS_SPACING_MS; a scale or a crash meanwhile is acted on at once", async () => {
  const h = setup();
  h.controller.start();
  await h.twoRunning(300);
  const [unit] = [...h.store.state.units.values()];
  const report = h.registry.nodes.get(unit.nodeName!)!.units.get(unit.name)!;
  // Calm now (both Running, nothing to do): a report every 5 ms for 1 s, each flipping readiness.
  const from = h.passes.length;
  const t0 = h.clock.now();
  for (let i = 0; i < 200; i++) {
    h.registry.unitStatus(unit.nodeName!, { ...report, ready: i % 2 === 0 });
    await h.advance(5);
  }
  const stream = h.passes.slice(from);
  assert.ok(stream.length >= 5, `passes during the stream: ${stream.length}`);
  // One more may come from the 1 s resync tick (a sweep is not lazy), and so may one gap shorter than the spacing.
  assert.ok(stream.length <= 1000 / LAZY_PASS_SPACING_MS + 2, `passes during 1 s of reports: ${stream.length}`);
  const short = stream.slice(1).filter((at, i) => at - stream[i] < LAZY_PASS_SPACING_MS - 1e-6);
  assert.ok(short.length <= 1, `passes sooner than LAZY_PASS_SPACING_MS after the one before: ${short.length}`);
  assert.ok(stream[0] - t0 < LAZY_PASS_SPACING_MS + 5, 'the first report after a quiet moment got its pass at once');
  // Mid-stream, a scale to 3: the new unit's spawn is sent within the ordinary spacing, not the lazy one.
  const spawnsBefore = spawns(h.sent).length;
  h.registry.unitStatus(unit.nodeName!, { ...report, ready: true });
  await h.advance(1);
  const at = h.clock.now();
  await h.store.propose({ type: 'deployment.scale', at: Math.floor(at), name: 'web', replicas: 3 });
  await h.advance(MIN_PASS_SPACING_MS + 5);
  const added = spawns(h.sent).slice(spawnsBefore);
  assert.equal(added.length, 1, 'the scale was acted on');
  assert.ok(added[0].at - at <= MIN_PASS_SPACING_MS + 1, `its spawn went ${added[0].at - at} ms after the scale`);
  h.running(added[0].node, added[0].cmd);
  await h.advance(300);
  // Calm again, a report, then at once a crash: the crash does not wait behind the lazy pass.
  h.registry.unitStatus(unit.nodeName!, { ...report, ready: false });
  await h.advance(2);
  const crashAt = h.clock.now();
  const before = spawns(h.sent).length;
  h.registry.unitStatus(unit.nodeName!, { ...report, ready: false, phase: 'Failed', signal: 'SIGKILL', finishedAt: Math.floor(crashAt) });
  await h.advance(5);
  const replaced = spawns(h.sent).slice(before);
  assert.equal(replaced.length, 1, 'the crashed unit was replaced');
  assert.ok(replaced[0].at - crashAt <= 1, `its replacement's spawn went ${replaced[0].at - crashAt} ms after the crash`);
  h.controller.stop();
});

test('a crashed unit: its pass waits for no spacing and no turn of the loop, and its unbind and replacement are proposed in one task (one Ready, one fsync)', async () => {
  const h = setup();
  // Proposals in one synchronous task share a batch: RaftStore takes one Ready (one fsync) for them.
  const proposals: Array<{ type: string; batch: number }> = [];
  /** What happened, in order: proposals, the store's Ready starting (a microtask, as RaftStore.kick), log lines. */
  const order: string[] = [];
  let batch = 0;
  let open = false;
  const propose = h.store.propose.bind(h.store);
  h.store.propose = (cmd: StoreCommand) => {
    if (!open) {
      open = true;
      batch++;
      queueMicrotask(() => ((open = false), order.push('ready')));
    }
    proposals.push({ type: cmd.type, batch });
    order.push(cmd.type);
    return propose(cmd);
  };
  const log = h.logs.push.bind(h.logs);
  h.logs.push = (...lines: string[]) => (order.push(...lines.map((l) => l.split(':')[0])), log(...lines));
  h.controller.start();
  await h.twoRunning(2000);
  const [unit] = [...h.store.state.units.values()];
  const report = h.registry.nodes.get(unit.nodeName!)!.units.get(unit.name)!;
  // A change that is not urgent runs a pass now...
  h.registry.unitStatus(unit.nodeName!, { ...report, ready: false });
  await h.advance(0);
  const last = h.passLog[h.passLog.length - 1];
  assert.ok(last.at >= h.clock.now() - 1, 'a pass for the readiness change');
  // ...and 2 ms later the unit crashes: its pass starts at once, not at the end of MIN_PASS_SPACING_MS.
  await h.advance(2);
  proposals.length = 0;
  order.length = 0;
  h.sent.length = 0;
  const crashedAt = h.clock.now();
  h.registry.unitStatus(unit.nodeName!, { ...report, phase: 'Failed', signal: 'SIGKILL', finishedAt: Math.floor(crashedAt) });
  // Proposed before any timer runs: neither the pass's start nor its first action waits for a turn of the loop.
  for (let i = 0; i < 20; i++) await Promise.resolve();
  assert.deepEqual(
    proposals.map((p) => p.type),
    ['unit.delete', 'unit.create'],
    'the unbind and the create proposed within the task of the report (microtasks only)',
  );
  // The pass's diff is logged (a synchronous write to stdout) only once the store has started its Ready.
  assert.deepEqual(order.slice(0, 4), ['unit.delete', 'unit.create', 'ready', 'reconcile web'], JSON.stringify(order));
  await h.advance(1);
  const pass = h.passLog.find((p) => p.at >= crashedAt);
  assert.ok(pass, 'a pass after the crash');
  assert.ok(pass.at - crashedAt <= 0.5, `the crash's pass started ${pass.at - crashedAt} ms after it (the spacing is 10 ms)`);
  await h.advance(20);
  assert.equal(spawns(h.sent).length, 1, 'the replacement spawned');
  const del = proposals.find((p) => p.type === 'unit.delete');
  const create = proposals.find((p) => p.type === 'unit.create');
  assert.ok(del && create, JSON.stringify(proposals));
  assert.equal(create.batch, del.batch, `unbind and create in one task: ${JSON.stringify(proposals)}`);
  h.controller.stop();
});

test("a crashed unit's pass takes no read barrier (its unbind and create get their quorum from their commits); a stray's terminate, or a leader not caught up, still waits for one", async () => {
  const h = setup();
  h.controller.start();
  await h.twoRunning(2000);
  const crash = async () => {
    const unit = [...h.store.state.units.values()].find((u) => h.registry.nodes.get(u.nodeName!)?.units.get(u.name)?.phase === 'Running')!;
    const report = h.registry.nodes.get(unit.nodeName!)!.units.get(unit.name)!;
    h.sent.length = 0;
    const before = h.store.barriers;
    h.registry.unitStatus(unit.nodeName!, { ...report, phase: 'Failed', signal: 'SIGKILL', finishedAt: Math.floor(h.clock.now()) });
    await h.advance(20);
    const [spawn] = spawns(h.sent);
    assert.ok(spawn, 'the replacement spawned');
    // Sent only once its binding was committed.
    assert.equal(spawn.boundThen, spawn.node);
    h.running(spawn.node, spawn.cmd);
    await h.advance(20);
    // The agent forgets the crashed unit when told (a stop that is no Raft write: a later pass, with a barrier).
    for (const s of h.sent) if (s.cmd.type === 'forget') h.registry.unitGone(s.node, s.cmd.name);
    await h.advance(20);
    // Barriers up to the replacement's create (a later pass tells the agent to forget the crashed unit: that one takes a barrier).
    return h.store.barriersAtCreate - before;
  };
  assert.equal(await crash(), 0, 'a crash: unbind + create, no read barrier');

  // A unit no binding names, running on node-a: stopping it is no Raft write, so the pass confirms its leadership first.
  h.sent.length = 0;
  let before = h.store.barriers;
  h.registry.unitStatus('node-a', { name: 'ghost-1', deployment: 'ghost', phase: 'Running', pid: 4343, resources: { cpu: 100, memory: 64 }, term: 3, ready: true });
  await h.advance(20);
  assert.ok(
    h.sent.some((s) => s.cmd.type === 'terminate' && s.cmd.name === 'ghost-1'),
    `the stray is stopped: ${JSON.stringify(h.sent.map((s) => s.cmd.type))}`,
  );
  assert.ok(h.store.barriers > before, 'a read barrier before the stray is stopped');

  // A new leader whose first entry is not committed yet: its state may lack what its predecessor committed.
  h.store.committedInTerm = false;
  before = h.store.barriers;
  assert.ok((await crash()) > 0, 'a leader not caught up takes the read barrier');
  h.controller.stop();
});

test('a leader not caught up (a new one) waits for its read barrier before it plans, and plans once', async () => {
  const h = setup();
  h.controller.start();
  await h.twoRunning(2000);
  // Count plans (each reads the deployment's reports) and where the first barrier falls among them.
  let plans = 0;
  let plansAtFirstBarrier: number | null = null;
  const reportsOf = h.registry.reportsOf.bind(h.registry);
  h.registry.reportsOf = (d, visit) => {
    plans++;
    reportsOf(d, visit);
  };
  const readBarrier = h.store.readBarrier.bind(h.store);
  h.store.readBarrier = () => {
    plansAtFirstBarrier ??= plans;
    return readBarrier();
  };
  // Elected anew: a new term, nothing of it committed yet. A scale-up gives the pass something to do.
  h.store.currentTerm++;
  h.store.committedInTerm = false;
  h.sent.length = 0;
  await h.deploy(3);
  await h.advance(20);
  assert.equal(plansAtFirstBarrier, 0, 'the barrier came before any plan (a plan before it would be thrown away)');
  assert.equal(spawns(h.sent).length, 1, 'the third unit is spawned');
  assert.equal(spawns(h.sent)[0].boundThen, spawns(h.sent)[0].node, 'after its binding was committed');
  h.controller.stop();
});

test('commitGated: writes, and stops behind an unbind of the same unit earlier in the plan; not a resent spawn, a forget, or a stop before its unbind', () => {
  const unbind = { type: 'unbind', unit: 'web-1', node: 'node-a', deployment: 'web', reason: 'crashed' } as const;
  const stop = { type: 'terminate', unit: 'web-1', node: 'node-a', reason: 'surplus' } as const;
  assert.equal(commitGated([unbind, { type: 'create', deployment: 'web' }]), true);
  assert.equal(commitGated([unbind, stop, { type: 'backoff-reset', deployment: 'web' }]), true);
  assert.equal(commitGated([stop, unbind]), false);
  assert.equal(commitGated([unbind, { ...stop, unit: 'web-2' }]), false);
  assert.equal(commitGated([{ type: 'spawn', unit: 'web-1', node: 'node-a', deployment: 'web' }]), false);
  assert.equal(commitGated([{ type: 'forget', unit: 'web-1', node: 'node-a' }]), false);
});
