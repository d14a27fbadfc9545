// node-agent/runtime/service-proxy.ts -- every node's Service proxy (like
// kube-proxy in userspace mode): for each Service port, a TCP listener on
// the node's address and the Service's nodePort that hands each new
// connection to one of the Service's ready endpoints, round-robin. A failed
// connect, or an endpoint that closes before answering, is retried on the
// next endpoint (each at most once per connection, replaying what the
// client sent) before the client's connection is closed, so a unit that
// died since the last table costs a retry, not an error. The table comes from
// the leader; with no leader the proxy keeps serving the last one it had.

import net from 'node:net';
import type { ProxyTable } from '../../shared/model.ts';

/** How long one connect attempt to an endpoint may take before the next is tried. */
export const CONNECT_TIMEOUT_MS = 1000;
/**
 * Bytes of a connection's start kept for a replay: if an endpoint closes
 * or resets before its first byte back, the connection moves to the next
 * endpoint with what the client sent so far. A request the dying unit had
 * already acted on may thus be seen twice (at least once, like a retry in
 * Envoy's `reset` policy); beyond this size no replay is attempted.
 */
export const MAX_REPLAY_BYTES = 64 * 1024;

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
    // What the client sent before the upstream's first byte: replayed to the
    // next endpoint if this one resets or closes without answering (a unit
    // SIGKILLed while the kernel still held our connect in its backlog).
    const early: Buffer[] = [];
    let earlyBytes = 0;
    let answered = false;
    let upstream: net.Socket | null = null; // the endpoint being tried or used
    let live: net.Socket | null = null; // ... once connected
    client.on('data', (chunk: Buffer) => {
      if (!answered) {
        early.push(chunk);
        earlyBytes += chunk.length;
        if (earlyBytes > MAX_REPLAY_BYTES) answered = true; // too much to replay: no retry after this
      }
      // Before the connect, the chunk waits in `early` (written on connect).
      if (live && !live.destroyed && !live.write(chunk)) client.pause();
    });
    client.on('end', () => upstream?.end());
    client.on('close', () => upstream?.destroy());
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
      const up = net.connect({ host: e.ip, port: e.port });
      upstream = up;
      let connected = false;
      const timer = setTimeout(() => up.destroy(new Error('connect timeout')), CONNECT_TIMEOUT_MS);
      const retryOrFail = (): void => {
        clearTimeout(timer);
        if (upstream !== up) return;
        upstream = null;
        live = null;
        up.destroy();
        if (!answered && !client.destroyed)
          attempt(); // the next endpoint, replaying what was sent
        else client.destroy();
      };
      up.once('connect', () => {
        connected = true;
        clearTimeout(timer);
        this.sockets.add(up);
        live = up;
        for (const chunk of early) up.write(chunk);
        client.resume();
      });
      up.on('drain', () => client.resume());
      up.on('data', (chunk: Buffer) => {
        answered = true;
        early.length = 0;
        if (!client.write(chunk)) up.pause();
      });
      client.on('drain', () => up.resume());
      up.on('end', () => {
        if (answered) client.end();
        else retryOrFail();
      });
      up.on('error', () => {
        if (!connected || !answered) retryOrFail();
        else client.destroy();
      });
      up.on('close', () => {
        this.sockets.delete(up);
        // Closed after answering: let what the client still has to read flush.
        if (answered && upstream === up && !client.writableEnded) client.destroy();
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
