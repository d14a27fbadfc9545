// test/unit/chaos-checker.test.ts -- the chaos suite's invariant checker is
// itself tested: fabricated observation streams fed to its pure core must
// produce exactly the violations a real bug would (two leaders in a term, a
// lost acknowledged write, a surplus unit, a stale-term spawn, an orphan...),
// and a healthy stream must produce none. Also the chaos command line.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_BOUNDS,
  InvariantChecker,
  possibleFinalStates,
  type NodeObservation,
  type SnapshotObservation,
  type UnitObservation,
  type Verdict,
  type WriteObservation,
} from '../../chaos/checker.ts';
import { formatReport } from '../../chaos/report.ts';
import { parseChaosArgs, ChaosUsageError } from '../../chaos/args.ts';

const T0 = 1_700_000_000_000; // epoch ms of "t = 0"

function node(name: string, o: Partial<NodeObservation> = {}): NodeObservation {
  return { name, ready: true, capacity: { cpu: 4000, memory: 8192 }, allocated: null, taints: [], agentPid: 100 + name.charCodeAt(5), agentAlive: true, ...o };
}

let nextPid = 1000;
function unit(name: string, o: Partial<UnitObservation> = {}): UnitObservation {
  return {
    name,
    deployment: name.slice(0, name.lastIndexOf('-')),
    node: 'node-a',
    phase: 'Running',
    pid: nextPid++,
    pidAlive: true,
    term: 1,
    startedAtMs: T0,
    cpu: 500,
    memory: 256,
    tolerations: [],
    bound: true,
    ...o,
  };
}

function snap(t: number, units: UnitObservation[], deployments: Array<[string, number]>, nodes: NodeObservation[] = [node('node-a')]): SnapshotObservation {
  return { type: 'snapshot', t, units, nodes, deployments: deployments.map(([name, replicas]) => ({ name, replicas })) };
}

function finish(c: InvariantChecker, o: { quietAt?: number; t?: number; final?: Array<[string, number, string?]> | null; orphans?: boolean } = {}): Verdict {
  return c.finish({
    t: o.t ?? 100000,
    quietAt: o.quietAt ?? 0,
    finalDeployments: o.final === undefined ? [] : o.final === null ? null : o.final.map(([name, replicas, marker]) => ({ name, replicas, marker: marker ?? null })),
    orphansChecked: o.orphans ?? false,
  });
}

const count = (v: Verdict, id: number) => v.invariants.find((i) => i.id === id)!.violations;

function write(seq: number, op: WriteObservation['op'], deployment: string, outcome: WriteObservation['outcome'], replicas?: number, t = seq * 1000): WriteObservation {
  return { type: 'write', t, doneT: t + 100, seq, op, deployment, replicas, marker: op === 'apply' ? `w${seq}` : undefined, outcome, detail: '' };
}

test('a healthy stream (one leader, desired met, writes kept, processes gone) has no violation at all', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c.observe({ type: 'replica', t: 0, id: 'cp-1', role: 'leader', term: 1, pid: 11 });
  c.observe({ type: 'replica', t: 0, id: 'cp-2', role: 'follower', term: 1, pid: 12 });
  c.observe(write(1, 'apply', 'web', 'ack', 2));
  const units = [unit('web-1'), unit('web-2')];
  for (let t = 0; t <= 3000; t += 250) c.observe(snap(t, units, [['web', 2]]));
  c.observe({ type: 'procs', t: 4000, dead: c.trackedPids(), final: true });
  const v = finish(c, { quietAt: 1000, final: [['web', 2, 'w1']], orphans: true });
  assert.equal(v.violations, 0, formatReport(v, { scenario: 't', seed: 0, durationS: 1, cluster: 'x', elapsedS: 1 }));
  assert.ok(v.invariants.every((i) => i.checked));
});

test('two replicas that each call themselves leader of the same term violate election safety', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c.observe({ type: 'replica', t: 10, id: 'cp-1', role: 'leader', term: 3 });
  c.observe({ type: 'replica', t: 20, id: 'cp-2', role: 'leader', term: 3 });
  c.observe({ type: 'replica', t: 30, id: 'cp-2', role: 'leader', term: 4 });
  const v = finish(c);
  assert.equal(count(v, 1), 1);
  assert.match(v.invariants[0].examples[0].message, /term 3 has 2 leaders: cp-1, cp-2/);
  const report = formatReport(v, { scenario: 'kill-leader', seed: 7, durationS: 1, cluster: 'x', elapsedS: 1 });
  assert.match(report, /\[FAIL\] 1 election safety: 1 violation/);
  assert.match(report, /verdict: FAIL/);
});

