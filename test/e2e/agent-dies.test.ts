// test/e2e/agent-dies.test.ts -- the node agent as a real OS process
// against small in-test fake control planes (ws servers on 127.0.0.1 port 0
// speaking the real protocol through the shared codec). Checks what a user
// would check: unit pids in /proc die with a SIGKILLed agent (grandchildren
// too), fencing refuses a deposed leader, a malformed frame costs one
// connection and nothing else, and SIGTERM stops everything and exits 0.
// Every process is killed by pid in t.after, whatever happens.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { WebSocketServer, type WebSocket } from 'ws';
import { decodeAgentMessage, encodeMessage } from '../../shared/protocol/codec.ts';
import type { AgentMessage, ControlPlaneMessage, SpawnCommand } from '../../shared/protocol/messages.ts';
import type { UnitReport } from '../../shared/model.ts';
import { pidAlive } from '../helpers/cluster.ts';
import { childrenOf } from '../../shared/proc.ts';
import { killQuietly, sleep, waitUntil } from '../helpers/wait.ts';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TOKEN = 'test-token-123';

const isAlive = pidAlive; // in /proc and not a zombie

/**
 * How long a freshly spawned agent may take to say its first hello (tsx
 * compiles it first): seconds on an idle machine, over 15 s on a shared one
 * with a load average of 40 on 2 cores, where the suite must still pass.
 */
const AGENT_START_MS = 60_000;

interface Received {
  msg: AgentMessage;
  conn: number;
}

/** One fake control-plane replica: accepts agents on /agent with the token, records every frame. */
class FakeControlPlane {
  readonly received: Received[] = [];
  readonly closes: Array<{ conn: number; code: number }> = [];
  readonly rejectedTokens: string[] = [];
  private readonly http = http.createServer((_req, res) => res.writeHead(404).end());
  private readonly wss = new WebSocketServer({ noServer: true });
  private sockets: WebSocket[] = [];
  port = 0;

  constructor(readonly id: string) {
    this.http.on('upgrade', (req, socket, head) => {
      // As the replica does (control-plane/main.ts): an agent refused here may reset its connection.
      socket.on('error', () => socket.destroy());
      if (req.url !== '/agent' || req.headers.authorization !== `Bearer ${TOKEN}`) {
        this.rejectedTokens.push(String(req.headers.authorization));
        socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\n');
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        const conn = this.sockets.push(ws) - 1;
        ws.on('message', (data) => {
          const decoded = decodeAgentMessage(data as Buffer);
          assert.ok(decoded.ok, `agent sent an invalid frame: ${!decoded.ok && decoded.error}`);
          this.received.push({ msg: decoded.msg, conn });
        });
        ws.on('close', (code) => this.closes.push({ conn, code }));
      });
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.http.listen(0, '127.0.0.1', r));
    this.port = (this.http.address() as { port: number }).port;
    return `ws://127.0.0.1:${this.port}`;
  }

  get connections(): number {
    return this.sockets.length;
  }

  /** Send to the newest connection. */
  send(msg: ControlPlaneMessage): void {
    this.sendRaw(encodeMessage(msg));
  }

  sendRaw(data: Buffer | string): void {
    const ws = this.sockets[this.sockets.length - 1];
    assert.ok(ws && ws.readyState === ws.OPEN, `${this.id}: no open agent connection`);
    ws.send(data);
  }

  frames<T extends AgentMessage['type']>(type: T): Array<Extract<AgentMessage, { type: T }>> {
    return this.received.filter((r) => r.msg.type === type).map((r) => r.msg as Extract<AgentMessage, { type: T }>);
  }

  reports(name: string): UnitReport[] {
    return this.frames('unit-status')
      .filter((m) => m.unit.name === name)
      .map((m) => m.unit);
  }

  async report(name: string, phase: UnitReport['phase'], timeoutMs = 5000): Promise<UnitReport> {
    await waitUntil(() => this.reports(name).some((r) => r.phase === phase), timeoutMs, `${this.id}: ${phase} report for ${name}`);
    return this.reports(name).find((r) => r.phase === phase)!;
  }

