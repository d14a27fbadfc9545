// test/unit/registry.test.ts -- liveness in the node registry: death by
// socket (a closed agent connection with no reconnect turns the node
// NotReady after CLOSE_GRACE_MS), silence by timer (no heartbeat for
// notReadyAfterMs), and a reconnect within the grace changing nothing.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CLOSE_GRACE_MS, NodeRegistry, STALL_SKIP_MS, type RegistryChange } from '../../control-plane/registry/node-registry.ts';
import { SeededRandom } from '../../shared/random.ts';
import { decodeAgentMessage, encodeMessage } from '../../shared/protocol/codec.ts';
import { stringCopies } from '../helpers/heap-strings.ts';

const INFO = { name: 'node-a', capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} };

function registry(): { r: NodeRegistry; changes: RegistryChange[] } {
  const r = new NodeRegistry(1000);
  const changes: RegistryChange[] = [];
  r.onChange((c) => changes.push(c));
  r.hello(INFO, 42, [], 1, 0);
  return { r, changes };
}

/** Liveness checks every 50 ms from `from` to `to`, as the shell runs them. */
function run(r: NodeRegistry, from: number, to: number): void {
  for (let t = from; t <= to; t += 50) r.checkLiveness(t);
}

test('a closed connection with no reconnect makes the node NotReady after the grace, saying so, long before the heartbeat timeout', () => {
  const { r, changes } = registry();
  run(r, 0, 100);
  r.disconnected('node-a', 100);
  run(r, 150, 100 + CLOSE_GRACE_MS);
  assert.equal(r.nodes.get('node-a')!.ready, true, 'not within the grace');
  run(r, 100 + CLOSE_GRACE_MS + 50, 400);
  assert.equal(r.nodes.get('node-a')!.ready, false);
  const c = changes.find((x) => x.type === 'node-not-ready');
  assert.ok(c && c.type === 'node-not-ready' && /^agent connection closed 0\.\d\ds ago, no reconnect$/.test(c.why), JSON.stringify(c));
});

test('a reconnect within the grace keeps the node Ready', () => {
  const { r } = registry();
  run(r, 0, 100);
  r.disconnected('node-a', 100);
  run(r, 150, 200);
  r.hello(INFO, 42, [], 1, 220);
  run(r, 250, 900);
  assert.equal(r.nodes.get('node-a')!.ready, true);
});

test('silence keeps the timer: heartbeats stop without a close, NotReady only after notReadyAfterMs', () => {
  const { r, changes } = registry();
  run(r, 0, 950);
  assert.equal(r.nodes.get('node-a')!.ready, true);
  run(r, 1000, 1100);
  assert.equal(r.nodes.get('node-a')!.ready, false);
  const c = changes.find((x) => x.type === 'node-not-ready');
  assert.ok(c && c.type === 'node-not-ready' && c.why.startsWith('no heartbeat for 1.'), JSON.stringify(c));
});

test("forgetUnit (a forced delete) drops a NotReady node's leftover report, and never a Ready node's", () => {
  const { r, changes } = registry();
  const report = { name: 'web-5', deployment: 'web', phase: 'Running' as const, pid: 7, resources: { cpu: 100, memory: 64 }, term: 1 };
  r.unitStatus('node-a', report);
  assert.equal(r.forgetUnit('node-a', 'web-5'), false, 'a Ready node reports the truth');
  assert.equal(r.findUnit('web-5')?.node, 'node-a');
  run(r, 0, 100);
  r.disconnected('node-a', 100);
  run(r, 150, 400);
  assert.equal(r.nodes.get('node-a')!.ready, false);
  assert.equal(r.forgetUnit('node-a', 'web-5'), true);
  assert.equal(r.findUnit('web-5'), undefined);
  assert.deepEqual(changes.at(-1), { type: 'unit-gone', node: 'node-a', name: 'web-5', deployment: 'web' });
  assert.equal(r.forgetUnit('node-a', 'web-5'), false, 'once');
  assert.equal(r.forgetUnit('node-x', 'web-5'), false, 'an unknown node');
});

