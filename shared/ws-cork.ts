// shared/ws-cork.ts -- the frames a process sends on one WebSocket in one
// synchronous run go to the kernel in one write.
//
// `ws` writes each frame by itself (its header and payload corked
// together, then uncorked): one writev system call per frame, and on the
// other side one wake-up and one read per frame. A node agent starting a
// burst of units sends a Pending report for each spawn command of a batch,
// then Running reports as its spawn server's frames come in several at a
// time; a replica sends the spawn commands of a pass's creates one after
// another. Corking the socket at the first frame of a run and uncorking it
// on the next tick (process.nextTick: before any I/O or timer, so no frame
// waits for anything but the code already running) makes each such run one
// writev.
//
// `ws` keeps its socket as `_socket` (not part of its types); a socket it
// does not have (closed) is left alone.

import type { Duplex } from 'node:stream';

const corked = new WeakSet<Duplex>();

/** Cork the socket under `ws` (a `ws` WebSocket) until the end of the current tick, once per tick. */
export function corkForThisTick(ws: object): void {
  const socket = (ws as unknown as { _socket?: Duplex | null })._socket;
  if (!socket || socket.destroyed || corked.has(socket)) return;
  corked.add(socket);
  socket.cork();
  process.nextTick(() => {
    corked.delete(socket);
    socket.uncork();
  });
}
