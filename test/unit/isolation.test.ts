// test/unit/isolation.test.ts -- the pure parts of unit resource limits:
// limit file values, /proc/self/cgroup parsing, the conditions a node
// reports, and cgroup v2 set-up on a fake tree in a temp dir. Units with
// real cgroups and namespaces, judged by the OS, are in
// test/e2e/unit-limits.test.ts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { UnitCgroups, agentCgroupName, cpuQuotaUs, cpuShares, cpuWeight, detectCgroups, limitFiles, limitsCondition, ownCgroupPath } from '../../node-agent/runtime/cgroups.ts';
import { MAX_CLAIM_BYTES, claimFields, claimScript } from '../../node-agent/runtime/namespaces.ts';

test('limit files: Kubernetes quota, shares and weight; memory without swap; pids capped', () => {
  assert.equal(cpuQuotaUs(200), 20000);
  assert.equal(cpuQuotaUs(1), 1000); // the kernel's minimum
  assert.equal(cpuShares(1000), 1024);
  assert.equal(cpuShares(1), 2);
  assert.equal(cpuWeight(1000), 39); // runc: 1 + ((1024 - 2) * 9999) / 262142
  assert.equal(cpuWeight(1), 1);
  const s = { resources: { cpu: 100, memory: 64 }, limits: { cpu: 200, memory: 64 } };
  assert.deepEqual(limitFiles('v2', s), {
    cpu: [
      ['cpu.weight', '4'],
      ['cpu.max', '20000 100000'],
    ],
    memory: [
      ['memory.max', String(64 * 1024 * 1024)],
      ['memory.swap.max', '0'],
      ['memory.oom.group', '1'],
    ],
    pids: [['pids.max', '4096']],
  });
  assert.deepEqual(limitFiles('v1', s).cpu, [
    ['cpu.shares', '102'],
    ['cpu.cfs_period_us', '100000'],
    ['cpu.cfs_quota_us', '20000'],
  ]);
  assert.deepEqual(
    limitFiles('v1', s).memory.map(([f]) => f),
    ['memory.limit_in_bytes', 'memory.memsw.limit_in_bytes', 'memory.swappiness'],
  );
  assert.deepEqual(limitFiles('v1', { resources: { cpu: 100, memory: 64 } }).memory, []); // no limit: nothing written
});

test('own cgroup paths from /proc/self/cgroup, and conditions that say what is enforced and why not', () => {
  const text = '4:memory:/process_api/abc\n1:cpu,cpuacct:/\n8:pids:/x\n0::/user.slice/a.scope\n';
  assert.equal(ownCgroupPath(text, 'memory'), '/process_api/abc');
  assert.equal(ownCgroupPath(text, 'cpu'), '/');
  assert.equal(ownCgroupPath(text, 'pids'), '/x');
  assert.equal(ownCgroupPath(text, ''), '/user.slice/a.scope');
  const none = detectCgroups('n', { platform: 'darwin' });
  assert.equal(none.version, 'none');
  assert.deepEqual(limitsCondition(none), {
    type: 'LimitsEnforced',
    status: 'False',
    reason: 'NotLinux',
    message: 'resource limits are not enforced: cgroups exist on Linux only (this is darwin); units with limits run without them',
  });
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-cg-'));
  try {
    const r = detectCgroups('n', { root: empty, selfCgroup: '' });
    assert.equal(r.version, 'none');
    assert.equal(limitsCondition(r).reason, 'NoCgroupFs');
  } finally {
    fs.rmSync(empty, { recursive: true, force: true });
  }
  assert.equal(limitsCondition({ version: 'v1', parents: { cpu: '/c', memory: '/m', pids: null } }).status, 'True');
});

