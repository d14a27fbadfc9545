// shared/ws-frames.ts -- the bytes of a received WebSocket frame, taken so
// that the socket keeps nothing of it.
//
// Why: a replica of a 5,000-agent cluster reads ~6,000 frames a second, and
// ws (8.x) kept two references to each frame after handing it over:
//
// * the receiver's list of the message's fragments. ws swaps in a new list
//   after each message, so the old one (allocated a message earlier, a
//   second ago at 1 Hz, and by then in V8's old generation) dies holding
//   the frame;
// * the frame's 4-byte mask (agents' frames are masked, as clients' must
//   be): a slice of the socket read, which holds that read's whole buffer
//   until the next frame replaces it.
//
// V8's young collections treat every pointer from an old object to a young
// one as live, dead old object or not, so each frame's buffers were copied
// into the old generation and freed only by full collections. A loopback
// probe (5,000 sockets, a heartbeat a second each, decoded as a replica
// does, young generation capped at 2 MiB as replicas then ran) promoted
// 2.5-2.6 MiB/s; with the list emptied, 0.87; with the mask dropped as
// well, 0.02. The fleet bench's replicas promoted ~3 MiB/s and paused for
// up to 0.7 s in the full collections that followed.

import type { RawData, WebSocket } from 'ws';

/**
 * Have `ws` hand this socket's binary messages over as fragment lists,
 * which takeFrame empties. Call before the first message.
 */
export function receiveAsFragments(ws: WebSocket): void {
  ws.binaryType = 'fragments';
}

/**
 * One message's bytes from what a 'message' event handed over: a fragment
 * list (emptied), a Buffer or an ArrayBuffer; joined without a copy when
 * there is one fragment. `socket`, when it is a ws WebSocket, drops the
 * message's mask (see the header); other sockets are left alone.
 */
export function takeFrame(data: RawData, socket?: unknown): Buffer {
  let bytes: Buffer;
  if (Array.isArray(data)) {
    bytes = data.length === 1 ? data[0] : Buffer.concat(data);
    data.length = 0;
  } else {
    bytes = Buffer.isBuffer(data) ? data : Buffer.from(data);
  }
  dropMask(socket);
  return bytes;
}

/**
 * ws keeps the last frame's mask in its receiver's `_mask` until the next
 * masked frame sets it again before reading it; nothing reads it between,
 * so forgetting it after the message is safe. A private field: if a later
 * ws renames it, this does nothing (test/unit/ws-frames.test.ts fails).
 */
function dropMask(socket: unknown): void {
  const receiver = (socket as { _receiver?: { _mask?: unknown } } | null | undefined)?._receiver;
  if (receiver !== undefined && receiver !== null && '_mask' in receiver) receiver._mask = undefined;
}
