// bench/services.ts -- what a Service's proxy costs: requests per second
// and latency (p50, p99) of a client that opens a new connection per
// request, straight to a unit's host port, against the same through a
// node's proxy (node address + nodePort), in the same run on the same
// cluster; the difference is the proxy's added latency. One unit behind the
// Service so both paths reach the same server.

import http from 'node:http';
import { Cluster, waitFor } from '../test/helpers/cluster.ts';
import { pct } from './cluster.ts';

function once(host: string, port: number): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port, path: '/', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(performance.now() - t0));
    });
    req.on('error', reject);
  });
}

async function load(host: string, port: number, n: number, concurrency: number): Promise<{ rps: number; p50: number; p99: number }> {
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) lat.push(await once(host, port));
    }),
  );
  return { rps: n / ((performance.now() - t0) / 1000), p50: pct(lat, 50), p99: pct(lat, 99) };
}

export async function benchServiceProxy(
  n = 3000,
): Promise<Array<{ concurrency: number; direct: { rps: number; p50: number; p99: number }; proxied: { rps: number; p50: number; p99: number } }>> {
  const nodes = [{ name: 'node-a', capacity: { cpu: 8000, memory: 16384 }, taints: [], labels: {} }];
  const c = await Cluster.start({ nodes });
  try {
    const server = `require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.env.PORT), process.env.HOST_IP)`;
    await c.api('PUT', '/v1/deployments/echo', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'echo' },
      spec: {
        replicas: 1,
        template: {
          metadata: { labels: { app: 'echo' } },
          spec: { containers: [{ name: 'echo', command: ['node', '-e', server], ports: [{ containerPort: 8080 }], readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 } }] },
        },
      },
    });
    await c.api('PUT', '/v1/services/echo', {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'echo' },
      spec: { selector: { app: 'echo' }, ports: [{ port: 80, targetPort: 8080, nodePort: 30090 }] },
    });
    const ep = await waitFor('a ready endpoint', async () => (await c.api('GET', '/v1/endpoints')).json.items[0]?.subsets[0].addresses[0], 30000, 100);
    const nodeIp = c.nodeAddress('node-a');
    await waitFor('the proxy answering', async () => (await once(nodeIp, 30090).catch(() => -1)) >= 0, 10000, 50);
    const out = [];
    for (const concurrency of [1, 16]) {
      await load(ep.ip, ep.port, 300, concurrency); // warm up
      const direct = await load(ep.ip, ep.port, n, concurrency);
      const proxied = await load(nodeIp, 30090, n, concurrency);
      out.push({ concurrency, direct, proxied });
    }
    return out;
  } finally {
    await c.stop();
  }
}
