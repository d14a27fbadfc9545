// test/e2e/cli-real.test.ts -- `mo` against a real 3-replica cluster, as a
// user types it: apply a file, get, describe (with the scheduling
// decision), scale, cluster status, and the one-line error with exit 1
// when a write cannot reach a quorum.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Cluster, REPO, runMo, waitFor } from '../helpers/cluster.ts';

/** The package's bin, as users run it (the prebuilt bundle, dist/mo.cjs). */
function mo(c: Cluster, args: string[], input = ''): Promise<{ code: number | null; out: string; err: string }> {
  return runMo(c, args, input, { NO_COLOR: '1' });
}

test('mo drives a real cluster: apply, get, describe with the decision, scale, cluster status, and "no quorum" with exit 1', { timeout: 120000 }, async (t) => {
  const c = await Cluster.start({ replicas: 3 });
  t.after(() => c.stop());

  let r = await mo(c, ['apply', '-f', path.join(REPO, 'examples/web.yaml')]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /deployment\.apps\/web created/);

  await waitFor(
    '3 units Running in mo get units',
    async () => {
      const g = await mo(c, ['get', 'units', '-o', 'json']);
      return g.code === 0 && JSON.parse(g.out).items.filter((u: any) => u.status.phase === 'Running').length === 3;
    },
    15000,
    200,
  );
  r = await mo(c, ['get', 'units']);
  assert.match(r.out.split('\n')[0], /NAME\s+DEPLOYMENT\s+READY\s+STATUS\s+NODE\s+PID/);
  assert.equal(r.out.trim().split('\n').length, 4);

  r = await mo(c, ['describe', 'unit', 'web-1']);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /untolerated taint gpu-only/, 'the decision says why node-c was rejected');
  assert.match(r.out, /balanced=\d+/, 'and shows the scores');

  r = await mo(c, ['scale', 'deployment', 'web', '--replicas', '4']);
  assert.equal(r.code, 0, r.err);
  await waitFor('4 Running', async () => (await c.running('web')).length === 4, 15000);

  r = await mo(c, ['cluster', 'status', '-o', 'json']);
  const status = JSON.parse(r.out);
  assert.equal(status.replicas.length, 3);
  const leader = status.replicas.find((x: any) => x.id === status.leader);
  assert.equal(leader.role, 'leader');
  assert.ok(fs.existsSync(`/proc/${leader.pid}`), 'the leader pid is a real process');

  // bad usage: exit 2, one line
  r = await mo(c, ['scale', 'deployment', 'web']);
  assert.equal(r.code, 2);

  // two replicas gone: a write fails within seconds, one line, exit 1
  for (const p of c.cps.filter((x) => x.pid !== leader.pid)) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
  const t0 = Date.now();
  r = await mo(c, ['scale', 'deployment', 'web', '--replicas', '5']);
  assert.equal(r.code, 1, r.out + r.err);
  assert.match(r.err.trim(), /^error: no quorum: /);
  assert.equal(r.err.trim().split('\n').length, 1);
  assert.ok(Date.now() - t0 < 8000, `failed within seconds (${Date.now() - t0} ms)`);
});

test('mo delete unit says "deleted by the user" to the agent and the events; a Lost unit goes with --force (kubectl warning) and not without', { timeout: 120000 }, async (t) => {
  const c = await Cluster.start({ replicas: 1 });
  t.after(() => c.stop());

  let r = await mo(c, ['apply', '-f', path.join(REPO, 'examples/web.yaml')]);
  assert.equal(r.code, 0, r.err);
  await waitFor('3 units Running', async () => (await c.running('web')).length === 3, 15000, 100);

  // A user's delete: the stop says why, and nothing calls it "not bound".
  const [first] = await c.running('web');
  const victim = first.metadata.name as string;
  r = await mo(c, ['delete', 'pod', victim]);
  assert.equal(r.code, 0, r.err);
  const killing = await waitFor(
    'a Killing event for the deleted unit',
    async () => {
      const ev = JSON.parse((await mo(c, ['get', 'events', victim, '-o', 'json'])).out).items as any[];
      return ev.find((e) => e.reason === 'Killing');
    },
    10000,
    100,
  );
  assert.match(killing.message, /deleted by the user/);
  await waitFor(
    'the replacement Running and the deleted unit gone',
    async () => {
      const units = await c.units();
      return units.filter((u: any) => u.status.phase === 'Running').length === 3 && !units.some((u: any) => u.metadata.name === victim);
    },
    15000,
    100,
  );
  const events = JSON.parse((await mo(c, ['get', 'events', victim, '-o', 'json'])).out).items as any[];
  assert.ok(!events.some((e) => /not bound/.test(e.message)), events.map((e) => e.message).join('\n'));
  // The stream says the same: the agent was told why, nobody said "not bound".
  const agentLines = c.agents.get(first.spec.nodeName)!.output;
  assert.ok(
    agentLines.some((l) => l.includes(`stopping ${victim} `) && l.includes('deleted by the user')),
    agentLines.slice(-20).join('\n'),
  );
  const allLines = [...c.cps.flatMap((p) => p.output), ...[...c.agents.values()].flatMap((p) => p.output)];
  assert.ok(!allLines.some((l) => l.includes(victim) && /not bound/.test(l)), allLines.filter((l) => l.includes(victim)).join('\n'));

  // A node dies: its unit stays listed as Lost from its last report.
  const running = await c.running('web');
  const node = running[0].spec.nodeName as string;
  const lost = running.filter((u: any) => u.spec.nodeName === node).map((u: any) => u.metadata.name as string);
  const agent = c.agents.get(node)!;
  agent.child.kill('SIGKILL');
  await agent.exited;
  await waitFor(
    `${lost[0]} listed as Lost`,
    async () => {
      const g = JSON.parse((await mo(c, ['get', 'units', '-o', 'json'])).out).items as any[];
      return g.some((u) => u.metadata.name === lost[0] && u.status.phase === 'Lost' && u.spec.nodeName === node);
    },
    15000,
    100,
  );
  // Its binding is gone once it is replaced: a plain delete says what to do.
  await waitFor('the replacements bound elsewhere', async () => (await c.running('web')).filter((u: any) => u.spec.nodeName !== node).length === 3, 15000, 100);
  r = await mo(c, ['delete', 'unit', lost[0]]);
  assert.equal(r.code, 1, r.out + r.err);
  assert.match(r.err, /NotReady node .*Lost.*force/);

  r = await mo(c, ['delete', 'unit', lost[0], '--force']);
  assert.equal(r.code, 0, r.err);
  assert.match(r.err, /^Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated/);
  assert.equal(r.out, `unit "${lost[0]}" force deleted\n`);
  const after = JSON.parse((await mo(c, ['get', 'units', '-o', 'json'])).out).items as any[];
  assert.ok(!after.some((u) => u.metadata.name === lost[0]), `${lost[0]} is no longer listed`);
  assert.equal(after.filter((u) => u.status.phase === 'Running').length, 3);
});
