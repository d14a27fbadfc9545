// control-plane/malloc-trim.ts -- glibc's malloc_trim(0), asked for by a
// replica at rest (rest-collect.ts) after its collection has freed a burst's
// buffers.
//
// Why: memory that Node allocates outside V8's heap (the backing stores of
// Buffers and ArrayBuffers, parsers, compiler zones) comes from the C
// library's malloc. glibc gives freed memory back to the system only from
// the top of its heap, so after a burst (10,000 deployments written) the
// space the burst's buffers held stays resident behind a few live ones for
// as long as the replica rests. malloc_trim(0) returns every free page
// inside the heap too. Measured after the big-state fill, 30 s at rest
// (gdb calling it in each replica, ad hoc): the leader 140.5 -> 114.0 MiB
// RSS, the followers 125.4 -> 110.1 and 103.6 -> 89.3. Go's runtime, which
// the Kubernetes control plane runs on, gives free pages back to the
// system in the background the same way (its scavenger).
//
// How: Node has no binding for it, so it is called through ffi-rs (a
// foreign-function interface with a prebuilt binary per platform, ~0.8 MB
// for linux-x64-gnu; loading it cost a bare Node process 3.7 MiB of RSS), loaded only
// the first time a rest asks for a trim. Where it cannot be (another
// platform, a C library without malloc_trim such as musl, the package
// missing from an image), `mallocTrim` returns why, the first rest's log
// line says it, and rests only collect.

import { createRequire } from 'node:module';
import type * as Ffi from 'ffi-rs';

export type TrimResult = { ok: true; rssBefore: number; rssAfter: number; ms: number } | { ok: false; why: string };

let trim: (() => void) | string | null = null;

/**
 * Load ffi-rs's binary for glibc and bind malloc_trim, or say why it cannot
 * be. Its own entry point is not used: to choose between its glibc and musl
 * binaries it calls process.report.getReport(), which lists every handle of
 * the event loop (266 ms with 6,000 sockets open, measured on this machine:
 * a stall of a replica with thousands of agents). Only glibc has
 * malloc_trim, so its glibc binary is the one wanted; on musl it does not
 * load, and that is said. One call of the binding checks it.
 */
function load(): (() => void) | string {
  if (process.platform !== 'linux') return `malloc_trim is glibc's (this is ${process.platform})`;
  try {
    const fromFfi = createRequire(createRequire(import.meta.url).resolve('ffi-rs'));
    const ffi = fromFfi(`@yuuang/ffi-rs-linux-${process.arch}-gnu`) as Pick<typeof Ffi, 'open' | 'load' | 'DataType'>;
    ffi.open({ library: 'libc', path: 'libc.so.6' });
    const params = { library: 'libc', funcName: 'malloc_trim', retType: ffi.DataType.I32, paramsType: [ffi.DataType.I64], paramsValue: [0], freeResultMemory: false };
    const call = () => {
      ffi.load(params);
    };
    call();
    return call;
  } catch (e) {
    return `malloc_trim unavailable: ${String((e as Error).message ?? e).split('\n')[0]}`;
  }
}

/**
 * Give the C library's free pages back to the system now: the process's
 * RSS (bytes) before and after, and how long the call held the loop (the
 * first call loads ffi-rs too, and its figures count that), or why it
 * cannot be done here.
 */
export function mallocTrim(): TrimResult {
  const t0 = performance.now();
  const rssBefore = process.memoryUsage.rss();
  if (trim === null) trim = load();
  else if (typeof trim !== 'string') trim();
  if (typeof trim === 'string') return { ok: false, why: trim };
  return { ok: true, rssBefore, rssAfter: process.memoryUsage.rss(), ms: performance.now() - t0 };
}
