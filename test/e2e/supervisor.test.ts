// test/e2e/supervisor.test.ts -- the unit runtime against real processes:
// every claim is checked in /proc (pids, process groups, children), in real
// log files, or by the timing of reports that arrive without any polling.
// Every process started here is killed by pid in t.after.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import type { UnitReport, UnitSpec } from '../../shared/model.ts';
import { UnitSupervisor, findExecutable, formatSeconds } from '../../node-agent/runtime/supervisor.ts';
import { OrphanGuard } from '../../node-agent/runtime/orphan-guard.ts';
import { childrenOf, cmdlineOf, pidAlive, readStat } from '../../shared/proc.ts';
import { holdLoopAfter } from '../helpers/hold-loop.ts';
import { textOf } from '../helpers/files.ts';
import { killQuietly, sleep, waitUntil } from '../helpers/wait.ts';

const isAlive = pidAlive; // in /proc and not a zombie

const pgidOf = (pid: number): number => readStat(pid)?.pgid ?? 0;

function spec(command: string[], env: UnitSpec['env'] = [], extra: Partial<UnitSpec> = {}): UnitSpec {
  return { containerName: 'main', command, env, resources: { cpu: 100, memory: 64 }, tolerations: [], ...extra };
}

/** A supervisor in a temp dir whose reports can be awaited as they arrive. */
function harness(t: TestContext, opts: { maxLogBytes?: number; defaultGracePeriodMs?: number } = {}) {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-supervisor-test-'));
  const reports: UnitReport[] = [];
  const waiters: Array<{ match: (r: UnitReport) => boolean; resolve: (r: UnitReport) => void }> = [];
  const sup = new UnitSupervisor({
    stateDir,
    nodeName: 'node-t',
    ...opts,
    onChange: (r) => {
      reports.push(r);
      for (const w of [...waiters]) {
        if (w.match(r)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(r);
        }
      }
    },
  });
  const pids = new Set<number>();
  t.after(() => {
    sup.killAllNow();
    for (const r of sup.list()) if (r.pid) pids.add(r.pid);
    for (const pid of pids) killQuietly(pid);
    sup.close();
    killQuietly(sup.guardPid);
    fs.rmSync(stateDir, { recursive: true, force: true });
  });
  /** Resolves on the first report (from now on, or already seen) matching. */
  function next(name: string, phase: UnitReport['phase'], timeoutMs = 5000): Promise<UnitReport> {
    const seen = reports.find((r) => r.name === name && r.phase === phase);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${phase} report for ${name} within ${timeoutMs}ms`)), timeoutMs);
      waiters.push({
        match: (r) => r.name === name && r.phase === phase,
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
      });
    });
  }
  function start(name: string, command: string[], env: UnitSpec['env'] = [], extra: Partial<UnitSpec> = {}) {
    const res = sup.start({ name, deployment: 'web', spec: spec(command, env, extra), term: 7, specHash: '0123456789abcdef', revision: 3 });
    assert.ok(res.ok, 'start was refused');
    if (res.report.pid) pids.add(res.report.pid);
    return res.report;
  }
  return { sup, stateDir, reports, next, start, pids };
}

test('a started unit is a real process that is reported Running with its pid, in its own process group', async (t) => {
  const h = harness(t);
  const first = h.start('web-1', ['sleep', '30']);
  assert.equal(first.phase, 'Pending');
  const running = await h.next('web-1', 'Running');
  assert.ok(running.pid && running.pid > 1);
  assert.equal(running.pid, first.pid, 'the pid is known from the first report on');
  assert.ok(isAlive(running.pid), 'pid is alive in /proc');
  // With setpriv, 'spawn' fires once setpriv runs; it execs the program in
  // place, so the same pid becomes the program itself a moment later.
  const cmdline = () => fs.readFileSync(`/proc/${running.pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  await waitUntil(() => cmdline() === 'sleep 30', 1000, 'the pid to be the unit program itself');
  assert.equal(pgidOf(running.pid), running.pid, 'the unit leads its own process group');
  assert.equal(running.term, 7);
  assert.equal(running.deployment, 'web');
  assert.deepEqual(running.resources, { cpu: 100, memory: 64 });
  assert.equal(typeof running.startedAt, 'number');
  if (h.sup.setprivPath) {
    const status = fs.readFileSync(`/proc/${running.pid}/status`, 'utf8');
    assert.ok(status.includes('\nPPid:\t' + process.pid + '\n'), 'the unit is a direct child of the supervisor');
  }
});

test('a unit killed with kill -9 is reported Failed with signal SIGKILL at once, without polling', async (t) => {
  const h = harness(t);
  h.start('web-1', ['sleep', '30']);
  const { pid } = await h.next('web-1', 'Running');
  assert.ok(pid);
  const killedAt = Date.now();
  process.kill(pid, 'SIGKILL');
  const failed = await h.next('web-1', 'Failed', 2000);
  const latencyMs = Date.now() - killedAt;
  assert.equal(failed.signal, 'SIGKILL');
  assert.equal(failed.reason, 'Error');
  assert.match(failed.message ?? '', /^signal SIGKILL after \d+\.\d+s$/);
  assert.equal(failed.ready, false);
  assert.equal(failed.exitCode, undefined);
  assert.ok(latencyMs < 500, `report arrived ${latencyMs}ms after the kill`);
  assert.ok(!isAlive(pid));
});

test('exit codes decide the final phase: 0 is Succeeded/Completed, non-zero is Failed/Error', async (t) => {
  const h = harness(t);
  h.start('ok-1', ['sh', '-c', 'exit 0']);
  h.start('bad-1', ['sh', '-c', 'exit 3']);
  const ok = await h.next('ok-1', 'Succeeded');
  const bad = await h.next('bad-1', 'Failed');
  assert.equal(ok.exitCode, 0);
  assert.equal(ok.reason, 'Completed');
  assert.match(ok.message ?? '', /^exit code 0 after \d+\.\d+s$/);
  assert.equal(bad.exitCode, 3);
  assert.equal(bad.reason, 'Error');
  assert.match(bad.message ?? '', /^exit code 3 after \d+\.\d+s$/);
  assert.equal(typeof bad.finishedAt, 'number');
  // "after Xs" is how long it ran.
  const ranMs = bad.finishedAt! - bad.startedAt!;
  assert.equal(bad.message, `exit code 3 after ${formatSeconds(ranMs)}`);
});

test('stop sends SIGTERM to the unit, reports Terminating, and the unit exits well before the grace period', async (t) => {
  const h = harness(t);
  h.start('web-1', ['sleep', '30']);
  const { pid } = await h.next('web-1', 'Running');
  assert.ok(pid);
  const t0 = Date.now();
  const done = h.sup.stop('web-1', 5000);
  assert.ok(done);
  assert.equal(h.sup.get('web-1')?.phase, 'Terminating');
  await h.next('web-1', 'Terminating');
  const final = await done;
  assert.ok(Date.now() - t0 < 2000, 'SIGTERM alone ended it');
  assert.equal(final.phase, 'Succeeded');
  assert.equal(final.signal, 'SIGTERM');
  assert.equal(final.reason, 'Terminated');
  assert.match(final.message ?? '', /^stopped within grace period 5000ms: signal SIGTERM after \d+\.\d+s$/);
  assert.equal(final.ready, false);
  assert.ok(!isAlive(pid));
  // Idempotent: stopping again answers with the same final report.
  const again = await h.sup.stop('web-1');
  assert.equal(again?.phase, 'Succeeded');
  assert.equal(h.sup.stop('no-such-unit'), undefined);
  assert.equal(h.reports.filter((r) => r.name === 'web-1' && r.phase === 'Terminating').length, 1);
});

test('a unit that ends on SIGTERM while the agent is held past its grace is reported stopped within grace, not killed', async (t) => {
  // On a busy machine the agent's loop can be held longer than a grace period; when it runs again,
  // Node fires the due grace timer before it reaps the exited child. The unit ended on SIGTERM.
  const h = harness(t);
  h.start('web-1', ['sleep', '30']);
  const { pid } = await h.next('web-1', 'Running');
  assert.ok(pid);
  // Hold this loop (as a stalled agent's is held) from the stop until the unit is a zombie and its grace is over.
  const final = await holdLoopAfter(
    () => h.sup.stop('web-1', 200)!,
    () => readStat(pid)?.state === 'Z',
    300,
    'the unit to end on SIGTERM',
  );
  assert.equal(final.signal, 'SIGTERM');
  assert.equal(final.reason, 'Terminated');
  assert.match(final.message ?? '', /^stopped within grace period 200ms: signal SIGTERM after \d+\.\d+s$/);
});

test('a unit that ignores SIGTERM is killed with SIGKILL after the grace period, with its children', async (t) => {
  const h = harness(t);
  h.start('stubborn-1', ['sh', '-c', 'trap "" TERM; sleep 30']);
  const { pid } = await h.next('stubborn-1', 'Running');
  assert.ok(pid);
  await waitUntil(() => childrenOf(pid).length > 0, 2000, 'the shell to start sleep');
  const [grandchild] = childrenOf(pid);
  h.pids.add(grandchild);
  const t0 = Date.now();
  const done = h.sup.stop('stubborn-1', 1500);
  // A negative check (SIGTERM does not end it): a bounded observation window
  // of 200 ms, well inside the 1.5 s grace period even on a busy machine.
  await sleep(200);
  assert.ok(isAlive(pid), 'still alive inside the grace period: SIGTERM is ignored');
  const final = await done!;
  const elapsedMs = Date.now() - t0;
  assert.ok(elapsedMs >= 1500, `killed after ${elapsedMs}ms, not before the grace period`);
  assert.ok(elapsedMs < 2600, `killed after ${elapsedMs}ms, promptly after the grace period`);
  assert.equal(final.signal, 'SIGKILL');
  assert.equal(final.reason, 'Terminated');
  assert.match(final.message ?? '', /^killed after grace period 1500ms: signal SIGKILL after \d+\.\d+s$/);
  assert.ok(!isAlive(pid));
  await waitUntil(() => !isAlive(grandchild), 1000, 'the grandchild to die');
});

test('stopping a unit also stops the processes it started (the whole process group)', async (t) => {
  const h = harness(t);
  h.start('tree-1', ['sh', '-c', 'sleep 30 & wait']);
  const { pid } = await h.next('tree-1', 'Running');
  assert.ok(pid);
  await waitUntil(() => childrenOf(pid).length > 0, 2000, 'the shell to start sleep');
  const [grandchild] = childrenOf(pid);
  h.pids.add(grandchild);
  await h.sup.stop('tree-1', 2000);
  await waitUntil(() => !isAlive(grandchild), 1000, 'the grandchild to die');
});

test('a program that cannot start is Failed with reason StartError, naming the program and the errno', async (t) => {
  const h = harness(t);
  const report = h.start('ghost-1', ['/nonexistent/definitely-not-a-program', 'x']);
  assert.equal(report.phase, 'Failed');
  assert.equal(report.reason, 'StartError');
  assert.equal(report.message, 'spawn /nonexistent/definitely-not-a-program ENOENT');
  assert.equal(report.pid, undefined);
  assert.equal(report.startedAt, undefined, 'it never ran');
  assert.equal(report.ready, false);
  const viaPath = h.start('ghost-2', ['sleeeep', '1']);
  assert.equal(viaPath.reason, 'StartError');
  assert.equal(viaPath.message, 'spawn sleeeep ENOENT');
  const empty = h.start('ghost-3', []);
  assert.equal(empty.reason, 'StartError');
  assert.match(empty.message ?? '', /ENOENT: empty command/);
  // Something by that name that is not executable: EACCES, as execvp says.
  const notExec = path.join(h.stateDir, 'not-a-program.sh');
  fs.writeFileSync(notExec, 'echo hi\n', { mode: 0o644 });
  const denied = h.start('ghost-4', [notExec]);
  assert.equal(denied.reason, 'StartError');
  assert.equal(denied.message, `spawn ${notExec} EACCES`);
  const final = await h.next('ghost-2', 'Failed');
  assert.equal(final.message, 'spawn sleeeep ENOENT');
  assert.ok(!h.reports.some((r) => r.name.startsWith('ghost-') && r.phase !== 'Failed'), 'never Pending or Running');
});

test('starting a name twice is a no-op that returns the running unit', async (t) => {
  const h = harness(t);
  h.start('web-1', ['sleep', '30']);
  const { pid } = await h.next('web-1', 'Running');
  const again = h.sup.start({ name: 'web-1', deployment: 'web', spec: spec(['sleep', '31']), term: 8, specHash: 'ffff', revision: 4 });
  assert.ok(again.ok);
  assert.equal(again.created, false);
  assert.equal(again.report.pid, pid);
  assert.equal(h.sup.liveCount(), 1);
});

test('unit names that are not safe file names are refused', (t) => {
  const h = harness(t);
  for (const name of ['../etc/passwd', 'a/b', '.hidden', '', 'x'.repeat(300)]) {
    const res = h.sup.start({ name, deployment: 'web', spec: spec(['sleep', '1']), term: 1, specHash: 'ffff', revision: 1 });
    assert.equal(res.ok, false, `name ${JSON.stringify(name)} accepted`);
  }
});

test('the environment in /proc/PID/environ carries MO_DEPLOYMENT and MO_REVISION; reports carry specHash and revision', async (t) => {
  const h = harness(t);
  h.start('env-2', ['sleep', '30']);
  const running = await h.next('env-2', 'Running');
  assert.equal(running.specHash, '0123456789abcdef');
  assert.equal(running.revision, 3);
  // The exec'd program's environ (setpriv passes its own environment on unchanged).
  await waitUntil(() => cmdlineOf(running.pid!).startsWith('sleep 30'), 2000, 'the pid to be sleep itself');
  const environ = fs.readFileSync(`/proc/${running.pid}/environ`, 'utf8').split('\0');
  for (const v of ['MO_DEPLOYMENT=web', 'MO_REVISION=3', 'MO_UNIT_NAME=env-2', 'MO_NODE_NAME=node-t']) {
    assert.ok(environ.includes(v), `${v} in /proc/${running.pid}/environ: ${environ.join(' ')}`);
  }
  const final = await h.sup.stop('env-2', 2000)!;
  assert.equal(final.specHash, '0123456789abcdef');
  assert.equal(final.revision, 3);
});

test('ready: true from Running on for a unit without probes (readySince set), false while Terminating and once finished', async (t) => {
  const h = harness(t);
  const pending = h.start('plain-1', ['sleep', '30']);
  assert.equal(pending.ready, false);
  const running = await h.next('plain-1', 'Running');
  assert.equal(running.ready, true);
  assert.equal(running.readySince, running.startedAt);
  const done = h.sup.stop('plain-1', 2000)!;
  assert.equal((await h.next('plain-1', 'Terminating')).ready, false);
  assert.equal((await done).ready, false);
});

test('a unit gets only a minimal environment plus its own variables and MO_UNIT_NAME/MO_NODE_NAME', async (t) => {
  process.env.MO_SUPERVISOR_TEST_LEAK = 'leaked';
  t.after(() => delete process.env.MO_SUPERVISOR_TEST_LEAK);
  const h = harness(t);
  h.start('env-1', ['sh', '-c', 'env | sort'], [{ name: 'GREETING', value: 'hello' }]);
  await h.next('env-1', 'Succeeded');
  await waitUntil(() => textOf(h.sup.logPath('env-1')).includes('PATH='), 2000, 'log output');
  // Records are `<RFC 3339 time> <stdout|stderr> <text>` (unit-log.ts): keep the text.
  const lines = fs
    .readFileSync(h.sup.logPath('env-1'), 'utf8')
    .split('\n')
    .map((l) => l.replace(/^\S+ stdout /, ''));
  assert.ok(lines.includes('GREETING=hello'));
  assert.ok(lines.includes('MO_UNIT_NAME=env-1'));
  assert.ok(lines.includes('MO_NODE_NAME=node-t'));
  assert.ok(lines.includes('MO_DEPLOYMENT=web'));
  assert.ok(lines.includes('MO_REVISION=3'));
  assert.ok(!lines.some((l) => l.startsWith('MO_SUPERVISOR_TEST_LEAK=')), 'agent environment leaked into the unit');
});

test('a unit log file stays bounded and keeps the newest output', async (t) => {
  const maxLogBytes = 64 * 1024;
  const h = harness(t, { maxLogBytes });
  // About 1.1 MB of output to stdout and stderr, then a last marker line.
  h.start('noisy-1', ['sh', '-c', 'i=0; while [ $i -lt 20000 ]; do echo "line $i ........................................"; i=$((i+1)); done; echo err-line >&2; echo THE-END']);
  await h.next('noisy-1', 'Succeeded', 20000);
  const logPath = h.sup.logPath('noisy-1');
  await waitUntil(() => textOf(logPath).includes('THE-END'), 3000, 'the last line in the log');
  const size = fs.statSync(logPath).size;
  const rotated = fs.statSync(`${logPath}.1`).size;
  assert.ok(size <= maxLogBytes, `log is ${size} bytes`);
  assert.ok(rotated <= maxLogBytes, `rotated log is ${rotated} bytes`);
  const text = fs.readFileSync(logPath, 'utf8');
  assert.match(text, /^\S+Z stderr err-line$/m, 'stderr goes to the same log, tagged');
  assert.match(text, /^\S+Z stdout THE-END$/m);
  assert.ok(!text.includes('line 0 ') && !fs.readFileSync(`${logPath}.1`, 'utf8').includes('line 0 '), 'the oldest output was dropped');
  // forget() removes the record; the log stays readable until node-wide retention removes it.
  assert.equal(h.sup.forget('noisy-1'), 'forgotten');
  assert.equal(h.sup.get('noisy-1'), undefined);
  assert.ok(fs.readFileSync(logPath, 'utf8').includes('THE-END'), 'the log of a forgotten unit is still there');
});

test('forget refuses a live unit and reports an unknown one', async (t) => {
  const h = harness(t);
  h.start('web-1', ['sleep', '30']);
  await h.next('web-1', 'Running');
  assert.equal(h.sup.forget('web-1'), 'still-running');
  assert.equal(h.sup.forget('nobody'), 'unknown');
});

test('findExecutable resolves like execvp: PATH for bare names, cwd for names with a slash', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-findexec-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'plain.txt'), 'not a program', { mode: 0o644 });
  assert.equal(findExecutable('sh', '/nonexistent:/bin:/usr/bin', '/'), '/bin/sh');
  assert.equal(findExecutable('sh', '/nonexistent', '/'), null);
  assert.equal(findExecutable('./sh', '', '/bin'), '/bin/sh');
  assert.equal(findExecutable('plain.txt', dir, '/'), null, 'a file without the execute bit is not a program');
  assert.equal(findExecutable(dir, '', '/'), null, 'a directory is not a program');
});

