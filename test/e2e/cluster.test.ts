// test/e2e/cluster.test.ts -- both lessons' story (docs/lessons.md) against real processes: a
// control-plane replica and the four default node agents as OS processes,
// units as real child processes whose pids are checked in /proc (not in
// the cluster's own bookkeeping).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { readStat, threadNices } from '../../shared/proc.ts';
import { autogroupNice, DEFAULT_REPLICA_NICE, roleNice } from '../../control-plane/priority.ts';
import WebSocket from 'ws';
import { Cluster, pidAlive, waitFor, webManifest } from '../helpers/cluster.ts';

const ppidOf = (pid: number): number => readStat(pid)?.ppid ?? 0;
/** The agent that runs `pid`: its parent, or (with a PID namespace per unit, as root) an ancestor a few levels up. */
const agentOf = (pid: number, agents: number[]): number => {
  for (let p = ppidOf(pid), i = 0; p > 1 && i < 8; p = ppidOf(p), i++) if (agents.includes(p)) return p;
  return 0;
};

test("both lessons' story: apply, scale, unit crash, node loss, scale down, delete, stop", { timeout: 120000 }, async (t) => {
  const c = await Cluster.start();
  t.after(() => c.stop());
  const agentPid = (node: string) => c.agents.get(node)!.pid;

  // apply 3 replicas -> 3 live pids, each a child of its own node's agent (or below it, in a PID namespace of its own)
  let r = await c.api('PUT', '/v1/deployments/web', webManifest('web', 3));
  assert.equal(r.status, 201, r.text);
  let units = await waitFor('3 running units', async () => {
    const u = await c.running('web');
    return u.length === 3 ? u : null;
  });
  for (const u of units) {
    assert.notEqual(u.spec.nodeName, 'node-c', 'node-c is tainted gpu-only and web does not tolerate it');
    assert.equal(
      agentOf(
        u.status.pid,
        [...c.agents.values()].map((a) => a.pid),
      ),
      agentPid(u.spec.nodeName),
      `${u.metadata.name} (pid ${u.status.pid}) must run under ${u.spec.nodeName}'s agent`,
    );
    assert.match(u.metadata.name, /^web-[123]$/);
  }
  assert.ok(new Set(units.map((u) => u.spec.nodeName)).size >= 2, 'replicas spread over more than one node');

  // The replica runs ahead of agents and units on the shared CPUs (control-plane/priority.ts): as
  // root, once it leads (it starts as a follower, a step nicer), every one of its threads is at
  // DEFAULT_REPLICA_NICE (-10), read in /proc; agents and units keep the nice they were started
  // with (this test's own).
  const ours = os.getPriority(0);
  const cpThreads = threadNices(c.cps[0].pid);
  assert.ok(cpThreads.length > 1, `the replica's threads are in /proc/${c.cps[0].pid}/task`);
  if (process.getuid?.() === 0) {
    assert.deepEqual(
      cpThreads.filter((x) => x.nice !== DEFAULT_REPLICA_NICE),
      [],
      `every thread of the replica is at nice ${DEFAULT_REPLICA_NICE}`,
    );
    assert.ok(
      c.cps[0].output.some((l) => new RegExp(`priority: nice ${DEFAULT_REPLICA_NICE} on \\d+ threads.* now that it leads`).test(l)),
      `the replica says so: ${c.cps[0].output.filter((l) => l.includes('priority')).join(' | ')}`,
    );
  } else {
    assert.ok(
      c.cps[0].output.some((l) => l.includes('priority: stays at nice')),
      'without the right to, the replica says it keeps its priority',
    );
  }
  for (const a of c.agents.values()) assert.deepEqual(new Set(threadNices(a.pid).map((x) => x.nice)), new Set([ours]), `agent ${a.name} keeps nice ${ours}`);
  // Where the kernel shares the CPUs between sessions first (autogroups), a thread's nice value
  // counts only inside its session: the replica leads its own (as npm start starts it) and gives
  // its session's group the same value; each agent leads its own too, and its group keeps nice 0.
  const groupNice = (pid: number | 'self') => {
    try {
      return autogroupNice(fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8'));
    } catch {
      return null;
    }
  };
  const ourGroup = groupNice('self');
  if (process.getuid?.() === 0 && ourGroup !== null && fs.readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1') {
    assert.equal(readStat(c.cps[0].pid)?.session, c.cps[0].pid, 'the replica leads its own session');
    assert.equal(groupNice(c.cps[0].pid), DEFAULT_REPLICA_NICE, `the replica's autogroup: ${fs.readFileSync(`/proc/${c.cps[0].pid}/autogroup`, 'utf8').trim()}`);
    assert.ok(
      c.cps[0].output.some((l) =>
        new RegExp(
          `priority: nice ${roleNice(DEFAULT_REPLICA_NICE, false)} on \\d+ threads, and its session's autogroup too \\(--nice ${DEFAULT_REPLICA_NICE}; ${DEFAULT_REPLICA_NICE} while it leads\\)`,
        ).test(l),
      ),
      `the replica says so: ${c.cps[0].output.slice(0, 5).join(' | ')}`,
    );
    for (const a of c.agents.values()) {
      assert.equal(readStat(a.pid)?.session, a.pid, `agent ${a.name} leads its own session`);
      assert.equal(groupNice(a.pid), 0, `agent ${a.name}'s autogroup keeps nice 0`);
    }
  }
  for (const u of units) assert.equal(readStat(u.status.pid)?.nice, ours, `unit ${u.metadata.name} keeps nice ${ours}`);

  // scale to 5
  r = await c.api('PATCH', '/v1/deployments/web/scale', { replicas: 5 });
  assert.equal(r.status, 200, r.text);
  units = await waitFor('5 running units', async () => {
    const u = await c.running('web');
    return u.length === 5 ? u : null;
  });
  assert.deepEqual(units.map((u) => u.metadata.name).sort(), ['web-1', 'web-2', 'web-3', 'web-4', 'web-5']);

  // kill -9 one unit's pid -> a new unit with a new name and a new pid
  const victim = units.find((u) => u.metadata.name === 'web-2')!;
  process.kill(victim.status.pid, 'SIGKILL');
  units = await waitFor('a replacement for web-2', async () => {
    const u = await c.running('web');
    return u.length === 5 && !u.some((x) => x.metadata.name === 'web-2') ? u : null;
  });
  const replacement = units.find((u) => !['web-1', 'web-3', 'web-4', 'web-5'].includes(u.metadata.name))!;
  assert.equal(replacement.metadata.name, 'web-6', 'names are never reused: the replacement is web-6');
  assert.notEqual(replacement.status.pid, victim.status.pid);
  assert.ok(pidAlive(replacement.status.pid));
  // Events are replicated in batches (every 50 ms): wait for it.
  await waitFor('a Crashed event for web-2', async () => (await c.api('GET', '/v1/events')).json.items.some((e: any) => e.reason === 'Crashed' && e.involvedObject.name === 'web-2'));

  // SIGKILL an agent that runs units -> its pids die, node NotReady, replacements elsewhere
  const byNode = new Map<string, any[]>();
  for (const u of units) byNode.set(u.spec.nodeName, [...(byNode.get(u.spec.nodeName) ?? []), u]);
  const [deadNode, deadUnits] = [...byNode.entries()].sort((a, b) => b[1].length - a[1].length)[0];
  const deadAgent = c.agents.get(deadNode)!;
  deadAgent.child.kill('SIGKILL');
  await deadAgent.exited;
  await waitFor(`the units of ${deadNode} to die with their agent`, () => deadUnits.every((u) => !pidAlive(u.status.pid)), 15000);
  await waitFor(`${deadNode} NotReady`, async () => (await c.api('GET', `/v1/nodes/${deadNode}`)).json.status.ready === false, 15000);
  units = await waitFor(
    '5 running units again, none on the dead node',
    async () => {
      const u = await c.running('web');
      return u.length === 5 && u.every((x) => x.spec.nodeName !== deadNode) ? u : null;
    },
    10000,
  );
  for (const u of units)
    assert.equal(
      agentOf(
        u.status.pid,
        [...c.agents.values()].map((a) => a.pid),
      ),
      agentPid(u.spec.nodeName),
    );

  // the agent comes back: Ready again, and it runs nothing the cluster no longer wants
  c.startAgent(deadNode);
  await waitFor(`${deadNode} Ready again`, async () => (await c.api('GET', `/v1/nodes/${deadNode}`)).json.status.ready === true, 10000);

  // scale to 2 -> exactly the surplus stopped, newest first
  const before = (await c.running('web')).map((u) => u.metadata.name);
  const indexes = before.map((n) => Number(n.split('-')[1])).sort((a, b) => a - b);
  const keep = indexes.slice(0, 2).map((i) => `web-${i}`);
  const stopped = (await c.running('web')).filter((u) => !keep.includes(u.metadata.name));
  r = await c.api('PATCH', '/v1/deployments/web/scale', { replicas: 2 });
  assert.equal(r.status, 200);
  await waitFor(
    'exactly the surplus stopped',
    async () => {
      const u = await c.units();
      const web = u.filter((x) => x.spec.deployment === 'web');
      return web.length === 2 && web.every((x) => x.status.phase === 'Running') && stopped.every((s) => !pidAlive(s.status.pid));
    },
    10000,
  );
  assert.deepEqual((await c.running('web')).map((u) => u.metadata.name).sort(), keep.sort());

  // delete -> all gone
  const last = await c.running('web');
  r = await c.api('DELETE', '/v1/deployments/web');
  assert.equal(r.status, 200);
  await waitFor('every unit of web gone', async () => (await c.units()).length === 0 && last.every((u) => !pidAlive(u.status.pid)), 10000);

  // stopping the cluster leaves no process behind
  const pids = [...c.agents.values(), ...c.cps].map((p) => p.pid);
  await c.stop();
  for (const pid of pids) assert.equal(pidAlive(pid), false, `pid ${pid} still alive after stop`);
});

test('a unit that fits nowhere stays Pending with a FailedScheduling event naming each node', { timeout: 60000 }, async (t) => {
  const c = await Cluster.start();
  t.after(() => c.stop());
  const r = await c.api('PUT', '/v1/deployments/huge', webManifest('huge', 1, { cpu: '9000m', memory: '1Gi' }));
  assert.equal(r.status, 201);
  const ev = await waitFor('FailedScheduling', async () => (await c.api('GET', '/v1/events')).json.items.find((e: any) => e.reason === 'FailedScheduling'));
  assert.match(ev.message, /^0\/4 nodes are available: /);
  assert.match(ev.message, /node-a: cpu_free=4000m < request=9000m/);
  assert.match(ev.message, /node-c: .*untolerated taint gpu-only/);
  const u = (await c.units()).find((x) => x.spec.deployment === 'huge');
  assert.equal(u.status.phase, 'Pending');
  assert.equal(u.spec.nodeName, null);
});

test('bad input is refused with a clear error and nothing crashes', { timeout: 60000 }, async (t) => {
  const c = await Cluster.start({ nodes: [{ name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} }] });
  t.after(() => c.stop());
  // no token, wrong token
  let r = await c.api('GET', '/v1/nodes', undefined, null);
  assert.equal(r.status, 401);
  assert.match(r.json.error, /token/);
  r = await c.api('GET', '/v1/nodes', undefined, 'wrong');
  assert.equal(r.status, 401);
  // malformed manifests name the field
  r = await c.api('PUT', '/v1/deployments/web', { ...(webManifest() as any), spec: { replicas: 'three' } });
  assert.equal(r.status, 400);
  assert.match(r.json.error, /spec\.replicas/);
  r = await c.api('PUT', '/v1/deployments/web', '{not json');
  assert.equal(r.status, 400);
  assert.match(r.json.error, /invalid JSON/);
  const m = webManifest() as any;
  m.spec.template.spec.volumes = [];
  r = await c.api('PUT', '/v1/deployments/web', m);
  assert.equal(r.status, 400);
  assert.match(r.json.error, /spec\.template\.spec\.volumes/);
  r = await c.api('PATCH', '/v1/deployments/nope/scale', { replicas: 2 });
  assert.equal(r.status, 404);
  // an agent connection without the token is refused; garbage frames close the connection
  const url = c.urls[0].replace('http', 'ws') + '/agent';
  const noToken = new WebSocket(url);
  const status = await new Promise<number>((resolve) => {
    noToken.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    noToken.on('error', () => resolve(-1));
  });
  assert.equal(status, 401);
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${c.token}` } });
  await new Promise((resolve, reject) => {
    ws.on('open', resolve);
    ws.on('error', reject);
  });
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  ws.send(Buffer.from([0xc1, 0xff, 0x00, 0x13]));
  assert.equal(await closed, 1008);
  await waitFor('the refusal logged with its reason', () => c.cps[0].output.some((l) => /frame refused/.test(l)));
  // A client refused at the upgrade (agent or peer path) that resets its connection on the 401:
  // the reset reaches a socket Node's HTTP server no longer watches once it has emitted 'upgrade'.
  const port = Number(new URL(c.urls[0]).port);
  for (const path of ['/agent', '/raft']) {
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', () => {});
    sock.write(
      `GET ${path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer wrong\r\n\r\n`,
    );
    const answer = await new Promise<string>((resolve) => sock.once('data', (b: Buffer) => resolve(b.toString())));
    assert.match(answer, /^HTTP\/1\.1 401/, `${path}: ${answer.slice(0, 40)}`);
    sock.resetAndDestroy();
  }
  assert.ok(pidAlive(c.cps[0].pid), 'the replica survived the resets');
  // and the replica still serves
  r = await c.api('GET', '/v1/nodes');
  assert.equal(r.status, 200);
  assert.equal(r.json.items[0].status.ready, true);
});

test('desired state survives a restart of the control plane with the same data dir', { timeout: 60000 }, async (t) => {
  const c = await Cluster.start({ nodes: [{ name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} }] });
  const agent = c.agents.get('node-a')!;
  t.after(async () => {
    if (pidAlive(agent.pid)) agent.child.kill('SIGCONT');
    await c.stop();
  });
  let r = await c.api('PUT', '/v1/deployments/web', webManifest('web', 2, { cpu: '100m', memory: '64Mi' }));
  assert.equal(r.status, 201);
  const units = await waitFor('2 running', async () => {
    const u = await c.running('web');
    return u.length === 2 ? u : null;
  });
  // The agent is held (SIGSTOP) until the restarted replica has applied its
  // log and made its first pass: a slow reconnect, as on a busy machine. The
  // node's registration reaches the new leader's state only with that log,
  // after its election, and must get the same startup grace as the rest.
  agent.child.kill('SIGSTOP');
  const cp = c.cps[0];
  cp.child.kill('SIGKILL');
  await cp.exited;
  const again = c.startReplica(1);
  await waitFor('the replica back', () => c.healthy(), 20000);
  await waitFor('its first pass', () => again.output.some((l) => /reconcile web:/.test(l)), 20000);
  agent.child.kill('SIGCONT');
  r = await waitFor('web restored', async () => {
    const x = await c.api('GET', '/v1/deployments/web');
    return x.status === 200 ? x : null;
  });
  assert.equal(r.json.spec.replicas, 2);
  // the units kept running through the control plane's absence: same pids
  const after = await waitFor('the same 2 units reported again', async () => {
    const u = await c.running('web');
    return u.length === 2 ? u : null;
  });
  assert.deepEqual(after.map((u) => u.status.pid).sort(), units.map((u) => u.status.pid).sort());
});

test('an agent restarted before its node turns NotReady runs nothing of its past: its units are replaced under new names', { timeout: 60000 }, async (t) => {
  const c = await Cluster.start({ nodes: [{ name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} }] });
  t.after(() => c.stop());
  assert.equal((await c.api('PUT', '/v1/deployments/web', webManifest('web', 2, { cpu: '100m', memory: '64Mi' }))).status, 201);
  const before = await waitFor('2 running', async () => {
    const u = await c.running('web');
    return u.length === 2 ? u : null;
  });
  const agent = c.agents.get('node-a')!;
  agent.child.kill('SIGKILL');
  await agent.exited;
  c.startAgent('node-a'); // back well within the 1 s NotReady timeout
  const after = await waitFor(
    '2 new units running',
    async () => {
      const u = await c.running('web');
      return u.length === 2 && u.every((x) => !before.some((b) => b.metadata.name === x.metadata.name)) ? u : null;
    },
    10000,
  );
  // Exactly two replacements: none of them taken for lost (or crashed) in turn. Should that fail,
  // the message carries the cluster's events, which say why a unit was unbound.
  const names = after.map((u) => u.metadata.name).sort();
  const why =
    names.join(',') === 'web-3,web-4' ? '' : JSON.stringify((await c.api('GET', '/v1/events')).json.items.map((e: any) => `${e.reason} ${e.involvedObject.name}: ${e.message}`));
  assert.deepEqual(names, ['web-3', 'web-4'], why);
  for (const b of before) assert.equal(pidAlive(b.status.pid), false);
});

test('a process interrupted with a cluster up (Ctrl-C of npm run bench) leaves none of its processes and no temp dir', { timeout: 60000 }, async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/interrupted-cluster.ts'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let out = '';
  let err = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (err += b));
  let started: { dir: string; pids: number[] } | null = null;
  try {
    started = await waitFor(
      'the cluster up and its pids printed',
      () => (out.includes('\n') ? (JSON.parse(out.slice(0, out.indexOf('\n'))) as { dir: string; pids: number[] }) : null),
      40000,
    );
    assert.ok(fs.existsSync(started.dir));
    assert.equal(started.pids.length, 2);
    for (const pid of started.pids) assert.ok(pidAlive(pid), `${pid} is running before the interrupt`);
    child.kill('SIGINT');
    assert.equal(await exited, 130, err);
    const { dir, pids } = started;
    await waitFor('every process of the cluster gone', () => pids.every((pid) => !pidAlive(pid)), 10000);
    assert.equal(fs.existsSync(dir), false, `${dir} is still there`);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const pid of started?.pids ?? []) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    if (started) fs.rmSync(started.dir, { recursive: true, force: true });
  }
});
