// test/e2e/chaos.test.ts -- a short run of every chaos scenario against a
// real 3-replica cluster (replicas, agents and units as OS processes), each
// as the user runs it (`npm run chaos -- <scenario> --duration S --seed N`),
// asserting the live checker's verdict: exit 0, faults actually injected
// and logged with their times, and every one of the eight invariants listed
// with 0 violations (the orphan check included: nothing the cluster started
// is left in /proc). The checker's ability to FAIL is proven on fabricated
// streams in test/unit/chaos-checker.test.ts. A failing run prints the seed
// that replays its fault schedule.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO } from '../helpers/cluster.ts';

interface Run {
  code: number | null;
  out: string;
  verdict: any;
}

async function chaos(t: TestContext, args: string[], timeoutMs = 120000): Promise<Run> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-chaos-test-'));
  const json = path.join(dir, 'verdict.json');
  const child = spawn(process.execPath, ['--import', 'tsx', 'chaos/main.ts', ...args, '--json', json, '-q'], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => {
    // The chaos run stops its own cluster on SIGTERM; SIGKILL only if it hangs.
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      setTimeout(() => child.exitCode === null && child.kill('SIGKILL'), 15000).unref();
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (out += b));
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chaos ${args.join(' ')} did not finish in ${timeoutMs} ms:\n${out.slice(-3000)}`)), timeoutMs);
    child.once('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  const verdict = fs.existsSync(json) ? JSON.parse(fs.readFileSync(json, 'utf8')) : null;
  return { code, out, verdict };
}

function assertAllInvariantsHeld(r: Run, scenario: string): void {
  const tail = r.out.slice(r.out.indexOf('chaos report:'));
  assert.equal(r.code, 0, `chaos ${scenario} exited ${r.code}:\n${tail || r.out.slice(-3000)}`);
  assert.match(r.out, /verdict: PASS \(0 violations\)/);
  for (const [id, name] of [
    [1, 'election safety'],
    [2, 'no lost writes'],
    [3, 'fencing'],
    [4, 'convergence'],
    [5, 'no surplus'],
    [6, 'not-ready nodes'],
    [7, 'capacity and taints'],
    [8, 'no orphans'],
  ] as const) {
    assert.match(tail, new RegExp(`\\[ok\\]\\s+${id} ${name}: 0 violations`), `invariant ${id} (${name}) not reported as held:\n${tail}`);
  }
  assert.equal(r.verdict?.violations, 0);
  assert.ok(r.verdict.snapshots > 10, `the checker observed too little: ${r.verdict.snapshots} snapshots`);
  assert.ok(r.verdict.pidsTracked.agent >= 4 && r.verdict.pidsTracked.replica >= 3, 'agents and replicas were watched in /proc');
}

test('crash-units: kill -9 of random unit pids, round after round, never leaves a deployment short for longer than the bound', { timeout: 150000 }, async (t) => {
  const r = await chaos(t, ['crash-units', '--duration', '12', '--iterations', '60', '--seed', '101', '--replicas', '3']);
  assertAllInvariantsHeld(r, 'crash-units');
  assert.match(r.out, /\+\d+\.\d{3}s fault: SIGKILL unit chaos-\w+-\d+ pid \d+ on node-[a-d]/);
  assert.ok(r.verdict.faultCounts['SIGKILL unit'] >= 50, `only ${r.verdict.faultCounts['SIGKILL unit']} unit kills`);
  assert.ok(r.verdict.pidsTracked.unit > 50, 'the replacement units were seen as new pids');
});

test('kill-agents: SIGKILLed agents take their units with them, the units are replaced elsewhere, and restarted agents rejoin', { timeout: 150000 }, async (t) => {
  const r = await chaos(t, ['kill-agents', '--duration', '15', '--seed', '102', '--replicas', '3']);
  assertAllInvariantsHeld(r, 'kill-agents');
  assert.match(r.out, /\+\d+\.\d{3}s fault: SIGKILL node-[a-d] agent pid \d+/);
  assert.match(r.out, /\+\d+\.\d{3}s heal: restarted node-[a-d] agent pid \d+/);
  assert.ok(r.verdict.writes.ack > 0, 'the workload wrote during the faults');
});

test('kill-leader: a SIGKILLed or SIGSTOPped leader is replaced by a new one of a higher term, with no write lost', { timeout: 150000 }, async (t) => {
  const r = await chaos(t, ['kill-leader', '--duration', '15', '--seed', '103', '--replicas', '3']);
  assertAllInvariantsHeld(r, 'kill-leader');
  assert.match(r.out, /\+\d+\.\d{3}s fault: (SIGKILL|SIGSTOP) leader cp-\d pid \d+/);
  assert.ok(r.verdict.maxTermSeen >= 2, `no failover happened (max term ${r.verdict.maxTermSeen})`);
  assert.ok(r.verdict.leadersByTerm.every((l: { leaders: string[] }) => l.leaders.length === 1));
});

test('partition: an isolated leader or agents split from the majority, then healed, leave no surplus and no double leader', { timeout: 150000 }, async (t) => {
  const r = await chaos(t, ['partition', '--duration', '15', '--seed', '104', '--replicas', '3']);
  assertAllInvariantsHeld(r, 'partition');
  assert.match(r.out, /\+\d+\.\d{3}s fault: partition: /);
  assert.match(r.out, /\+\d+\.\d{3}s heal: healed partition of /);
});

test('soak: every kind of fault at random while deployments are applied, scaled and deleted', { timeout: 150000 }, async (t) => {
  const r = await chaos(t, ['soak', '--duration', '20', '--seed', '105', '--replicas', '3']);
  assertAllInvariantsHeld(r, 'soak');
  assert.ok(Object.keys(r.verdict.faultCounts).length >= 2, `soak injected one kind only: ${JSON.stringify(r.verdict.faultCounts)}`);
  assert.ok(r.verdict.writes.ack >= 10, `the workload got only ${r.verdict.writes.ack} writes acknowledged`);
});

test('a bad chaos command line exits 2 with one line naming the cause', { timeout: 30000 }, async (t) => {
  const r = await chaos(t, ['earthquake']);
  assert.equal(r.code, 2);
  assert.match(r.out, /^chaos: unknown scenario "earthquake" \(kill-agents, kill-leader, crash-units, partition, soak\)$/m);
});
