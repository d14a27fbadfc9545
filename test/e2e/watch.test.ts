// test/e2e/watch.test.ts -- exact watches on a real 3-replica cluster: a
// list carries a resourceVersion; a watch resumed from a version replays
// exactly what came after it; `mo get units -w` survives the death of the
// leader it was watching through (it resumes or lists again on the next
// replica) and, checked against the list at the end, showed every unit's
// final state and no unit that no longer exists; against a cluster with no
// replica left, `mo get -w` exits 1 within a few seconds.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Cluster, REPO, waitFor, webManifest } from '../helpers/cluster.ts';

const small = (name: string, replicas: number) => webManifest(name, replicas, { cpu: '100m', memory: '64Mi' });

test('a list has a resourceVersion, and a watch from it replays exactly the changes after it', { timeout: 60000 }, async (t) => {
  const c = await Cluster.start({ replicas: 1 });
  t.after(() => c.stop());
  const list = (await c.api('GET', '/v1/deployments')).json;
  assert.match(list.metadata.resourceVersion, /^[\w-]+\.\d+$/);
  assert.equal((await c.api('PUT', '/v1/deployments/a', small('a', 0))).status, 201);
  const r = await fetch(`${c.urls[0]}/v1/deployments?watch=1&resourceVersion=${list.metadata.resourceVersion}`, { headers: { authorization: `Bearer ${c.token}` } });
  const reader = r.body!.getReader();
  const { value } = await reader.read();
  const first = JSON.parse(Buffer.from(value!).toString().split('\n')[0]);
  assert.equal(first.type, 'ADDED');
  assert.equal(first.object.metadata.name, 'a', 'the change made after the list, and nothing before it');
  await reader.cancel();
  const gone = await c.api('GET', '/v1/deployments?watch=1&resourceVersion=elsewhere.3');
  assert.equal(gone.status, 410);
  assert.match(gone.json.error, /list again/);
});

test('mo get units -w survives the death of the replica it watched through, and shows the final state exactly', { timeout: 120000 }, async (t) => {
  const c = await Cluster.start({ replicas: 3 });
  t.after(() => c.stop());
  assert.equal((await c.api('PUT', '/v1/deployments/w', small('w', 3))).status, 201);
  await waitFor('3 running', async () => (await c.running('w')).length === 3, 20000);
  // /v1/cluster names no leader while a slow replica has not answered yet: wait for one.
  const leader = await waitFor(
    'a leader named by /v1/cluster',
    async () => {
      const status = (await c.api('GET', '/v1/cluster')).json;
      return status?.replicas?.find((r: any) => r.id === status.leader && r.reachable);
    },
    20000,
  );
  // Watch through the leader first, with the others as fallbacks.
  const order = [leader.url, ...c.urls.filter((u) => u !== leader.url)];
  const child = spawn(process.execPath, ['cli/mo.cjs', 'get', 'units', '-w', '-o', 'json'], {
    cwd: REPO,
    env: { ...process.env, MO_SERVER: order.join(','), MO_TOKEN: c.token },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  await waitFor('the first units in the watch', () => out.includes('"w-3"'), 15000);
  // The leader dies; meanwhile the cluster changes: scale 3 -> 1 (two units go), then up to 4.
  process.kill(leader.pid, 'SIGKILL');
  await c.agreedLeader(leader.id, 15000);
  assert.equal((await c.api('PATCH', '/v1/deployments/w/scale', { replicas: 1 })).status, 200);
  await waitFor('1 running', async () => (await c.units()).filter((u) => u.spec.deployment === 'w').length === 1, 20000);
  assert.equal((await c.api('PATCH', '/v1/deployments/w/scale', { replicas: 4 })).status, 200);
  await waitFor('4 running', async () => (await c.running('w')).length === 4, 20000);
  // What the watch says now must be what a list says.
  const final = (await c.units()).filter((u) => u.spec.deployment === 'w');
  await waitFor(
    'the watch caught up with the list',
    () => {
      const state = new Map<string, any>();
      for (const line of out.split('\n')) {
        if (!line.trim()) continue;
        let ev: any;
        try {
          ev = JSON.parse(line);
        } catch {
          continue; // -o json prints one pretty event per object; whole-line parse only for compact lines
        }
        if (ev.type === 'DELETED') state.delete(ev.object.metadata.name);
        else state.set(ev.object.metadata.name, ev.object);
      }
      const names = [...state.keys()].sort();
      return JSON.stringify(names) === JSON.stringify(final.map((u) => u.metadata.name).sort()) && final.every((u) => state.get(u.metadata.name)?.status.phase === 'Running');
    },
    20000,
    100,
  );
});

test('mo get -w against a cluster with no replica left exits 1 within a few seconds', { timeout: 60000 }, async () => {
  const t0 = Date.now();
  const r = await new Promise<{ code: number | null; err: string }>((resolve) => {
    const p = spawn(process.execPath, ['cli/mo.cjs', 'get', 'units', '-w'], {
      cwd: REPO,
      env: { ...process.env, MO_SERVER: 'http://127.0.0.1:9,http://127.0.0.1:10', MO_TOKEN: 'x' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    p.stderr!.on('data', (b) => (err += b));
    p.on('close', (code) => resolve({ code, err }));
  });
  assert.equal(r.code, 1);
  assert.match(r.err, /unreachable servers/);
  assert.ok(Date.now() - t0 < 8000, `gave up after ${Date.now() - t0} ms`);
});
