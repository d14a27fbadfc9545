// test/e2e/netns.test.ts -- `npm start -- --netns` and `npm run net` for
// real: network namespaces, veths and a bridge made by the launcher, real
// control-plane replicas and agents inside them, links cut, healed and made
// lossy between two of them (seen by connecting from inside one namespace to
// another), and nothing left behind: not after Ctrl-C, not after a SIGKILL
// of the launcher (the cleanup guard), not after a crashed run (the next
// start removes stale namespaces). Needs root and `ip netns`; skipped, with
// the reason, without them -- except the refusal for non-root users, which
// runs everywhere.

import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { destroyTopology, healProcess, isolate, linkStatus, readLayout } from '../../netns/index.ts';
import { pidAlive } from '../../shared/proc.ts';
import { agentCgroupName } from '../../node-agent/runtime/cgroups.ts';
import { randomLauncherBasePort } from '../helpers/ports.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const FAKE = 'test/fixtures/fake-child.ts';
const START_TIMEOUT_MS = 90_000;
const IS_ROOT = process.getuid?.() === 0;
const NETNS_SKIP = !IS_ROOT ? 'needs root (network namespaces)' : spawnSync('ip', ['netns', 'list']).status !== 0 ? 'needs `ip netns` (iproute2) working here' : undefined;

const alive = pidAlive;

