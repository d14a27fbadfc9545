// test/e2e/prober.test.ts -- probes (the pure threshold/scheduling logic is
// in test/unit/probe-logic.test.ts): the three handlers against real
// sockets and processes, and the supervisor wired to them with real
// units: readiness by httpGet and by exec, kills by liveness and startup
// probes (checked in /proc), and no probe process outliving its unit.
// Every process started here is killed by pid in t.after, temp dirs removed.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Probe, UnitReport, UnitSpec } from '../../shared/model.ts';
import { runExecProbe, runHttpProbe, runTcpProbe, type ProbeOutcome } from '../../node-agent/runtime/prober.ts';
import { UnitSupervisor, type UnitChange } from '../../node-agent/runtime/supervisor.ts';
import { findExecutable } from '../../node-agent/runtime/exec-util.ts';
import { childrenOf, cmdlineOf, pidAlive, readStat } from '../../shared/proc.ts';
import { killQuietly, sleep, waitUntil } from '../helpers/wait.ts';

function probe(handler: Pick<Probe, 'exec' | 'httpGet' | 'tcpSocket'>, fields: Partial<Probe> = {}): Probe {
  return { initialDelaySeconds: 0, periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 3, successThreshold: 1, ...handler, ...fields };
}
const execProbe = (command: string[], fields: Partial<Probe> = {}) => probe({ exec: { command } }, fields);

// ---- the handlers against real sockets and processes ----------------------

function outcome(start: (done: (o: ProbeOutcome) => void) => unknown): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    start(resolve);
  });
}

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

test('httpGet: 200-399 succeed, 500 fails with the status, refused and timeouts fail', async (t) => {
  const hung: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    if (req.url === '/hang') return void hung.push(res);
    const status = Number(req.url?.slice(1)) || 200;
    res.writeHead(status, status === 302 ? { Location: '/elsewhere' } : {});
    res.end('x');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const r of hung) r.destroy();
    server.closeAllConnections();
    server.close();
  });
  const port = (server.address() as net.AddressInfo).port;
  for (const [urlPath, ok] of [
    ['/200', true],
    ['/204', true],
    ['/302', true],
    ['/399', true],
    ['/404', false],
    ['/500', false],
  ] as const) {
    const o = await outcome((done) => runHttpProbe(port, urlPath, 1000, done));
    assert.equal(o.ok, ok, `${urlPath}: ${o.detail}`);
    assert.equal(o.detail, `HTTP GET :${port}${urlPath}: ${urlPath.slice(1)}`);
  }
  const closed = await freePort();
  const refused = await outcome((done) => runHttpProbe(closed, '/healthz', 1000, done));
  assert.equal(refused.ok, false);
  assert.match(refused.detail, new RegExp(`^HTTP GET :${closed}/healthz: connect ECONNREFUSED`));
  // A path Node will not send is a failed probe, not a crash of the agent.
  const bad = await outcome((done) => runHttpProbe(port, '/a b', 1000, done));
  assert.equal(bad.ok, false);
  assert.match(bad.detail, new RegExp(`^HTTP GET :${port}/a b: .*unescaped`, 'i'));
  const t0 = Date.now();
  const slow = await outcome((done) => runHttpProbe(port, '/hang', 300, done));
  assert.equal(slow.ok, false);
  assert.equal(slow.detail, `HTTP GET :${port}/hang: timed out after 0.3s`);
  assert.ok(Date.now() - t0 < 2000);
});

