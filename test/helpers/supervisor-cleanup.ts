// test/helpers/supervisor-cleanup.ts -- what a test that made a UnitSupervisor
// leaves behind: nothing. Its units ended, their cgroups and the node's
// parents removed, its spawn server exited, its state directory gone.

import * as fs from 'node:fs';
import type { UnitSupervisor } from '../../node-agent/runtime/supervisor.ts';
import type { UnitCgroups } from '../../node-agent/runtime/cgroups.ts';
import { pidAlive } from '../../shared/proc.ts';

async function until(pred: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}

/** Kill what still runs (killAllNow first, if the test wants that), then wait for each thing to be gone, for 5 s at most each. */
export async function closeSupervisor(sup: UnitSupervisor, cgroups: UnitCgroups | null, stateDir: string): Promise<void> {
  await until(() => sup.liveCount() === 0, 5000);
  if (cgroups) await sup.cgroupsRemoved();
  const server = sup.spawnServerPid;
  sup.close();
  // The spawn server exits once its stdin ends: no process of this test is left for the next.
  if (server !== undefined) await until(() => !pidAlive(server), 5000);
  if (cgroups) {
    for (const u of cgroups.leftovers()) await cgroups.remove(u);
    cgroups.removeParents();
  }
  fs.rmSync(stateDir, { recursive: true, force: true });
}
