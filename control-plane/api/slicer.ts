// control-plane/api/slicer.ts -- long work of the API in slices: the loop
// calls due() per item and awaits pause() when it says so, a turn of the
// event loop between slices, so a big list or scrape never holds a replica
// for longer than a slice (heartbeats, Raft and sockets go on meanwhile).

/**
 * Work in slices of `sliceMs`: `due()` is cheap (the clock is read every
 * `checkEvery` calls, 32 by default, for items of a few microseconds);
 * await `pause()` when it says so. Items that may each cost a millisecond
 * or more need the clock read at every one (`checkEvery` 1).
 */
export class Slicer {
  private since: number;
  private calls = 0;
  constructor(
    private readonly sliceMs = 5,
    private readonly now: () => number = () => performance.now(),
    private readonly yieldToLoop: () => Promise<void> = () => new Promise<void>((r) => setImmediate(r)),
    private readonly checkEvery = 32,
  ) {
    this.since = now();
  }
  due(): boolean {
    if (++this.calls % this.checkEvery !== 0) return false;
    return this.now() - this.since >= this.sliceMs;
  }
  async pause(): Promise<void> {
    await this.yieldToLoop();
    this.since = this.now();
  }
}