test('tcpSocket: a listening port succeeds, a closed one fails', async (t) => {
  const server = net.createServer((s) => s.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const open = await outcome((done) => runTcpProbe(port, 1000, done));
  assert.deepEqual(open, { ok: true, detail: `TCP :${port}: connected` });
  const closed = await freePort();
  const shut = await outcome((done) => runTcpProbe(closed, 1000, done));
  assert.equal(shut.ok, false);
  assert.match(shut.detail, new RegExp(`^TCP :${closed}: connect ECONNREFUSED`));
});

test('exec: exit 0 succeeds, other exits fail, a missing program fails with ENOENT, a timeout kills the probe group', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-prober-test-'));
  const pids = new Set<number>();
  t.after(() => {
    for (const pid of pids) killQuietly(pid);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const setprivPath = process.platform === 'linux' ? findExecutable('setpriv', '/usr/bin:/bin:/usr/sbin:/sbin', '/') : null;
  const tracked: number[] = [];
  const untracked: number[] = [];
  const ctx = {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', MARK: 'x' },
    setprivPath,
    trackGroup: (g: number) => tracked.push(g),
    untrackGroup: (g: number) => untracked.push(g),
  };
  assert.deepEqual(await outcome((done) => runExecProbe(['true'], 1000, ctx, done)), { ok: true, detail: 'exec true: exit code 0' });
  assert.deepEqual(await outcome((done) => runExecProbe(['sh', '-c', 'exit 3'], 1000, ctx, done)), { ok: false, detail: 'exec sh -c exit 3: exit code 3' });
  // Same cwd and env as the unit.
  assert.equal((await outcome((done) => runExecProbe(['sh', '-c', `[ "$PWD" = "${dir}" ] && [ "$MARK" = x ]`], 1000, ctx, done))).ok, true);
  assert.deepEqual(await outcome((done) => runExecProbe(['sleeeep', '1'], 1000, ctx, done)), { ok: false, detail: 'exec sleeeep 1: spawn sleeeep ENOENT' });
  const nul = await outcome((done) => runExecProbe(['true', 'a\0b'], 1000, ctx, done));
  assert.equal(nul.ok, false, 'an argv Node refuses is a failed probe, not a crash');
  assert.equal(tracked.length, 3, 'every spawned probe group went to the guard');
  assert.deepEqual(untracked, tracked, 'and came back from it once the probe ended');

  // A probe that hangs, with a child of its own: both die at the timeout.
  const t0 = Date.now();
  const pending = outcome((done) => runExecProbe(['sh', '-c', 'sleep 43 & sleep 44; :'], 500, ctx, done));
  await waitUntil(() => childrenOf(process.pid).some((c) => cmdlineOf(c).startsWith('sh -c sleep 43')), 2000, 'the probe to run');
  const probePid = childrenOf(process.pid).find((c) => cmdlineOf(c).startsWith('sh -c sleep 43'))!;
  pids.add(probePid);
  await waitUntil(() => childrenOf(probePid).length === 2, 2000, 'the probe to start its children');
  const kids = childrenOf(probePid);
  for (const k of kids) pids.add(k);
  assert.equal(readStat(probePid)?.pgid, probePid, 'the probe leads its own process group');
  const timedOut = await pending;
  assert.deepEqual(timedOut, { ok: false, detail: 'exec sh -c sleep 43 & sleep 44; :: timed out after 0.5s' });
  assert.ok(Date.now() - t0 < 2500);
  await waitUntil(() => !pidAlive(probePid) && kids.every((k) => !pidAlive(k)), 2000, 'the probe and its children to die');
});

// ---- wired into the supervisor, with real units --------------------------

function harness(t: TestContext) {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-prober-test-'));
  const reports: Array<UnitReport & { change: UnitChange }> = [];
  const waiters: Array<{ match: (r: UnitReport, c: UnitChange) => boolean; resolve: (r: UnitReport) => void }> = [];
  const sup = new UnitSupervisor({
    stateDir,
    nodeName: 'node-p',
    defaultGracePeriodMs: 2000,
    onChange: (r, change) => {
      reports.push({ ...r, change });
      for (const w of [...waiters]) {
        if (w.match(r, change)) {
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
  /** The first report from now on (or already seen) that matches. */
  function until(what: string, match: (r: UnitReport, c: UnitChange) => boolean, timeoutMs = 6000): Promise<UnitReport> {
    const seen = reports.find((r) => match(r, r.change));
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no report (${what}) within ${timeoutMs}ms`)), timeoutMs);
      waiters.push({
        match,
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
      });
    });
  }
  function start(name: string, command: string[], extra: Partial<UnitSpec> = {}) {
    const spec: UnitSpec = { containerName: 'main', command, env: [], resources: { cpu: 100, memory: 64 }, tolerations: [], ...extra };
    const res = sup.start({ name, deployment: 'web', spec, term: 1, specHash: '0123456789abcdef', revision: 2 });
    assert.ok(res.ok, 'start was refused');
    if (res.report.pid) pids.add(res.report.pid);
    return res.report;
  }
  /** Processes this test process spawned whose command line starts with `prefix` (probes run as our children). */
  const ourChildren = (prefix: string) => childrenOf(process.pid).filter((c) => cmdlineOf(c).startsWith(prefix));
  return { sup, stateDir, reports, until, start, pids, ourChildren };
}

test('an httpGet readiness probe against the server the unit runs turns it ready, in a report of its own', async (t) => {
  const h = harness(t);
  const port = await freePort();
  const server = `require('http').createServer((q, s) => s.end('ok')).listen(Number(process.env.PORT), '127.0.0.1')`;
  const first = h.start('web-1', [process.execPath, '-e', server], {
    env: [{ name: 'PORT', value: String(port) }],
    ports: [{ containerPort: port, protocol: 'TCP' }],
    probes: { readiness: probe({ httpGet: { path: '/healthz', port } }, { periodSeconds: 1, failureThreshold: 3 }) },
  });
  assert.equal(first.ready, false);
  const running = await h.until('Running', (r) => r.name === 'web-1' && r.phase === 'Running');
  assert.equal(running.ready, false, 'not ready before the probe said so');
  const ready = await h.until('ready', (r, c) => r.name === 'web-1' && c === 'readiness' && r.ready === true);
  assert.equal(ready.phase, 'Running');
  assert.ok(ready.readySince! >= running.startedAt!, 'readySince is when it turned ready');
  assert.equal(ready.message, undefined);
  assert.equal(h.sup.get('web-1')?.ready, true);
  // Stopping: not ready at once.
  const done = h.sup.stop('web-1', 2000)!;
  assert.equal((await h.until('Terminating', (r) => r.name === 'web-1' && r.phase === 'Terminating')).ready, false);
  assert.equal((await done).ready, false);
});

test('an exec readiness probe (test -f FILE): ready only once the file exists, not ready once it is removed', async (t) => {
  const h = harness(t);
  const flag = path.join(h.stateDir, 'ready-flag');
  h.start('web-2', ['sleep', '30'], { probes: { readiness: execProbe(['test', '-f', flag], { failureThreshold: 1 }) } });
  // The first probe ran and said no: a report with the reason, still not ready.
  const notYet = await h.until('not ready', (r, c) => r.name === 'web-2' && c === 'readiness');
  assert.equal(notYet.ready, false);
  assert.equal(notYet.message, `readiness probe failed 1 times: exec test -f ${flag}: exit code 1`);
  assert.ok(!h.reports.some((r) => r.name === 'web-2' && r.ready), 'never ready without the file');
  fs.writeFileSync(flag, '');
  const ready = await h.until('ready', (r, c) => r.name === 'web-2' && c === 'readiness' && r.ready === true, 4000);
  assert.equal(ready.message, undefined);
  fs.rmSync(flag);
  const gone = await h.until('not ready again', (r, c) => r.name === 'web-2' && c === 'readiness' && r.ready === false && r.readySince !== undefined, 4000);
  assert.equal(gone.phase, 'Running');
  assert.equal(gone.readySince, ready.readySince, 'readySince stays the last time it turned ready');
  assert.match(gone.message ?? '', /^readiness probe failed 1 times: exec test -f .*: exit code 1$/);
});

test('a failing liveness probe kills the unit gracefully: Terminating, then Failed/LivenessProbeFailed, pid gone from /proc', async (t) => {
  const h = harness(t);
  const port = await freePort();
  // A server whose /healthz answers 500 and which ignores SIGTERM: killed after its grace period (spec.gracePeriodMs).
  const server = `process.on('SIGTERM', () => {}); require('http').createServer((q, s) => { s.statusCode = q.url === '/healthz' ? 500 : 200; s.end(); }).listen(Number(process.env.PORT), '127.0.0.1')`;
  h.start('web-3', [process.execPath, '-e', server], {
    env: [{ name: 'PORT', value: String(port) }],
    gracePeriodMs: 300,
    probes: {
      liveness: probe({ httpGet: { path: '/healthz', port } }, { initialDelaySeconds: 1, failureThreshold: 2 }),
      readiness: probe({ httpGet: { path: '/', port } }),
    },
  });
  const running = await h.until('Running', (r) => r.name === 'web-3' && r.phase === 'Running');
  const pid = running.pid!;
  h.pids.add(pid);
  await h.until('ready', (r) => r.name === 'web-3' && r.ready === true);
  const terminating = await h.until('Terminating', (r) => r.name === 'web-3' && r.phase === 'Terminating');
  assert.equal(terminating.ready, false);
  assert.equal(terminating.reason, 'LivenessProbeFailed');
  assert.equal(terminating.message, `liveness probe failed 2 times: HTTP GET :${port}/healthz: 500`);
  const tTerm = Date.now();
  assert.ok(pidAlive(pid), 'SIGTERM is ignored: alive during the grace period');
  const failed = await h.until('Failed', (r) => r.name === 'web-3' && r.phase === 'Failed');
  assert.ok(Date.now() - tTerm >= 200, 'SIGKILL waited for the grace period');
  assert.equal(failed.reason, 'LivenessProbeFailed');
  assert.equal(failed.message, `liveness probe failed 2 times: HTTP GET :${port}/healthz: 500; killed after grace period 300ms`);
  assert.equal(failed.signal, 'SIGKILL');
  assert.equal(failed.ready, false);
  await waitUntil(() => !pidAlive(pid), 1000, 'the pid to leave /proc');

  // A unit that honours SIGTERM ends within the grace period: the message is the probe's alone.
  h.start('web-4', ['sleep', '30'], { probes: { liveness: execProbe(['false'], { failureThreshold: 2 }) } });
  const r4 = await h.until('Running', (r) => r.name === 'web-4' && r.phase === 'Running');
  const f4 = await h.until('Failed', (r) => r.name === 'web-4' && r.phase === 'Failed');
  assert.equal(f4.reason, 'LivenessProbeFailed');
  assert.equal(f4.message, 'liveness probe failed 2 times: exec false: exit code 1');
  assert.equal(f4.signal, 'SIGTERM');
  assert.ok(!pidAlive(r4.pid!));
});

test('a startup probe that never succeeds kills the unit; readiness and liveness never ran meanwhile', async (t) => {
  const h = harness(t);
  const marker = path.join(h.stateDir, 'liveness-ran');
  h.start('web-5', ['sleep', '30'], {
    probes: {
      startup: execProbe(['false'], { failureThreshold: 2 }),
      readiness: execProbe(['true']),
      liveness: execProbe(['touch', marker], { failureThreshold: 1 }),
    },
  });
  const running = await h.until('Running', (r) => r.name === 'web-5' && r.phase === 'Running');
  const failed = await h.until('Failed', (r) => r.name === 'web-5' && r.phase === 'Failed');
  assert.equal(failed.reason, 'LivenessProbeFailed');
  assert.equal(failed.message, 'startup probe failed 2 times: exec false: exit code 1');
  assert.ok(!h.reports.some((r) => r.name === 'web-5' && r.ready), 'never ready');
  assert.equal(fs.existsSync(marker), false, 'the liveness probe never ran');
  await waitUntil(() => !pidAlive(running.pid!), 1000, 'the pid to leave /proc');
});

test('probe processes do not outlive their unit: stopping the unit, or closing the supervisor, kills a probe in flight', async (t) => {
  const h = harness(t);
  // Readiness probes that take far longer than the test: in flight until killed.
  h.start('web-6', ['sleep', '30'], { probes: { readiness: execProbe(['sleep', '46'], { timeoutSeconds: 60 }) } });
  h.start('web-7', ['sleep', '31'], { probes: { liveness: execProbe(['sleep', '47'], { timeoutSeconds: 60 }) } });
  await waitUntil(() => h.ourChildren('sleep 46').length === 1 && h.ourChildren('sleep 47').length === 1, 4000, 'both probes to run');
  const [probe6] = h.ourChildren('sleep 46');
  const [probe7] = h.ourChildren('sleep 47');
  h.pids.add(probe6);
  h.pids.add(probe7);
  assert.equal(readStat(probe6)?.pgid, probe6, 'a probe runs in its own process group');
  const unit6 = h.sup.get('web-6')!.pid!;
  const final = await h.sup.stop('web-6', 2000)!;
  assert.equal(final.reason, 'Terminated');
  await waitUntil(() => !pidAlive(probe6), 1000, 'the probe of the stopped unit to die');
  assert.ok(!pidAlive(unit6));
  assert.ok(pidAlive(probe7), 'the other unit keeps probing');
  // A unit that ends on its own takes its probe with it as well.
  const unit7 = h.sup.get('web-7')!.pid!;
  process.kill(unit7, 'SIGKILL');
  const f7 = await h.until('Failed', (r) => r.name === 'web-7' && r.phase === 'Failed');
  assert.equal(f7.reason, 'Error');
  await waitUntil(() => !pidAlive(probe7), 1000, 'the probe of the dead unit to die');

  // close() stops the probes of whatever still runs.
  h.start('web-8', ['sleep', '32'], { probes: { readiness: execProbe(['sleep', '48'], { timeoutSeconds: 60 }) } });
  await waitUntil(() => h.ourChildren('sleep 48').length === 1, 4000, 'the probe to run');
  const [probe8] = h.ourChildren('sleep 48');
  h.pids.add(probe8);
  h.sup.close();
  await waitUntil(() => !pidAlive(probe8), 2000, 'the probe to die on close');
});
