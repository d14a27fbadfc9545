// test/e2e/unit-limits.test.ts -- resource limits through cgroups, with the
// OS as the judge: a unit's cpu time from /proc/PID/stat, the OOM killer's
// verdict, /proc/PID/cgroup and the cgroup directories themselves. The
// pure parts (file values, /proc/self/cgroup parsing, conditions) are in
// test/unit/isolation.test.ts; most of these need root and a writable
// cgroup v1 or v2 hierarchy (CI: root with v1) and are skipped with the
// reason otherwise. Every unit is
// killed by pid and every cgroup made here is removed in t.after.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import type { UnitReport, UnitSpec } from '../../shared/model.ts';
import { UnitSupervisor, type UnitSupervisorOptions } from '../../node-agent/runtime/supervisor.ts';
import { UnitCgroups } from '../../node-agent/runtime/cgroups.ts';
import { childrenOf, cpuMs, pidAlive, readStat } from '../../shared/proc.ts';
import { holdLoopAfter } from '../helpers/hold-loop.ts';
import { detectNamespaces, MAX_CLAIM_BYTES, type Namespaces } from '../../node-agent/runtime/namespaces.ts';
import { SandboxPool } from '../../node-agent/runtime/sandbox-pool.ts';
import { buildInitHelper } from '../../launcher/bundle.ts';
import { closeSupervisor } from '../helpers/supervisor-cleanup.ts';
import { textOf } from '../helpers/files.ts';
import { sleep, waitUntil } from '../helpers/wait.ts';

function spec(command: string[], extra: Partial<UnitSpec> = {}): UnitSpec {
  return { containerName: 'main', command, env: [], resources: { cpu: 100, memory: 64 }, tolerations: [], ...extra };
}

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  assert.ok(pidAlive(pid), `pid ${pid} is gone`);
  return cpuMs(pid) / 1000;
}

test('without cgroups, a unit with limits runs unenforced and its status message says so', async (t) => {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-iso-test-'));
  const reports: UnitReport[] = [];
  const sup = new UnitSupervisor({
    stateDir,
    nodeName: 'node-t',
    cgroups: new UnitCgroups({ version: 'none', reason: 'CgroupNotWritable', detail: 'cgroup v1: cannot create /x: EACCES' }),
    onChange: (r) => reports.push(r),
  });
  t.after(() => {
    sup.killAllNow();
    sup.close();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });
  sup.start({ name: 'lim-1', deployment: 'd', spec: spec(['sleep', '30'], { limits: { cpu: 200 } }), term: 1, specHash: 'h', revision: 1 });
  await waitUntil(() => reports.some((r) => r.phase === 'Running'), 5000, 'Running');
  assert.equal(sup.get('lim-1')?.message, 'limits not enforced on this node: cgroup v1: cannot create /x: EACCES');
  sup.start({ name: 'plain-1', deployment: 'd', spec: spec(['sleep', '30']), term: 1, specHash: 'h', revision: 1 });
  await waitUntil(() => sup.get('plain-1')?.phase === 'Running', 5000, 'Running');
  assert.equal(sup.get('plain-1')?.message, undefined);
});

// ---- with real cgroups ------------------------------------------------------

const NODE = `iso-${process.pid}-${Math.random().toString(36).slice(2, 7)}`;
const probe = process.platform === 'linux' && process.getuid?.() === 0 ? UnitCgroups.detect(NODE) : null;
const skip =
  process.platform !== 'linux' ? 'not Linux' : process.getuid?.() !== 0 ? 'needs root to create cgroups' : !probe!.enabled ? `no usable cgroups: ${probe!.disabledReason}` : false;
probe?.removeParents();

/** After a test: its units ended, their cgroups and the node's parents removed, the state directory gone. */
const cleanUp = (sup: UnitSupervisor, cgroups: UnitCgroups, stateDir: string) => closeSupervisor(sup, cgroups, stateDir);

let harnesses = 0;
/** A supervisor with cgroups of a node name of its own (its guard removes that node's parent when it closes). */
function harness(t: TestContext) {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-iso-test-'));
  const node = `${NODE}-${++harnesses}`;
  const cgroups = UnitCgroups.detect(node);
  assert.ok(cgroups.enabled, cgroups.disabledReason ?? '');
  const reports: UnitReport[] = [];
  const sup = new UnitSupervisor({ stateDir, nodeName: 'node-t', cgroups, onChange: (r) => reports.push({ ...r }) });
  t.after(async () => {
    sup.killAllNow();
    for (const r of sup.list())
      if (r.pid)
        try {
          process.kill(r.pid, 'SIGKILL');
        } catch {
          /* gone */
        }
    await cleanUp(sup, cgroups, stateDir);
  });
  const start = (name: string, s: UnitSpec) => {
    const r = sup.start({ name, deployment: 'd', spec: s, term: 1, specHash: 'h', revision: 1 });
    assert.ok(r.ok);
  };
  const final = (name: string, timeoutMs: number) =>
    waitUntil(() => reports.some((r) => r.name === name && (r.phase === 'Failed' || r.phase === 'Succeeded')), timeoutMs, `${name} to end`).then(() => sup.get(name)!);
  return { sup, cgroups, node, reports, start, final };
}

