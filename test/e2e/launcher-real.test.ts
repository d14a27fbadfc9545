// test/e2e/launcher-real.test.ts -- `npm start` with the real processes:
// three replicas and the four default agents, a deployment with live units,
// a killed agent reported with its restart command, then SIGTERM to the
// launcher: every process it started, units included, must be gone from
// /proc.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO, freeBasePort, pidAlive, waitFor, webManifest } from '../helpers/cluster.ts';

test('npm start runs a real cluster, reports a dead agent with its restart command, and SIGTERM leaves no process behind', { timeout: 120000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-launch-'));
  const base = await freeBasePort(13);
  const launcher = spawn(process.execPath, ['--import', 'tsx', 'launcher/main.ts', '--data-dir', dir, '--base-port', String(base)], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1' },
  });
  let out = '';
  launcher.stdout!.on('data', (b) => (out += b));
  launcher.stderr!.on('data', (b) => (out += b));
  const exited = new Promise<number | null>((r) => launcher.once('exit', (code) => r(code)));
  const seen = new Set<number>();
  // A wait that fails with the launcher's last output: CI shows only the assertion.
  const wait = async <T>(what: string, fn: () => Promise<T | null | false | undefined> | T | null | false | undefined, ms: number): Promise<T> => {
    try {
      return await waitFor(what, fn, ms);
    } catch (err) {
      throw new Error(`${(err as Error).message}; the launcher's last output:\n${out.slice(-3000)}`);
    }
  };
  t.after(async () => {
    if (launcher.exitCode === null) launcher.kill('SIGKILL');
    await exited;
    for (const pid of seen) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  await wait('the banner', () => /cluster is up/.test(out), 40000);
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  assert.equal(cfg.servers.length, 3);
  // The banner's dashboard link logs in: the first replica's page, the token in the fragment.
  // The banner is several lines and may arrive in several reads: wait for the link's whole line.
  const link = await wait('the banner to print the dashboard link', () => /dashboard: (http:\/\/\S+)\/#token=(\S+)  /.exec(out), 10000);
  assert.equal(link[1], cfg.servers[0]);
  assert.equal(decodeURIComponent(link[2]), cfg.token);
  const page = await fetch(`${link[1]}/`);
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<title>mini-orchestrator<\/title>/);
  const api = async (method: string, p: string, body?: unknown) => {
    const r = await fetch(cfg.servers[0] + p, {
      method,
      headers: { authorization: `Bearer ${cfg.token}`, 'content-type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: r.status, json: (await r.json()) as any };
  };
  // An election right after the banner (a busy machine) answers 503 for a moment: retry until accepted.
  await wait('the apply to be accepted', async () => [200, 201].includes((await api('PUT', '/v1/deployments/web', webManifest('web', 3))).status), 15000);
  const units = await wait(
    '3 running units',
    async () => {
      const u = (await api('GET', '/v1/units')).json.items.filter((x: any) => x.status.phase === 'Running' && pidAlive(x.status.pid));
      return u.length === 3 ? u : null;
    },
    15000,
  );
  // Every agent registered and connected to the replica asked (three units need only some of them).
  const nodes = await wait(
    '4 nodes with their agents',
    async () => {
      const n = (await api('GET', '/v1/nodes')).json.items;
      return n.length === 4 && n.every((x: any) => x.status.agent.pid) ? n : null;
    },
    15000,
  );
  const replicas = (await api('GET', '/v1/cluster')).json.replicas;
  for (const u of units) seen.add(u.status.pid);
  for (const n of nodes) seen.add(n.status.agent.pid);
  for (const r of replicas) seen.add(r.pid);
  assert.equal(seen.size, 3 + 4 + 3, `pids: ${[...seen].join(' ')}`);

  // a dead agent is reported with the command line that restarts it
  const victim = nodes.find((n: any) => n.metadata.name === 'node-c');
  process.kill(victim.status.agent.pid, 'SIGKILL');
  await wait(
    'the death line',
    () => new RegExp(`node-c \\(pid ${victim.status.agent.pid}\\) exited: signal SIGKILL .*restart it by hand with: .*node-agent.* --name node-c`).test(out),
    5000,
  );

  launcher.kill('SIGTERM');
  assert.equal(await exited, 0, out.slice(-2000));
  for (const pid of seen) assert.equal(pidAlive(pid), false, `pid ${pid} outlived the launcher`);
});
