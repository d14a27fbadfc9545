// shared/system-clock.ts -- the real Clock (shared/clock.ts): performance.now()
// and Node's timers. A shell module; the default of every component that
// takes a Clock, so production behaviour is what it was before injection.

import type { Clock, ClockTimer } from './clock.ts';

export const systemClock: Clock = {
  now: () => performance.now(),
  timeout: (fn, ms) => setTimeout(fn, ms),
  interval: (fn, ms) => setInterval(fn, ms),
  cancel: (t: ClockTimer | null | undefined) => {
    if (t) clearTimeout(t as NodeJS.Timeout);
  },
  immediate: (fn) => {
    setImmediate(fn);
  },
};
