// bench/isolation.ts -- what a unit's isolation costs at start and stop: the
// node agent's own UnitSupervisor started bare, with per-unit cgroups (limits
// written before exec), with per-unit namespaces (unshare: PID, UTS, IPC,
// mount with a private /tmp), with both, and with both from a warm sandbox
// (runtime/sandbox-pool.ts: what an agent does by default), against a plain
// child_process.spawn of the same program from the same process, all in one
// run. Start = start() until the report says Running (for a PID namespace
// that is when the command's host pid is known); stop = stop() until the
// final report, plus, with cgroups, until the unit's cgroup directory is gone.
// Needs root for cgroups and namespaces; a mode this machine cannot do is
// reported as not measured, with the reason, never as zero.

import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { UnitCgroups, agentCgroupName } from '../node-agent/runtime/cgroups.ts';
import { detectNamespaces, type Namespaces } from '../node-agent/runtime/namespaces.ts';
import { UnitSupervisor } from '../node-agent/runtime/supervisor.ts';
import type { UnitReport, UnitSpec } from '../shared/model.ts';
import { pct } from './cluster.ts';

export interface IsolationRow {
  mode: string;
  /** Why it was not measured (null when it was). */
  skipped: string | null;
  startP50: number;
  startP99: number;
  stopP50: number;
  stopP99: number;
}

const SLEEP = ['sleep', '600'];

/** A plain spawn of `sleep` until its 'spawn' event, and SIGKILL until 'exit': the floor. */
async function plainSpawn(n: number): Promise<IsolationRow> {
  const start: number[] = [];
  const stop: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const child = spawn(SLEEP[0], SLEEP.slice(1), { stdio: 'ignore', detached: true });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    start.push(performance.now() - t0);
    const t1 = performance.now();
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    stop.push(performance.now() - t1);
  }
  return { mode: 'plain child_process.spawn', skipped: null, startP50: pct(start, 50), startP99: pct(start, 99), stopP50: pct(stop, 50), stopP99: pct(stop, 99) };
}

async function supervised(n: number, mode: string, cgroups: UnitCgroups | undefined, namespaces: Namespaces | undefined, stateDir: string, warmSandboxes = 0): Promise<IsolationRow> {
  const waiters = new Map<string, { phase: (p: UnitReport['phase']) => boolean; resolve: () => void }>();
  const sup = new UnitSupervisor({
    stateDir,
    nodeName: 'bench-node',
    cgroups,
    namespaces,
    warmSandboxes,
    onChange: (report) => {
      const w = waiters.get(report.name);
      if (w && w.phase(report.phase)) {
        waiters.delete(report.name);
        w.resolve();
      }
    },
  });
  const until = (name: string, phase: (p: UnitReport['phase']) => boolean): Promise<void> => new Promise((resolve) => waiters.set(name, { phase, resolve }));
  const spec: UnitSpec = {
    containerName: 'main',
    command: SLEEP,
    env: [],
    resources: { cpu: 100, memory: 64 },
    tolerations: [],
    ...(cgroups ? { limits: { cpu: 500, memory: 128 } } : {}),
  };
  const start: number[] = [];
  const stop: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const name = `iso-${i}`;
      // Warm: each start takes a sandbox made ahead (as a crash's replacement does); waiting for it is not timed.
      const readyBy = Date.now() + 10000;
      while (warmSandboxes > 0 && sup.warmSandboxesReady === 0 && Date.now() < readyBy) await new Promise((r) => setTimeout(r, 5));
      if (warmSandboxes > 0 && sup.warmSandboxesReady === 0) throw new Error(`${mode}: no warm sandbox within 10 s`);
      const running = until(name, (p) => p === 'Running' || p === 'Failed' || p === 'Succeeded');
      const t0 = performance.now();
      const r = sup.start({ name, deployment: 'bench', spec, term: 1, specHash: 'h', revision: 1 });
      if (!r.ok) throw new Error(`${mode}: start refused: ${r.error}`);
      await running;
      start.push(performance.now() - t0);
      const got = sup.get(name);
      if (got?.phase !== 'Running') throw new Error(`${mode}: unit ended instead of running: ${got?.reason} ${got?.message}`);
      const t1 = performance.now();
      await sup.stop(name, 0);
      await sup.cgroupsRemoved();
      stop.push(performance.now() - t1);
      if (cgroups && cgroups.dirs(name).some((d) => fs.existsSync(d))) throw new Error(`${mode}: ${name}'s cgroup is still there after stop`);
      sup.forget(name);
    }
  } finally {
    await sup.stopAll(0);
    await sup.cgroupsRemoved();
    sup.close();
  }
  return { mode, skipped: null, startP50: pct(start, 50), startP99: pct(start, 99), stopP50: pct(stop, 50), stopP99: pct(stop, 99) };
}

export async function benchIsolation(n = 40): Promise<IsolationRow[]> {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-bench-iso-'));
  const cgroups = UnitCgroups.detect(agentCgroupName('bench-node', stateDir));
  const namespaces = detectNamespaces();
  const skip = (mode: string, why: string): IsolationRow => ({ mode, skipped: why, startP50: NaN, startP99: NaN, stopP50: NaN, stopP99: NaN });
  const rows: IsolationRow[] = [];
  try {
    rows.push(await plainSpawn(n));
    rows.push(await supervised(n, 'agent, no isolation', undefined, undefined, stateDir));
    rows.push(
      cgroups.enabled ? await supervised(n, `agent + cgroup ${cgroups.setup.version}`, cgroups, undefined, stateDir) : skip('agent + cgroups', cgroups.disabledReason ?? 'no cgroups'),
    );
    rows.push(namespaces.enabled ? await supervised(n, 'agent + namespaces', undefined, namespaces, stateDir) : skip('agent + namespaces', namespaces.condition.message));
    rows.push(
      cgroups.enabled && namespaces.enabled ? await supervised(n, 'agent + cgroups + namespaces', cgroups, namespaces, stateDir) : skip('agent + cgroups + namespaces', 'needs both'),
    );
    rows.push(
      cgroups.enabled && namespaces.enabled
        ? await supervised(n, 'agent + cgroups + namespaces, warm sandbox', cgroups, namespaces, stateDir, 1)
        : skip('agent + cgroups + namespaces, warm sandbox', 'needs both'),
    );
  } finally {
    if (cgroups.enabled) cgroups.removeParents();
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
  return rows;
}
