// launcher/ports.ts -- "is this port free?" asked the only way that is
// reliable: try to listen on it (127.0.0.1, where the replicas will listen),
// then close at once. A port can still be taken between this check and the
// replica's own listen; the replica then dies and the stream says so.

import { createServer } from 'node:net';

export type PortProblem = { port: number; code: string };

function probe(port: number, host: string): Promise<PortProblem | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve({ port, code: err.code ?? err.message }));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/** The first port in `ports` that cannot be listened on, with the reason code; undefined if all are free. */
export async function firstBusyPort(ports: readonly number[], host = '127.0.0.1'): Promise<PortProblem | undefined> {
  for (const port of ports) {
    const problem = await probe(port, host);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** The one line the user reads when a port is taken. */
export function describePortProblem(problem: PortProblem, basePort: number): string {
  const suggestion = basePort + 100 <= 65000 ? basePort + 100 : 20000;
  if (problem.code === 'EADDRINUSE') {
    return `port ${problem.port} is in use (another cluster running? try --base-port ${suggestion})`;
  }
  if (problem.code === 'EACCES') {
    return `port ${problem.port} needs privileges to listen on (try --base-port ${suggestion})`;
  }
  return `cannot listen on port ${problem.port}: ${problem.code} (try --base-port ${suggestion})`;
}
