// shared/ws-cork.ts -- the frames a process sends on one WebSocket in one
// synchronous run reach the kernel in two writes at most, the first of
// them at once.
//
// `ws` writes each frame by itself (its header and payload corked
// together, then uncorked): one writev system call per frame, and on the
// other side one wake-up and one read per frame. A node agent starting a
// burst of units sends a Pending report for each spawn command of a batch,
// then Running reports as its spawn server's frames come in several at a
// time; a replica sends the spawn commands of a pass's creates one after
// another. Corking the socket after the first frame of a run and uncorking
// it on the next tick (process.nextTick: before any I/O or timer, so no
// frame waits for anything but the code already running) makes the rest of
// each such run one writev.
//
// The first frame is not held: a lone frame is the urgent kind (a crashed
// unit's report, its replacement's spawn command), and the code that sent
// it goes on in the same run with work that can wait (the agent removes the
// unit's cgroup, the replica records and logs its decision). Corked from
// the first frame, each waited for that work: 1.3-4.7 ms of a crash's
// replacement went between the agent hearing the exit and the replica
// reading its report.
//
// `ws` keeps its socket as `_socket` (not part of its types); a socket it
// does not have (closed) is left alone.

import type { Duplex } from 'node:stream';

const corked = new WeakSet<Duplex>();

/**
 * Send a frame with `send` (a write of it on `ws`, a `ws` WebSocket): the
 * first frame of a synchronous run goes at once, and the socket is then
 * corked until the next tick, so the frames that follow in the run go
 * together. Returns what `send` returns.
 */
export function sendInRun<T>(ws: object, send: () => T): T {
  const socket = (ws as unknown as { _socket?: Duplex | null })._socket;
  if (!socket || socket.destroyed || corked.has(socket)) return send();
  const sent = send();
  corked.add(socket);
  socket.cork();
  process.nextTick(() => {
    corked.delete(socket);
    socket.uncork();
  });
  return sent;
}
