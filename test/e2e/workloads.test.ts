// test/e2e/workloads.test.ts -- Deployments behave like Kubernetes' on a real
// cluster, checked against the operating system: a rolling update sampled
// every few ms from /proc never has fewer than replicas-maxUnavailable units
// available nor more than replicas+maxSurge processes alive (stopping ones
// included), ends with every process running the new environment, and undo
// goes back the same way; the leader SIGKILLed mid-rollout and the next one
// finishes it within the same bounds; crash-looping deployments back off
// (few units, bounded) while a healthy one's kill -9 is still replaced at
// once; a readiness probe that never passes stops a rollout with
// ProgressDeadlineExceeded and leaves the old units running; a delete with
// --grace-period is honoured by the process.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { childrenOf, pidAlive } from '../../shared/proc.ts';
import { Cluster, runMo, sleep, waitFor } from '../helpers/cluster.ts';

/** A unit that takes 300 ms to stop after SIGTERM, so stopping processes are visible in /proc. */
const SLOW_STOP = ['sh', '-c', 'trap "sleep 0.3; exit 0" TERM; while true; do sleep 0.1; done'];

function rollManifest(name: string, greeting: string, extra: Record<string, unknown> = {}): unknown {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas: 5,
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      ...extra,
      template: {
        spec: {
          containers: [{ name, command: SLOW_STOP, env: [{ name: 'GREETING', value: greeting }], resources: { requests: { cpu: '100m', memory: '64Mi' } } }],
        },
      },
    },
  };
}

function environOf(pid: number): Record<string, string> {
  try {
    const out: Record<string, string> = {};
    for (const kv of fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
      const i = kv.indexOf('=');
      if (i > 0) out[kv.slice(0, i)] = kv.slice(i + 1);
    }
    return out;
  } catch {
    return {};
  }
}

/**
 * Unit processes of `deployment` alive now, one per unit (by its
 * MO_UNIT_NAME): anywhere below each agent, the top-most process whose
 * environment names the deployment, i.e. the unit's command (its init and
 * the spawn server's fork above it do not carry it; the `sleep`s a command
 * forks below it come and go). The whole tree is walked: a unit started
 * from a warm sandbox sits below a child of the agent of its own, but every
 * unit started cold sits below the agent's one spawn server
 * (`mo-init --serve`), so one child of the agent can hold many units.
 * (Stopping at the first unit below each child counted two cold starts on
 * one agent as one, and a rollout was seen one unit short.)
 */
function aliveByOs(c: Cluster, deployment: string): number[] {
  const byUnit = new Map<string, number>();
  for (const agent of c.agents.values()) {
    const queue = childrenOf(agent.pid);
    for (let i = 0; i < queue.length; i++) {
      const pid = queue[i];
      const env = environOf(pid);
      if (env.MO_DEPLOYMENT === deployment && env.MO_UNIT_NAME && !byUnit.has(env.MO_UNIT_NAME) && pidAlive(pid)) byUnit.set(env.MO_UNIT_NAME, pid);
      queue.push(...childrenOf(pid));
    }
  }
  return [...byUnit.values()];
}

interface Bounds {
  minAvailable: number;
  maxAlive: number;
  samples: number;
}

/**
 * Samples the cluster until `done` says so: processes alive from /proc, and
 * units available (Running, ready, pid alive) from the API.
 */
async function sample(c: Cluster, deployment: string, done: () => Promise<boolean>, timeoutMs: number): Promise<Bounds> {
  const b: Bounds = { minAvailable: Number.POSITIVE_INFINITY, maxAlive: 0, samples: 0 };
  const deadline = Date.now() + timeoutMs;
  let checked = 0;
  for (;;) {
    b.maxAlive = Math.max(b.maxAlive, aliveByOs(c, deployment).length);
    try {
      const units = (await c.units()).filter((u) => u.spec.deployment === deployment);
      const available = units.filter((u) => u.status.phase === 'Running' && u.status.ready && pidAlive(u.status.pid)).length;
      b.minAvailable = Math.min(b.minAvailable, available);
      b.maxAlive = Math.max(b.maxAlive, aliveByOs(c, deployment).length);
      b.samples++;
    } catch {
      // a replica just died (leader kill): sample again
    }
    if (Date.now() - checked > 100) {
      checked = Date.now();
      if (await done()) return b;
    }
    if (Date.now() > deadline) throw new Error(`rollout of ${deployment} did not finish in ${timeoutMs} ms`);
    await sleep(2);
  }
}

