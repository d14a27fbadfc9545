// test/e2e/launcher.test.ts -- `npm start` as real processes: the launcher
// with test/fixtures/fake-child.ts in place of the control plane and the
// agents (the MO_LAUNCHER_*_SCRIPT hook keeps every flag), so this checks the
// launcher alone: real pids in /proc, the prefixed stream, the death line
// with a command that really reproduces the process, --restart-after, and
// that every way of stopping (Ctrl-C to the group, SIGTERM with a child that
// ignores it, SIGKILL of the launcher itself) leaves no process behind.

import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { REPLICA_ENV } from '../../launcher/command-lines.ts';
import { pidAlive, readStat } from '../../shared/proc.ts';
import { randomLauncherBasePort } from '../helpers/ports.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const FAKE = 'test/fixtures/fake-child.ts';
const START_TIMEOUT_MS = 60_000;
const HAS_SETPRIV = spawnSync('setpriv', ['--pdeathsig', 'TERM', '--', 'true']).status === 0;

/** Alive = in /proc and not a zombie (a reparented zombie is dead, just not yet reaped by pid 1). */
const alive = pidAlive;

function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
  } catch {
    return [];
  }
}

/**
 * A failure's view of one process: its state (R running, S sleeping, D in
 * the kernel, T stopped, Z zombie), CPU used, and where it sleeps, so that
 * a line that never came says whether its writer was stuck, starved or busy.
 */
function procState(pid: number): string {
  const st = readStat(pid);
  if (st === null) return `pid ${pid}: gone`;
  let wchan = '';
  try {
    wchan = readFileSync(`/proc/${pid}/wchan`, 'utf8');
  } catch {
    // not readable here
  }
  const argv = cmdline(pid);
  return `pid ${pid} ${argv.find((a) => a.endsWith('.ts')) ?? argv[0] ?? '?'}: state ${st.state}, cpu ${st.cpuTicks * 10} ms, wchan ${wchan || '-'}`;
}

/** `what` names the wait in its failure; a function is called at the failure (to show the state then, not at the start). */
async function eventually(what: string | (() => string), check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for: ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One launcher process, its output as lines, and every pid it reported (for the checks and for cleanup). */
class LauncherRun {
  readonly proc: ChildProcess;
  readonly lines: string[] = [];
  stderr = '';
  readonly childPids = new Set<number>();
  readonly grandchildPids = new Set<number>();
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private partial = '';

  constructor(args: string[], env: Record<string, string> = {}) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', 'launcher/main.ts', ...args], {
      cwd: REPO,
      // detached: the launcher leads its own process group, like a shell's foreground job.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_COLOR: '1', MO_LAUNCHER_CP_SCRIPT: FAKE, MO_LAUNCHER_AGENT_SCRIPT: FAKE, ...env },
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', (code, signal) => resolve({ code, signal })));
    this.proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (this.partial + chunk).split('\n');
      this.partial = parts.pop()!;
      for (const line of parts) this.onLine(line);
    });
    this.proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
  }

  private onLine(line: string): void {
    this.lines.push(line);
    const started = /^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?started \S+ pid=(\d+)/.exec(line);
    if (started) this.childPids.add(Number(started[1]));
    const grandchild = /^\S+ *\| grandchild pid=(\d+)$/.exec(line);
    if (grandchild) this.grandchildPids.add(Number(grandchild[1]));
  }

  get pid(): number {
    return this.proc.pid!;
  }

  async waitForLine(re: RegExp, timeoutMs = START_TIMEOUT_MS): Promise<RegExpExecArray> {
    let found: RegExpExecArray | null = null;
    await eventually(
      () =>
        `a line matching ${re}\n--- output so far:\n${this.lines.join('\n')}\n--- stderr:\n${this.stderr}\n--- the processes now:\n${[this.pid, ...this.childPids].map(procState).join('\n')}`,
      () => {
        for (const line of this.lines) if ((found = re.exec(line))) return true;
        return false;
      },
      timeoutMs,
    );
    return found!;
  }

  allPids(): number[] {
    return [...this.childPids, ...this.grandchildPids];
  }

  /** Failure path: SIGKILL whatever is left, by pid, checking the pid is still ours. */
  killLeftovers(): void {
    for (const pid of [this.pid, ...this.allPids()]) {
      const argv = cmdline(pid).join(' ');
      if (alive(pid) && (argv.includes('fake-child') || argv.includes('launcher/main.ts') || argv.startsWith('sleep'))) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    }
  }
}

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'mo-launcher-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A nodes file in the examples/nodes.yaml format. */
function nodesFile(dir: string, names: string[]): string {
  const path = join(dir, 'nodes.yaml');
  writeFileSync(path, names.map((n) => `- name: ${n}\n  cpu: 4000\n  memory: 8192\n`).join(''));
  return path;
}

