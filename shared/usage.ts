// shared/usage.ts -- the one error class for bad usage of any command line
// (`mo`, `npm start`, `npm run chaos`, `npm run net`, the agent's and the
// replica's flags): an unknown flag, a missing or bad value. Every entry point
// prints its message as one line and exits 2. shared/flags.ts, which reads
// every command line with node:util parseArgs, throws it in the tool's wording. The older per-tool names
// (ChaosUsageError, NetUsageError) are this class under another name.

/** Bad usage: unknown command or flag, missing argument, bad value. Exit 2. */
export class UsageError extends Error {
  readonly exitCode = 2;
  override readonly name = 'UsageError';
}