/** Null once deployment `name` has rolled out `revision` to 5 units alive in /proc; otherwise what is still missing. */
async function notRolledOut(c: Cluster, name: string, revision: number): Promise<string | null> {
  const r = await c.api('GET', `/v1/deployments/${name}`);
  if (r.status !== 200) return `GET /v1/deployments/${name}: ${r.status} ${r.text}`;
  const d = r.json;
  const alive = aliveByOs(c, name).length;
  const rolled =
    d.metadata.annotations['deployment.kubernetes.io/revision'] === String(revision) &&
    d.status.observedGeneration === d.metadata.generation &&
    d.status.updatedReplicas === 5 &&
    d.status.availableReplicas === 5 &&
    d.status.oldReplicas === 0 &&
    alive === 5;
  if (rolled) return null;
  return `revision ${d.metadata.annotations['deployment.kubernetes.io/revision']}, generation ${d.status.observedGeneration}/${d.metadata.generation}, updated ${d.status.updatedReplicas}, available ${d.status.availableReplicas}, old ${d.status.oldReplicas}, ${alive} alive in /proc`;
}

async function rolledOut(c: Cluster, name: string, revision: number): Promise<boolean> {
  return (await notRolledOut(c, name, revision)) === null;
}

/** Waits for the rollout of `revision`; on a timeout the error says what was still missing (and waitFor adds what the processes last said). */
async function waitRolledOut(c: Cluster, name: string, revision: number, timeoutMs: number): Promise<void> {
  await waitFor(
    `5 units of revision ${revision}`,
    async () => {
      const why = await notRolledOut(c, name, revision);
      if (why !== null) throw new Error(why);
      return true;
    },
    timeoutMs,
  );
}

test(
  'a rolling update (maxUnavailable 1, maxSurge 0) never has fewer than 4 available or more than 5 alive, ends with the new env in every process, and undo goes back the same way',
  { timeout: 120000 },
  async (t) => {
    const c = await Cluster.start({ replicas: 1 });
    t.after(() => c.stop());
    assert.equal((await c.api('PUT', '/v1/deployments/roll', rollManifest('roll', 'hello'))).status, 201);
    await waitRolledOut(c, 'roll', 1, 20000);

    assert.equal((await c.api('PUT', '/v1/deployments/roll', rollManifest('roll', 'world'))).status, 200);
    const forward = await sample(c, 'roll', () => rolledOut(c, 'roll', 2), 60000);
    assert.ok(forward.samples > 20, `sampled often (${forward.samples})`);
    assert.ok(forward.minAvailable >= 4, `never below 4 available (min ${forward.minAvailable})`);
    assert.ok(forward.maxAlive <= 5, `never above 5 processes alive (max ${forward.maxAlive})`);
    const pids = aliveByOs(c, 'roll');
    assert.equal(pids.length, 5);
    for (const pid of pids) {
      assert.equal(environOf(pid).GREETING, 'world', `pid ${pid} runs the new env`);
      assert.equal(environOf(pid).MO_REVISION, '2');
    }

    let r = await runMo(c, ['rollout', 'history', 'deployment/roll']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^1\s+apply/m);
    assert.match(r.out, /^2\s+\*\s+apply/m);

    r = await runMo(c, ['rollout', 'undo', 'deployment/roll']);
    assert.equal(r.code, 0, r.err);
    const back = await sample(c, 'roll', () => rolledOut(c, 'roll', 3), 60000);
    assert.ok(back.minAvailable >= 4 && back.maxAlive <= 5, `undo within the same bounds (min ${back.minAvailable} available, max ${back.maxAlive} alive)`);
    for (const pid of aliveByOs(c, 'roll')) assert.equal(environOf(pid).GREETING, 'hello', 'undo brings back the first template');

    r = await runMo(c, ['rollout', 'status', 'deployment/roll', '--timeout', '10s']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /successfully rolled out/);
    r = await runMo(c, ['rollout', 'undo', 'deployment/roll', '--to-revision', '9']);
    assert.equal(r.code, 1);
    assert.match(r.err, /^error: revision 9 of deployment roll not found \(revisions: 2, 3\)\n$/);
  },
);