test('findUnit follows every way a report comes and goes: unit-status, unit-gone, a hello without it, a forced delete, two nodes at once', () => {
  const r = new NodeRegistry(1000);
  const b = { ...INFO, name: 'node-b' };
  const report = (name: string, phase: 'Running' | 'Succeeded' = 'Running') => ({ name, deployment: 'web', phase, pid: 7, resources: { cpu: 1, memory: 1 }, term: 1 });
  r.hello(INFO, 42, [report('web-1'), report('web-2')], 1, 0);
  r.hello(b, 43, [], 1, 0);
  assert.equal(r.findUnit('web-1')?.node, 'node-a');
  assert.equal(r.findUnit('web-1')?.report.phase, 'Running');
  r.unitStatus('node-a', report('web-1', 'Succeeded'));
  assert.equal(r.findUnit('web-1')?.report.phase, 'Succeeded', 'the latest report');
  r.unitGone('node-a', 'web-1');
  assert.equal(r.findUnit('web-1'), undefined);
  // The same name reported by two nodes (a move seen mid-way): either answers until both are gone.
  r.unitStatus('node-b', report('web-2'));
  assert.equal(r.findUnit('web-2')?.node, 'node-a');
  r.hello(INFO, 42, [], 1, 10); // node-a restarted without it
  assert.equal(r.findUnit('web-2')?.node, 'node-b');
  r.disconnected('node-b', 20);
  r.checkLiveness(20);
  r.checkLiveness(20 + 200);
  assert.equal(r.nodes.get('node-b')!.ready, false);
  assert.equal(r.forgetUnit('node-b', 'web-2'), true);
  assert.equal(r.findUnit('web-2'), undefined);
  assert.equal(r.findUnit('never-reported'), undefined);
});

test("reportsOf, reportersOf, findUnit and reportedDeployments match every node's reports through 2,000 random hellos, reports, deployment changes, gones and forced deletes", () => {
  const r = new NodeRegistry(1000);
  let seed = 7;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const nodes = ['node-a', 'node-b', 'node-c'];
  const deployments = ['web', 'api', ''];
  const report = (name: string, deployment: string) => ({
    name,
    deployment,
    phase: pick(['Running', 'Terminating', 'Failed'] as const),
    pid: 7,
    resources: { cpu: 1, memory: 1 },
    term: 1,
  });
  const unit = () => `u-${Math.floor(rand() * 12)}`;
  let now = 0;
  for (const n of nodes) r.hello({ ...INFO, name: n }, 1, [], 1, now);
  for (let step = 0; step < 2000; step++) {
    const node = pick(nodes);
    const x = rand();
    now += 10;
    if (x < 0.5) r.unitStatus(node, report(unit(), pick(deployments)));
    else if (x < 0.7) r.unitGone(node, unit());
    else if (x < 0.8)
      r.hello(
        { ...INFO, name: node },
        1,
        Array.from({ length: Math.floor(rand() * 4) }, () => report(unit(), pick(deployments))),
        1,
        now,
      );
    else if (x < 0.9) {
      r.disconnected(node, now);
      for (let t = now; t <= now + 400; t += 50) r.checkLiveness(t);
      now += 400;
      r.forgetUnit(node, unit());
    } else r.heartbeat(node, now);
    // The index says exactly what a walk over every node's reports says.
    const want = new Map<string, string[]>();
    for (const n of r.nodes.values()) for (const rep of n.units.values()) want.set(rep.deployment, [...(want.get(rep.deployment) ?? []), `${n.name}/${rep.name}/${rep.phase}`]);
    for (const d of deployments) {
      const got: string[] = [];
      r.reportsOf(d, (n, rep) => {
        assert.equal(r.nodes.get(n.name)!.units.get(rep.name), rep, 'the very report the node holds');
        got.push(`${n.name}/${rep.name}/${rep.phase}`);
      });
      assert.deepEqual(got.sort(), (want.get(d) ?? []).sort(), `step ${step}: reports naming '${d}'`);
    }
    assert.deepEqual([...r.reportedDeployments()].sort(), [...want.keys()].filter((d) => d !== '').sort(), `step ${step}: deployments reported`);
    // And the nodes reporting each name: one node's name alone, a list only for more than one.
    for (let i = 0; i < 12; i++) {
      const on = nodes.filter((n) => r.nodes.get(n)!.units.has(`u-${i}`));
      const got = r.reportersOf(`u-${i}`);
      if (on.length === 0) assert.equal(got, undefined, `step ${step}: u-${i} reported by none`);
      else if (on.length === 1) assert.equal(got, on[0], `step ${step}: u-${i} reported by ${on[0]} alone`);
      else assert.deepEqual([...(got as readonly string[])].sort(), on, `step ${step}: u-${i} reported by ${on.join(', ')}`);
      assert.ok(on.length === 0 ? r.findUnit(`u-${i}`) === undefined : on.includes(r.findUnit(`u-${i}`)!.node), `step ${step}: findUnit(u-${i})`);
    }
  }
});

