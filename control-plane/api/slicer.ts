// control-plane/api/slicer.ts -- long work of the API in slices: the loop
// calls due() per item and awaits pause() when it says so, a turn of the
// event loop between slices, so a big list or scrape never holds a replica
// for longer than a slice (heartbeats, Raft and sockets go on meanwhile).

/** Work in slices of `sliceMs`: `due()` is cheap (the clock is read every 32 calls); await `pause()` when it says so. */
export class Slicer {
  private since: number;
  private calls = 0;
  constructor(
    private readonly sliceMs = 5,
    private readonly now: () => number = () => performance.now(),
    private readonly yieldToLoop: () => Promise<void> = () => new Promise<void>((r) => setImmediate(r)),
  ) {
    this.since = now();
  }
  due(): boolean {
    if (++this.calls % 32 !== 0) return false;
    return this.now() - this.since >= this.sliceMs;
  }
  async pause(): Promise<void> {
    await this.yieldToLoop();
    this.since = this.now();
  }
}