  close(): void {
    for (const ws of this.sockets) ws.terminate();
    this.wss.close();
    this.http.close();
    this.http.closeAllConnections();
  }
}

interface Agent {
  proc: ChildProcess;
  pid: number;
  stdout: () => string;
  stateDir: string;
  guardPid: () => number | undefined;
}

/** Start the agent as a real process; everything it leaves is killed in t.after. */
function startAgent(t: TestContext, name: string, urls: string[], extra: string[] = [], unitPids: Set<number> = new Set()): Agent {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `mo-agent-e2e-${name}-`));
  const proc = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'node-agent/main.ts',
      '--name',
      name,
      '--cpu',
      '4000',
      '--memory',
      '8192',
      '--taint',
      'gpu-only',
      '--label',
      'zone=a',
      '--control-plane',
      urls.join(','),
      ...(extra.includes('--token') ? [] : ['--token', TOKEN]),
      '--heartbeat-interval-ms',
      '100',
      '--state-dir',
      stateDir,
      ...extra,
    ],
    { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MO_TOKEN: '' } },
  );
  let out = '';
  proc.stdout!.on('data', (c) => (out += c));
  proc.stderr!.on('data', (c) => (out += c));
  const guardPid = () => {
    const m = /orphan-guard pid=(\d+)/.exec(out);
    return m ? Number(m[1]) : undefined;
  };
  t.after(async () => {
    killQuietly(proc.pid);
    for (const pid of unitPids) killQuietly(pid);
    // Once the agent is gone its guard kills what is left and removes the agent's
    // unit cgroups (as root), then exits by itself: give it the time, then make sure.
    const guard = guardPid();
    const deadline = Date.now() + 6000;
    while (guard && isAlive(guard) && Date.now() < deadline) await sleep(20);
    killQuietly(guard);
    fs.rmSync(stateDir, { recursive: true, force: true });
  });
  assert.ok(proc.pid);
  return { proc, pid: proc.pid, stdout: () => out, stateDir, guardPid };
}

let commandSeq = 0;
function spawnCommand(name: string, command: string[], term: number, leaderId = 'cp-1'): SpawnCommand {
  return {
    v: 1,
    type: 'spawn',
    commandId: `cmd-${++commandSeq}`,
    term,
    leaderId,
    unit: {
      name,
      deployment: name.replace(/-\d+$/, ''),
      spec: { containerName: 'main', command, env: [], resources: { cpu: 100, memory: 64 }, tolerations: [] },
      revision: 1,
      specHash: '0123456789abcdef',
    },
  };
}

