// test/helpers/wait.ts -- what the tests of real processes share to wait
// for an event with a deadline, and to kill a process by its pid when it
// may be gone already.

/** Resolves after `ms`: paces a poll; a test waits for its event with waitUntil. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `cond` every 10 ms until it holds; after `timeoutMs` throws, naming `what`. */
export async function waitUntil(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await sleep(10);
  }
}

/** SIGKILLs `pid` if it still runs. No pid (undefined, or 0, which would name this process group) kills nothing. */
export function killQuietly(pid: number | undefined): void {
  if (!pid) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}
