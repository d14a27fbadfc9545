// test/unit/probe-logic.test.ts -- the probes' pure threshold and
// scheduling logic (node-agent/runtime/probe-logic.ts) against a table of
// cases. The handlers and the supervisor wired to them, with real sockets and
// processes, are in test/e2e/prober.test.ts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Probe, UnitProbes } from '../../shared/model.ts';
import { ProbeLogic, type ProbeKind } from '../../node-agent/runtime/probe-logic.ts';

function probe(handler: Pick<Probe, 'exec' | 'httpGet' | 'tcpSocket'>, fields: Partial<Probe> = {}): Probe {
  return { initialDelaySeconds: 0, periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 3, successThreshold: 1, ...handler, ...fields };
}
const execProbe = (command: string[], fields: Partial<Probe> = {}) => probe({ exec: { command } }, fields);

// ---- the pure logic: a table of cases --------------------------------------

type Step =
  /** due(t) returns exactly these kinds. */
  | { t: number; due: ProbeKind[]; next?: number | null }
  /** result(kind, ok, 'd', t) gives this verdict; then the state is as listed. */
  | { t: number; result: ProbeKind; ok: boolean; verdict: 'none' | 'changed' | 'kill'; ready?: boolean; readySince?: number; message?: string | null; kill?: string };

interface Case {
  name: string;
  probes: UnitProbes | undefined;
  ready0: boolean;
  steps: Step[];
}

const p = (fields: Partial<Probe> = {}) => execProbe(['check'], fields);

const cases: Case[] = [
  {
    name: 'no probes: ready from Running on, nothing ever due',
    probes: undefined,
    ready0: true,
    steps: [
      { t: 0, due: [], next: null },
      { t: 60_000, due: [], next: null },
    ],
  },
  {
    name: 'liveness only: ready at once; three failures in a row kill',
    probes: { liveness: p() },
    ready0: true,
    steps: [
      { t: 0, due: ['liveness'], next: null },
      { t: 10, result: 'liveness', ok: false, verdict: 'none', ready: true },
      { t: 1000, due: ['liveness'] },
      { t: 1010, result: 'liveness', ok: false, verdict: 'none' },
      { t: 2000, due: ['liveness'] },
      { t: 2010, result: 'liveness', ok: false, verdict: 'kill', kill: 'liveness probe failed 3 times: d', ready: false },
      { t: 3000, due: [], next: null },
    ],
  },
  {
    name: 'liveness: a success resets the failure count',
    probes: { liveness: p({ failureThreshold: 2 }) },
    ready0: true,
    steps: [
      { t: 0, due: ['liveness'] },
      { t: 1, result: 'liveness', ok: false, verdict: 'none' },
      { t: 1000, due: ['liveness'] },
      { t: 1001, result: 'liveness', ok: true, verdict: 'none' },
      { t: 2000, due: ['liveness'] },
      { t: 2001, result: 'liveness', ok: false, verdict: 'none' },
      { t: 3000, due: ['liveness'] },
      { t: 3001, result: 'liveness', ok: false, verdict: 'kill', kill: 'liveness probe failed 2 times: d' },
    ],
  },
  {
    name: 'readiness: not ready until successThreshold successes, not ready again after failureThreshold failures, reported once',
    probes: { readiness: p({ successThreshold: 2, failureThreshold: 2 }) },
    ready0: false,
    steps: [
      { t: 0, due: ['readiness'], next: null },
      { t: 5, result: 'readiness', ok: true, verdict: 'none', ready: false },
      { t: 1000, due: ['readiness'] },
      { t: 1005, result: 'readiness', ok: true, verdict: 'changed', ready: true, readySince: 1005, message: null },
      { t: 2000, due: ['readiness'] },
      { t: 2005, result: 'readiness', ok: true, verdict: 'none', ready: true, readySince: 1005 },
      { t: 3000, due: ['readiness'] },
      { t: 3005, result: 'readiness', ok: false, verdict: 'none', ready: true },
      { t: 4000, due: ['readiness'] },
      { t: 4005, result: 'readiness', ok: false, verdict: 'changed', ready: false, readySince: 1005, message: 'readiness probe failed 2 times: d' },
      { t: 5000, due: ['readiness'] },
      { t: 5005, result: 'readiness', ok: false, verdict: 'none', ready: false },
      { t: 6000, due: ['readiness'] },
      { t: 6005, result: 'readiness', ok: true, verdict: 'none', ready: false },
      { t: 7000, due: ['readiness'] },
      { t: 7005, result: 'readiness', ok: true, verdict: 'changed', ready: true, readySince: 7005, message: null },
    ],
  },
  {
    name: 'readiness that never succeeds: one report when the failure threshold is first reached',
    probes: { readiness: p({ failureThreshold: 1 }) },
    ready0: false,
    steps: [
      { t: 0, due: ['readiness'] },
      { t: 1, result: 'readiness', ok: false, verdict: 'changed', ready: false, message: 'readiness probe failed 1 times: d' },
      { t: 1000, due: ['readiness'] },
      { t: 1001, result: 'readiness', ok: false, verdict: 'none', ready: false },
    ],
  },
  {
    name: 'startup gates readiness and liveness; once it succeeds they run at once and it never runs again',
    probes: { startup: p({ failureThreshold: 5 }), readiness: p(), liveness: p({ initialDelaySeconds: 2 }) },
    ready0: false,
    steps: [
      { t: 0, due: ['startup'], next: null },
      { t: 1, result: 'startup', ok: false, verdict: 'none', ready: false },
      { t: 1000, due: ['startup'] },
      { t: 1001, result: 'startup', ok: false, verdict: 'none' },
      { t: 2500, due: ['startup'] },
      { t: 2501, result: 'startup', ok: true, verdict: 'none', ready: false },
      { t: 2501, due: ['readiness', 'liveness'], next: null },
      { t: 2502, result: 'readiness', ok: true, verdict: 'changed', ready: true, readySince: 2502 },
      { t: 2503, result: 'liveness', ok: true, verdict: 'none' },
      { t: 3501, due: ['readiness', 'liveness'] },
    ],
  },
  {
    name: 'startup without readiness: ready when it succeeds',
    probes: { startup: p() },
    ready0: false,
    steps: [
      { t: 0, due: ['startup'] },
      { t: 700, result: 'startup', ok: true, verdict: 'changed', ready: true, readySince: 700 },
      { t: 5000, due: [], next: null },
    ],
  },
  {
    name: 'startup that keeps failing kills, and liveness never ran',
    probes: { startup: p({ failureThreshold: 2 }), liveness: p({ failureThreshold: 1 }) },
    ready0: false,
    steps: [
      { t: 0, due: ['startup'] },
      { t: 1, result: 'startup', ok: false, verdict: 'none' },
      { t: 1000, due: ['startup'] },
      { t: 1001, result: 'startup', ok: false, verdict: 'kill', kill: 'startup probe failed 2 times: d', ready: false },
      { t: 2000, due: [], next: null },
    ],
  },
  {
    name: 'initialDelaySeconds: nothing due before it, then every periodSeconds',
    probes: { readiness: p({ initialDelaySeconds: 3, periodSeconds: 2 }) },
    ready0: false,
    steps: [
      { t: 0, due: [], next: 3000 },
      { t: 2999, due: [], next: 3000 },
      { t: 3000, due: ['readiness'], next: null },
      { t: 3100, result: 'readiness', ok: true, verdict: 'changed', ready: true },
      { t: 4999, due: [], next: 5000 },
      { t: 5000, due: ['readiness'] },
    ],
  },
  {
    name: 'at most one in flight per kind: a slow probe is not started again; the next starts as soon as it returns when overdue',
    probes: { liveness: p(), readiness: p() },
    ready0: false,
    steps: [
      { t: 0, due: ['readiness', 'liveness'] },
      { t: 1500, due: [], next: null },
      { t: 2500, result: 'liveness', ok: true, verdict: 'none' },
      { t: 2500, due: ['liveness'], next: null },
      { t: 2600, result: 'readiness', ok: true, verdict: 'changed', ready: true },
      { t: 2600, due: ['readiness'] },
    ],
  },
];