test('when the agent is killed with SIGKILL, every unit it started dies within 2 s, grandchildren included', async (t) => {
  const cp1 = new FakeControlPlane('cp-1');
  const cp2 = new FakeControlPlane('cp-2');
  t.after(() => {
    cp1.close();
    cp2.close();
  });
  const urls = [await cp1.listen(), await cp2.listen()];
  const unitPids = new Set<number>();
  const agent = startAgent(t, 'node-a', urls, [], unitPids);

  // The agent registers with EVERY replica.
  await waitUntil(() => cp1.frames('hello').length > 0 && cp2.frames('hello').length > 0, 15000, 'hello on both replicas');
  const hello = cp1.frames('hello')[0];
  assert.equal(hello.node.name, 'node-a');
  assert.equal(hello.agentPid, agent.pid, 'hello carries the real agent pid');
  assert.deepEqual(hello.node.capacity, { cpu: 4000, memory: 8192 });
  assert.deepEqual(hello.node.taints, [{ key: 'gpu-only', effect: 'NoSchedule' }]);
  assert.deepEqual(hello.node.labels, { zone: 'a' });
  assert.equal(cp1.received[0].msg.type, 'hello', 'hello is the first frame');

  cp1.send({ v: 1, type: 'welcome', replicaId: 'cp-1', term: 1, leaderId: 'cp-1', heartbeatIntervalMs: 100, pingIntervalMs: 1000 });
  cp2.send({ v: 1, type: 'welcome', replicaId: 'cp-2', term: 1, leaderId: 'cp-1', heartbeatIntervalMs: 100, pingIntervalMs: 1000 });
  for (const n of [1, 2, 3]) cp1.send(spawnCommand(`web-${n}`, ['sleep', '300'], 1));
  cp1.send(spawnCommand('tree-1', ['sh', '-c', 'sleep 300 & wait'], 1));

  const names = ['web-1', 'web-2', 'web-3', 'tree-1'];
  for (const name of names) {
    const r = await cp1.report(name, 'Running');
    assert.ok(r.pid && isAlive(r.pid), `${name} runs`);
    unitPids.add(r.pid);
    // Reports go to every replica, not only the leader.
    await cp2.report(name, 'Running');
  }
  const treePid = cp1.reports('tree-1').find((r) => r.phase === 'Running')!.pid!;
  await waitUntil(() => childrenOf(treePid).length > 0, 3000, 'the grandchild of tree-1');
  const grandchild = childrenOf(treePid)[0];
  unitPids.add(grandchild);
  // A report goes out before its log line, which reaches us through the agent's stdout pipe: wait for it.
  await waitUntil(() => /(\[node-a\]|\d\d:\d\d:\d\d\.\d{3}) started web-1 pid=\d+/.test(agent.stdout()), 3000, 'the start in the log');

  // Heartbeats flow to both replicas.
  await waitUntil(() => cp1.frames('heartbeat').length >= 2 && cp2.frames('heartbeat').length >= 2, 3000, 'heartbeats');

  const guard = agent.guardPid();
  assert.ok(guard && isAlive(guard), 'the orphan guard runs');
  const all = [...unitPids];
  // Everything else the agent started dies with it too: a root agent's warm sandbox (runtime/sandbox-pool.ts) included.
  const others = childrenOf(agent.pid).filter((p) => p !== guard && !all.includes(p));
  if (process.getuid?.() === 0 && process.platform === 'linux') {
    // An idle sandbox's argv ends with `--warm` (mo-init's) or its init's name (util-linux's); a unit's goes on with the unit's name and command.
    const idle = (p: number) => /\0(--warm|mo-init)\0$/.test(fs.readFileSync(`/proc/${p}/cmdline`, 'utf8'));
    await waitUntil(() => childrenOf(agent.pid).some(idle), 10000, 'an idle warm sandbox');
    others.push(...childrenOf(agent.pid).filter((p) => !others.includes(p) && p !== guard && !all.includes(p)));
  }
  for (const p of others) for (const q of childrenOf(p)) others.push(q);
  all.push(...others);
  assert.ok(all.every(isAlive));

  process.kill(agent.pid, 'SIGKILL');
  const t0 = Date.now();
  await waitUntil(() => all.every((pid) => !isAlive(pid)), 2000, `units ${all.filter(isAlive).join(',')} to die`);
  const elapsedMs = Date.now() - t0;
  await waitUntil(() => !isAlive(guard), 2000, 'the orphan guard to exit');
  t.diagnostic(`all ${all.length} unit processes gone ${elapsedMs}ms after SIGKILL of the agent`);
});