test('a final state that lost the last acknowledged scale violates no-lost-writes', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c.observe(write(1, 'apply', 'web', 'ack', 3));
  c.observe(write(2, 'scale', 'web', 'ack', 5));
  assert.equal(count(finish(c, { final: [['web', 3, 'w1']] }), 2), 1);
});

test('a deployment deleted by an acknowledged write must be absent at the end', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c.observe(write(1, 'apply', 'api', 'ack', 2));
  c.observe(write(2, 'delete', 'api', 'ack'));
  assert.equal(count(finish(c, { final: [['api', 2, 'w1']] }), 2), 1);
  const c2 = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c2.observe(write(1, 'apply', 'api', 'ack', 2));
  c2.observe(write(2, 'delete', 'api', 'ack'));
  assert.equal(count(finish(c2, { final: [] }), 2), 0);
});

test('a write with an unknown outcome may or may not have applied, but a refused one must not show', () => {
  const ws = [write(1, 'apply', 'web', 'ack', 3), write(2, 'scale', 'web', 'unknown', 4), write(3, 'scale', 'web', 'refused', 1)];
  const states = possibleFinalStates(ws);
  assert.deepEqual([...states].sort(), ['3/w1', '4/w1']);
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  for (const w of ws) c.observe(w);
  assert.equal(count(finish(c, { final: [['web', 1, 'w1']] }), 2), 1);
});

test('an unknown-outcome apply may take effect before a later acknowledged scale (linearizable, not lost)', () => {
  // apply#2 timed out; scale#3 was acked later; apply#2 may still land before scale#3.
  const ws = [write(1, 'apply', 'web', 'ack', 1), write(2, 'apply', 'web', 'unknown', 2), write(3, 'scale', 'web', 'ack', 4)];
  const states = possibleFinalStates(ws);
  assert.ok(states.has('4/w2') && states.has('4/w1') && states.has('2/w2'));
  assert.ok(!states.has('1/w1') && !states.has('2/w1'));
});

test('a surplus unit that lives longer than the bound in calm time violates no-surplus', () => {
  const c = new InvariantChecker({ ...DEFAULT_BOUNDS, surplusBoundMs: 2000 }, T0);
  const units = [unit('web-1'), unit('web-2'), unit('web-3')];
  for (let t = 0; t <= 3000; t += 250) c.observe(snap(t, units, [['web', 2]]));
  const v = finish(c, { quietAt: 0 });
  assert.equal(count(v, 5), 1);
  assert.match(v.invariants[4].examples[0].message, /web had 3 live units for 2 replicas/);
});

test('a surplus during a partition is not judged until the partition heals, then it is', () => {
  const c = new InvariantChecker({ ...DEFAULT_BOUNDS, surplusBoundMs: 2000 }, T0);
  c.observe({ type: 'fault', t: 0, id: 1, kind: 'partition agents', target: 'node-b', detail: '', disruptive: true, settleMs: 1000 });
  const units = [unit('web-1'), unit('web-2'), unit('web-3')];
  // Calm starts at 6000 (heal at 5000 + settle 1000): up to 7000 nothing is judged.
  for (let t = 0; t <= 7000; t += 250) {
    if (t === 5000) c.observe({ type: 'heal', t, id: 1, kind: 'heal partition', detail: '' });
    c.observe(snap(t, units, [['web', 2]]));
  }
  assert.equal(count(finish(c, { quietAt: 5000 }), 5), 0, 'no violation before 2 s of calm');
  const c2 = new InvariantChecker({ ...DEFAULT_BOUNDS, surplusBoundMs: 2000 }, T0);
  c2.observe({ type: 'fault', t: 0, id: 1, kind: 'partition agents', target: 'node-b', detail: '', disruptive: true, settleMs: 1000 });
  c2.observe({ type: 'heal', t: 5000, id: 1, kind: 'heal partition', detail: '' });
  for (let t = 0; t <= 8500; t += 250) c2.observe(snap(t, units, [['web', 2]]));
  assert.equal(count(finish(c2, { quietAt: 5000 }), 5), 1, 'a surplus 2.5 s into calm time is a violation');
});