for (const c of cases) {
  test(`probe logic: ${c.name}`, () => {
    const logic = new ProbeLogic(c.probes, 0);
    assert.equal(logic.ready, c.ready0, 'ready at Running');
    if (c.ready0) assert.equal(logic.readySince, 0);
    for (const [i, step] of c.steps.entries()) {
      const at = `step ${i} (t=${step.t})`;
      if ('due' in step) {
        assert.deepEqual(logic.due(step.t).sort(), [...step.due].sort(), `${at}: due`);
        if (step.next !== undefined) assert.equal(logic.nextDueAt(), step.next, `${at}: nextDueAt`);
        continue;
      }
      const verdict = logic.result(step.result, step.ok, 'd', step.t);
      assert.equal(verdict.type, step.verdict, `${at}: verdict`);
      if (step.kill !== undefined) assert.equal(verdict.type === 'kill' ? verdict.message : null, step.kill, `${at}: kill message`);
      if (step.ready !== undefined) assert.equal(logic.ready, step.ready, `${at}: ready`);
      if (step.readySince !== undefined) assert.equal(logic.readySince, step.readySince, `${at}: readySince`);
      if (step.message !== undefined) assert.equal(logic.message ?? null, step.message, `${at}: message`);
    }
  });
}

test('probe logic: after stop() nothing is due, results are ignored, not ready', () => {
  const logic = new ProbeLogic({ readiness: p(), liveness: p({ failureThreshold: 1 }) }, 0);
  assert.deepEqual(logic.due(0).sort(), ['liveness', 'readiness']);
  assert.equal(logic.result('readiness', true, 'd', 1).type, 'changed');
  logic.stop();
  assert.equal(logic.ready, false);
  assert.equal(logic.result('liveness', false, 'd', 2).type, 'none');
  assert.deepEqual(logic.due(10_000), []);
  assert.equal(logic.nextDueAt(), null);
  // A result nobody asked for is ignored too.
  const other = new ProbeLogic({ liveness: p({ failureThreshold: 1 }) }, 0);
  assert.equal(other.result('liveness', false, 'd', 0).type, 'none', 'not in flight');
});
