// cli/context.ts -- what every command gets from the entry point: a lazily
// built client (so `mo --help` needs no config), output sinks and the clock.
// Commands write only through these, which keeps them easy to read and test.

import type { Client } from './client.ts';

export interface Context {
  /** Loads the config on first use; throws RequestError when there is none. */
  client(): Client;
  /** stdout */
  out(text: string): void;
  /** stderr, for notices that are not the command's result */
  notice(line: string): void;
  now(): number;
  readStdin(): Promise<string>;
  cwd: string;
}