test("a node seeded at an election counts its agent's reports from the election, not from its first hello; a later new agent process from its hello", () => {
  const r = new NodeRegistry(1000);
  r.seed(INFO, 1_000, 6_000);
  assert.equal(r.nodes.get('node-a')!.reportsSince, undefined);
  // The first agent heard may be the one that ran all along: a unit this leader bound at 1,500,
  // before the agent reconnected to it, was never sent, not lost with an agent.
  r.hello(INFO, 4242, [], 1, 2_000);
  assert.equal(r.nodes.get('node-a')!.reportsSince, 1_000);
  // The same process again: nothing changes. Another process: its hello starts the count.
  r.hello(INFO, 4242, [], 1, 3_000);
  assert.equal(r.nodes.get('node-a')!.reportsSince, 1_000);
  r.hello(INFO, 4343, [], 1, 4_000);
  assert.equal(r.nodes.get('node-a')!.reportsSince, 4_000);
  // A node no election seeded: its first hello.
  const fresh = new NodeRegistry(1000);
  fresh.hello(INFO, 4242, [], 1, 2_000);
  assert.equal(fresh.nodes.get('node-a')!.reportsSince, 2_000);
});

test('checks between deadlines skip the walk over the nodes and judge every node at the same check as a walk each time would, through 1,000 random histories', () => {
  const T = 1000;
  for (let history = 1; history <= 1000; history++) {
    const random = new SeededRandom(history);
    const r = new NodeRegistry(T);
    const judged: string[] = [];
    r.onChange((c) => {
      if (c.type === 'node-not-ready') judged.push(`${c.node}@${now}: ${c.why}`);
    });
    // The rule, applied to every node at every check that is not skipped for a stall.
    const expected: string[] = [];
    let lastCheck = Number.POSITIVE_INFINITY;
    const names = Array.from({ length: 1 + random.int(6) }, (_, i) => `node-${i}`);
    const info = (name: string) => ({ ...INFO, name });
    let now = 0;
    for (let step = 0; step < 400; step++) {
      now += random.chance(0.03) ? 300 : random.int(60); // now and then a stall longer than STALL_SKIP_MS
      const name = names[random.int(names.length)];
      const x = random.next();
      if (x < 0.3) r.heartbeat(name, now);
      else if (x < 0.35) r.hello(info(name), 7, [], 1, now);
      else if (x < 0.4) r.disconnected(name, now);
      else if (x < 0.42) r.seed(info(name), now, now + random.int(2000));
      else {
        const stalled = now - lastCheck > STALL_SKIP_MS;
        lastCheck = now;
        if (!stalled) {
          for (const n of r.nodes.values()) {
            if (!n.ready) continue;
            const closedFor = !n.connected && n.disconnectedAtMs != null ? now - n.disconnectedAtMs : -1;
            if (closedFor > CLOSE_GRACE_MS) expected.push(`${n.name}@${now}: agent connection closed ${(closedFor / 1000).toFixed(2)}s ago, no reconnect`);
            else if (now - n.lastHeartbeatMs > T) expected.push(`${n.name}@${now}: no heartbeat for ${((now - n.lastHeartbeatMs) / 1000).toFixed(1)}s`);
          }
        }
        r.checkLiveness(now);
      }
    }
    assert.deepEqual(judged, expected, `history ${history}`);
  }
});

test('unit reports decoded from frames share one copy of their deployment, phase and spec hash (a heap snapshot counts them) and one object of equal requests in the registry', async () => {
  const { r } = registry();
  const reports = 300;
  // Distinctive values, so the snapshot's strings are these and nothing else of the process.
  const deployment = 'intern-probe-deployment';
  const specHash = 'feedc0de1234abcd';
  // Each unit reported twice, Pending then Running, as an agent reports a start.
  for (const phase of ['Pending', 'Running'] as const) {
    for (let i = 0; i < reports; i++) {
      const frame = encodeMessage({
        v: 1,
        type: 'unit-status',
        unit: { name: `intern-probe-${i}`, deployment, phase, pid: 1000 + i, resources: { cpu: 10, memory: 8 }, term: 1, specHash, revision: 1 },
      });
      const decoded = decodeAgentMessage(frame); // a new copy of every string, as a frame off a socket gives
      assert.ok(decoded.ok && decoded.msg.type === 'unit-status');
      r.unitStatus('node-a', decoded.msg.unit);
    }
  }
  assert.equal(r.nodes.get('node-a')!.units.size, reports);
  assert.ok([...r.nodes.get('node-a')!.units.values()].every((u) => u.phase === 'Running'));
  const copies = await stringCopies([deployment, specHash, 'intern-probe-7']);
  // One shared instance each (and the literal in this file's code); without sharing, one per report.
  for (const [value, n] of copies) assert.ok(n <= 3, `${n} copies of "${value}" in the heap for ${reports} kept reports`);
  // A unit's name: the maps' key and the kept report's name are one string, not the first report's and the last's.
  assert.equal(copies.get('intern-probe-7'), 2, 'the unit name once in the registry (and once in this test)');
  // Their equal requests are one object too, not one per report.
  const requests = new Set([...r.nodes.get('node-a')!.units.values()].map((u) => u.resources));
  assert.equal(requests.size, 1, `${requests.size} objects for ${reports} reports' equal requests`);
  assert.deepEqual([...requests][0], { cpu: 10, memory: 8 });
});
