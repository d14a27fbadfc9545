// Cold starts through the spawn server (node-agent/runtime/spawn-server.ts,
// `mo-init --serve`): the units are real processes whose P is the server's
// child, their output and exit reach the supervisor as before, and the
// server's death takes its units with it without taking the supervisor;
// P makes the unit's cgroups itself.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import type { UnitReport, UnitSpec } from '../../shared/model.ts';
import { UnitSupervisor } from '../../node-agent/runtime/supervisor.ts';
import { detectNamespaces } from '../../node-agent/runtime/namespaces.ts';
import { UnitCgroups } from '../../node-agent/runtime/cgroups.ts';
import { MAX_STARTING, ServedProcess, SpawnServer } from '../../node-agent/runtime/spawn-server.ts';
import { signalGroup } from '../../node-agent/runtime/exec-util.ts';
import { parseRecord } from '../../node-agent/runtime/unit-log.ts';
import { childrenOf, cmdlineOf, pidAlive, readStat } from '../../shared/proc.ts';
import { buildInitHelper } from '../../launcher/bundle.ts';
import { closeSupervisor } from '../helpers/supervisor-cleanup.ts';
import { waitUntil } from '../helpers/wait.ts';

const helper = buildInitHelper();
const ns = detectNamespaces('path' in helper ? helper.path : null);
const skip = !ns.enabled ? `no unit namespaces here: ${ns.condition.message}` : ns.initPath === null ? 'mo-init is not usable here' : false;

const spec = (command: string[], extra: Partial<UnitSpec> = {}): UnitSpec => ({
  containerName: 'main',
  command,
  env: [],
  resources: { cpu: 10, memory: 16 },
  tolerations: [],
  ...extra,
});

function harness(t: TestContext) {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-serve-test-'));
  const problems: string[] = [];
  const reports: UnitReport[] = [];
  const sup = new UnitSupervisor({
    stateDir,
    nodeName: 'node-t',
    namespaces: ns,
    defaultGracePeriodMs: 3000,
    onChange: (r) => reports.push({ ...r }),
    onSpawnServerProblem: (m) => problems.push(m),
  });
  t.after(async () => {
    sup.killAllNow();
    await closeSupervisor(sup, null, stateDir);
  });
  const start = (name: string, s: UnitSpec) => assert.ok(sup.start({ name, deployment: 'd', spec: s, term: 1, specHash: 'h', revision: 1 }).ok);
  const running = async (name: string) => {
    await waitUntil(() => sup.get(name)?.phase === 'Running', 8000, `${name} Running`);
    return sup.get(name)!.pid!;
  };
  const final = async (name: string) => {
    await waitUntil(() => ['Failed', 'Succeeded'].includes(sup.get(name)?.phase ?? ''), 8000, `${name} to end`);
    return sup.get(name)!;
  };
  const records = (name: string) =>
    fs
      .readFileSync(sup.logPath(name), 'utf8')
      .split('\n')
      .map(parseRecord)
      .filter((r) => r !== null);
  return { sup, problems, reports, start, running, final, records };
}

/** This process's `mo-init --serve` children. */
const servers = () => childrenOf(process.pid).filter((p) => cmdlineOf(p).includes('--serve'));
/** The unit's P: the leader of its process group. */
const outerOf = (pid: number) => readStat(pid)!.pgid;