async function eventually(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The cgroup parents the run's agents made (`mini-orchestrator/<node>.<hash
 * of its state dir>`), in any hierarchy and at any depth a container runtime
 * puts the agent's own cgroup (a few levels below /sys/fs/cgroup).
 */
function agentCgroups(dataDir: string, nodes: string[]): string[] {
  const names = new Set(nodes.map((n) => agentCgroupName(n, join(dataDir, 'agents', n))));
  const found: string[] = [];
  const walk = (dir: string, depth: number) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const sub = join(dir, e.name);
      if (e.name === 'mini-orchestrator') {
        for (const name of names) if (existsSync(join(sub, name))) found.push(join(sub, name));
      } else if (depth < 4) walk(sub, depth + 1);
    }
  };
  walk('/sys/fs/cgroup', 0);
  return found;
}

function ourNamespaces(basePort: number): string[] {
  const out = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout;
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0])
    .filter((n) => n.startsWith(`mo-${basePort}-`));
}

function linkExists(name: string): boolean {
  return spawnSync('ip', ['link', 'show', 'dev', name], { stdio: 'ignore' }).status === 0;
}

/** One launcher, its stream as lines, the pids it reported. */
class LauncherRun {
  readonly proc: ChildProcess;
  readonly lines: string[] = [];
  stderr = '';
  readonly pids = new Map<string, number>();
  readonly allPids = new Set<number>();
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private partial = '';

  constructor(args: string[], env: Record<string, string> = {}) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', 'launcher/main.ts', ...args], {
      cwd: REPO,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_COLOR: '1', ...env },
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', (code, signal) => resolve({ code, signal })));
    this.proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (this.partial + chunk).split('\n');
      this.partial = parts.pop()!;
      for (const line of parts) {
        this.lines.push(line);
        const m = /^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?started (\S+) pid=(\d+)/.exec(line);
        if (m) {
          this.pids.set(m[1], Number(m[2]));
          this.allPids.add(Number(m[2]));
        }
      }
    });
    this.proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
  }

  get pid(): number {
    return this.proc.pid!;
  }

  async waitForLine(re: RegExp, timeoutMs = START_TIMEOUT_MS): Promise<RegExpExecArray> {
    let found: RegExpExecArray | null = null;
    await eventually(
      `a line matching ${re}\n--- output so far:\n${this.lines.slice(-60).join('\n')}\n--- stderr:\n${this.stderr}`,
      () => {
        for (const line of this.lines) if ((found = re.exec(line))) return true;
        return false;
      },
      timeoutMs,
    );
    return found!;
  }
}

/**
 * Starts a launcher; on the way out (pass or fail) SIGKILLs it and anything
 * it started that still runs (by pid, only if it still runs our data dir),
 * removes its namespaces if the guard did not, and its temp dir.
 */
function startLauncher(t: TestContext, dataDir: string, basePort: number, extra: string[] = [], env?: Record<string, string>): LauncherRun {
  const run = new LauncherRun(['--netns', '--data-dir', dataDir, '--base-port', String(basePort), ...extra], env);
  t.after(async () => {
    for (const pid of [run.pid, ...run.allPids]) {
      if (!alive(pid)) continue;
      let argv = '';
      try {
        argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (argv.includes(dataDir) || argv.includes('launcher/main.ts')) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    }
    await run.exited;
    if (ourNamespaces(basePort).length > 0 && existsSync(join(dataDir, 'netns.json'))) {
      await new Promise((r) => setTimeout(r, 1000)); // the guard's turn first
      if (ourNamespaces(basePort).length > 0) await destroyTopology(readLayout(dataDir));
    }
  });
  return run;
}

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'mo-netns-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function net(dataDir: string, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'netns/cli.ts', '--data-dir', dataDir, ...args], { cwd: REPO, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** True when a GET from inside namespace `ns` to `url` answers 200 within 1.5 s. */
function reachableFrom(ns: string, url: string): boolean {
  const script = `fetch(${JSON.stringify(url)}, { signal: AbortSignal.timeout(1500) }).then((r) => process.exit(r.status === 200 ? 0 : 3), () => process.exit(4))`;
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', script], { timeout: 10_000 });
  return r.status === 0;
}

async function reachableFromHost(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1500) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}

/**
 * The launcher as one ES module in a fresh directory that every user can
 * read, for a run as `nobody`: the checkout itself may sit in a folder only
 * its owner can enter (a clone under /root, or in a `mktemp -d` folder).
 * esbuild is replaced by a stub that throws: the launcher imports it to
 * bundle the cluster's processes, which a refused start never gets to.
 */
async function launcherForAnyone(t: TestContext): Promise<{ dir: string; script: string }> {
  const { build } = await import('esbuild');
  const { NODE_ESM_BUNDLE } = await import('../../launcher/bundle.ts');
  const dir = mkdtempSync(join(tmpdir(), 'mo-launcher-public-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  chmodSync(dir, 0o755);
  const script = join(dir, 'launcher.mjs');
  await build({
    ...NODE_ESM_BUNDLE,
    entryPoints: [join(REPO, 'launcher/main.ts')],
    outfile: script,
    plugins: [
      {
        name: 'no-esbuild',
        setup(b) {
          b.onResolve({ filter: /^esbuild$/ }, () => ({ path: 'esbuild', namespace: 'stub' }));
          b.onLoad({ filter: /.*/, namespace: 'stub' }, () => ({
            contents: "export function build() { throw new Error('esbuild is not available in this test bundle'); }",
          }));
        },
      },
    ],
  });
  chmodSync(script, 0o644);
  return { dir, script };
}

test('npm start -- --netns as a non-root user is refused with one line and exit 2, before touching the data dir', { timeout: 60_000 }, async (t) => {
  let argv: string[];
  let cwd: string;
  let home: string;
  if (IS_ROOT) {
    // As root, drop to nobody for this one run; otherwise we already are a non-root user.
    const drop = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'];
    if (spawnSync(drop[0], [...drop.slice(1), 'true']).status !== 0) {
      t.skip('running as root and cannot drop to nobody with setpriv');
      return;
    }
    const pub = await launcherForAnyone(t);
    // A home nobody owns, so that only the refusal keeps the data dir from being made.
    home = join(pub.dir, 'home');
    mkdirSync(home);
    chownSync(home, 65534, 65534);
    cwd = pub.dir;
    argv = [...drop, process.execPath, pub.script];
  } else {
    home = tempDir(t);
    cwd = REPO;
    argv = [process.execPath, '--import', 'tsx', 'launcher/main.ts'];
  }
  const dataDir = join(home, 'data');
  argv.push('--netns', '--data-dir', dataDir, '--base-port', String(randomLauncherBasePort()));
  const r = spawnSync(argv[0], argv.slice(1), { cwd, encoding: 'utf8', env: { ...process.env, HOME: home }, timeout: 60_000 });
  assert.equal(r.stderr, 'launcher: --netns needs root (network namespaces): run as root or without --netns\n');
  assert.equal(r.status, 2);
  assert.equal(existsSync(dataDir), false);
});

test(
  'with --netns every replica and agent runs in its own namespace, a cut between cp-1 and node-a stops only their traffic until healed, and a SIGKILLed launcher leaves no namespace, veth or process',
  { timeout: 240_000 },
  async (t) => {
    if (NETNS_SKIP) {
      t.skip(NETNS_SKIP);
      return;
    }
    const dir = tempDir(t);
    const dataDir = join(dir, 'data');
    const base = randomLauncherBasePort();
    const run = startLauncher(t, dataDir, base, ['--restart-after', '1']);
    await run.waitForLine(/^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?=+ cluster is up: 3 control-plane replica\(s\).*, 4 node agent\(s\)/);

    // The layout the CLI and the chaos scripts read, and config.json pointing at the namespace addresses.
    const layout = readLayout(dataDir);
    const octet = base % 256;
    assert.equal(layout.subnet, `10.213.${octet}.0/24`);
    const addr = (name: string): string => layout.processes.find((p) => p.name === name)!.address;
    const config = JSON.parse(readFileSync(join(dataDir, 'config.json'), 'utf8')) as { servers: string[] };
    assert.deepEqual(
      config.servers,
      [1, 2, 3].map((i) => `http://10.213.${octet}.${10 + i}:${base + i}`),
    );
    const names = ['cp-1', 'cp-2', 'cp-3', 'node-a', 'node-b', 'node-c', 'node-d'];
    assert.deepEqual(ourNamespaces(base).sort(), [...names, 'hub'].map((n) => `mo-${base}-${n}`).sort());
    assert.ok(linkExists(`mo-${base}-host`), 'the host has its veth into the hub');

    // Each process is node itself (nsenter exec'd), in its own namespace, and that namespace is the named one.
    const ownNet = readlinkSync('/proc/self/ns/net');
    for (const name of names) {
      const pid = run.pids.get(name)!;
      assert.ok(alive(pid), `${name} pid ${pid} runs`);
      assert.equal(readlinkSync(`/proc/${pid}/exe`), readlinkSync(`/proc/${process.pid}/exe`), `${name}'s pid is node, not a wrapper`);
      const net = readlinkSync(`/proc/${pid}/ns/net`);
      assert.notEqual(net, ownNet, `${name} is not in the host's network namespace`);
      const identify = spawnSync('ip', ['netns', 'identify', String(pid)], { encoding: 'utf8' }).stdout.trim();
      assert.equal(identify, `mo-${base}-${name}`);
    }
    assert.notEqual(readlinkSync(`/proc/${run.pids.get('cp-1')}/ns/net`), readlinkSync(`/proc/${run.pids.get('node-a')}/ns/net`));

    const cp1 = `http://${addr('cp-1')}:${base + 1}/healthz`;
    const cp2 = `http://${addr('cp-2')}:${base + 2}/healthz`;
    const nsA = `mo-${base}-node-a`;
    assert.ok(reachableFrom(nsA, cp1), 'before the cut node-a reaches cp-1');

    // Cut cp-1 <-> node-a: node-a no longer reaches cp-1, but still cp-2; the host still reaches cp-1.
    const cut = net(dataDir, 'cut', 'cp-1', 'node-a');
    assert.equal(cut.status, 0, cut.stderr);
    assert.equal(cut.stdout, 'cut cp-1 <-> node-a\n');
    assert.equal(reachableFrom(nsA, cp1), false, 'after the cut node-a does not reach cp-1');
    assert.ok(reachableFrom(nsA, cp2), 'node-a still reaches cp-2');
    assert.ok(await reachableFromHost(cp1), 'the host still reaches cp-1');
    assert.match(net(dataDir, 'status').stdout, /faults:\n {2}cp-1 <-> node-a: cut\n$/);

    const healed = net(dataDir, 'heal', 'cp-1', 'node-a');
    assert.equal(healed.status, 0, healed.stderr);
    assert.ok(reachableFrom(nsA, cp1), 'after heal node-a reaches cp-1 again');
    assert.match(net(dataDir, 'status').stdout, /faults: none\n$/);

    // Loss shows in status and heal-all removes it; delay either works or says the kernel lacks netem, leaving nothing.
    assert.equal(net(dataDir, 'loss', 'cp-2', 'node-b', '30%').status, 0);
    assert.match(net(dataDir, 'status').stdout, /cp-2 <-> node-b: loss 30%/);
    const delayed = net(dataDir, 'delay', 'cp-2', 'node-b', '200ms');
    if (delayed.status === 0) {
      assert.match(net(dataDir, 'status').stdout, /cp-2 <-> node-b: delay 200ms/);
    } else {
      assert.equal(delayed.status, 1);
      assert.match(delayed.stderr, /^net: delay needs the kernel's netem queueing discipline \(sch_netem\)/);
      assert.doesNotMatch(net(dataDir, 'status').stdout, /delay/);
    }
    assert.equal(net(dataDir, 'heal-all').status, 0);
    assert.match(net(dataDir, 'status').stdout, /faults: none\n$/);

    // The programmatic API (for the chaos scripts): isolate cuts cp-3 from all six others, both ways.
    await isolate(layout, 'cp-3');
    const faults = await linkStatus(layout);
    assert.equal(faults.length, 12);
    assert.ok(faults.every((f) => f.kind === 'cut' && (f.from === 'cp-3' || f.to === 'cp-3')));
    assert.equal(reachableFrom(nsA, `http://${addr('cp-3')}:${base + 3}/healthz`), false);
    await healProcess(layout, 'cp-3');
    assert.deepEqual(await linkStatus(layout), []);

    // Bad usage names its cause.
    const typo = net(dataDir, 'cut', 'cp-1', 'node-z');
    assert.equal(typo.status, 2);
    assert.match(typo.stderr, /^net: no process "node-z" in this cluster/);

    // A killed agent: the death line's command enters the namespace; --restart-after brings it back inside it.
    const oldB = run.pids.get('node-b')!;
    process.kill(oldB, 'SIGKILL');
    const death = await run.waitForLine(
      new RegExp(`^launcher\\| (?:\\d\\d:\\d\\d:\\d\\d\\.\\d{3} )?node-b \\(pid ${oldB}\\) exited: signal SIGKILL — restart it by hand with: (.+)$`),
      15_000,
    );
    assert.ok(death[1].startsWith(`nsenter --net=/var/run/netns/mo-${base}-node-b -- ${process.execPath} `), death[1]);
    const restarted = await run.waitForLine(/^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?started node-b pid=(\d+) \(restart #1\)$/, 15_000);
    const newB = Number(restarted[1]);
    assert.equal(spawnSync('ip', ['netns', 'identify', String(newB)], { encoding: 'utf8' }).stdout.trim(), `mo-${base}-node-b`);

    // SIGKILL the launcher: the guard removes every namespace and the host veth, pdeathsig ends every process.
    const agents = names.filter((n) => n.startsWith('node-'));
    const cgroupsBefore = agentCgroups(dataDir, agents);
    // node-b's included, once its new agent made them again (it starts with the previous agent's guard done).
    if (cgroupsBefore.length > 0) {
      const ofB = (p: string) => p.endsWith(`/${agentCgroupName('node-b', join(dataDir, 'agents', 'node-b'))}`);
      await eventually("the restarted node-b's cgroup parents", () => agentCgroups(dataDir, agents).some(ofB), 15_000);
    }
    const pids = [...run.allPids].filter(alive);
    process.kill(run.pid, 'SIGKILL');
    await run.exited;
    await eventually('every namespace and the host veth gone', () => ourNamespaces(base).length === 0 && !linkExists(`mo-${base}-host`), 5000);
    await eventually(`every process gone: ${pids.filter(alive).join(' ')}`, () => pids.every((p) => !alive(p)), 15_000);
    // Each agent's orphan guard removed its cgroup parents, node-b's restart included (they knew them before they existed).
    if (cgroupsBefore.length === 0) t.diagnostic('the agents made no cgroup parents here (no cgroups in use): nothing to check');
    else t.diagnostic(`cgroup parents before the SIGKILL: ${cgroupsBefore.length}`);
    await eventually(`every agent's cgroup parent removed: ${agentCgroups(dataDir, agents).join(' ')}`, () => agentCgroups(dataDir, agents).length === 0, 20_000);
    const after = net(dataDir, 'status');
    assert.equal(after.status, 1);
    assert.match(after.stderr, /namespaces are gone/);
  },
);

test(
  "with --netns a second cluster on the same base port is refused without harming the first, a crashed run's namespace is removed at start, and Ctrl-C removes everything",
  { timeout: 120_000 },
  async (t) => {
    if (NETNS_SKIP) {
      t.skip(NETNS_SKIP);
      return;
    }
    const dir = tempDir(t);
    const base = randomLauncherBasePort();
    // A leftover of a "crashed" run: an empty namespace with this cluster's prefix.
    const stale = `mo-${base}-node-z`;
    assert.equal(spawnSync('ip', ['netns', 'add', stale]).status, 0);
    t.after(() => void spawnSync('ip', ['netns', 'del', stale], { stdio: 'ignore' }));

    const fakes = { MO_LAUNCHER_CP_SCRIPT: FAKE, MO_LAUNCHER_AGENT_SCRIPT: FAKE };
    const dataDir = join(dir, 'one');
    const run = startLauncher(t, dataDir, base, ['--replicas', '1'], fakes);
    await run.waitForLine(/^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?=+ cluster is up: 1 control-plane replica\(s\)/, 60_000);
    assert.ok(!ourNamespaces(base).includes(stale), 'the stale namespace was removed');
    const before = ourNamespaces(base).sort();
    assert.equal(before.length, 6);

    const second = spawnSync(process.execPath, ['--import', 'tsx', 'launcher/main.ts', '--netns', '--replicas', '1', '--data-dir', join(dir, 'two'), '--base-port', String(base)], {
      cwd: REPO,
      encoding: 'utf8',
      env: { ...process.env, ...fakes },
      timeout: 60_000,
    });
    assert.equal(second.status, 1);
    assert.equal(second.stderr, `launcher: --netns: another --netns cluster on base port ${base} is running (pid ${run.pid}); stop it or use another --base-port\n`);
    assert.deepEqual(ourNamespaces(base).sort(), before, "the refused launcher left the running cluster's namespaces alone");
    assert.ok(await reachableFromHost(`http://${readLayout(dataDir).processes[0].address}:${base + 1}/healthz`));

    process.kill(run.pid, 'SIGINT');
    const exit = await run.exited;
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.ok(run.lines.some((l) => l.startsWith('launcher| ') && l.endsWith(` netns: removed the namespaces mo-${base}-* and mo-${base}-host`)));
    assert.deepEqual(ourNamespaces(base), []);
    assert.equal(linkExists(`mo-${base}-host`), false);
    assert.equal(existsSync(join(dataDir, 'netns.json')), false);
  },
);
