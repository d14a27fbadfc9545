// test/e2e/tls-channels.test.ts -- the replicas' main port over TLS (`--tls
// true`): three replicas whose Raft peers talk wss://, an agent connected
// with wss://, /v1 over https checked against the cluster CA (made first
// with --make-ca, trusted through NODE_EXTRA_CA_CERTS), a leader elected,
// the node Ready, a follower forwarding a write to the leader over https,
// and plain http refused. A replica started with --tls without trusting
// the CA stops at once with a one-line reason.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { REPO, ensureBundles, freeBasePort, startProcess, waitFor, webManifest, type Proc } from '../helpers/cluster.ts';

test('--tls: peers and agents over wss, /v1 over https with the cluster CA', { timeout: 120_000 }, async (t) => {
  await ensureBundles();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-tls-'));
  const procs: Proc[] = [];
  t.after(async () => {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const made = spawnSync(process.execPath, ['dist/control-plane.mjs', '--make-ca', dir], { cwd: REPO, encoding: 'utf8' });
  assert.equal(made.status, 0, made.stderr);
  const caFile = path.join(dir, 'ca.crt');
  const ca = fs.readFileSync(caFile, 'utf8');

  const base = await freeBasePort(3);
  const token = 'tls-token';
  const peers = [1, 2, 3].map((i) => `cp-${i}=wss://127.0.0.1:${base + i}`).join(',');
  const replica = (i: number, env: Record<string, string>) =>
    startProcess(
      `cp-${i}`,
      'control-plane/main.ts',
      ['--id', `cp-${i}`, '--listen', `127.0.0.1:${base + i}`, '--peers', peers, '--data-dir', path.join(dir, `cp-${i}`), '--token', token, '--tls', 'true'],
      env,
    );

  // Without trusting the CA it cannot check its peers: refused at start, naming the fix.
  const untrusting = replica(1, { NODE_EXTRA_CA_CERTS: '' });
  procs.push(untrusting);
  await untrusting.exited;
  assert.equal(untrusting.child.exitCode, 2);
  // Its stderr may still be on its way after 'exit': wait for the line.
  const refusal = /--tls: this process does not trust the cluster CA: start it with NODE_EXTRA_CA_CERTS=.*ca\.crt/;
  await waitFor('the refusal on stderr', async () => refusal.test(untrusting.output.join('\n')), 5000, 20);

  const env = { NODE_EXTRA_CA_CERTS: caFile };
  for (const i of [1, 2, 3]) procs.push(replica(i, env));
  const get = (port: number, p: string, method = 'GET', body?: string) =>
    new Promise<{ status: number; json: any }>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port, path: p, method, ca, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } }, (res) => {
        let s = '';
        res.on('data', (c) => (s += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: s ? JSON.parse(s) : null }));
      });
      req.on('error', reject);
      req.end(body);
    });
  const cluster = await waitFor(
    'a leader among the TLS replicas',
    async () => {
      const r = await get(base + 1, '/v1/cluster');
      return r.status === 200 && r.json.leader && r.json.replicas.every((x: any) => x.reachable) ? r.json : undefined;
    },
    60_000,
    200,
  );
  assert.equal(cluster.replicas.length, 3);

  procs.push(
    startProcess(
      'node-a',
      'node-agent/main.ts',
      [
        '--name',
        'node-a',
        '--cpu',
        '2000',
        '--memory',
        '2048',
        '--control-plane',
        [1, 2, 3].map((i) => `wss://127.0.0.1:${base + i}`).join(','),
        '--token',
        token,
        '--state-dir',
        path.join(dir, 'agent'),
        '--address',
        '127.0.0.1',
        '--port-range',
        '31000-31099',
      ],
      env,
    ),
  );
  await waitFor('node-a Ready over wss', async () => (await get(base + 2, '/v1/nodes')).json?.items?.[0]?.status?.ready === true, 30_000, 200);

  // A follower forwards a write to the leader over https.
  const follower = cluster.replicas.find((r: any) => r.id !== cluster.leader);
  const port = base + Number(follower.id.slice(3));
  const put = await get(port, '/v1/deployments/web', 'PUT', JSON.stringify(webManifest('web', 1, { cpu: '100m', memory: '64Mi' })));
  assert.equal(put.status, 201, JSON.stringify(put.json));
  await waitFor('the unit running', async () => (await get(base + 1, '/v1/units')).json?.items?.[0]?.status?.phase === 'Running', 30_000, 200);

  // Plain http to a TLS port gets no API answer.
  const plain = await fetch(`http://127.0.0.1:${base + 1}/v1/nodes`, { headers: { authorization: `Bearer ${token}` } }).then(
    (r) => r.status,
    () => 'refused',
  );
  assert.equal(plain, 'refused');
});
