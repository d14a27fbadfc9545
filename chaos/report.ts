// chaos/report.ts -- renders the checker's Verdict as the text report a run
// ends with. Pure (data in, lines out). The invariant lines have a fixed
// shape that tests and scripts can read:
//   `  [ok]   1 election safety: 0 violations -- at most one leader per term`
//   `  [FAIL] 5 no surplus: 2 violations -- ...` followed by indented examples
//   `  [skip] 8 no orphans: not checked: ...`

import type { Verdict } from './checker.ts';

export interface RunInfo {
  scenario: string;
  seed: number;
  durationS: number;
  cluster: string; // e.g. 'local: 3 replicas, 4 nodes (pid checks in /proc)'
  partitions?: string; // how partitions were made, when the scenario makes them
  elapsedS: number;
}

const s = (ms: number | null | undefined) => (ms == null ? 'n/a' : `${(ms / 1000).toFixed(3)}s`);
const at = (t: number) => `+${(t / 1000).toFixed(3)}s`;

function counts(c: Record<string, number>): string {
  const entries = Object.entries(c).sort((a, b) => b[1] - a[1]);
  return entries.length ? entries.map(([k, n]) => `${k} x${n}`).join(', ') : 'none';
}

export function formatReport(v: Verdict, info: RunInfo): string {
  const lines: string[] = [];
  const nFaults = v.faults.length;
  lines.push(`chaos report: scenario ${info.scenario}, seed ${info.seed}, ${info.durationS}s of faults, ${info.elapsedS.toFixed(1)}s in all`);
  lines.push(`cluster: ${info.cluster}`);
  if (info.partitions) lines.push(`partitions: ${info.partitions}`);
  lines.push(`faults injected: ${nFaults}${nFaults ? ` (${counts(v.faultCounts)})` : ''}`);
  lines.push(`heals: ${counts(v.healCounts)}`);
  lines.push(`workload writes: ${v.writes.ack} acknowledged, ${v.writes.refused} refused, ${v.writes.unknown} outcome unknown`);
  lines.push(
    `observations: ${v.snapshots} snapshots, ${v.replicaPolls} replica polls; terms seen up to ${v.maxTermSeen}; leaders: ${v.leadersByTerm.map((l) => `${l.term}=${l.leaders.join('+')}`).join(' ') || 'none seen'}`,
  );
  lines.push(`convergence after the last fault: ${s(v.convergedAfterQuietMs)}${v.quietAt !== null ? ` (quiet from ${at(v.quietAt)})` : ''}`);
  const r = v.slowestRecovery;
  lines.push(`slowest recovery after a fault: ${r ? `${s(r.recoveryMs)} (${r.kind} ${r.target} at ${at(r.t)}${r.overlapped ? ', overlapped by a later fault' : ''})` : 'n/a'}`);
  const recovered = v.faults
    .filter((f) => f.recoveryMs !== null)
    .map((f) => f.recoveryMs!)
    .sort((a, b) => a - b);
  if (recovered.length)
    lines.push(`recovery times: median ${s(recovered[Math.floor(recovered.length / 2)])}, ${recovered.length} of ${nFaults} faults followed by a converged snapshot`);
  lines.push(
    `longest deficit: ${v.longestDeficit ? `${s(v.longestDeficit.ms)} (${v.longestDeficit.deployment})` : 'none'}; longest surplus: ${v.longestSurplus ? `${s(v.longestSurplus.ms)} (${v.longestSurplus.deployment})` : 'none'}`,
  );
  const pt = v.pidsTracked;
  lines.push(`pids watched in /proc: ${pt.unit} units, ${pt.agent} agents, ${pt.replica} replicas, ${pt.helper} agents' children`);
  lines.push('invariants:');
  for (const inv of v.invariants) {
    if (!inv.checked) {
      lines.push(`  [skip] ${inv.id} ${inv.name}: ${inv.note || 'not checked'}`);
      continue;
    }
    const tag = inv.violations ? '[FAIL]' : '[ok]  ';
    lines.push(`  ${tag} ${inv.id} ${inv.name}: ${inv.violations} violation${inv.violations === 1 ? '' : 's'} -- ${inv.text}${inv.note ? ` (${inv.note})` : ''}`);
    for (const e of inv.examples) lines.push(`           ${at(e.t)} ${e.message}`);
    if (inv.violations > inv.examples.length) lines.push(`           ... and ${inv.violations - inv.examples.length} more`);
  }
  lines.push(v.violations ? `verdict: FAIL (${v.violations} violation${v.violations === 1 ? '' : 's'}; seed ${info.seed} replays the fault schedule)` : 'verdict: PASS (0 violations)');
  return lines.join('\n');
}