test('a unit runs in a cgroup of its own (in /proc/PID/cgroup), which is gone after it stops', { skip }, async (t) => {
  const h = harness(t);
  h.start('own-1', spec(['sleep', '30'], { limits: { memory: 256 } }));
  await waitUntil(() => h.sup.get('own-1')?.phase === 'Running', 5000, 'Running');
  const pid = h.sup.get('own-1')!.pid!;
  const dirs = h.cgroups.dirs('own-1');
  assert.ok(dirs.length > 0 && dirs.every((d) => fs.existsSync(d)));
  // 'spawn' (Running) fires when setpriv is exec'd; the join happens before the program's exec.
  await waitUntil(() => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep', 5000, "the program to be exec'd");
  const cg = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  const mine = cg.split('\n').filter((l) => l.endsWith(`/mini-orchestrator/${h.node}/own-1`));
  // v2: the one line; v1: cpu, memory (and pids) each name it.
  assert.ok(mine.length >= (h.cgroups.setup.version === 'v2' ? 1 : 3), `want the unit's own cgroup in /proc/${pid}/cgroup:\n${cg}`);
  assert.equal(h.sup.get('own-1')!.message, undefined); // enforced: no note
  await h.sup.stop('own-1', 1000);
  assert.equal(pidAlive(pid), false);
  await h.sup.cgroupsRemoved();
  for (const d of dirs) assert.equal(fs.existsSync(d), false, `${d} should be removed`);
});

test('cpu limit 200m: a busy loop gets at most ~0.2-0.3 of a core', { skip }, async (t) => {
  const h = harness(t);
  h.start('busy-1', spec(['/bin/sh', '-c', 'while :; do :; done'], { limits: { cpu: 200 } }));
  await waitUntil(() => h.sup.get('busy-1')?.phase === 'Running', 5000, 'Running');
  const pid = h.sup.get('busy-1')!.pid!;
  // A measurement, not a wait for an event: cpu time used over a 3 s window
  // that starts past exec and the first cfs period.
  await sleep(300);
  const c0 = cpuSeconds(pid);
  const t0 = Date.now();
  await sleep(3000);
  const used = (cpuSeconds(pid) - c0) / ((Date.now() - t0) / 1000);
  assert.ok(used <= 0.3, `busy loop limited to 200m used ${used.toFixed(3)} of a core`);
  assert.ok(used >= 0.05, `busy loop should still run, used ${used.toFixed(3)} of a core`);
});

test('memory limit 64Mi: a unit allocating 256 MiB ends OOMKilled with a message', { skip }, async (t) => {
  const h = harness(t);
  const hog = 'const a=[];for(let i=0;i<256;i++){const b=Buffer.allocUnsafe(1<<20);b.fill(i);a.push(b)}setTimeout(()=>{},30000)';
  h.start('hog-1', spec([process.execPath, '-e', hog], { resources: { cpu: 100, memory: 64 }, limits: { memory: 64 } }));
  const r = await h.final('hog-1', 15000);
  assert.equal(r.phase, 'Failed');
  assert.equal(r.reason, 'OOMKilled', JSON.stringify(r));
  assert.match(r.message ?? '', /^killed by the OOM killer \(memory limit 64Mi reached\): signal SIGKILL after \d/);
});

test("a dead agent's leftover unit cgroups are emptied (their processes killed) and removed at the next start", { skip }, async (t) => {
  const h = harness(t);
  // A leftover: a cgroup of this node with a process in it, as a SIGKILLed agent could leave.
  const made = h.cgroups.create('left-1', spec(['x']));
  assert.ok(made.ok);
  const { spawn } = await import('node:child_process');
  const child = spawn('/bin/sh', ['-c', `for f in ${made.procs.join(' ')}; do echo $$ > $f; done; exec sleep 30`], { stdio: 'ignore', detached: true });
  t.after(() => {
    try {
      process.kill(child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  await waitUntil(() => h.cgroups.pids('left-1').includes(child.pid!), 5000, 'the leftover process to join');
  const next = new UnitCgroups(h.cgroups.setup); // the next agent with this node name
  assert.deepEqual(next.leftovers(), ['left-1']);
  const { removed, stuck } = await next.cleanLeftovers();
  assert.deepEqual({ removed, stuck }, { removed: ['left-1'], stuck: [] });
  await waitUntil(() => !pidAlive(child.pid!), 5000, 'the leftover process to be killed');
  for (const d of h.cgroups.dirs('left-1')) assert.equal(fs.existsSync(d), false);
});

// ---- namespaces -------------------------------------------------------------

// mo-init (node-agent/runtime/mo-init.c) as the agents' start builds it; without a C compiler there is none.
const helper = buildInitHelper();
const nsSupport = detectNamespaces('path' in helper ? helper.path : null);
const nsSkip = nsSupport.enabled ? false : `no unit namespaces here: ${nsSupport.condition.message}`;
/** The two ways a cold start's namespaces are made: the same promises are checked of each. */
const nsVariants = [
  {
    name: 'mo-init',
    ns: nsSupport,
    skip: nsSkip || (nsSupport.initPath === null ? `mo-init not usable here (${'error' in helper ? helper.error : 'its trial failed'})` : false),
    mainInner: 2,
    spawnServer: true,
  },
  // The same mo-init spawned per unit, as a cold start runs when the spawn server is off or gave up.
  { name: 'mo-init spawned', ns: nsSupport, skip: nsSkip || (nsSupport.initPath === null ? 'mo-init not usable here' : false), mainInner: 2, spawnServer: false },
  { name: 'util-linux', ns: detectNamespaces(null), skip: nsSkip, mainInner: 3, spawnServer: false },
];

function nsHarness(t: TestContext, namespaces: Namespaces, spawnServer = true) {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-ns-test-'));
  const reports: UnitReport[] = [];
  const sup = new UnitSupervisor({ stateDir, nodeName: 'node-t', namespaces, spawnServer, defaultGracePeriodMs: 3000, onChange: (r) => reports.push({ ...r }) });
  t.after(async () => {
    sup.killAllNow();
    await closeSupervisor(sup, null, stateDir);
  });
  const start = (name: string, s: UnitSpec) => assert.ok(sup.start({ name, deployment: 'd', spec: s, term: 1, specHash: 'h', revision: 1 }).ok);
  const running = async (name: string) => {
    await waitUntil(() => sup.get(name)?.phase === 'Running', 5000, `${name} Running`);
    return sup.get(name)!.pid!;
  };
  const final = (name: string) => waitUntil(() => ['Failed', 'Succeeded'].includes(sup.get(name)?.phase ?? ''), 8000, `${name} to end`).then(() => sup.get(name)!);
  return { sup, start, running, final };
}

const nsOf = (pid: number | 'self', ns: string) => fs.readlinkSync(`/proc/${pid}/ns/${ns}`);
/**
 * Where a process's descriptor leads; '' for one closed since it was listed (the init closes the pipe
 * it told P through right after the word that makes the unit Running).
 */
function fdTarget(pid: number, fd: string): string {
  try {
    return fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw err;
  }
}

for (const v of nsVariants) {
  test(`namespaces (${v.name}): own PID, UTS (hostname = unit name), IPC and mount (private /tmp); status.pid is the host pid of the command`, { skip: v.skip }, async (t) => {
    const h = nsHarness(t, v.ns, v.spawnServer);
    const marker = `mo-ns-${process.pid}-${Date.now()}`;
    h.start('ns-web-1', spec(['/bin/sh', '-c', `hostname; echo $$; echo x > /tmp/${marker}; ls -a /tmp | wc -l; exec sleep 30`]));
    const pid = await h.running('ns-web-1');
    await waitUntil(() => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep', 5000, 'the command to be sleep');
    for (const ns of ['pid', 'uts', 'ipc', 'mnt']) assert.notEqual(nsOf(pid, ns), nsOf('self', ns), `${ns} namespace`);
    assert.match(fs.readFileSync(`/proc/${pid}/status`, 'utf8'), new RegExp(`^NSpid:\\s+${pid}\\s+${v.mainInner}$`, 'm'));
    await waitUntil(() => textOf(h.sup.logPath('ns-web-1')).split('\n').length >= 4, 5000, 'its output');
    const lines = fs
      .readFileSync(h.sup.logPath('ns-web-1'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.replace(/^\S+ stdout /, ''));
    assert.deepEqual(lines, ['ns-web-1', String(v.mainInner), '3'], 'hostname, its pid inside, and a /tmp with only its own file (. .. and it)');
    assert.equal(fs.existsSync(`/tmp/${marker}`), false, "the unit's /tmp is its own");
    // A graceful stop still works: SIGTERM reaches the command through the namespace's init.
    const t0 = Date.now();
    const r = await h.sup.stop('ns-web-1', 3000)!;
    assert.ok(Date.now() - t0 < 2000, `stopped in ${Date.now() - t0}ms, not after the grace period`);
    assert.match(r.message ?? '', /^stopped within grace period 3000ms: signal SIGTERM after/);
    assert.equal(fs.existsSync(`/proc/${pid}`), false);
  });

  test(`namespaces (${v.name}): a unit that ends on SIGTERM while the agent is held past its grace is reported stopped within grace`, { skip: v.skip }, async (t) => {
    const h = nsHarness(t, v.ns, v.spawnServer);
    h.start('ns-held-1', spec(['sleep', '30']));
    const pid = await h.running('ns-held-1');
    // The process the unit's chain (mo-init or unshare) starts with: its process group's leader, a
    // child of this process or of the spawn server this process started.
    const top = readStat(pid)!.pgid;
    assert.equal(readStat(top)?.pgid, top, `pid ${pid}'s group ${top} is led by a live process`);
    const parent = readStat(top)!.ppid;
    assert.ok(parent === process.pid || readStat(parent)?.ppid === process.pid, `pid ${pid}'s chain descends from this process`);
    // The whole chain ends on SIGTERM (the init passes it on) while this loop is held past the grace:
    // a zombie for this process to reap, or reaped by the spawn server and not yet heard of.
    const r = await holdLoopAfter(
      () => h.sup.stop('ns-held-1', 200)!,
      () => readStat(top) === null || readStat(top)?.state === 'Z',
      300,
      "the unit's chain to end on SIGTERM",
    );
    assert.equal(r.signal, 'SIGTERM');
    assert.match(r.message ?? '', /^stopped within grace period 200ms: signal SIGTERM after/);
  });

  test(
    `namespaces (${v.name}): kill -9 of status.pid is reported as SIGKILL; a command's exit code comes through; exec probes run inside the unit (its /tmp); hostPID keeps the host PID namespace only`,
    { skip: v.skip },
    async (t) => {
      const h = nsHarness(t, v.ns, v.spawnServer);
      const probe = { exec: { command: ['test', '-f', '/tmp/ready'] }, initialDelaySeconds: 0, periodSeconds: 1, timeoutSeconds: 2, failureThreshold: 3, successThreshold: 1 };
      h.start('ns-ready-1', spec(['/bin/sh', '-c', 'touch /tmp/ready; exec sleep 30'], { probes: { readiness: probe } }));
      const pid = await h.running('ns-ready-1');
      await waitUntil(() => h.sup.get('ns-ready-1')?.ready === true, 8000, 'ready by a probe that sees its /tmp');
      process.kill(pid, 'SIGKILL');
      const r = await h.final('ns-ready-1');
      assert.equal(r.signal, 'SIGKILL', JSON.stringify(r));
      assert.match(r.message ?? '', /^signal SIGKILL after/);
      h.start('ns-exit-1', spec(['/bin/sh', '-c', 'exit 3']));
      const e = await h.final('ns-exit-1');
      assert.equal(e.exitCode, 3, JSON.stringify(e));
      assert.equal(e.signal, undefined);

      h.start('ns-host-1', spec(['sleep', '30'], { hostPID: true }));
      const hp = await h.running('ns-host-1');
      await waitUntil(() => fs.readFileSync(`/proc/${hp}/comm`, 'utf8').trim() === 'sleep', 5000, 'the command to be sleep');
      assert.equal(nsOf(hp, 'pid'), nsOf('self', 'pid'));
      for (const ns of ['uts', 'ipc', 'mnt']) assert.notEqual(nsOf(hp, ns), nsOf('self', ns), `${ns} namespace`);
    },
  );
}

test(
  'mo-init --warm: a malformed claim ends the sandbox with exit 126 and one line naming the cause; EOF before any claim is an unused sandbox (exit 0)',
  { skip: nsVariants[0].skip },
  async () => {
    const initPath = nsSupport.initPath!;
    const payload = (words: string[]) => Buffer.from(words.map((w) => `${w}\0`).join(''));
    const framed = (words: string[]) => Buffer.concat([Buffer.from(`${payload(words).length}\0`), payload(words)]);
    const cases: Array<{ claim: Buffer; code: number; line: RegExp }> = [
      { claim: Buffer.from('not a claim at all, no length'), code: 126, line: /^mini-orchestrator: bad claim: its length$/ },
      { claim: framed(['u', '0', '0']), code: 126, line: /^mini-orchestrator: bad claim: its command$/ },
      { claim: framed(['u', '2', 'A=1']), code: 126, line: /^mini-orchestrator: bad claim: its environment$/ },
      { claim: Buffer.from('99\0u\0'), code: 126, line: /^mini-orchestrator: bad claim: it ended early$/ },
      { claim: Buffer.alloc(0), code: 0, line: /^$/ },
    ];
    for (const c of cases) {
      const child = spawn(initPath, ['--warm'], { detached: true, stdio: ['pipe', 'ignore', 'pipe', 'pipe'] });
      let err = '';
      let said = '';
      child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
      // 'close', not 'exit': the line may still be unread in the stderr pipe when the exit is seen (a busy machine).
      const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
      try {
        // The claim goes in once the sandbox says it is ready, as the agent's does.
        await new Promise<void>((resolve) =>
          (child.stdio[3] as NodeJS.ReadableStream).on('data', (b: Buffer) => {
            said += b.toString();
            if (/^r\d+ \d+\n/.test(said)) resolve();
          }),
        );
        child.stdin!.end(c.claim);
        assert.equal(await exited, c.code, `${JSON.stringify(c.claim.toString())}: ${err}`);
        assert.match(err.trim(), c.line);
      } finally {
        if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
      }
    }
  },
);

/** A pool of one sandbox made by this machine's maker, in the temp directory (each test adds its guard and hooks). */
function onePool(): Omit<ConstructorParameters<typeof SandboxPool>[0], 'guard'> {
  return { size: 1, initPath: nsSupport.initPath, unsharePath: nsSupport.unsharePath!, setprivPath: null, cwd: os.tmpdir() };
}

test(
  'a pool closed while a sandbox joins its cgroup releases that cgroup once joined, and settled() waits for it (an agent stopping then removes its cgroup parent)',
  { skip: nsVariants[0].skip },
  async () => {
    const joining: Array<() => void> = [];
    const released: string[] = [];
    const pool = new SandboxPool({
      ...onePool(),
      guard: { add: () => {}, remove: () => {} },
      // The join (a cgroup made and three moves) is still going when the pool closes.
      join: () => new Promise<string | null>((resolve) => joining.push(() => resolve('warm@test'))),
      release: (cg) => released.push(cg),
    });
    try {
      await waitUntil(() => joining.length === 1, 10000, 'a sandbox joining its cgroup');
      pool.close();
      assert.deepEqual(released, [], 'nothing to release before the join is done');
      // The join ends a little later; settled() waits for it.
      setTimeout(() => joining[0](), 50);
      await pool.settled();
      assert.deepEqual(released, ['warm@test'], 'released once joined, before settled() resolves');
      assert.equal(pool.readyCount, 0);
    } finally {
      pool.close();
    }
  },
);

test('no sandbox is made while units are being started (a burst): the refill waits until the pool is told none is, then makes one', { skip: nsVariants[0].skip }, async () => {
  const launched: number[] = [];
  let busy = false;
  let asked = 0;
  const pool = new SandboxPool({
    ...onePool(),
    guard: { add: (pid) => launched.push(pid), remove: () => {} },
    busy: () => (asked++, busy),
  });
  let taken: number | null = null;
  try {
    await waitUntil(() => pool.readyCount === 1, 10000, 'the first sandbox');
    assert.equal(launched.length, 1);
    // A burst begins: its first unit takes the sandbox.
    busy = true;
    asked = 0;
    const warm = pool.take();
    assert.ok(warm, 'a ready sandbox to take');
    taken = warm.pid;
    pool.replenish();
    // The refill asks, is told a burst is on, and asks again later, several times, making nothing.
    await waitUntil(() => asked >= 4, 10000, 'the refill asking again while busy');
    assert.equal(launched.length, 1, 'no sandbox made during the burst');
    assert.equal(pool.readyCount, 0);
    busy = false;
    await waitUntil(() => pool.readyCount === 1, 10000, 'the sandbox made once the burst is over');
    assert.equal(launched.length, 2);
  } finally {
    if (taken !== null) {
      try {
        process.kill(-taken, 'SIGKILL');
      } catch {
        // gone
      }
    }
    pool.close();
    await pool.settled();
  }
});

// ---- warm sandboxes (node-agent/runtime/sandbox-pool.ts) --------------------

const warmSkip = skip || nsSkip;
const statusOf = (pid: number) => fs.readFileSync(`/proc/${pid}/status`, 'utf8');
const ppidOf = (pid: number) => Number(/^PPid:\s+(\d+)$/m.exec(statusOf(pid))![1]);
const environText = (pid: number) => fs.readFileSync(`/proc/${pid}/environ`, 'utf8');

/**
 * A process's environment once its exec is done. The kernel names the new
 * program (comm) before it sets up the program's stack, and in between
 * /proc/PID/environ reads empty: a wait on the comm alone can read there.
 */
async function environAfterExec(pid: number): Promise<string[]> {
  await waitUntil(() => environText(pid).length > 0, 5000, `pid ${pid}'s exec to finish (its environ non-empty)`);
  return environText(pid).split('\0').filter(Boolean);
}

/** A supervisor with namespaces and the cgroups of node name `node`; after the test its units, cgroups and state are gone. */
function nsCgroupHarness(t: TestContext, node: string, options: Omit<UnitSupervisorOptions, 'stateDir' | 'nodeName' | 'cgroups'>) {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-nscg-test-'));
  const cgroups = UnitCgroups.detect(node);
  const sup = new UnitSupervisor({ stateDir, nodeName: 'node-t', cgroups, ...options });
  t.after(async () => {
    sup.killAllNow();
    await cleanUp(sup, cgroups, stateDir);
  });
  /** Is pid `p` in cgroup `name` of this node (in each v1 hierarchy, or the v2 one)? */
  const inCgroup = (p: number, name: string) =>
    fs
      .readFileSync(`/proc/${p}/cgroup`, 'utf8')
      .split('\n')
      .filter((l) => l.endsWith(`/mini-orchestrator/${node}/${name}`)).length >= (cgroups.setup.version === 'v2' ? 1 : 3);
  return { sup, cgroups, inCgroup };
}

for (const v of nsVariants) {
  test(
    `a cold start with cgroups and namespaces (${v.name}): every process of the unit is in its cgroup, status.pid is the command's host pid, nothing inside holds the host's /proc`,
    { skip: skip || v.skip },
    async (t) => {
      const { sup, inCgroup } = nsCgroupHarness(t, `${NODE}-cold-${v.name.replace(' ', '-')}`, {
        namespaces: v.ns,
        spawnServer: v.spawnServer,
        warmSandboxes: 0,
        onChange: () => {},
      });
      assert.ok(sup.start({ name: 'cold-1', deployment: 'd', spec: spec(['sleep', '30']), term: 1, specHash: 'h', revision: 1 }).ok);
      await waitUntil(() => sup.get('cold-1')?.phase === 'Running', 5000, 'cold-1 Running');
      const pid = sup.get('cold-1')!.pid!;
      assert.match(statusOf(pid), new RegExp(`^NSpid:\\s+${pid}\\s+${v.mainInner}$`, 'm'), 'status.pid is the host pid of the command');
      await waitUntil(() => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep', 5000, "the command to be exec'd");
      // P (the spawned process, or the spawn server's child: the unit's group), the init (PID 1 inside) and the command.
      const init = ppidOf(pid);
      const P = ppidOf(init);
      assert.match(statusOf(init), /^NSpid:\s+\d+\s+1$/m);
      assert.equal(Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[2]), P, 'the command is in the group of P');
      for (const p of [P, init, pid]) assert.ok(inCgroup(p, 'cold-1'), `pid ${p} in the unit's cgroup:\n${fs.readFileSync(`/proc/${p}/cgroup`, 'utf8')}`);
      // Inside the namespace no descriptor leads to the host's /proc (mo-init's P keeps one to read the command's pid).
      for (const p of [init, pid]) {
        for (const fd of fs.readdirSync(`/proc/${p}/fd`)) {
          const target = fdTarget(p, fd);
          assert.ok(!target.startsWith('/proc'), `pid ${p} fd ${fd} -> ${target}`);
        }
      }
    },
  );
}

for (const v of nsVariants) {
  test(
    `a unit started from a warm sandbox (${v.name}) is a cold start's twin: namespaces, hostname, private /tmp, exactly its env, all its processes in its cgroup, stop with grace`,
    { skip: warmSkip || v.skip },
    async (t) => {
      const problems: string[] = [];
      const { sup, cgroups, inCgroup } = nsCgroupHarness(t, `${NODE}-warm-${v.name.replace(' ', '-')}`, {
        namespaces: v.ns,
        spawnServer: v.spawnServer,
        warmSandboxes: 1,
        defaultGracePeriodMs: 3000,
        onChange: () => {},
        onSandboxProblem: (r) => problems.push(r),
      });
      // The sandbox is made ahead: P below us (mo-init, or unshare), its init (PID 1 inside) below it.
      await waitUntil(() => sup.warmSandboxesReady === 1, 10000, 'a warm sandbox');
      const sandboxes = childrenOf(process.pid).filter((p) => {
        const argv = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
        return argv.includes('mo-init') && !argv.includes('--serve');
      });
      assert.equal(sandboxes.length, 1, 'one warm sandbox process below this process');
      const [P] = sandboxes;
      const [init] = childrenOf(P);
      assert.match(statusOf(init), /^NSpid:\s+\d+\s+1$/m);
      // ...and the main process (PID 2 under mo-init, 3 under util-linux), made ahead too, waiting to become the unit's command.
      const [pre] = childrenOf(init);
      assert.match(statusOf(pre), new RegExp(`^NSpid:\\s+\\d+\\s+${v.mainInner}$`, 'm'));
      // All three already sit in a cgroup of their own, moved while the sandbox waited (a move can wait for an RCU grace period).
      for (const p of [P, init, pre]) assert.ok(inCgroup(p, `warm@${P}`), `pid ${p} in the sandbox's cgroup warm@${P} before any unit`);

      const marker = `mo-warm-${process.pid}-${Date.now()}`;
      const r = sup.start({
        name: 'warm-1',
        deployment: 'd',
        spec: spec(['/bin/sh', '-c', `hostname; echo $$; echo x > /tmp/${marker}; ls -a /tmp | wc -l; exec sleep 30`], {
          env: [{ name: 'QUOTED', value: 'it\'s\na "$HOME"' }],
          limits: { memory: 256 },
        }),
        term: 1,
        specHash: 'h',
        revision: 7,
      });
      assert.ok(r.ok);
      await waitUntil(() => sup.get('warm-1')?.phase === 'Running', 5000, 'warm-1 Running');
      const pid = sup.get('warm-1')!.pid!;
      assert.equal(pid, pre, 'the command is the process made ahead (exec keeps its pid)');
      assert.equal(ppidOf(pid), init, 'the command runs in the sandbox made ahead (its init is the parent)');
      assert.equal(ppidOf(init), P);
      await waitUntil(() => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep', 5000, 'the command to be sleep');
      assert.match(statusOf(pid), new RegExp(`^NSpid:\\s+${pid}\\s+${v.mainInner}$`, 'm'), `status.pid is the host pid of PID ${v.mainInner} inside`);
      for (const ns of ['pid', 'uts', 'ipc', 'mnt']) assert.notEqual(nsOf(pid, ns), nsOf('self', ns), `${ns} namespace`);
      for (const p of [init, pid]) {
        for (const fd of fs.readdirSync(`/proc/${p}/fd`)) {
          const target = fdTarget(p, fd);
          assert.ok(!target.startsWith('/proc'), `pid ${p} fd ${fd} -> ${target}`);
        }
      }
      await waitUntil(() => textOf(sup.logPath('warm-1')).split('\n').length >= 4, 5000, 'its output');
      const lines = fs
        .readFileSync(sup.logPath('warm-1'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.replace(/^\S+ stdout /, ''));
      assert.deepEqual(lines, ['warm-1', String(v.mainInner), '3'], `hostname = unit name, PID ${v.mainInner} inside, a /tmp of its own`);
      assert.equal(fs.existsSync(`/tmp/${marker}`), false);
      // Exactly the unit's environment (the sandbox itself ran with none); sh adds PWD as a cold start's init does.
      const env = await environAfterExec(pid);
      assert.deepEqual(env.map((e) => e.slice(0, e.indexOf('='))).sort(), ['HOME', 'LANG', 'MO_DEPLOYMENT', 'MO_NODE_NAME', 'MO_REVISION', 'MO_UNIT_NAME', 'PATH', 'PWD', 'QUOTED']);
      assert.ok(env.includes('QUOTED=it\'s\na "$HOME"'), 'a value with a quote, a newline and a $ arrives as it was');
      assert.ok(env.includes('MO_REVISION=7'));
      // The limits hold for every process of the unit: P, the init and the command are all in its cgroup.
      for (const p of [P, init, pid]) assert.ok(inCgroup(p, 'warm-1'), `pid ${p} in warm-1's cgroup`);
      // That cgroup became the unit's (renamed at the claim), with the unit's limits written.
      for (const d of cgroups.dirs(`warm@${P}`)) assert.equal(fs.existsSync(d), false, `${d} renamed away`);
      const memDir = cgroups.dirs('warm-1').find((d) => cgroups.setup.version === 'v2' || d.includes('/memory/'))!;
      assert.equal(fs.readFileSync(path.join(memDir, cgroups.setup.version === 'v2' ? 'memory.max' : 'memory.limit_in_bytes'), 'utf8').trim(), String(256 * 1024 * 1024));
      // The pool makes the next one.
      await waitUntil(() => sup.warmSandboxesReady === 1, 10000, 'the next warm sandbox');
      // A graceful stop reaches the command through the init, well within the grace period; the cgroup goes.
      const t0 = Date.now();
      const fin = await sup.stop('warm-1', 3000)!;
      assert.ok(Date.now() - t0 < 2000, `stopped in ${Date.now() - t0}ms`);
      assert.match(fin.message ?? '', /^stopped within grace period 3000ms: signal SIGTERM after/);
      assert.equal(pidAlive(pid), false, 'the command is gone when its end is reported');
      // The init reports the end itself (fd 3); the sandbox's other two processes are SIGKILLed then and go right after.
      await waitUntil(() => !pidAlive(P) && !pidAlive(init), 2000, 'the init and unshare to be gone');
      await sup.cgroupsRemoved();
      for (const d of cgroups.dirs('warm-1')) assert.equal(fs.existsSync(d), false);

      // kill -9 of a warm unit's pid is a SIGKILL, as cold; a unit its claim cannot say (an environment over MAX_CLAIM_BYTES) starts cold and still runs.
      assert.ok(sup.start({ name: 'warm-2', deployment: 'd', spec: spec(['sleep', '30']), term: 1, specHash: 'h', revision: 1 }).ok);
      await waitUntil(() => sup.get('warm-2')?.phase === 'Running', 5000, 'warm-2 Running');
      process.kill(sup.get('warm-2')!.pid!, 'SIGKILL');
      await waitUntil(() => sup.get('warm-2')?.phase === 'Failed', 5000, 'warm-2 to end');
      assert.equal(sup.get('warm-2')!.signal, 'SIGKILL');
      assert.ok(
        sup.start({ name: 'cold-1', deployment: 'd', spec: spec(['sleep', '30'], { env: [{ name: 'BIG', value: 'x'.repeat(MAX_CLAIM_BYTES) }] }), term: 1, specHash: 'h', revision: 1 })
          .ok,
      );
      await waitUntil(() => sup.get('cold-1')?.phase === 'Running', 5000, 'cold-1 Running');
      const cold = sup.get('cold-1')!.pid!;
      assert.match(statusOf(cold), new RegExp(`^NSpid:\\s+\\d+\\s+${v.mainInner}$`, 'm'));
      // Under util-linux the pid is known before the init's subshell execs the command: /proc/PID/environ
      // reads empty while the exec sets up the new program, even once its comm says sleep. Read it after.
      await waitUntil(() => fs.readFileSync(`/proc/${cold}/comm`, 'utf8').trim() === 'sleep', 5000, 'cold-1 to be sleep');
      assert.ok((await environAfterExec(cold)).includes('MO_UNIT_NAME=cold-1'));
      assert.deepEqual(problems, []);
      // A sandbox whose cgroup cannot become the unit's (a directory of that name is in the way): it is
      // discarded, said, and the unit starts cold in a cgroup of its own.
      await waitUntil(() => sup.warmSandboxesReady === 1, 10000, 'a warm sandbox');
      for (const d of cgroups.dirs('blocked-1')) fs.mkdirSync(d);
      assert.ok(sup.start({ name: 'blocked-1', deployment: 'd', spec: spec(['sleep', '30']), term: 1, specHash: 'h', revision: 1 }).ok);
      await waitUntil(() => sup.get('blocked-1')?.phase === 'Running', 5000, 'blocked-1 Running');
      assert.equal(problems.length, 1);
      assert.match(problems[0], /^cannot adopt cgroup warm@\d+ for blocked-1: .*EEXIST/);
      const blocked = sup.get('blocked-1')!.pid!;
      assert.match(statusOf(blocked), new RegExp(`^NSpid:\\s+\\d+\\s+${v.mainInner}$`, 'm'));
      assert.ok(inCgroup(blocked, 'blocked-1'), 'the cold start runs in its own cgroup');
      // Closing the supervisor kills the idle sandbox too.
      await waitUntil(() => sup.warmSandboxesReady === 1, 10000, 'a warm sandbox');
      const idle = childrenOf(process.pid).filter(
        (p) =>
          fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('mo-init') &&
          !fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--serve') && // the spawn server of cold starts
          !sup.list().some((u) => u.pid !== undefined && childrenOf(p).some((i) => childrenOf(i).includes(u.pid!))),
      );
      assert.equal(idle.length, 1);
      sup.killAllNow();
      await waitUntil(() => sup.liveCount() === 0, 5000, 'units to end');
      sup.close();
      await waitUntil(() => !pidAlive(idle[0]), 5000, 'the idle sandbox to be killed');
    },
  );
}