test('units start through one mo-init --serve: P is its child and leads the unit group; output, exit codes and kill -9 come through', { skip }, async (t) => {
  const h = harness(t);
  h.start('a-1', spec(['sleep', '30']));
  h.start('a-2', spec(['sleep', '30']));
  // 20,000 lines on stdout (108 KB: frames of up to 64 KiB, and the log stays under its 1 MiB), one line on stderr, then exit 3.
  h.start('talk-1', spec(['/bin/sh', '-c', 'seq 1 20000; echo to-stderr >&2; exit 3']));
  const [p1, p2] = [await h.running('a-1'), await h.running('a-2')];
  const [server] = servers();
  assert.equal(servers().length, 1, 'one spawn server');
  for (const [name, pid] of [['a-1', p1] as const, ['a-2', p2] as const]) {
    const outer = outerOf(pid);
    assert.notEqual(outer, pid, 'the command runs under its init, in its P group');
    assert.equal(readStat(outer)!.ppid, server, `P ${outer} is the server's child`);
    // ps shows what P and its init are, not the `mo-init --serve` they were forked from.
    const init = readStat(pid)!.ppid;
    for (const p of [outer, init]) assert.equal(cmdlineOf(p).trim(), `mo-init --pid ${name}`);
    assert.equal(fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(), 'sleep');
  }
  const talk = await h.final('talk-1');
  assert.equal(talk.phase, 'Failed');
  assert.equal(talk.exitCode, 3, JSON.stringify(talk));
  const recs = h.records('talk-1');
  const out = recs.filter((r) => r.stream === 'stdout').map((r) => r.text);
  assert.equal(out.length, 20000);
  assert.ok(
    out.every((line, i) => line === String(i + 1)),
    'every stdout line, in order',
  );
  assert.deepEqual(
    recs.filter((r) => r.stream === 'stderr').map((r) => r.text),
    ['to-stderr'],
  );
  process.kill(p1, 'SIGKILL');
  const killed = await h.final('a-1');
  assert.equal(killed.signal, 'SIGKILL', JSON.stringify(killed));
  // A stop asked for in the same turn as the start, before the server said P's pid.
  h.start('quick-1', spec(['sleep', '30']));
  const stopped = await h.sup.stop('quick-1', 3000)!;
  assert.ok(['Succeeded', 'Failed'].includes(stopped.phase), JSON.stringify(stopped));
  assert.notEqual(stopped.reason, 'StartError', JSON.stringify(stopped));
  assert.ok(!h.sup.list().some((u) => u.name === 'quick-1' && u.pid !== undefined && pidAlive(u.pid)));
  // A NUL byte cannot be said to the server: refused as spawn() refuses it, and the server is unharmed.
  h.start('nul-1', spec(['sleep', '30'], { env: [{ name: 'BAD', value: 'a\0b' }] }));
  const nul = await h.final('nul-1');
  assert.equal(nul.reason, 'StartError');
  assert.match(nul.message ?? '', /^spawn sleep: .*NUL/);
  assert.equal(servers()[0], server);
  assert.ok(pidAlive(p2));
  assert.deepEqual(h.problems, []);
});

test('a command whose exec fails in the unit ends Failed with exit code 127 and the reason on its stderr, never Running', { skip }, async (t) => {
  const h = harness(t);
  // Executable on the host (the agent finds it), but its interpreter is nowhere: execve fails with ENOENT.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-serve-exec-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const script = path.join(dir, 'broken');
  fs.writeFileSync(script, '#!/nonexistent/interpreter\n', { mode: 0o755 });
  h.start('broken-1', spec([script]));
  const end = await h.final('broken-1');
  assert.equal(end.phase, 'Failed');
  assert.equal(end.exitCode, 127, JSON.stringify(end));
  assert.ok(!h.reports.some((r) => r.name === 'broken-1' && r.phase === 'Running'), 'never reported Running');
  const err = h.records('broken-1').filter((r) => r.stream === 'stderr');
  assert.equal(err.length, 1, JSON.stringify(err));
  assert.match(err[0].text, /^mini-orchestrator: .*broken: No such file or directory$/);
  assert.deepEqual(h.problems, []);
});

test('a SIGKILLed spawn server takes its units along; they are reported killed, and the next start gets a new server', { skip }, async (t) => {
  const h = harness(t);
  h.start('b-1', spec(['sleep', '30']));
  h.start('b-2', spec(['sleep', '30']));
  const pids = [await h.running('b-1'), await h.running('b-2')];
  const outers = pids.map(outerOf);
  const [server] = servers();
  process.kill(server, 'SIGKILL');
  for (const name of ['b-1', 'b-2']) {
    const r = await h.final(name);
    assert.equal(r.signal, 'SIGKILL', JSON.stringify(r));
  }
  // Every process of theirs is gone (parent-death signals: server -> P -> init -> the namespace).
  await waitUntil(() => [...pids, ...outers].every((p) => !pidAlive(p)), 5000, 'the units to be gone from /proc');
  assert.equal(h.problems.length, 1);
  assert.match(h.problems[0], /^the spawn server \(.*mo-init --serve\) was killed by SIGKILL; 2 unit\(s\) lost with it$/);
  h.start('b-3', spec(['sleep', '30']));
  const p3 = await h.running('b-3');
  const [again] = servers();
  assert.notEqual(again, server);
  assert.equal(readStat(outerOf(p3))!.ppid, again);
});

