// test/unit/service-proxy.test.ts -- a node's Service proxy on real
// loopback sockets: connections spread round-robin over the endpoints, an
// endpoint that refuses or resets before answering costs a retry on the
// next (the request replayed), not an error; a table update swaps the
// endpoints of a live listener; no endpoints: the connection is closed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { ServiceProxy } from '../../node-agent/runtime/service-proxy.ts';
import { waitUntil } from '../helpers/wait.ts';

function server(onConn: (s: net.Socket) => void): Promise<{ port: number; close: () => Promise<void> }> {
  return new Promise((resolve) => {
    const srv = net.createServer(onConn);
    srv.listen(0, '127.0.0.1', () => resolve({ port: (srv.address() as net.AddressInfo).port, close: () => new Promise((r) => srv.close(() => r())) }));
  });
}

/** One request: send `msg`, read until the server closes. */
function ask(port: number, msg: string): Promise<string> {
  return new Promise((resolve) => {
    const c = net.connect({ host: '127.0.0.1', port }, () => c.write(msg));
    let got = '';
    c.on('data', (b) => (got += b));
    c.on('close', () => resolve(got));
    c.on('error', () => {});
  });
}

/** True once a socket listens on 127.0.0.1:port, as the kernel lists it in /proc/net/tcp. */
function listening(port: number): boolean {
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .some((line) => {
      const f = line.trim().split(/\s+/);
      return f[1] === local && f[3] === '0A'; // 0A: LISTEN
    });
}

async function freePort(): Promise<number> {
  const s = await server(() => {});
  await s.close();
  return s.port;
}

test('round-robin over endpoints, retries past a dead one and one that resets before answering, swaps endpoints on update, closes with none', async () => {
  const named = (name: string) => server((s) => s.once('data', (b) => s.end(`${name}:${b}`)));
  const a = await named('a');
  const b = await named('b');
  const resetter = await server((s) => s.destroy()); // accepts, then resets: a unit dying
  const refused = await freePort(); // nothing listens there
  const nodePort = await freePort();
  const proxy = new ServiceProxy('127.0.0.1', () => {});
  try {
    const table = (ports: number[]) => ({ services: [{ name: 'web', ports: [{ nodePort, endpoints: ports.map((p, i) => ({ ip: '127.0.0.1', port: p, unit: `web-${i}` })) }] }] });
    proxy.apply(table([a.port, refused, resetter.port, b.port]));
    await waitUntil(() => listening(nodePort), 10_000, `the proxy listening on ${nodePort}`);
    const answers: string[] = [];
    for (let i = 0; i < 12; i++) answers.push(await ask(nodePort, `req${i}`));
    assert.ok(
      answers.every((x, i) => x === `a:req${i}` || x === `b:req${i}`),
      answers.join(' '),
    );
    assert.ok(answers.some((x) => x.startsWith('a:')) && answers.some((x) => x.startsWith('b:')), 'both live endpoints served');

    proxy.apply(table([b.port]));
    assert.equal(await ask(nodePort, 'x'), 'b:x', 'the update reached the running listener');

    proxy.apply(table([]));
    assert.equal(await ask(nodePort, 'y'), '', 'no endpoints: closed without an answer');
  } finally {
    proxy.close();
    await Promise.all([a.close(), b.close(), resetter.close()]);
  }
});
