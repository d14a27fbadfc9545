// test/e2e/services.test.ts -- a NodePort Service on a real 3-replica
// cluster, with the OS and a real client as the judges: units get host
// ports (status.ports, PORT in /proc/PID/environ), every node's proxy
// listens on its own address and the nodePort, and a client that opens a
// new connection per request to one node's address gets every request
// answered while a unit is SIGKILLed, another node's agent is SIGKILLed and
// the leader is SIGKILLed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Cluster, REPO, runMo, waitFor } from '../helpers/cluster.ts';

function get(host: string, port: number, timeoutMs = 2000): Promise<{ ok: boolean; body: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = http.get({ host, port, path: '/', agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.on('data', (b) => (body += b));
      res.on('end', () => resolve({ ok: res.statusCode === 200, body, ms: performance.now() - t0 }));
      res.on('error', () => resolve({ ok: false, body, ms: performance.now() - t0 }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ ok: false, body: e.message, ms: performance.now() - t0 }));
  });
}

test('a NodePort Service answers every request through unit, agent and leader kills, and on without quorum', { timeout: 120000 }, async (t) => {
  const c = await Cluster.start({ replicas: 3 });
  t.after(() => c.stop());
  const [, service] = parseAllDocuments(fs.readFileSync(path.join(REPO, 'examples/web-service.yaml'), 'utf8')).map((d) => d.toJS());
  // One file, a Deployment and its Service, applied as a user would.
  const applied = await runMo(c, ['apply', '-f', 'examples/web-service.yaml']);
  assert.equal(applied.code, 0, applied.err);
  assert.equal(applied.out, 'deployment.apps/hello created\nservice/hello created\n');
  const created = await c.api('GET', '/v1/services/hello');
  assert.equal(created.json.spec.ports[0].nodePort, 30080);

  // Bad input: a nodePort another Service holds is refused naming both.
  const clash = await c.api('PUT', '/v1/services/other', { ...service, metadata: { name: 'other' } });
  assert.equal(clash.status, 409);
  assert.match(clash.json.error, /nodePort 30080 of service other is already used by service hello/);

  const ready = await waitFor(
    '3 ready endpoints',
    async () => {
      const e = (await c.api('GET', '/v1/endpoints')).json.items.find((x: any) => x.metadata.name === 'hello');
      return e?.subsets[0].addresses.length === 3 ? e.subsets[0].addresses : null;
    },
    30000,
  );
  // Each endpoint is its node's address and the unit's host port, which the unit got as PORT.
  const units = await c.running('hello');
  for (const u of units) {
    const p = u.status.ports[0];
    assert.equal(p.hostIP, c.nodeAddress(u.spec.nodeName));
    assert.ok(ready.some((a: any) => a.ip === p.hostIP && a.port === p.hostPort && a.unit === u.metadata.name));
    const environ = fs.readFileSync(`/proc/${u.status.pid}/environ`, 'utf8').split('\0');
    assert.ok(environ.includes(`PORT=${p.hostPort}`), `${u.metadata.name} runs with PORT=${p.hostPort}`);
  }
  const svc = await runMo(c, ['get', 'svc']);
  assert.match(svc.out, /^hello\s+NodePort\s+80:30080\/TCP\s+app=hello\s+3\/3 ready/m, svc.out);
  const eps = await runMo(c, ['get', 'endpoints']);
  assert.equal(eps.out.trim().split('\n')[1].split(/\s+/)[1].split(',').length, 3, eps.out);
  const nodes = (await c.api('GET', '/v1/nodes')).json.items;
  assert.deepEqual(nodes.find((n: any) => n.metadata.name === 'node-a').status.addresses, [{ type: 'InternalIP', address: c.nodeAddress('node-a') }]);

  // The client: one node's address, a new connection per request, 2 s timeout.
  const host = c.nodeAddress('node-a');
  let ok = 0;
  let failed = 0;
  let worst = 0;
  const seen = new Set<string>();
  const run = async (ms: number) => {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      const r = await get(host, 30080);
      worst = Math.max(worst, r.ms);
      if (r.ok) {
        ok++;
        seen.add(r.body.trim());
      } else {
        failed++;
        t.diagnostic(`request failed: ${r.body}`);
      }
    }
  };
  await run(1500);
  // A unit SIGKILLed (between two requests: no request of ours is in flight).
  const victim = (await c.running('hello')).find((u) => u.spec.nodeName !== 'node-a') ?? (await c.running('hello'))[0];
  process.kill(victim.status.pid, 'SIGKILL');
  await run(2000);
  // Another node's agent SIGKILLed: its units die with it.
  const other = (await c.running('hello')).map((u) => u.spec.nodeName).find((n: string) => n !== 'node-a') ?? 'node-d';
  c.agents.get(other)!.child.kill('SIGKILL');
  await run(2500);
  // The leader SIGKILLed: proxies keep serving the table they have.
  const status = (await c.api('GET', '/v1/cluster')).json;
  const leader = status.replicas.find((r: any) => r.id === status.leader);
  process.kill(leader.pid, 'SIGKILL');
  await run(2500);
  // A second replica SIGKILLed: one of three left, no quorum, no leader to
  // come; the proxies go on with the endpoints they last had.
  const survivors = (await c.api('GET', '/v1/cluster')).json.replicas.filter((r: any) => r.id !== leader.id && typeof r.pid === 'number');
  assert.ok(survivors.length >= 1, 'a surviving replica to kill');
  process.kill(survivors[0].pid, 'SIGKILL');
  await run(2000);

  t.diagnostic(`${ok} requests answered, ${failed} failed, worst ${worst.toFixed(0)} ms; answers from ${seen.size} units: ${[...seen].join(' | ')}`);
  assert.equal(failed, 0, 'every request answered');
  assert.ok(ok > 100, `the client really ran (${ok} requests)`);
  assert.ok(seen.size >= 3, 'answers came from several units as they moved');
});

