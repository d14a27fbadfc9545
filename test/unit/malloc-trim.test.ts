// malloc-trim.ts: the C library's free pages, given back. A burst of
// buffers is made resident and freed behind one that lives on (so glibc
// cannot give the space back from the top of its heap by itself); the
// process's RSS from /proc falls once mallocTrim runs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mallocTrim } from '../../control-plane/malloc-trim.ts';
import { fullCollection } from '../../control-plane/rest-collect.ts';
import { rssMiB } from '../../shared/proc.ts';
import { waitFor } from '../helpers/cluster.ts';

const MiB = 1048576;

test('mallocTrim gives back the pages of freed buffers that glibc keeps resident behind a live one', async () => {
  const first = mallocTrim(); // loads ffi-rs: its own RSS is not what is measured below
  assert.ok(first.ok, first.ok ? '' : first.why);

  // 600 buffers of 96 KiB (under glibc's mmap threshold: from its heap), each written so its pages are resident.
  let burst: Uint8Array[] | null = Array.from({ length: 600 }, () => new Uint8Array(96 * 1024).fill(1));
  const pin = new Uint8Array(96 * 1024).fill(2); // allocated after them, kept: the heap's top stays in use
  const held = process.memoryUsage().arrayBuffers;
  burst = null;
  const collect = fullCollection();
  // V8 frees dead backing stores after the collection, on a thread of its own: wait until it has.
  await waitFor(
    'the burst freed',
    async () => {
      collect();
      return process.memoryUsage().arrayBuffers < held - 50 * MiB || null;
    },
    20000,
    50,
  );
  // RSS from /proc (VmRSS: the figure a user's `ps` shows), not from Node.
  const before = rssMiB(process.pid);
  const r = mallocTrim();
  const after = rssMiB(process.pid);
  assert.ok(r.ok, r.ok ? '' : r.why);
  assert.equal(pin[0], 2);
  assert.ok(before - after > 30, `RSS ${before.toFixed(1)} -> ${after.toFixed(1)} MiB: the ~56 MiB freed should mostly go back`);
  assert.ok(r.rssBefore - r.rssAfter > 30 * MiB, 'its own figures say so too');
});
