// test/helpers/sim-stores.ts -- three RaftStores on the simulation's memory
// network and memory disks, one manual clock: for tests of RaftStore itself
// (what the host does around the Raft core), without processes or sockets.

import assert from 'node:assert/strict';
import { ManualClock, type Clock } from '../../shared/clock.ts';
import { SeededRandom } from '../../shared/random.ts';
import { MemoryNetwork, type MemoryTransport } from '../../control-plane/sim/memory-network.ts';
import { MemoryDisk, MemoryStorage } from '../../control-plane/sim/memory-storage.ts';
import { RaftStore } from '../../control-plane/store/raft-store.ts';

export interface SimStores {
  clock: ManualClock;
  net: MemoryNetwork;
  stores: RaftStore<MemoryTransport>[];
  /** Steps the clock one timer at a time, letting each one's promises settle, until `until` holds (at most `maxClockMs` of clock time). */
  runUntil(what: string, until: () => boolean, maxClockMs?: number): Promise<void>;
  close(): Promise<void>;
}

export interface SimStoresOptions {
  /** While true for a replica, its interval timers (the Raft ticker) do not run: a host whose event loop is too busy for its timers. */
  ticksHeld?: (id: string) => boolean;
  /** RaftStore's snapshotEvery (entries); default its own. */
  snapshotEvery?: number;
  /** Each replica's log lines. */
  log?: (id: string, line: string) => void;
  /** A replica's clock made from the shared one (default: the shared one, or holdableClock with ticksHeld). */
  clockFor?: (id: string, clock: Clock) => Clock;
}

/** A replica's view of the shared clock: its intervals skip their runs while `held()`. */
function holdableClock(clock: ManualClock, held: () => boolean): Clock {
  return {
    now: () => clock.now(),
    timeout: (fn, ms) => clock.timeout(fn, ms),
    interval: (fn, ms) =>
      clock.interval(() => {
        if (!held()) fn();
      }, ms),
    cancel: (t) => clock.cancel(t),
    immediate: (fn) => clock.immediate(fn),
  };
}

/** `writeDelayMs(id)`: how long each save of that replica takes to become durable, in clock ms (asked at every save). */
export async function openSimStores(seed: number, writeDelayMs: (id: string) => number = () => 1, opts: SimStoresOptions = {}): Promise<SimStores> {
  const clock = new ManualClock(1_700_000_000_000);
  const random = new SeededRandom(seed);
  const net = new MemoryNetwork({ clock, random, latencyMs: () => 0.5 });
  const ids = ['cp-1', 'cp-2', 'cp-3'];
  const runUntil = async (what: string, until: () => boolean, maxClockMs = 60_000) => {
    const deadline = clock.now() + maxClockMs;
    while (!until() && clock.now() < deadline) {
      await new Promise((r) => setImmediate(r));
      if (until()) return;
      if (!clock.runNext()) clock.skip(1);
    }
    assert.ok(until(), what);
  };
  let opened: RaftStore<MemoryTransport>[] | null = null;
  void Promise.all(
    ids.map(async (id) => {
      const storage = await MemoryStorage.open(new MemoryDisk(), { clock, writeDelayMs: () => writeDelayMs(id) });
      return RaftStore.open({
        id,
        peers: new Map(ids.map((p) => [p, `sim://${p}`])),
        dataDir: `sim://${id}`,
        token: 'sim',
        log: (line) => opts.log?.(id, line),
        ...(opts.snapshotEvery === undefined ? {} : { snapshotEvery: opts.snapshotEvery }),
        timing: { tickMs: 10, electionTimeoutTicks: 25, heartbeatTicks: 5 },
        clock: (opts.clockFor ?? ((_id, c) => c))(id, opts.ticksHeld ? holdableClock(clock, () => opts.ticksHeld!(id)) : clock),
        random,
        storage: async () => storage,
        transport: net.transport(id, ids),
      });
    }),
  ).then((s) => (opened = s));
  await runUntil('three stores open', () => opened !== null);
  const stores = opened!;
  const close = async () => {
    let closed = false;
    void Promise.all(stores.map((s) => s.close())).then(() => (closed = true));
    await runUntil('the stores closed', () => closed);
  };
  return { clock, net, stores, runUntil, close };
}