function startLauncher(t: TestContext, args: string[], env?: Record<string, string>): LauncherRun {
  const run = new LauncherRun(args, env);
  t.after(() => run.killLeftovers());
  return run;
}

test(
  'npm start runs every process with a real pid, streams prefixed whole lines, reports a killed process with a command that recreates it, restarts it with --restart-after, and Ctrl-C leaves nothing behind',
  { timeout: 120_000 },
  async (t) => {
    const dir = tempDir(t);
    const dataDir = join(dir, 'data');
    const base = randomLauncherBasePort();
    const run = startLauncher(t, ['--data-dir', dataDir, '--base-port', String(base), '--replicas', '3', '--nodes', nodesFile(dir, ['node-a', 'node-b']), '--restart-after', '1']);

    const banner = await run.waitForLine(/^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?=+ cluster is up: 3 control-plane replica\(s\), leader (\S+), 2 node agent\(s\)/);
    assert.equal(banner[1], 'cp-1', 'the banner names the leader that GET /v1/cluster reported (with the token)');

    // Every process of the cluster is a real OS process running the command we built.
    const names = ['cp-1', 'cp-2', 'cp-3', 'node-a', 'node-b'];
    const pids = new Map<string, number>();
    for (const name of names) {
      const m = await run.waitForLine(new RegExp(`^launcher\\| (?:\\d\\d:\\d\\d:\\d\\d\\.\\d{3} )?started ${name} pid=(\\d+)$`));
      const pid = Number(m[1]);
      pids.set(name, pid);
      assert.ok(alive(pid), `${name} pid ${pid} is in /proc`);
      const argv = cmdline(pid);
      assert.equal(argv[0], process.execPath, "the pid we hold is node itself (setpriv exec'd), not a shell");
      assert.ok(argv.includes(FAKE), `${name} runs the entry script: ${argv.join(' ')}`);
      assert.equal(argv[argv.indexOf(name.startsWith('cp-') ? '--id' : '--name') + 1], name);
      // Each child's own output comes through under its name, whole, stdout and stderr alike.
      await run.waitForLine(new RegExp(`^${name} *\\| hello from ${name} pid=${pid}$`));
      await run.waitForLine(new RegExp(`^${name} *\\| part-one part-two from ${name}$`));
      await run.waitForLine(new RegExp(`^${name} *\\| a stderr line from ${name}$`));
    }
    const cp2 = cmdline(pids.get('cp-2')!);
    assert.equal(cp2[cp2.indexOf('--listen') + 1], `127.0.0.1:${base + 2}`);
    assert.equal(cp2[cp2.indexOf('--data-dir') + 1], join(dataDir, 'cp-2'));
    // A replica starts with the launcher's malloc setting (REPLICA_ENV) in its real environment; an agent without it.
    const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    assert.ok(environ(pids.get('cp-2')!).includes(`MALLOC_MMAP_THRESHOLD_=${process.env.MALLOC_MMAP_THRESHOLD_ ?? 131072}`), 'cp-2 has MALLOC_MMAP_THRESHOLD_');
    // glibc parses GLIBC_TUNABLES in the process's own copy of its environment and leaves the first tunable
    // there (the one /proc shows), so only the start is compared; the launcher-args unit test has the whole value.
    const tunables = process.env.GLIBC_TUNABLES ?? REPLICA_ENV.GLIBC_TUNABLES;
    assert.ok(
      environ(pids.get('cp-2')!).some((v) => v.startsWith(`GLIBC_TUNABLES=${tunables.split(':')[0]}`)),
      'cp-2 has GLIBC_TUNABLES',
    );
    if (process.env.GLIBC_TUNABLES === undefined) {
      assert.ok(!environ(pids.get('node-a')!).some((v) => v.startsWith('GLIBC_TUNABLES=')), 'node-a has no GLIBC_TUNABLES');
    }
    if (process.env.MALLOC_MMAP_THRESHOLD_ === undefined) {
      assert.ok(!environ(pids.get('node-a')!).some((v) => v.startsWith('MALLOC_MMAP_THRESHOLD_=')), 'node-a has no MALLOC_MMAP_THRESHOLD_');
    }
    assert.ok(
      run.lines.every((l) => /^(launcher|cp-\d|node-[ab]) *\| /.test(l)),
      'every line carries a prefix',
    );
    assert.equal(new Set(run.lines.map((l) => l.indexOf('|'))).size, 1, 'all prefixes have the same width');

    // The token is made once, private, and config.json points the CLI at this cluster.
    const token = readFileSync(join(dataDir, 'token'), 'utf8').trim();
    assert.match(token, /^[0-9a-f]{32}$/);
    assert.equal(statSync(join(dataDir, 'token')).mode & 0o777, 0o600);
    assert.deepEqual(JSON.parse(readFileSync(join(dataDir, 'config.json'), 'utf8')), {
      servers: [1, 2, 3].map((i) => `http://127.0.0.1:${base + i}`),
      token,
      // Each node's own address, where its Service proxy listens.
      nodes: [
        { name: 'node-a', address: '127.0.1.1' },
        { name: 'node-b', address: '127.0.1.2' },
      ],
    });
    assert.equal(cp2[cp2.indexOf('--token') + 1], token);

    // A second launcher on the same data dir is refused, naming the one that holds it.
    const second = spawnSync(process.execPath, ['--import', 'tsx', 'launcher/main.ts', '--data-dir', dataDir, '--base-port', String(base + 10)], {
      cwd: REPO,
      encoding: 'utf8',
      env: { ...process.env, MO_LAUNCHER_CP_SCRIPT: FAKE, MO_LAUNCHER_AGENT_SCRIPT: FAKE },
      timeout: 30_000,
    });
    assert.equal(second.status, 1);
    assert.equal(second.stderr, `launcher: data dir ${dataDir} is in use by the launcher with pid ${run.pid} (stop it first, or use another --data-dir)\n`);

    // Kill an agent: the stream says so, with a command line that recreates it exactly.
    const oldPid = pids.get('node-b')!;
    process.kill(oldPid, 'SIGKILL');
    const death = await run.waitForLine(
      new RegExp(`^launcher\\| (?:\\d\\d:\\d\\d:\\d\\d\\.\\d{3} )?node-b \\(pid ${oldPid}\\) exited: signal SIGKILL — restart it by hand with: (.+)$`),
      15_000,
    );
    assert.ok(alive(run.pid), 'the launcher keeps running');
    await run.waitForLine(/^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?restarting node-b in 1 s \(--restart-after\)$/);
    const restarted = await run.waitForLine(/^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?started node-b pid=(\d+) \(restart #1\)$/, 15_000);
    const newPid = Number(restarted[1]);
    assert.notEqual(newPid, oldPid);
    assert.ok(alive(newPid), `restarted node-b pid ${newPid} is in /proc`);
    assert.ok(!alive(oldPid));
    // What a shell makes of the printed command is exactly the argv of the running process.
    const parsed = spawnSync('sh', ['-c', `printf '%s\\0' ${death[1]}`], { cwd: REPO, encoding: 'utf8' });
    assert.equal(parsed.status, 0, parsed.stderr);
    assert.deepEqual(parsed.stdout.split('\0').slice(0, -1), cmdline(newPid));

    // Ctrl-C: SIGINT to the launcher's whole process group, as a terminal sends it.
    await eventually('six grandchildren reported (five children and the restarted one)', () => run.grandchildPids.size >= 6);
    for (const name of names.filter((n) => n !== 'node-b')) assert.ok(alive(pids.get(name)!), `${name} still runs`);
    process.kill(-run.pid, 'SIGINT');
    const exit = await run.exited;
    assert.deepEqual(exit, { code: 0, signal: null }, `launcher exit; stderr: ${run.stderr}`);
    for (const pid of run.allPids()) assert.ok(!alive(pid), `pid ${pid} (${cmdline(pid).join(' ')}) is gone`);
    assert.ok(run.lines.some((l) => /^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?\d\d:\d\d:\d\d\.\d{3} stopped: every process of the cluster has exited$/.test(l)));
    assert.ok(!run.lines.some((l) => l.includes('got SIGINT')), "the terminal's Ctrl-C reached only the launcher, which stopped the children with SIGTERM");
    assert.ok(!run.lines.some((l) => l.includes('again: SIGKILL')), 'one Ctrl-C is one stop, not a forced kill');
    assert.ok(!existsSync(join(dataDir, 'launcher.pid')), 'the data dir lock is released');
  },
);

test('SIGTERM to the launcher stops a child that ignores SIGTERM with SIGKILL after the grace period, and the launcher exits 0', { timeout: 60_000 }, async (t) => {
  const dir = tempDir(t);
  const run = startLauncher(t, ['--data-dir', join(dir, 'data'), '--base-port', String(randomLauncherBasePort()), '--replicas', '1', '--nodes', nodesFile(dir, ['node-a'])], {
    FAKE_CHILD_STUBBORN: 'node-a',
  });
  await run.waitForLine(/cluster is up/);
  const nodeA = Number((await run.waitForLine(/^launcher\| (?:\d\d:\d\d:\d\d\.\d{3} )?started node-a pid=(\d+)$/))[1]);
  await run.waitForLine(/^node-a *\| grandchild pid=\d+$/);
  // Its last start-up line too, written in two parts 100 ms apart: a SIGTERM between them put
  // "ignoring SIGTERM" after "part-one " on one line (a CI-like run under load).
  await run.waitForLine(/^node-a *\| part-one part-two from node-a$/);

  const sentAt = Date.now();
  process.kill(run.pid, 'SIGTERM');
  await run.waitForLine(/^node-a *\| node-a ignoring SIGTERM$/, 10_000);
  await run.waitForLine(new RegExp(`^launcher\\| (?:\\d\\d:\\d\\d:\\d\\d\\.\\d{3} )?still running after 5 s: node-a \\(pid ${nodeA}\\) — SIGKILL$`), 15_000);
  assert.deepEqual(await run.exited, { code: 0, signal: null });
  const tookMs = Date.now() - sentAt;
  assert.ok(tookMs >= 4500 && tookMs < 15_000, `stopped after the ~5 s grace period, took ${tookMs} ms`);
  for (const pid of run.allPids()) assert.ok(!alive(pid), `pid ${pid} is gone`);
});

test(
  'a SIGKILLed launcher takes its children and their children with it, and the next start reuses the data dir and the token',
  { timeout: 90_000, skip: HAS_SETPRIV ? false : 'setpriv (util-linux) is not installed' },
  async (t) => {
    const dir = tempDir(t);
    const dataDir = join(dir, 'data');
    const nodes = nodesFile(dir, ['node-a']);
    const first = startLauncher(t, ['--data-dir', dataDir, '--base-port', String(randomLauncherBasePort()), '--replicas', '1', '--nodes', nodes]);
    await first.waitForLine(/cluster is up/);
    await first.waitForLine(/^node-a *\| grandchild pid=\d+$/);
    const token = readFileSync(join(dataDir, 'token'), 'utf8');
    assert.equal(first.allPids().length, 4);

    process.kill(first.pid, 'SIGKILL');
    await first.exited;
    await eventually('every child and grandchild of the killed launcher is gone', () => first.allPids().every((pid) => !alive(pid)));

    const second = startLauncher(t, ['--data-dir', dataDir, '--base-port', String(randomLauncherBasePort()), '--replicas', '1', '--nodes', nodes]);
    await second.waitForLine(/cluster is up/);
    assert.equal(readFileSync(join(dataDir, 'token'), 'utf8'), token, 'the token survives restarts');
    process.kill(second.pid, 'SIGTERM');
    assert.deepEqual(await second.exited, { code: 0, signal: null });
    for (const pid of second.allPids()) assert.ok(!alive(pid), `pid ${pid} is gone`);
  },
);

test('a port already in use stops the start with exit 1 and a line naming the port, before any process is started', { timeout: 30_000 }, async (t) => {
  const dir = tempDir(t);
  const base = randomLauncherBasePort();
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(base + 2, '127.0.0.1', resolve));
  t.after(() => blocker.close());

  const run = startLauncher(t, ['--data-dir', join(dir, 'data'), '--base-port', String(base)]);
  assert.deepEqual(await run.exited, { code: 1, signal: null });
  assert.equal(run.stderr, `launcher: port ${base + 2} is in use (another cluster running? try --base-port ${base + 100})\n`);
  assert.equal(run.childPids.size, 0);
});

test('a bad option exits 2 with one line naming it, and --help exits 0 with the options', { timeout: 30_000 }, async (t) => {
  const bad = startLauncher(t, ['--replica', '3']);
  assert.deepEqual(await bad.exited, { code: 2, signal: null });
  assert.equal(bad.stderr, 'launcher: unknown option --replica (see --help)\n');

  const help = startLauncher(t, ['--help']);
  assert.deepEqual(await help.exited, { code: 0, signal: null });
  for (const flag of ['--data-dir', '--base-port', '--replicas', '--nodes', '--restart-after']) {
    assert.ok(
      help.lines.some((l) => l.includes(flag)),
      `--help mentions ${flag}`,
    );
  }
});

test('a nodes file that does not parse exits 2 naming the file', { timeout: 30_000 }, async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'nodes.yaml');
  writeFileSync(path, '- name: [unclosed\n');
  const run = startLauncher(t, ['--data-dir', join(dir, 'data'), '--base-port', String(randomLauncherBasePort()), '--nodes', path]);
  assert.deepEqual(await run.exited, { code: 2, signal: null });
  assert.match(run.stderr, new RegExp(`^launcher: --nodes ${path}: .+\\n$`));
});