const NODE = `serve-${process.pid}-${Math.random().toString(36).slice(2, 7)}`;
const cgProbe = UnitCgroups.detect(NODE);
const cgSkip = skip || (cgProbe.enabled ? false : 'no cgroups here');
cgProbe.removeParents(); // made again by the test that uses them

test("through the server, P makes the unit's cgroups (and the node's, if gone) with their limits and joins them; they go when the unit ends", { skip: cgSkip }, async (t) => {
  const cgroups = UnitCgroups.detect(NODE);
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-serve-cg-test-'));
  const sup = new UnitSupervisor({ stateDir, nodeName: 'node-t', namespaces: ns, cgroups, onChange: () => {} });
  t.after(async () => {
    sup.killAllNow();
    await closeSupervisor(sup, cgroups, stateDir);
  });
  // The node's own cgroup directories are gone (as after a dead agent's guard removed them): P makes them too.
  cgroups.removeParents();
  for (const d of cgroups.parentDirs()) assert.equal(fs.existsSync(d), false, `${d} removed`);
  assert.ok(sup.start({ name: 'lim-1', deployment: 'd', spec: spec(['sleep', '30'], { limits: { memory: 64 } }), term: 1, specHash: 'h', revision: 1 }).ok);
  await waitUntil(() => sup.get('lim-1')?.phase === 'Running', 8000, 'lim-1 Running');
  const pid = sup.get('lim-1')!.pid!;
  const outer = outerOf(pid);
  assert.equal(readStat(outer)!.ppid, sup.spawnServerPid, "P is the server's child");
  const dirs = cgroups.dirs('lim-1');
  const v2 = cgroups.setup.version === 'v2';
  const limitFile = dirs.map((d) => path.join(d, v2 ? 'memory.max' : 'memory.limit_in_bytes')).find((f) => fs.existsSync(f))!;
  assert.equal(fs.readFileSync(limitFile, 'utf8').trim(), String(64 * 1024 * 1024));
  for (const d of dirs) {
    const members = fs.readFileSync(path.join(d, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    for (const p of [outer, pid]) assert.ok(members.includes(p), `pid ${p} in ${d}: ${members.join(' ')}`);
  }
  await sup.stop('lim-1', 2000);
  await sup.cgroupsRemoved();
  for (const d of dirs) assert.equal(fs.existsSync(d), false, `${d} removed`);
});

test(`the server is asked to start at most ${MAX_STARTING} units at once; the rest wait in the agent until one has started`, { skip }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-serve-gate-'));
  const server = new SpawnServer({ initPath: ns.initPath! });
  const units: ServedProcess[] = [];
  t.after(async () => {
    for (const u of units) if (u.pid !== undefined) signalGroup(u.pid, 'SIGKILL');
    const pid = server.pid;
    server.close();
    if (pid !== undefined) await waitUntil(() => !pidAlive(pid), 5000, 'the spawn server to exit').catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  });
  // Each unit's P blocks writing a "limit file" that is a FIFO, until this test opens it: none of them starts meanwhile.
  const gate = path.join(dir, 'gate');
  assert.equal(spawnSync('mkfifo', [gate]).status, 0);
  for (let i = 0; i < MAX_STARTING + 6; i++)
    units.push(server.spawn({ name: `gate-${i}`, hostPID: false, cwd: dir, env: {}, command: ['sleep', '30'], procs: [], make: [[dir, [['gate', 'x']]]] }));
  await waitUntil(() => units.filter((u) => u.pid !== undefined).length === MAX_STARTING, 8000, `${MAX_STARTING} units forked`);
  const serverPid = server.pid!;
  await waitUntil(() => childrenOf(serverPid).length === MAX_STARTING, 8000, `${MAX_STARTING} P below the server`);
  // The others were never sent: no pid, no process.
  assert.equal(units.filter((u) => u.pid === undefined).length, 6);
  // Open the gate: every unit starts, the queued ones as the first ones get through.
  const reader = fs.openSync(gate, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  t.after(() => fs.closeSync(reader));
  const said = units.map(() => '');
  units.forEach((u, i) => u.status.on('data', (b: Buffer) => (said[i] += b.toString())));
  await waitUntil(() => said.every((s) => /^s\d+\n/.test(s)), 15000, 'every unit to start');
  for (const u of units) assert.ok(pidAlive(u.pid!));
});
