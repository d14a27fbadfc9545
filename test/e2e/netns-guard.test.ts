// test/e2e/netns-guard.test.ts -- the cleanup guard of `npm start -- --netns`
// (netns/plan.ts, GUARD_SCRIPT) run for real as a /bin/sh process against a
// fake `ip` that records its calls (no root needed): it must survive SIGTERM
// and, at EOF on its stdin (the launcher died), delete the host veth and
// every namespace, the hub last.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { guardArgs, planTopology } from '../../netns/plan.ts';
import { waitUntil } from '../helpers/wait.ts';

const layout = planTopology({
  basePort: 7000,
  processes: [
    { name: 'cp-1', kind: 'control-plane', port: 7001 },
    { name: 'cp-2', kind: 'control-plane', port: 7002 },
    { name: 'cp-3', kind: 'control-plane', port: 7003 },
    { name: 'node-a', kind: 'node-agent' },
    { name: 'node-b', kind: 'node-agent' },
    { name: 'node-c', kind: 'node-agent' },
    { name: 'node-d', kind: 'node-agent' },
  ],
});

/** True once the process ignores SIGTERM (bit 15 of SigIgn in /proc/PID/status). */
function ignoresSigterm(pid: number): boolean {
  const m = /^SigIgn:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m !== null && (BigInt(`0x${m[1]}`) & (1n << 14n)) !== 0n;
}

test('the cleanup guard ignores SIGTERM and, at EOF on its stdin, deletes the host veth and every namespace', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mo-guard-'));
  try {
    const fakeIp = join(dir, 'ip');
    const record = join(dir, 'calls');
    writeFileSync(fakeIp, `#!/bin/sh\necho "$*" >> '${record}'\n`);
    chmodSync(fakeIp, 0o755);
    const guard = spawn('/bin/sh', guardArgs(layout, fakeIp), { stdio: ['pipe', 'ignore', 'ignore'] });
    const exited = new Promise<number | null>((resolve) => guard.once('exit', (code) => resolve(code)));
    try {
      await waitUntil(() => ignoresSigterm(guard.pid!), 10_000, 'the guard to set its trap');
      guard.kill('SIGTERM');
      // A negative check ("SIGTERM does nothing") has no event to wait for: a
      // bounded observation window of 200 ms, then the guard must still be
      // there and must not have called `ip` yet.
      await new Promise((r) => setTimeout(r, 200));
      assert.ok(guard.exitCode === null && guard.signalCode === null, 'the guard survived SIGTERM');
      assert.throws(() => readFileSync(record), /ENOENT/, 'the guard acted before EOF');
      guard.stdin!.end();
      assert.equal(await exited, 0);
    } finally {
      if (guard.exitCode === null && guard.signalCode === null) guard.kill('SIGKILL');
    }
    const calls = readFileSync(record, 'utf8').trim().split('\n');
    assert.equal(calls[0], 'link del mo-7000-host');
    assert.equal(calls.length, 9);
    assert.ok(calls.includes('netns del mo-7000-node-a') && calls.at(-1) === 'netns del mo-7000-hub');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