test('a control plane restarted whole never sends the proxies a table older than its log: the listener stays open throughout', { timeout: 90000 }, async (t) => {
  const c = await Cluster.start({ replicas: 3, nodes: [{ name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} }] });
  t.after(() => c.stop());
  const applied = await runMo(c, ['apply', '-f', 'examples/web-service.yaml']);
  assert.equal(applied.code, 0, applied.err);
  const agent = c.agents.get('node-a')!;
  const proxyLines = () => agent.output.filter((l) => /proxy: /.test(l));
  await waitFor('the proxy listening', () => proxyLines().some((l) => /on 127\.[\d.]+:30080/.test(l)), 30000);
  await waitFor('3 ready', async () => (await c.running('hello')).filter((u) => u.status.ready).length === 3, 30000);
  // Every replica SIGKILLed and started again: the Service is in their logs,
  // which a new leader applies only once an entry of its term commits.
  for (const p of c.cps) p.child.kill('SIGKILL');
  await Promise.all(c.cps.map((p) => p.exited));
  for (let i = 1; i <= 3; i++) c.startReplica(i);
  // A command of the new leader: every Services table it sent before it
  // reached the agent first (one connection, in order).
  await waitFor('an API again', () => c.healthy(), 30000);
  // One replica knowing the new leader does not mean the one asked does yet:
  // that one refuses the write with a 503 that says it never applied. Scaling
  // to 4 is idempotent, so ask again until accepted. Any other answer fails
  // at once, a 503 whose outcome is unknown (proposed, then no commit within
  // the proposal timeout) among them.
  const scaled = await waitFor(
    'the scale to 4 accepted',
    async () => {
      const r = await c.api('PATCH', '/v1/deployments/hello/scale', { replicas: 4 });
      if (r.status === 503 && r.json?.outcome !== 'unknown') throw new Error(`503 ${r.text}`);
      return r;
    },
    30000,
  );
  assert.equal(scaled.status, 200, scaled.text);
  await waitFor('the 4th unit started', () => agent.output.some((l) => /started hello-4 /.test(l)), 30000);
  assert.deepEqual(
    proxyLines().filter((l) => /closed/.test(l)),
    [],
    `the listener was never closed; the agent's proxy lines:\n${proxyLines().join('\n')}`,
  );
  const r = await get(c.nodeAddress('node-a'), 30080);
  assert.ok(r.ok, r.body);
});
