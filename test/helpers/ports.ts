// test/helpers/ports.ts -- ports for the listeners tests start (replicas,
// launchers), chosen outside the kernel's ephemeral range. A connection
// made anywhere on the machine takes its local port from that range, and a
// listen on a port some connection holds fails with EADDRINUSE: a replica
// a test kills and starts again on its port could find it taken (CI runs
// many clusters at once, each opening connections all the time).

import fs from 'node:fs';
import { KUBE_PORT_OFFSET } from '../../launcher/command-lines.ts';

const LOWEST = 10000;
const HIGHEST = 65535;

/** The kernel's ephemeral port range (Linux's default when it cannot be read). */
export function ephemeralPorts(file = '/proc/sys/net/ipv4/ip_local_port_range'): [number, number] {
  try {
    const [low, high] = fs.readFileSync(file, 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high) && low <= high) return [low, high];
  } catch {
    // not Linux, or no /proc: the default below
  }
  return [32768, 60999];
}

/**
 * A random base port B such that B+1 .. B+span all lie outside the ephemeral
 * range [low, high]: below it from 10000 up, or above it, whichever gap is wider.
 */
export function randomBasePort(span: number, [low, high]: [number, number] = ephemeralPorts()): number {
  const below: [number, number] = [LOWEST, low - 1 - span];
  const above: [number, number] = [high + 1, HIGHEST - span];
  const [from, to] = below[1] - below[0] >= above[1] - above[0] ? below : above;
  if (to < from) throw new Error(`no ${span} ports outside the ephemeral range ${low}-${high}`);
  return from + Math.floor(Math.random() * (to - from + 1));
}

/**
 * A base port for `npm start -- --base-port B` with up to 3 replicas: B+1..B+3,
 * and B+11..B+13 for the Kubernetes API. Random, so tests running at once
 * rarely share ports, nor the `--netns` subnets derived from them (B % 256).
 */
export function randomLauncherBasePort(): number {
  return randomBasePort(3 + KUBE_PORT_OFFSET);
}
