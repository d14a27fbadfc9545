// shared/ws-mask.ts -- the masking key our own WebSocket clients send with.
//
// RFC 6455 has every client mask its frames with a random key so that a
// script in a browser cannot choose the bytes a transparent proxy on the
// path sees (the cache-poisoning attack of section 10.3). Our clients are
// not browsers: a replica dialing a replica, an agent dialing a replica,
// both running code of this project, and the masking buys nothing between
// them. It costs, though: `ws` masks a frame by copying it into a new buffer
// and XORing it byte by byte in JavaScript, and the receiver XORs it back
// (we ship no `bufferutil`): a follower spent ~3% of its busy time in
// `_unmask` taking a leader's appends at 16 concurrent writers.
//
// So our clients send an all-zero key. It is a valid frame (the mask bit is
// set, the key is four zero bytes) that any server reads; `ws` sees the zero
// key on both ends and skips the copy and both XOR passes. The `ws` option
// for this is `generateMask`: it fills a 4-byte buffer before each frame.

/** `generateMask` for `new WebSocket(url, { generateMask })`: the all-zero key. */
export function zeroMask(mask: Buffer): void {
  mask.fill(0);
}