test('the orphan guard kills exactly the groups still registered: a removed group is left alone', async (t) => {
  const guard = new OrphanGuard();
  const procs = [0, 1, 2].map(() => spawn('sleep', ['30'], { detached: true, stdio: 'ignore' }));
  const pids = procs.map((p) => p.pid!);
  t.after(() => {
    guard.close();
    for (const p of pids) killQuietly(p);
  });
  for (const pid of pids) guard.add(pid);
  guard.add(pids[0]); // registering twice is harmless
  guard.remove(pids[1]);
  const guardPid = guard.pid!;
  guard.close();
  await waitUntil(() => !isAlive(pids[0]) && !isAlive(pids[2]), 2000, 'the registered groups to be killed');
  await waitUntil(() => !isAlive(guardPid), 2000, 'the guard to exit');
  assert.ok(isAlive(pids[1]), 'the removed group was not touched');
});

test('the orphan guard kills registered process groups when its pipe closes, and comes back if killed', async (t) => {
  const problems: string[] = [];
  const guard = new OrphanGuard({ onRestart: (r) => problems.push(r) });
  const victim = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
  const pids: number[] = [victim.pid!];
  t.after(() => {
    guard.close();
    for (const p of pids) killQuietly(p);
  });
  const firstGuard = guard.pid!;
  pids.push(firstGuard);
  guard.add(victim.pid!);
  // Kill the guard: a new one takes over with the same groups.
  process.kill(firstGuard, 'SIGKILL');
  await waitUntil(() => guard.pid !== undefined && guard.pid !== firstGuard, 2000, 'a new guard');
  pids.push(guard.pid!);
  assert.equal(problems.length, 1);
  assert.match(problems[0], /guard exited \(SIGKILL\)/);
  // A negative check (the new guard kills nothing while the agent lives):
  // a bounded observation window of 100 ms.
  await sleep(100);
  assert.ok(isAlive(victim.pid!), 'the guard kills nothing while the agent lives');
  const secondGuard = guard.pid!;
  guard.close();
  await waitUntil(() => !isAlive(victim.pid!), 2000, 'the guarded group to be killed');
  await waitUntil(() => !isAlive(secondGuard), 2000, 'the guard to exit');
});
