// shared/protocol/codec.ts -- bytes <-> messages for the agent <->
// control-plane socket: the order of checks on an incoming frame: size, msgpack, then the strict
// schema of validate.ts. Transports call decode*() on every frame and treat
// `{ok: false}` as a protocol error (log the one-line reason, close the
// connection); they never look inside an unvalidated frame.
//
// Contract: decode*() never throws, whatever bytes arrive.

import { packFrame, unpackFrame } from '../codec.ts';
import { MAX_FRAME_BYTES, type AgentMessage, type ControlPlaneMessage } from './messages.ts';
import { validateAgentMessage, validateControlPlaneMessage, type Validated } from './validate.ts';

// The msgpack settings both sides share (plain maps, trees, no `undefined`
// extension) are shared/codec.ts's, the one owner of every msgpack setting.

/** One message as one msgpack frame. Throws only if the frame would exceed MAX_FRAME_BYTES (a bug in the sender). */
export function encodeMessage(msg: AgentMessage | ControlPlaneMessage): Buffer {
  const frame = packFrame(msg);
  if (frame.length > MAX_FRAME_BYTES) {
    throw new RangeError(`${msg.type} frame of ${frame.length} bytes exceeds limit ${MAX_FRAME_BYTES}`);
  }
  return frame;
}

function decodeFrame<M>(buf: Uint8Array, validate: (value: unknown) => Validated<M>): Validated<M> {
  try {
    if (!(buf instanceof Uint8Array)) return { ok: false, error: 'frame is not binary data' };
    if (buf.byteLength > MAX_FRAME_BYTES) {
      return { ok: false, error: `frame of ${buf.byteLength} bytes exceeds limit ${MAX_FRAME_BYTES}` };
    }
    if (buf.byteLength === 0) return { ok: false, error: 'empty frame' };
    let value: unknown;
    try {
      value = unpackFrame(buf);
    } catch (err) {
      const detail = err instanceof Error ? err.message.split('\n')[0].slice(0, 120) : 'unknown error';
      return { ok: false, error: `undecodable msgpack frame: ${detail}` };
    }
    return validate(value);
  } catch (err) {
    // Defensive: the validators do not throw, but a protocol error must
    // never take a process down (e.g. a RangeError from a pathological input).
    const detail = err instanceof Error ? err.message.split('\n')[0].slice(0, 120) : 'unknown error';
    return { ok: false, error: `invalid frame: ${detail}` };
  }
}

export function decodeAgentMessage(buf: Uint8Array): { ok: true; msg: AgentMessage } | { ok: false; error: string } {
  return decodeFrame(buf, validateAgentMessage);
}

export function decodeControlPlaneMessage(buf: Uint8Array): { ok: true; msg: ControlPlaneMessage } | { ok: false; error: string } {
  return decodeFrame(buf, validateControlPlaneMessage);
}
