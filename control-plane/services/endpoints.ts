// control-plane/services/endpoints.ts -- which units a Service sends
// connections to, and the table every node's proxy serves. Pure: desired
// state and observed reports in, data out.
//
// An endpoint is a unit whose template labels carry every pair of the
// Service's selector, that is bound to a Ready node, reported Running there
// and ready (readiness probes gate it), and that declared the Service
// port's targetPort (by containerPort number or port name): the address is
// its node's address and the host port the agent gave that port. A unit
// that is stopping (Terminating), finished, lost or unbound is never an
// endpoint, so a proxy never sends a new connection to it.

import type { ProxyTable, ServicePort, UnitReport } from '../../shared/model.ts';
import type { ObservedNodeState } from '../registry/node-registry.ts';
import type { DesiredState, ServiceRecord, UnitRecord } from '../store/desired-state.ts';

export interface Endpoint {
  unit: string;
  node: string;
  hostIP: string;
  hostPort: number;
  ready: boolean;
}

export interface PortEndpoints {
  port: ServicePort;
  endpoints: Endpoint[];
}

function matches(u: UnitRecord, selector: Record<string, string>): boolean {
  const labels = u.spec.labels ?? {};
  for (const [k, v] of Object.entries(selector)) if (labels[k] !== v) return false;
  return true;
}

function hostPortFor(report: UnitReport, target: number | string): { hostIP: string; hostPort: number } | undefined {
  const p = report.ports?.find((x) => (typeof target === 'number' ? x.containerPort === target : x.name === target));
  return p ? { hostIP: p.hostIP, hostPort: p.hostPort } : undefined;
}

/** Every unit the Service selects that has the port, ready or not (for `mo get endpoints`). */
export function serviceEndpoints(svc: ServiceRecord, state: DesiredState, observed: ReadonlyMap<string, ObservedNodeState>): PortEndpoints[] {
  const selected: Array<{ u: UnitRecord; report: UnitReport | undefined; nodeReady: boolean }> = [];
  for (const u of state.units.values()) {
    if (!matches(u, svc.manifest.spec.selector) || u.nodeName === null) continue;
    const node = observed.get(u.nodeName);
    selected.push({ u, report: node?.units.get(u.name), nodeReady: node?.ready ?? false });
  }
  return svc.manifest.spec.ports.map((port) => {
    const endpoints: Endpoint[] = [];
    for (const { u, report, nodeReady } of selected) {
      if (!report || report.phase !== 'Running') continue;
      const at = hostPortFor(report, port.targetPort);
      if (!at) continue;
      endpoints.push({ unit: u.name, node: u.nodeName!, ...at, ready: nodeReady && report.ready !== false });
    }
    endpoints.sort((a, b) => (a.unit < b.unit ? -1 : a.unit > b.unit ? 1 : 0));
    return { port, endpoints };
  });
}

/** The table every proxy serves: each Service port's nodePort and its ready endpoints. */
export function proxyTable(state: DesiredState, observed: ReadonlyMap<string, ObservedNodeState>): ProxyTable {
  const services: ProxyTable['services'] = [];
  for (const svc of [...state.services.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const ports = serviceEndpoints(svc, state, observed).map(({ port, endpoints }) => {
      const out: ProxyTable['services'][number]['ports'][number] = {
        nodePort: port.nodePort!,
        endpoints: endpoints.filter((e) => e.ready).map((e) => ({ ip: e.hostIP, port: e.hostPort, unit: e.unit })),
      };
      if (port.name !== undefined) out.name = port.name;
      return out;
    });
    services.push({ name: svc.name, ports });
  }
  return { services };
}
