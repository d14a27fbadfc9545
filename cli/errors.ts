// cli/errors.ts -- the two ways `mo` fails, as named error classes with the
// exit status each one maps to (docs/contract.md: 1 the request failed, 2 bad usage).
// mo.ts catches them at the top and prints exactly one line on stderr.

/** Bad usage: unknown command or flag, missing argument, bad value. Exit 2 (shared/usage.ts, the one class for every command line). */
export { UsageError } from '../shared/usage.ts';

/**
 * The request failed: the server refused it, no replica was reachable, or the
 * input file could not be read. Exit 1. `message` is the one line the user
 * sees after `error: `.
 */
export class RequestError extends Error {
  readonly exitCode = 1;
  override readonly name: string = 'RequestError';
}

/** The server answered with an error status; `message` is its `{"error"}` text. */
export class ApiError extends RequestError {
  override readonly name = 'ApiError';
  constructor(
    message: string,
    readonly status: number,
    readonly url: string,
  ) {
    super(message);
  }
}
