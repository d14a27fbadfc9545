// test/e2e/logs.test.ts -- `mo logs` against a real 3-replica cluster with
// real agents and units: --tail, --timestamps, -f receiving lines as they
// are written, the last lines of a unit killed with SIGKILL still readable
// through every replica (followers included) after the agent forgot it, a
// deployment's units prefixed, and a unit on a SIGKILLed agent's node
// answered "unavailable" with exit 1, never an empty success. Every process
// is stopped by pid in t.after (followers too), the temp dir removed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { Cluster, REPO, pidAlive, waitFor, webManifest } from '../helpers/cluster.ts';

interface Run {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

function moStart(servers: string[], token: string, args: string[]): Run {
  const child = spawn(process.execPath, ['cli/mo.cjs', ...args], {
    cwd: REPO,
    env: { ...process.env, MO_SERVER: servers.join(','), MO_TOKEN: token, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (err += b));
  // 'close': after the output is read to its end ('exit' may come first).
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, out: () => out, err: () => err, exited };
}

async function mo(servers: string[], token: string, args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const r = moStart(servers, token, args);
  const code = await r.exited;
  return { code, out: r.out(), err: r.err() };
}

const numbers = (text: string) => [...text.matchAll(/^line (\d+)$/gm)].map((m) => Number(m[1]));

test('mo logs: tail, timestamps, follow, a SIGKILLed unit readable through every replica, a dead node unavailable', { timeout: 90000 }, async (t) => {
  const c = await Cluster.start({ replicas: 3 });
  const followers: Run[] = [];
  t.after(async () => {
    for (const f of followers) if (f.child.exitCode === null && f.child.signalCode === null) f.child.kill('SIGKILL');
    await c.stop();
  });
  const run = (args: string[], servers = c.urls) => mo(servers, c.token, args);

  const counter = ['sh', '-c', 'i=0; while true; do i=$((i+1)); echo line $i; sleep 0.2; done'];
  const put = await c.api('PUT', '/v1/deployments/counter', webManifest('counter', 2, { command: counter, cpu: '100m', memory: '64Mi' }));
  assert.ok(put.status === 200 || put.status === 201, put.text);
  const units = await waitFor(
    '2 counter units Running',
    async () => {
      const r = await c.running('counter');
      return r.length === 2 ? r.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)) : null;
    },
    15000,
  );
  const [u1, u2] = units;
  const name1: string = u1.metadata.name;

  // The API straight: a plain-text answer from the agent that holds the unit.
  await waitFor(
    `${name1} to have written 5 lines`,
    async () => {
      const r = await c.api('GET', `/v1/units/${name1}/log`);
      return r.status === 200 && numbers(r.text).length >= 5;
    },
    10000,
    100,
  );

  // --tail 3: the last three lines, consecutive, nothing else.
  let r = await run(['logs', name1, '--tail', '3']);
  assert.equal(r.code, 0, r.err);
  const tail = numbers(r.out);
  assert.equal(r.out.trim().split('\n').length, 3, r.out);
  assert.deepEqual(tail, [tail[0], tail[0] + 1, tail[0] + 2]);
  assert.ok(tail[2] >= 5);

  // --timestamps: RFC 3339 times, the stream tag never shown.
  r = await run(['logs', name1, '--tail', '2', '--timestamps']);
  assert.equal(r.code, 0, r.err);
  for (const line of r.out.trim().split('\n')) assert.match(line, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z line \d+$/);

  // -f: new lines arrive as the unit writes them; mo stops when we stop it.
  const f1 = moStart(c.urls, c.token, ['logs', name1, '-f', '--tail', '1']);
  followers.push(f1);
  const first = await waitFor('the follower to print a line', () => numbers(f1.out())[0], 10000);
  await waitFor('the follower to print 3 new lines', () => numbers(f1.out()).some((n) => n >= first + 3), 10000);
  const followed = numbers(f1.out());
  assert.deepEqual(
    followed,
    followed.map((_, i) => first + i),
    'every line once, in order',
  );
  f1.child.kill('SIGTERM');
  await f1.exited;

  // SIGKILL the unit while a follower runs: the follower ends by itself once
  // the unit's output is drained (exit 0), and its last line stays readable
  // after the controller replaced the unit and the agent forgot it.
  const f2 = moStart(c.urls, c.token, ['logs', name1, '-f']);
  followers.push(f2);
  await waitFor('the second follower to print', () => numbers(f2.out()).length > 0, 10000);
  process.kill(u1.status.pid, 'SIGKILL');
  await waitFor(`pid ${u1.status.pid} to be gone`, () => !pidAlive(u1.status.pid), 5000);
  const code = await Promise.race([f2.exited, new Promise((res) => setTimeout(() => res('still running'), 10000))]);
  assert.equal(code, 0, `the follower ended with the unit: ${String(code)} ${f2.err()}`);
  const last = numbers(f2.out()).at(-1)!;
  // Replaced, unbound, and forgotten by its agent: no record of it is left anywhere but the log file.
  await waitFor(`${name1} to be replaced and forgotten`, async () => (await c.units()).every((u) => u.metadata.name !== name1) && (await c.running('counter')).length === 2, 15000);

  const status = (await c.api('GET', '/v1/cluster')).json;
  const followerUrls = status.replicas.filter((x: any) => x.role === 'follower').map((x: any) => x.url);
  assert.ok(followerUrls.length >= 1, 'a follower to ask');
  for (const url of c.urls) {
    r = await run(['logs', name1, '--tail', '2'], [url]);
    assert.equal(r.code, 0, `${url}: ${r.err}`);
    assert.equal(numbers(r.out).at(-1), last, `${url} shows the last line the unit wrote`);
  }

  // A deployment: every unit, each line prefixed with its name.
  await waitFor(
    'the replacement to write a line',
    async () => {
      const running = await c.running('counter');
      for (const u of running) {
        const l = await c.api('GET', `/v1/units/${u.metadata.name}/log`);
        if (l.status !== 200 || numbers(l.text).length === 0) return false;
      }
      return running.length === 2;
    },
    10000,
    100,
  );
  r = await run(['logs', 'deployment/counter', '--tail', '2']);
  assert.equal(r.code, 0, r.err);
  const prefixed = r.out.trim().split('\n');
  for (const line of prefixed) assert.match(line, /^\[counter-\d+\] line \d+$/);
  const shown = new Set(prefixed.map((l) => l.slice(1, l.indexOf(']'))));
  for (const u of await c.running('counter')) assert.ok(shown.has(u.metadata.name), `${u.metadata.name} in ${[...shown]}`);

  // Bad usage: exit 2, one line.
  r = await run(['logs', name1, '--since', 'yesterday']);
  assert.equal(r.code, 2);
  assert.equal(r.err.trim().split('\n').length, 1);

  // An unknown unit: 404, exit 1, the server's line.
  r = await run(['logs', 'nope-1']);
  assert.equal(r.code, 1);
  assert.equal(r.err.trim(), 'error: no log for unit nope-1');

  // The agent of u2's node dies: its log is unavailable (exit 1), never an empty answer.
  const node2: string = u2.spec.nodeName;
  const agent = c.agents.get(node2)!;
  agent.child.kill('SIGKILL');
  await agent.exited;
  await waitFor(`${node2} NotReady`, async () => (await c.api('GET', `/v1/nodes/${node2}`)).json?.status?.ready === false, 10000);
  r = await run(['logs', u2.metadata.name]);
  assert.equal(r.code, 1, r.out + r.err);
  assert.equal(r.out, '');
  assert.match(r.err.trim(), new RegExp(`^error: log of unit ${u2.metadata.name} is unavailable: node ${node2} (is NotReady|'s agent is not connected)`));
  assert.equal(r.err.trim().split('\n').length, 1);
});