test('a deficit that outlasts the bound violates convergence even while unit crashes keep coming', () => {
  const c = new InvariantChecker({ ...DEFAULT_BOUNDS, deficitBoundMs: 1000 }, T0);
  const units = [unit('web-1')];
  for (let t = 0; t <= 2000; t += 250) {
    c.observe({ type: 'fault', t, id: t + 1, kind: 'SIGKILL unit', target: 'web-2', detail: '', disruptive: false, settleMs: 0 });
    c.observe(snap(t, units, [['web', 2]]));
  }
  const v = finish(c, { quietAt: 0 });
  assert.ok(count(v, 4) >= 1);
  assert.match(v.invariants[3].examples[0].message, /web had 1 of 2 units running/);
});

test('never converging after the last fault violates convergence and says what is missing', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c.observe(snap(1000, [unit('web-1')], [['web', 3]]));
  const v = finish(c, { quietAt: 500 });
  assert.equal(count(v, 4), 1);
  assert.match(v.invariants[3].examples[0].message, /web 1\/3 running/);
});

test('an agent that starts a unit of an older term after one of a newer term violates fencing', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c.observe({ type: 'replica', t: 0, id: 'cp-1', role: 'leader', term: 5 });
  c.observe(snap(100, [unit('web-1', { term: 5, startedAtMs: T0 + 50 }), unit('web-2', { term: 4, startedAtMs: T0 + 80 })], [['web', 2]]));
  const v = finish(c, { quietAt: 0 });
  assert.equal(count(v, 3), 1);
  assert.match(v.invariants[2].examples[0].message, /web-2 \(term 4\) started on node-a after web-1 of term 5/);
});

test('a unit started long after a newer leader was seen, with the old term, violates fencing', () => {
  const c = new InvariantChecker({ ...DEFAULT_BOUNDS, fenceBoundMs: 1000 }, T0);
  c.observe({ type: 'replica', t: 0, id: 'cp-1', role: 'leader', term: 1 });
  c.observe({ type: 'replica', t: 1000, id: 'cp-2', role: 'leader', term: 2 });
  c.observe(snap(4000, [unit('web-1', { term: 1, startedAtMs: T0 + 3000 })], [['web', 1]]));
  assert.equal(count(finish(c, { quietAt: 0 }), 3), 1);
});

test('a unit whose term no replica ever reported violates fencing', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c.observe({ type: 'replica', t: 0, id: 'cp-1', role: 'leader', term: 2 });
  c.observe(snap(100, [unit('web-1', { term: 9 })], [['web', 1]]));
  assert.equal(count(finish(c, { quietAt: 0 }), 3), 1);
});

test('a unit still alive well after its agent died violates invariant 6, and outliving the cluster violates 8', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  const u = unit('web-1');
  const a = node('node-a');
  c.observe(snap(0, [u], [['web', 1]], [a]));
  c.observe({ type: 'procs', t: 100, dead: [String(a.agentPid!)] });
  c.observe({ type: 'procs', t: 2000, dead: [] });
  const v = (c.observe({ type: 'procs', t: 9000, dead: [], final: true }), finish(c, { quietAt: 0, orphans: true }));
  assert.equal(count(v, 6), 1);
  assert.match(v.invariants[5].examples[0].message, /unit web-1 pid \d+ on node-a still alive 1\.9s after its agent pid \d+ died/);
  assert.equal(count(v, 8), 1);
  assert.match(v.invariants[7].examples[0].message, /unit web-1 pid \d+ is still alive after the cluster stopped/);
});

