// node-agent/runtime/ports.ts -- host ports for units' declared ports. Units
// share their node's network, so each declared containerPort gets a host
// port of its own from the agent's range: never one another unit holds,
// never one something on the machine already listens on (read from
// /proc/net/tcp and tcp6, synchronously, so a spawn never waits). Released
// when the unit ends.

import fs from 'node:fs';
import type { ContainerPort, UnitPortStatus } from '../../shared/model.ts';

/** Local ports in LISTEN state on this machine (any address). */
export function listeningPorts(): Set<number> {
  const out = new Set<number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st ...; st 0A = LISTEN
      if (f.length > 3 && f[3] === '0A') out.add(parseInt(f[1].split(':')[1], 16));
    }
  }
  return out;
}

export class PortAllocator {
  private readonly held = new Map<string, number[]>(); // unit -> ports
  private readonly taken = new Set<number>();
  private next: number;

  constructor(
    private readonly address: string,
    private readonly range: { min: number; max: number },
    private readonly inUse: () => Set<number> = listeningPorts,
  ) {
    this.next = range.min;
  }

  /** Host ports for a unit's declared ports; an error string when the range is exhausted. */
  allocate(unit: string, ports: readonly ContainerPort[] | undefined): UnitPortStatus[] | string {
    if (!ports || ports.length === 0) return [];
    const existing = this.held.get(unit);
    if (existing) this.release(unit);
    const busy = this.inUse();
    const out: UnitPortStatus[] = [];
    const size = this.range.max - this.range.min + 1;
    for (const p of ports) {
      let found = -1;
      for (let i = 0; i < size; i++) {
        const candidate = this.next;
        this.next = this.next >= this.range.max ? this.range.min : this.next + 1;
        if (!this.taken.has(candidate) && !busy.has(candidate)) {
          found = candidate;
          break;
        }
      }
      if (found < 0) {
        for (const o of out) this.taken.delete(o.hostPort);
        return `no free host port in ${this.range.min}-${this.range.max} for ${unit}`;
      }
      this.taken.add(found);
      const status: UnitPortStatus = { containerPort: p.containerPort, hostPort: found, hostIP: this.address };
      if (p.name !== undefined) status.name = p.name;
      out.push(status);
    }
    this.held.set(
      unit,
      out.map((o) => o.hostPort),
    );
    return out;
  }

  release(unit: string): void {
    for (const p of this.held.get(unit) ?? []) this.taken.delete(p);
    this.held.delete(unit);
  }
}