test('cgroup v2 (on a fake tree): controllers enabled down to the agent parent, the unit files written, OOM kills read from memory.events', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-cg2-'));
  try {
    fs.mkdirSync(path.join(root, 'agent.slice'));
    fs.writeFileSync(path.join(root, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    fs.writeFileSync(path.join(root, 'agent.slice', 'cgroup.controllers'), 'cpu memory pids\n');
    const setup = detectCgroups('node-a.12345678', { root, selfCgroup: '0::/agent.slice\n', platform: 'linux' });
    const parent = path.join(root, 'agent.slice', 'mini-orchestrator', 'node-a.12345678');
    assert.deepEqual(setup, { version: 'v2', parent });
    for (const dir of ['agent.slice', 'agent.slice/mini-orchestrator', 'agent.slice/mini-orchestrator/node-a.12345678']) {
      assert.equal(fs.readFileSync(path.join(root, dir, 'cgroup.subtree_control'), 'utf8'), '+cpu +memory +pids', dir);
    }
    const cg = new UnitCgroups(setup);
    const made = cg.create('web-1', { resources: { cpu: 1000, memory: 64 }, limits: { cpu: 1500, memory: 64 } });
    assert.deepEqual(made, { ok: true, procs: [path.join(parent, 'web-1', 'cgroup.procs')] });
    const read = (f: string) => fs.readFileSync(path.join(parent, 'web-1', f), 'utf8');
    assert.equal(read('cpu.weight'), '39');
    assert.equal(read('cpu.max'), '150000 100000');
    assert.equal(read('memory.max'), String(64 * 1024 * 1024));
    assert.equal(read('pids.max'), '4096');
    assert.equal(cg.oomKills('web-1'), 0); // no memory.events: unknown is 0
    fs.writeFileSync(path.join(parent, 'web-1', 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n');
    assert.equal(cg.oomKills('web-1'), 1);
    assert.equal(limitsCondition(setup).reason, 'CgroupV2');
    // Controllers not delegated: said, nothing enforced.
    fs.writeFileSync(path.join(root, 'agent.slice', 'cgroup.controllers'), 'pids\n');
    const missing = detectCgroups('x', { root, selfCgroup: '0::/agent.slice\n', platform: 'linux' });
    assert.equal(missing.version, 'none');
    assert.equal(limitsCondition(missing).reason, 'ControllersMissing');
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('the per-agent directory is the node name and a hash of the state dir', () => {
  assert.match(agentCgroupName('node-a', '/tmp/x/agents/node-a'), /^node-a\.[0-9a-f]{8}$/);
  assert.equal(agentCgroupName('node-a', '/tmp/x'), agentCgroupName('node-a', '/tmp/x/'));
  assert.notEqual(agentCgroupName('node-a', '/tmp/x'), agentCgroupName('node-a', '/tmp/y'));
});

test("a warm sandbox's claim line: one line, every word single-quoted for sh, and null for what sh cannot carry", () => {
  const line = claimScript('web-1', { PATH: '/bin', Q: "it's\nhere $HOME" }, ['sh', '-c', 'echo "$0"', "a'b"])!;
  assert.equal(line.indexOf('\n'), line.length - 1, 'a newline only at the end (a value\'s newline is the init\'s "$nl")');
  assert.equal(line, `printf %s 'web-1' > /proc/sys/kernel/hostname || exit 125; export 'PATH=/bin' 'Q=it'\\''s'"$nl"'here $HOME'; set -- 'sh' '-c' 'echo "$0"' 'a'\\''b'\n`);
  assert.equal(claimScript('u', { 'A-B': '1' }, ['sleep', '1']), null, 'an env name that is no sh name: a cold start');
  assert.equal(claimScript('u', { A: 'x\0y' }, ['sleep', '1']), null, 'a NUL byte: a cold start');
  assert.equal(claimScript('u', {}, []), null, 'no command');
  assert.equal(claimScript('u', { A: 'x'.repeat(MAX_CLAIM_BYTES) }, ['sleep', '1']), null, 'longer than MAX_CLAIM_BYTES: a cold start');
});

test("mo-init's claim: its length, then NUL-ended fields (hostname, env count, KEY=VALUE..., word count, words, an empty one kept); null for what it cannot carry", () => {
  const claim = claimFields('web-1', { PATH: '/bin', 'A-B': "it's\n$HOME" }, ['sh', '-c', 'echo "$1"', ''])!;
  const payload = 'web-1\x002\x00PATH=/bin\x00A-B=it\'s\n$HOME\x004\x00sh\x00-c\x00echo "$1"\x00\x00';
  assert.equal(claim.toString(), `${Buffer.byteLength(payload)}\x00${payload}`);
  assert.equal(claimFields('u', { A: 'x\0y' }, ['sleep', '1']), null, 'a NUL byte: a cold start');
  assert.equal(claimFields('u', { 'A=B': '1' }, ['sleep', '1']), null, 'an env name with "=": a cold start');
  assert.equal(claimFields('u', {}, []), null, 'no command');
  assert.equal(claimFields('u', { A: 'x'.repeat(MAX_CLAIM_BYTES) }, ['sleep', '1']), null, 'longer than MAX_CLAIM_BYTES: a cold start');
});

test('the per-agent cgroup parents are told to beforeCreate (the orphan guard) before they exist, in v1 and v2', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-cg-before-'));
  try {
    // cgroup v1: cpu, memory and pids hierarchies; this process's memory cgroup is not the root (as under a container runtime).
    const v1 = path.join(root, 'v1');
    for (const c of ['cpu', 'memory', 'pids']) {
      fs.mkdirSync(path.join(v1, c, c === 'memory' ? 'runtime/abc' : ''), { recursive: true });
      fs.writeFileSync(path.join(v1, c, 'cgroup.procs'), '');
    }
    const told: [string, boolean][] = [];
    const beforeCreate = (dir: string) => told.push([dir, fs.existsSync(dir)]);
    const setup = detectCgroups('node-b.12345678', { root: v1, selfCgroup: '8:pids:/\n4:memory:/runtime/abc\n1:cpu:/\n', platform: 'linux', beforeCreate });
    assert.equal(setup.version, 'v1');
    const made = [
      path.join(v1, 'cpu/mini-orchestrator/node-b.12345678'),
      path.join(v1, 'memory/runtime/abc/mini-orchestrator/node-b.12345678'),
      path.join(v1, 'pids/mini-orchestrator/node-b.12345678'),
    ];
    assert.deepEqual(
      told,
      made.map((d) => [d, false]),
      'each parent told once, before it existed',
    );
    for (const d of made) assert.ok(fs.existsSync(d), d);
    // cgroup v2: the one parent.
    const v2 = path.join(root, 'v2');
    fs.mkdirSync(path.join(v2, 'agent.slice'), { recursive: true });
    fs.writeFileSync(path.join(v2, 'cgroup.controllers'), 'cpu memory pids\n');
    fs.writeFileSync(path.join(v2, 'agent.slice', 'cgroup.controllers'), 'cpu memory pids\n');
    told.length = 0;
    const two = detectCgroups('node-b.12345678', { root: v2, selfCgroup: '0::/agent.slice\n', platform: 'linux', beforeCreate });
    const parent = path.join(v2, 'agent.slice/mini-orchestrator/node-b.12345678');
    assert.deepEqual(two, { version: 'v2', parent });
    assert.deepEqual(told, [[parent, false]]);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