test('a recycled pid is a new process: an agent restarted under a pid an earlier, dead process had is alive, and its units are no orphans', () => {
  // pid_max wraps on a busy machine: pid 500 was node-a's first agent (dead at
  // t=100), and after the wrap a new incarnation of node-a's agent got pid 500
  // again. Only the identity (pid and start time) tells the two apart.
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  const old = node('node-a', { agentPid: 500, agentId: '500/1000' });
  c.observe(snap(0, [unit('web-1', { pid: 600, pidId: '600/1001' })], [['web', 1]], [old]));
  c.observe({ type: 'procs', t: 100, dead: ['500/1000', '600/1001'] });
  const fresh = node('node-a', { agentPid: 500, agentId: '500/90000' });
  const u2 = unit('web-2', { pid: 600, pidId: '600/90001' }); // and its unit got pid 600, web-1's
  for (let t = 1000; t <= 20000; t += 500) {
    c.observe(snap(t, [u2], [['web', 1]], [fresh]));
    c.observe({ type: 'procs', t, dead: [] });
  }
  assert.deepEqual(c.trackedPids().sort(), ['500/90000', '600/90001']);
  const v = finish(c, { quietAt: 1000 });
  assert.equal(count(v, 6), 0, v.invariants[5].examples.map((e) => e.message).join('\n'));
  assert.equal(count(v, 4), 0);
  // The old identities stay dead: had web-2 run under the first agent, it would be an orphan.
  const c2 = new InvariantChecker(DEFAULT_BOUNDS, T0);
  c2.observe(snap(0, [unit('web-1', { pid: 600, pidId: '600/1001' })], [['web', 1]], [old]));
  c2.observe({ type: 'procs', t: 100, dead: ['500/1000'] });
  c2.observe({ type: 'procs', t: 5000, dead: [] });
  assert.equal(count(finish(c2, { quietAt: 0 }), 6), 1);
});

test('a live unit on a NotReady node after calm time, or shown Running there, violates invariant 6', () => {
  const c = new InvariantChecker({ ...DEFAULT_BOUNDS, notReadyBoundMs: 1000, lostGraceMs: 500 }, T0);
  const n = node('node-a', { ready: false });
  for (let t = 0; t <= 2000; t += 250) c.observe(snap(t, [unit('web-1', { pid: 4242 })], [['web', 1]], [n]));
  const v = finish(c, { quietAt: 0 });
  assert.equal(count(v, 6), 2);
});

test('requests beyond a node capacity, or a unit on a tainted node it does not tolerate, violate invariant 7', () => {
  const c = new InvariantChecker(DEFAULT_BOUNDS, T0);
  const a = node('node-a', { capacity: { cpu: 1000, memory: 8192 } });
  const gpu = node('node-c', { taints: [{ key: 'gpu-only', effect: 'NoSchedule' }] });
  c.observe(
    snap(
      0,
      [unit('web-1'), unit('web-2'), unit('web-3'), unit('web-4', { node: 'node-c' }), unit('gpu-1', { node: 'node-c', tolerations: [{ key: 'gpu-only', operator: 'Exists' }] })],
      [
        ['web', 4],
        ['gpu', 1],
      ],
      [a, gpu],
    ),
  );
  const v = finish(c, { quietAt: 0 });
  assert.equal(count(v, 7), 2);
  assert.match(v.invariants[6].examples.map((e) => e.message).join('\n'), /node-a: units bound request cpu=1500m/);
  assert.match(v.invariants[6].examples.map((e) => e.message).join('\n'), /web-4 is bound to node-c but does not tolerate its taint gpu-only:NoSchedule/);
});

test('the chaos command line takes a scenario and its options, and refuses bad ones with the cause', () => {
  const o = parseChaosArgs(['kill-agents', '--duration', '20', '--seed=7', '--replicas', '1']);
  assert.equal(o.scenario, 'kill-agents');
  assert.equal(o.durationS, 20);
  assert.equal(o.seed, 7);
  assert.equal(o.replicas, 1);
  assert.throws(
    () => parseChaosArgs([]),
    (e: Error) => e instanceof ChaosUsageError && /scenario is missing/.test(e.message),
  );
  assert.throws(() => parseChaosArgs(['nap']), /unknown scenario "nap"/);
  assert.throws(() => parseChaosArgs(['soak', '--replicas', '2']), /expected 1, 3 or 5/);
  assert.throws(() => parseChaosArgs(['soak', '--duration', 'x']), /--duration: expected a number/);
  assert.throws(() => parseChaosArgs(['soak', '--compose']), /--compose needs --cluster/);
  assert.throws(() => parseChaosArgs(['soak', '--bogus']), /unknown option --bogus/);
});
