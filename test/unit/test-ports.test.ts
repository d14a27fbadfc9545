// test/unit/test-ports.test.ts -- the tests' own listeners get ports outside
// the kernel's ephemeral range (test/helpers/ports.ts): a port some
// connection holds as its local port cannot be listened on, shown here.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ephemeralPorts, randomBasePort } from '../helpers/ports.ts';

test('a port held by an outgoing connection cannot be listened on: why test listeners avoid the ephemeral range', async (t) => {
  const server = net.createServer((s) => s.on('error', () => undefined));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  t.after(() => client.destroy());
  await new Promise<void>((resolve) => client.once('connect', resolve));
  const [low, high] = ephemeralPorts();
  assert.ok(client.localPort! >= low && client.localPort! <= high, `local port ${client.localPort} in ${low}-${high}`);
  const second = net.createServer();
  const code = await new Promise<string>((resolve) => {
    second.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    second.listen(client.localPort, '127.0.0.1', () => second.close(() => resolve('listening')));
  });
  assert.equal(code, 'EADDRINUSE');
});

test('randomBasePort keeps base+1 .. base+span out of the ephemeral range, in the wider gap', () => {
  for (let i = 0; i < 2000; i++) {
    const b = randomBasePort(13, [32768, 60999]);
    assert.ok(b >= 10000 && b + 13 < 32768, `${b}`);
    const a = randomBasePort(13, [10000, 30000]);
    assert.ok(a > 30000 && a + 13 <= 65535, `${a}`);
  }
  assert.throws(() => randomBasePort(13, [1024, 65535]), /no 13 ports outside the ephemeral range 1024-65535/);
});

test("ephemeralPorts reads the kernel's range, and falls back to Linux's default", (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-ports-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'ip_local_port_range');
  fs.writeFileSync(file, '40000\t50000\n');
  assert.deepEqual(ephemeralPorts(file), [40000, 50000]);
  fs.writeFileSync(file, 'garbage\n');
  assert.deepEqual(ephemeralPorts(file), [32768, 60999]);
  assert.deepEqual(ephemeralPorts(path.join(dir, 'missing')), [32768, 60999]);
});
