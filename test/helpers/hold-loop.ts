// test/helpers/hold-loop.ts -- hold this process's event loop, as a stalled
// agent's loop is held on a busy machine; count its turns, to see that long
// work gave it some.

/**
 * Run `act()`, then hold the loop (nothing of Node's runs: no timer, no pipe,
 * no child's exit) until `until()` holds and `holdMs` have passed since
 * `act()`. Both run in a setImmediate callback, so what Node does next is
 * fire the timers that fell due meanwhile, and only after them read its
 * pipes and reap its children: the order a held agent sees. The check runs
 * every 5 ms; after `limitMs` without it the hold throws, naming `what`.
 */
export function holdLoopAfter<T>(act: () => T, until: () => boolean, holdMs: number, what: string, limitMs = 10000): Promise<T> {
  return new Promise((resolve, reject) =>
    setImmediate(() => {
      try {
        const t0 = Date.now();
        const out = act();
        const block = new Int32Array(new SharedArrayBuffer(4));
        while (!until()) {
          if (Date.now() - t0 > limitMs) throw new Error(`held the loop ${limitMs}ms waiting for ${what}`);
          Atomics.wait(block, 0, 0, 5);
        }
        const left = t0 + holdMs - Date.now();
        if (left > 0) Atomics.wait(block, 0, 0, left);
        resolve(out);
      } catch (err) {
        reject(err);
      }
    }),
  );
}

/** Counts the event loop's turns (a setImmediate that schedules itself) until `stop()`. */
export function countTurns(): { turns: () => number; stop: () => void } {
  let turns = 0;
  let counting = true;
  const count = () => {
    turns++;
    if (counting) setImmediate(count);
  };
  setImmediate(count);
  return { turns: () => turns, stop: () => (counting = false) };
}
