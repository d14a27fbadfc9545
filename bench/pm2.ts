// bench/pm2.ts -- the baseline for "crash to replacement": PM2 (the npm
// package, a pinned devDependency) restarting a process killed with
// `kill -9`, measured the way bench/cluster.ts measures a unit's
// replacement: from the kill until the process manager says the new
// process runs. For PM2 that is its own 'online' event on its bus (which
// God.js emits as soon as the new child is spawned), read by a client in a
// small Node process of its own; for the cluster it is the leader's watch
// stream showing the replacement Running.
//
// PM2 gets the same work as the cluster: 3 instances of `sleep 3600` (fork
// mode, no interpreter), killed one after another, 50 ms apart, with
// restart_delay 0 (its default) and max_restarts high enough that the
// rounds never make it give up. It runs with its own PM2_HOME in a temp
// dir (nothing of a user's ~/.pm2 is touched), with its version check and
// banner off (no network: PM2_PROGRAMMATIC, PM2_DISABLE_VERSION_CHECK, and
// the 'touch' file its client looks for). At the end the daemon is stopped
// by the pid in PM2_HOME/pm2.pid (SIGTERM, SIGKILL after 5 s), and every
// sleep it started is SIGKILLed by pid; the temp dir is removed.

import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cmdlineOf, pidAlive } from '../shared/proc.ts';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The PM2 that is measured (the devDependency's exact version). */
export const PM2_VERSION: string = (() => {
  try {
    return (JSON.parse(fs.readFileSync(path.join(REPO, 'node_modules', 'pm2', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '(not installed: npm ci)';
  }
})();

// Runs in a child `node`: connects (starting the daemon), starts the app,
// kills and times, prints one JSON line {samples, pids} and leaves the
// daemon to the parent.
const SCRIPT = String.raw`
const pm2 = require('pm2');
const { rounds, warmups } = JSON.parse(process.argv[1]);
const seen = new Set();
const p = (f, ...a) => new Promise((res, rej) => f.call(pm2, ...a, (err, v) => (err ? rej(err) : res(v))));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  await p(pm2.connect);
  await p(pm2.start, { name: 'web', script: 'sleep', args: ['3600'], interpreter: 'none', exec_mode: 'fork', instances: 3, autorestart: true, restart_delay: 0, max_restarts: 100000, merge_logs: true, out_file: '/dev/null', error_file: '/dev/null' });
  const bus = await p(pm2.launchBus);
  let waiter = null;
  bus.on('process:event', (pkt) => {
    if (pkt.event !== 'online' || !waiter || pkt.process.pm_id !== waiter.id) return;
    const w = waiter;
    waiter = null;
    w.resolve(performance.now());
  });
  const pidsOf = async () => {
    const list = await p(pm2.list);
    for (const x of list) if (x.pid) seen.add(x.pid);
    return new Map(list.map((x) => [x.pm_id, { pid: x.pid, status: x.pm2_env.status }]));
  };
  const deadline = Date.now() + 20000;
  for (;;) {
    const m = await pidsOf();
    if (m.size === 3 && [...m.values()].every((x) => x.status === 'online' && x.pid > 0)) break;
    if (Date.now() > deadline) throw new Error('pm2: the 3 instances never came online');
    await sleep(20);
  }
  const samples = [];
  const warm = [];
  for (let i = 0; i < warmups + rounds; i++) {
    const m = await pidsOf();
    const id = [...m.keys()].sort((a, b) => a - b)[i % m.size];
    const victim = m.get(id).pid;
    const online = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('pm2: no online event within 10 s')), 10000);
      waiter = { id, resolve: (t) => (clearTimeout(timer), resolve(t)) };
    });
    const t0 = performance.now();
    process.kill(victim, 'SIGKILL');
    const t1 = await online;
    (i < warmups ? warm : samples).push(t1 - t0);
    // Not timed: PM2 really runs a new process for it.
    const after = (await pidsOf()).get(id);
    if (!after || !after.pid || after.pid === victim) throw new Error('pm2: instance ' + id + ' has no new pid after its online event');
    await sleep(50);
  }
  await pidsOf();
  process.stdout.write(JSON.stringify({ samples, warmup: warm, pids: [...seen] }) + '\n');
  pm2.disconnect();
  bus.close && bus.close();
  process.exit(0);
})().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err && err.message || err), pids: [...seen] }) + '\n');
  process.exit(1);
});
`;

/** PM2 restarting a kill -9'd `sleep`: kill until its 'online' event, `warmups` times not counted, then `rounds` times. */
export async function benchPm2Restart(rounds = 30, warmups = 0): Promise<{ samples: number[]; warmup: number[] }> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-bench-pm2-'));
  // Its client prints a banner and phones home on the first connect to a PM2_HOME without this file.
  fs.writeFileSync(path.join(home, 'touch'), String(Date.now()));
  const env = { ...process.env, PM2_HOME: home, PM2_PROGRAMMATIC: 'true', PM2_DISABLE_VERSION_CHECK: 'true', PM2_SILENT: 'true' };
  let pids: number[] = [];
  try {
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, ['-e', SCRIPT, JSON.stringify({ rounds, warmups })], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (b) => (stdout += b));
      child.stderr.on('data', (b) => (stderr += b));
      const timer = setTimeout(() => child.kill('SIGKILL'), 60000 + (warmups + rounds) * 2000);
      child.on('error', reject);
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        if (stdout.trim()) resolve(stdout.trim().split('\n').pop()!);
        else reject(new Error(`pm2 bench client exited ${signal ?? code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`));
      });
    });
    const r = JSON.parse(out) as { samples?: number[]; warmup?: number[]; pids: number[]; error?: string };
    pids = r.pids;
    if (r.error !== undefined || !r.samples) throw new Error(r.error ?? 'pm2 bench: no samples');
    return { samples: r.samples, warmup: r.warmup ?? [] };
  } finally {
    await stopDaemon(home, pids);
    fs.rmSync(home, { recursive: true, force: true });
  }
}

async function stopDaemon(home: string, appPids: number[]): Promise<void> {
  let daemon = NaN;
  try {
    daemon = Number(fs.readFileSync(path.join(home, 'pm2.pid'), 'utf8').trim());
  } catch {
    // it never started
  }
  if (Number.isInteger(daemon) && daemon > 1 && pidAlive(daemon)) {
    try {
      process.kill(daemon, 'SIGTERM');
    } catch {
      // gone
    }
    const deadline = Date.now() + 5000;
    while (pidAlive(daemon) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    if (pidAlive(daemon)) {
      try {
        process.kill(daemon, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
  // The daemon kills its apps when it stops; whatever it left goes by pid.
  for (const pid of appPids) {
    // Only a pid that is still one of its sleeps (a recycled pid belongs to someone else).
    if (!pidAlive(pid) || cmdlineOf(pid).trim() !== 'sleep 3600') continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}
