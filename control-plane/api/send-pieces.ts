// control-plane/api/send-pieces.ts -- a big answer (a list of 10,000
// deployments is ~11 MiB of JSON) written a slice at a time. Written in one
// go, the text's UTF-8 length, its encoding and one writev of it into the
// loopback socket held a leader's event loop 300-450 ms (a CPU profile of
// `npm run bench -- --only big-state`: the bench's own list after the fill),
// longer than the election timeout: the followers elected a new leader. Now
// a body over BODY_SLICE_CHARS goes out with chunked transfer encoding, one
// slice per turn of the event loop (waiting for 'drain' when the socket's
// buffer is full), so heartbeats and Raft go on in between. A small one
// keeps its content-length and goes in one write, as before.

import type http from 'node:http';

/** Characters of JSON per write of a big answer (~0.5 ms to encode and write on a slow machine). */
export const BODY_SLICE_CHARS = 128 * 1024;

/**
 * Answer `status` with the body `head + items.join(',') + tail`, in slices
 * when it is big. Resolves once the last slice is handed to the socket, or
 * the client went away (nothing more is written then).
 */
export async function sendPieces(
  res: http.ServerResponse,
  status: number,
  headers: Record<string, string>,
  head: string,
  items: readonly string[],
  tail: string,
  yieldToLoop: () => Promise<void> = () => new Promise<void>((r) => setImmediate(r)),
): Promise<void> {
  let chars = head.length + tail.length + Math.max(0, items.length - 1);
  for (const item of items) chars += item.length;
  if (chars <= BODY_SLICE_CHARS) {
    const text = head + items.join(',') + tail;
    res.writeHead(status, { ...headers, 'content-length': String(Buffer.byteLength(text)) });
    res.end(text);
    return;
  }
  res.writeHead(status, headers);
  let gone = false;
  const onClose = (): void => {
    gone = true;
  };
  res.once('close', onClose);
  try {
    let slice = head;
    for (let i = 0; i < items.length; i++) {
      slice += i === 0 ? items[i] : `,${items[i]}`;
      if (slice.length < BODY_SLICE_CHARS) continue;
      if (!(await writeSlice(res, slice, yieldToLoop, () => gone))) return;
      slice = '';
    }
    slice += tail;
    if (gone) return;
    res.end(slice);
  } finally {
    res.off('close', onClose);
  }
}

/**
 * Write one slice, then let the loop turn, and wait for the socket to drain
 * when its buffer is still full; false once the client is gone. (On
 * loopback the kernel usually takes a whole slice at once, and Node then
 * says 'drain' in the same task: the turn is taken all the same.)
 */
async function writeSlice(res: http.ServerResponse, slice: string, yieldToLoop: () => Promise<void>, gone: () => boolean): Promise<boolean> {
  if (gone() || res.destroyed) return false;
  res.write(slice);
  await yieldToLoop();
  if (res.writableNeedDrain && !gone() && !res.destroyed) {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
  return !gone() && !res.destroyed;
}