test('fencing: a spawn with a term lower than a leader message already seen is refused, and the current leader is obeyed', async (t) => {
  const cp = new FakeControlPlane('cp-1');
  t.after(() => cp.close());
  const unitPids = new Set<number>();
  const agent = startAgent(t, 'node-b', [await cp.listen()], [], unitPids);
  await waitUntil(() => cp.frames('hello').length > 0, AGENT_START_MS, 'hello');

  cp.send({ v: 1, type: 'welcome', replicaId: 'cp-1', term: 2, leaderId: 'cp-1', heartbeatIntervalMs: 100, pingIntervalMs: 1000 });
  cp.send({ v: 1, type: 'leader', term: 4, leaderId: 'cp-2' });
  const stale = spawnCommand('web-4', ['sleep', '300'], 3, 'cp-1');
  cp.send(stale);
  await waitUntil(() => cp.frames('command-refused').length > 0, 5000, 'command-refused');
  const refused = cp.frames('command-refused')[0];
  assert.equal(refused.commandId, stale.commandId);
  assert.equal(refused.reason, 'stale term 3 < highest seen 4');
  await waitUntil(() => agent.stdout().includes(' refused spawn web-4 from cp-1: stale term 3 < highest seen 4'), 2000, 'the refusal in the log');

  // The current leader's command runs; the refused unit never started.
  const fresh = spawnCommand('web-5', ['sleep', '300'], 4, 'cp-2');
  cp.send(fresh);
  const running = await cp.report('web-5', 'Running');
  unitPids.add(running.pid!);
  assert.equal(running.term, 4);
  assert.equal(cp.reports('web-4').length, 0, 'no report at all for the refused unit');
  // The same command again (a resend) does not start a second process.
  cp.send(fresh);
  cp.send(spawnCommand('web-5', ['sleep', '300'], 4, 'cp-2'));
  // Frames are handled in order: once the second one (a new id, the same
  // name) is answered "nothing to do", the duplicate before it was handled too.
  await waitUntil(() => agent.stdout().includes(' spawn web-5: already Running, nothing to do'), 5000, 'the resend handled');
  // (With a PID namespace per unit, Pending has no pid yet: the command's host pid is known from Running on.)
  assert.deepEqual(
    [
      ...new Set(
        cp
          .reports('web-5')
          .map((r) => r.pid)
          .filter((p) => p !== undefined),
      ),
    ],
    [running.pid],
    'one process only',
  );
  // terminate from a deposed leader is refused too; the unit keeps running.
  cp.send({ v: 1, type: 'terminate', commandId: 'old-term', term: 2, leaderId: 'cp-1', name: 'web-5', gracePeriodMs: 100, reason: 'scaled down' });
  await waitUntil(() => cp.frames('command-refused').length === 2, 3000, 'second refusal');
  assert.ok(isAlive(running.pid!));
});

test('a malformed frame closes that connection only: the agent keeps running, reconnects and says hello again', async (t) => {
  const cp = new FakeControlPlane('cp-1');
  t.after(() => cp.close());
  const unitPids = new Set<number>();
  const agent = startAgent(t, 'node-c', [await cp.listen()], [], unitPids);
  await waitUntil(() => cp.frames('hello').length > 0, AGENT_START_MS, 'hello');
  cp.send({ v: 1, type: 'welcome', replicaId: 'cp-1', term: 1, leaderId: 'cp-1', heartbeatIntervalMs: 100, pingIntervalMs: 1000 });
  cp.send(spawnCommand('web-1', ['sleep', '300'], 1));
  const { pid } = await cp.report('web-1', 'Running');
  unitPids.add(pid!);

  cp.sendRaw(Buffer.from([0xc1, 0xff, 0x00])); // 0xc1 is never valid msgpack
  await waitUntil(() => cp.closes.some((c) => c.conn === 0), 3000, 'the agent to close the connection');
  assert.equal(cp.closes.find((c) => c.conn === 0)!.code, 1008);
  await waitUntil(() => cp.connections >= 2 && cp.frames('hello').length >= 2, 5000, 'a reconnect with a new hello');
  const hello2 = cp.frames('hello')[1];
  assert.ok(
    hello2.units.some((u) => u.name === 'web-1' && u.phase === 'Running' && u.pid === pid),
    'hello reports the running unit',
  );
  assert.equal(hello2.highestTerm, 1);

  // A well-formed message of the wrong shape is refused the same way.
  cp.sendRaw(encodeMessage({ v: 1, type: 'leader', term: -5, leaderId: 'x' } as ControlPlaneMessage));
  await waitUntil(() => cp.closes.some((c) => c.conn === 1), 3000, 'the second connection to close');
  await waitUntil(() => cp.frames('hello').length >= 3, 5000, 'a third hello');
  assert.ok(isAlive(agent.pid), 'the agent survived');
  assert.ok(isAlive(pid!), 'the unit survived');
  await waitUntil(() => /frame refused from cp-1: .*closing the connection/.test(agent.stdout()), 3000, 'the refusal in the log');
});

