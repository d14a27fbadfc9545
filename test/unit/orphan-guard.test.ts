// test/unit/orphan-guard.test.ts -- the orphan guard's clean-up of a
// per-agent cgroup parent (node-agent/runtime/orphan-guard.ts), on plain
// directories: the script empties and removes the parent's child
// directories, then the parent and the `mini-orchestrator` directory above
// it. A parent that cannot be removed at first is tried again for a while,
// so one that empties a moment later is not left behind.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GUARD_PID_FILE, OrphanGuard, waitForPreviousGuard } from '../../node-agent/runtime/orphan-guard.ts';
import { pidAlive } from '../../shared/proc.ts';

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('at EOF the guard removes the parent with its children, retrying a parent that empties only a moment later', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-guard-'));
  const top = path.join(tmp, 'mini-orchestrator');
  const parent = path.join(top, 'node-x.1234');
  fs.mkdirSync(path.join(parent, 'web-1'), { recursive: true });
  fs.mkdirSync(path.join(parent, 'warm@99'));
  // Something that keeps the parent from being removed at first (as a child's removal still finishing does).
  fs.writeFileSync(path.join(parent, 'hold'), '');
  const guard = new OrphanGuard();
  const pid = guard.pid!;
  try {
    guard.addCgroupParent(parent);
    guard.close(); // EOF: the guard cleans up
    await until('the children removed', () => !fs.existsSync(path.join(parent, 'web-1')) && !fs.existsSync(path.join(parent, 'warm@99')));
    assert.ok(pidAlive(pid), 'the guard still tries the parent');
    fs.rmSync(path.join(parent, 'hold'));
    await until('the guard to exit', () => !pidAlive(pid));
    assert.equal(fs.existsSync(parent), false, 'the parent removed once it could be');
    assert.equal(fs.existsSync(top), false, 'and mini-orchestrator, empty, with it');
  } finally {
    if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test("a restarted agent's wait for its predecessor's guard: none without one, timeout while it runs, ended once its pipe closes", async () => {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-guard-wait-'));
  try {
    assert.equal(await waitForPreviousGuard(stateDir, 100), 'none', 'no pid file');
    fs.writeFileSync(path.join(stateDir, GUARD_PID_FILE), `${process.pid}\n`);
    assert.equal(await waitForPreviousGuard(stateDir, 100), 'none', 'a live pid that is no guard (a reused pid)');
    const guard = new OrphanGuard({ pidFile: path.join(stateDir, GUARD_PID_FILE) });
    const pid = guard.pid!;
    assert.equal(fs.readFileSync(path.join(stateDir, GUARD_PID_FILE), 'utf8'), `${pid}\n`);
    assert.equal(await waitForPreviousGuard(stateDir, 200), 'timeout', 'the guard runs while its agent lives');
    const waited = waitForPreviousGuard(stateDir, 10_000);
    guard.close(); // EOF, as when the agent dies: the guard cleans up and exits
    assert.equal(await waited, 'ended');
    assert.ok(!pidAlive(pid), `guard pid ${pid} gone`);
  } finally {
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
});