test('the leader SIGKILLed mid-rollout: the next leader completes it within the same bounds', { timeout: 120000 }, async (t) => {
  const c = await Cluster.start({ replicas: 3 });
  t.after(() => c.stop());
  // minReadySeconds 1 spaces the steps out, so the kill lands mid-way.
  assert.ok([200, 201].includes((await c.api('PUT', '/v1/deployments/roll', rollManifest('roll', 'hello', { minReadySeconds: 1 }))).status));
  await waitRolledOut(c, 'roll', 1, 30000);
  assert.equal((await c.api('PUT', '/v1/deployments/roll', rollManifest('roll', 'world', { minReadySeconds: 1 }))).status, 200);

  let killed = '';
  const bounds = await sample(
    c,
    'roll',
    async () => {
      if (killed === '') {
        const d = (await c.api('GET', '/v1/deployments/roll')).json;
        if (d?.status?.updatedReplicas >= 2) {
          const status = (await c.api('GET', '/v1/cluster')).json;
          const leader = status?.replicas?.find((x: any) => x.id === status.leader && x.reachable);
          if (!leader) return false; // no leader named yet (a slow replica's answer is missing): sample again
          killed = leader.id;
          process.kill(leader.pid, 'SIGKILL');
        }
        return false;
      }
      return rolledOut(c, 'roll', 2);
    },
    90000,
  );
  assert.notEqual(killed, '', 'the leader was killed mid-rollout');
  const status = (await c.api('GET', '/v1/cluster')).json;
  assert.notEqual(status.leader, killed, 'a new leader finished it');
  assert.ok(bounds.minAvailable >= 4, `never below 4 available across the failover (min ${bounds.minAvailable})`);
  assert.ok(bounds.maxAlive <= 5, `never above 5 alive across the failover (max ${bounds.maxAlive})`);
  for (const pid of aliveByOs(c, 'roll')) assert.equal(environOf(pid).GREETING, 'world');
});

test('crash loops back off and stay bounded while a healthy deployment is still healed at once', { timeout: 120000 }, async (t) => {
  const c = await Cluster.start({ replicas: 1 });
  t.after(() => c.stop());
  const small = { requests: { cpu: '100m', memory: '64Mi' } };
  const dep = (name: string, replicas: number, command: string[]) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas, template: { spec: { containers: [{ name, command, resources: small }] } } },
  });
  await c.api('PUT', '/v1/deployments/good', dep('good', 2, ['sleep', '3600']));
  await waitFor('good running', async () => (await c.running('good')).length === 2, 15000);
  const started = Date.now();
  await c.api('PUT', '/v1/deployments/bad', dep('bad', 3, ['false']));
  await c.api('PUT', '/v1/deployments/typo', dep('typo', 2, ['sleeeep', '10']));

  // The typo's units say why they cannot start, and wait in CrashLoopBackOff.
  const typo = await waitFor(
    'a typo unit in CrashLoopBackOff',
    async () => (await c.units()).find((u) => u.spec.deployment === 'typo' && u.status.reason === 'CrashLoopBackOff'),
    15000,
  );
  assert.match(typo.status.message, /StartError.*sleeeep.*ENOENT/, typo.status.message);
  const g = await runMo(c, ['get', 'units']);
  assert.match(g.out, /^typo-\d+\s+typo\s+0\/1\s+CrashLoopBackOff/m);
  const gd = await runMo(c, ['get', 'deployments']);
  assert.match(gd.out, /^bad\s+0\/3\s+3\s+0\s+CrashLoopBackOff/m);

  // Let them loop a while; a healthy unit's kill -9 is replaced in the meantime, at once.
  await waitFor('15 s of crash looping', () => Date.now() - started > 15000, 20000, 200);
  const victim = (await c.running('good'))[0];
  const killedAt = Date.now();
  process.kill(victim.status.pid, 'SIGKILL');
  const healed = await waitFor(
    'a replacement for the killed unit',
    async () => {
      const now = await c.running('good');
      return now.length === 2 && !now.some((u) => u.metadata.name === victim.metadata.name) ? Date.now() - killedAt : 0;
    },
    10000,
    5,
  );
  assert.ok(healed < 3000, `replaced in ${healed} ms, not held back by the other deployments' back-off`);

  // Bounded: with back-off 1, 2, 4, 8 s, 3 + 2 replicas make a few dozen units, not thousands.
  const deployments = (await c.api('GET', '/v1/units')).json.items as any[];
  const highest = (prefix: string) => Math.max(0, ...deployments.filter((u) => u.spec.deployment === prefix).map((u) => Number(u.metadata.name.split('-').pop())));
  assert.ok(highest('bad') <= 3 * 6, `bad made ${highest('bad')} units in ~15 s`);
  assert.ok(highest('typo') <= 2 * 6, `typo made ${highest('typo')} units in ~15 s`);
  const backoff = await waitFor('a BackOff event for bad', async () =>
    ((await c.api('GET', '/v1/events')).json.items as any[]).find((e) => e.reason === 'BackOff' && e.involvedObject.name.startsWith('bad-')),
  );
  const events = (await c.api('GET', '/v1/events')).json.items as any[];
  assert.match(backoff.message, /exit code 1 after [\d.]+s\); next try at \d\d:\d\d:\d\d/);
  assert.ok(
    events.some((e) => e.reason === 'Scheduled' && e.involvedObject.name === 'good-1'),
    "the healthy deployment's early events are still there",
  );
});