test('terminate stops a unit with its grace, terminate of an unknown unit answers unit-gone, and SIGTERM stops everything and exits 0', async (t) => {
  const cp = new FakeControlPlane('cp-1');
  t.after(() => cp.close());
  const unitPids = new Set<number>();
  const agent = startAgent(t, 'node-d', [await cp.listen()], [], unitPids);
  await waitUntil(() => cp.frames('hello').length > 0, AGENT_START_MS, 'hello');
  cp.send({ v: 1, type: 'welcome', replicaId: 'cp-1', term: 1, leaderId: 'cp-1', heartbeatIntervalMs: 100, pingIntervalMs: 1000 });
  cp.send(spawnCommand('web-1', ['sleep', '300'], 1));
  cp.send(spawnCommand('web-2', ['sleep', '300'], 1));
  cp.send(spawnCommand('ghost-1', ['no-such-program-xyz'], 1));
  const w1 = await cp.report('web-1', 'Running');
  const w2 = await cp.report('web-2', 'Running');
  unitPids.add(w1.pid!);
  unitPids.add(w2.pid!);
  const ghost = await cp.report('ghost-1', 'Failed');
  assert.equal(ghost.reason, 'StartError');
  assert.equal(ghost.message, 'spawn no-such-program-xyz ENOENT');

  // `sleep` ends at SIGTERM at once; the grace is 5 s, not 1: one CI run saw this unit end by the
  // grace timer's SIGKILL after 1 s, the agent slower than that to hear the exit on a busy machine.
  cp.send({ v: 1, type: 'terminate', commandId: 't-1', term: 1, leaderId: 'cp-1', name: 'web-1', gracePeriodMs: 5000, reason: 'scaled down' });
  await cp.report('web-1', 'Terminating');
  const done = await cp.report('web-1', 'Succeeded');
  assert.equal(done.signal, 'SIGTERM');
  assert.ok(!isAlive(w1.pid!));
  // The report goes out before its log line: wait for the line, not just the report.
  await waitUntil(() => / web-1 exited signal=SIGTERM/.test(agent.stdout()), 3000, 'the exit in the log');

  cp.send({ v: 1, type: 'terminate', commandId: 't-2', term: 1, leaderId: 'cp-1', name: 'web-99', gracePeriodMs: 1000, reason: 'not bound' });
  await waitUntil(() => cp.frames('unit-gone').some((m) => m.name === 'web-99'), 3000, 'unit-gone for web-99');
  cp.send({ v: 1, type: 'forget', commandId: 'f-1', term: 1, leaderId: 'cp-1', name: 'web-1' });
  await waitUntil(() => cp.frames('unit-gone').some((m) => m.name === 'web-1'), 3000, 'unit-gone for web-1');

  const exited = new Promise<number | null>((r) => agent.proc.once('exit', (code) => r(code)));
  process.kill(agent.pid, 'SIGTERM');
  assert.equal(await exited, 0);
  assert.ok(!isAlive(w2.pid!), 'web-2 was stopped with the agent');
  assert.ok(
    cp.reports('web-2').some((r) => r.phase === 'Succeeded'),
    'its final state was reported before exit',
  );
});

test('an agent with the wrong token is refused and keeps retrying without crashing', async (t) => {
  const cp = new FakeControlPlane('cp-1');
  t.after(() => cp.close());
  const url = await cp.listen();
  const agent = startAgent(t, 'node-e', [url], ['--token', 'wrong']);
  await waitUntil(() => cp.rejectedTokens.length >= 3, AGENT_START_MS, 'several refused attempts');
  assert.equal(cp.connections, 0);
  assert.ok(isAlive(agent.pid));
  await waitUntil(() => /cannot reach ws:\/\/127\.0\.0\.1:\d+\/agent: .*401/.test(agent.stdout()), 3000, 'the refusal in the log');
});

test('bad flags print one line naming the cause and exit 2', async () => {
  const run = (args: string[]) =>
    new Promise<{ code: number | null; err: string }>((resolve) => {
      const p = spawn(process.execPath, ['--import', 'tsx', 'node-agent/main.ts', ...args], { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      p.stderr!.on('data', (c) => (err += c));
      p.on('close', (code) => resolve({ code, err }));
    });
  const r = await run(['--name', 'node-x', '--control-plane', 'http://nope', '--token', 't']);
  assert.equal(r.code, 2);
  assert.equal(r.err.trim().split('\n').length, 1);
  assert.match(r.err, /--control-plane: invalid URL "http:\/\/nope"/);
});
