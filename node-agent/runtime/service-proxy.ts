// node-agent/runtime/service-proxy.ts -- every node's Service proxy (like
// kube-proxy in userspace mode): for each Service port, a TCP listener on
// the node's address and the Service's nodePort that hands each new
// connection to one of the Service's ready endpoints, round-robin. A failed
// connect is retried on the next endpoint (each endpoint at most once per
// connection) before the client's connection is closed, so a unit that died
// since the last table costs a retry, not an error. The table comes from
// the leader; with no leader the proxy keeps serving the last one it had.

import net from 'node:net';
import type { ProxyTable } from '../../shared/model.ts';

/** How long one connect attempt to an endpoint may take before the next is tried. */
export const CONNECT_TIMEOUT_MS = 1000;

type Endpoint = ProxyTable['services'][number]['ports'][number]['endpoints'][number];

interface Listener {
  key: string; // service/port
  nodePort: number;
  server: net.Server;
  endpoints: Endpoint[];
  next: number;
}

export class ServiceProxy {
  private readonly listeners = new Map<number, Listener>(); // by nodePort
  private readonly sockets = new Set<net.Socket>();

  constructor(
    private readonly address: string,
    private readonly log: (line: string) => void,
  ) {}

  /** Serve `table`: open listeners for new nodePorts, close those gone, swap endpoints in place. */
  apply(table: ProxyTable): void {
    const wanted = new Map<number, { key: string; endpoints: Endpoint[] }>();
    for (const svc of table.services) for (const p of svc.ports) wanted.set(p.nodePort, { key: `${svc.name}/${p.name ?? p.nodePort}`, endpoints: p.endpoints });
    for (const [port, l] of this.listeners) {
      if (!wanted.has(port)) {
        l.server.close();
        this.listeners.delete(port);
        this.log(`proxy: ${l.key} closed (:${port})`);
      }
    }
    for (const [nodePort, w] of wanted) {
      const l = this.listeners.get(nodePort);
      if (l) {
        l.key = w.key;
        l.endpoints = w.endpoints;
        continue;
      }
      const listener: Listener = { key: w.key, nodePort, endpoints: w.endpoints, next: 0, server: net.createServer((c) => this.accept(listener, c)) };
      listener.server.on('error', (err) => this.log(`proxy: ${listener.key} cannot listen on ${this.address}:${nodePort}: ${err.message}`));
      listener.server.listen(nodePort, this.address, () => this.log(`proxy: ${listener.key} on ${this.address}:${nodePort}`));
      this.listeners.set(nodePort, listener);
    }
  }

  private accept(l: Listener, client: net.Socket): void {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => client.destroy());
    client.pause();
    const tried = new Set<string>();
    const attempt = (): void => {
      const eps = l.endpoints.filter((e) => !tried.has(`${e.ip}:${e.port}`));
      if (eps.length === 0 || client.destroyed) {
        client.destroy();
        return;
      }
      const e = eps[l.next++ % eps.length];
      tried.add(`${e.ip}:${e.port}`);
      const upstream = net.connect({ host: e.ip, port: e.port });
      const timer = setTimeout(() => upstream.destroy(new Error('connect timeout')), CONNECT_TIMEOUT_MS);
      upstream.once('connect', () => {
        clearTimeout(timer);
        upstream.removeAllListeners('error');
        this.sockets.add(upstream);
        upstream.on('close', () => this.sockets.delete(upstream));
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      upstream.once('error', () => {
        clearTimeout(timer);
        upstream.destroy();
        attempt(); // the next endpoint
      });
    };
    attempt();
  }

  close(): void {
    for (const l of this.listeners.values()) l.server.close();
    this.listeners.clear();
    for (const s of this.sockets) s.destroy();
  }
}