test('a readiness probe that never passes stops the rollout with ProgressDeadlineExceeded and keeps the old units; --grace-period is honoured', { timeout: 120000 }, async (t) => {
  const c = await Cluster.start({ replicas: 1 });
  t.after(() => c.stop());
  const manifest = (probe: unknown) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: {
      replicas: 3,
      progressDeadlineSeconds: 3,
      template: {
        spec: {
          // It ignores SIGTERM: only the grace period's SIGKILL stops it.
          terminationGracePeriodSeconds: 60,
          containers: [
            {
              name: 'web',
              command: ['sh', '-c', 'trap "" TERM; while true; do sleep 0.2; done'],
              resources: { requests: { cpu: '100m', memory: '64Mi' } },
              ...(probe ? { readinessProbe: probe } : {}),
            },
          ],
        },
      },
    },
  });
  await c.api('PUT', '/v1/deployments/web', manifest({ exec: { command: ['true'] }, periodSeconds: 1 }));
  await waitFor('3 ready units', async () => (await c.running('web')).filter((u) => u.status.ready).length === 3, 20000);
  const before = (await c.running('web')).map((u) => u.status.pid).sort();

  await c.api('PUT', '/v1/deployments/web', manifest({ exec: { command: ['false'] }, periodSeconds: 1 }));
  const r = await runMo(c, ['rollout', 'status', 'deployment/web', '--timeout', '60s']);
  assert.equal(r.code, 1, r.out + r.err);
  assert.match(r.err, /^error: deployment "web" exceeded its progress deadline\n$/);
  const d = (await c.api('GET', '/v1/deployments/web')).json;
  const progressing = d.status.conditions.find((x: any) => x.type === 'Progressing');
  assert.equal(progressing.status, 'False');
  assert.equal(progressing.reason, 'ProgressDeadlineExceeded');
  const stillThere = before.filter((pid) => pidAlive(pid));
  assert.deepEqual(stillThere, before, 'the old units still run');
  const newOnes = (await c.units()).filter((u) => u.spec.revision === 2);
  assert.ok(newOnes.length >= 1 && newOnes.every((u) => u.status.ready === false), 'the new unit runs but is not ready');

  // Undo: the unready unit is stopped (it ignores SIGTERM and has 60 s of
  // grace, so it stays Terminating a while), back to the 3 ready units.
  assert.equal((await c.api('POST', '/v1/deployments/web/undo', {})).status, 200);
  await waitFor(
    'back to 3 ready units, the unready one stopping',
    async () => {
      const units = (await c.units()).filter((u) => u.spec.deployment === 'web' && u.status.phase !== 'Terminating');
      return units.length === 3 && units.every((u) => u.status.ready && before.includes(u.status.pid));
    },
    30000,
  );

  // A unit that ignores SIGTERM goes within its --grace-period (1 s), not its template's 60 s.
  const victim = (await c.running('web'))[0];
  const t0 = Date.now();
  const del = await runMo(c, ['delete', 'unit', victim.metadata.name, '--grace-period', '1']);
  assert.equal(del.code, 0, del.err);
  await waitFor(`pid ${victim.status.pid} to die`, () => !pidAlive(victim.status.pid), 20000, 20);
  const took = Date.now() - t0;
  assert.ok(took >= 900 && took < 10000, `stopped after ${took} ms: SIGTERM ignored, SIGKILL after the 1 s grace`);
  const bad = await runMo(c, ['delete', 'unit', 'web-1', '--grace-period', '-1']);
  assert.equal(bad.code, 2);
});
