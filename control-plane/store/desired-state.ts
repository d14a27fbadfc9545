// control-plane/store/desired-state.ts -- the replicated desired-state
// machine. Pure and deterministic: every replica applies the same committed
// commands in the same order and ends in the same state. Anything that
// varies (uids, timestamps) is chosen by the proposer and carried IN the
// command, never read here.
//
// It owns: deployments (spec, replicas, generation), units (the scheduler's
// bindings unit -> node, committed BEFORE a spawn is sent), the per-
// deployment name counters (`web-<n>`, n never reused, even across a delete
// and re-create), and the user-set node fields (cordon). Registered node
// info (capacity, taints, labels) goes through the log too, so every replica
// schedules against the same nodes.

import type { DeploymentManifest, NodeInfo, UnitSpec } from '../../shared/model.ts';

export interface SchedulingRecord {
  message: string;
  /** Per-node outcome, trimmed to a named maximum (MAX_RECORDED_NODES). */
  nodes: Array<{ node: string; feasible: boolean; reasons: string[]; scores?: Record<string, number>; total?: number }>;
  at: number;
}

export interface DeploymentRecord {
  name: string;
  uid: string;
  creationTimestamp: number;
  generation: number;
  resourceVersion: number; // log index of the last change
  manifest: DeploymentManifest;
  replicas: number;
  unitSpec: UnitSpec;
  specHash: string;
}

export interface UnitRecord {
  name: string;
  uid: string;
  deployment: string;
  index: number;
  /** null while Pending: no node fits yet (FailedScheduling). */
  nodeName: string | null;
  spec: UnitSpec;
  specHash: string;
  creationTimestamp: number;
  resourceVersion: number;
  scheduling: SchedulingRecord | null;
}

export interface NodeRecord {
  info: NodeInfo;
  unschedulable: boolean;
  registeredAt: number;
  resourceVersion: number;
}

export const MAX_RECORDED_NODES = 16;

export type StoreCommand =
  | { type: 'deployment.apply'; at: number; uid: string; manifest: DeploymentManifest; unitSpec: UnitSpec; specHash: string }
  | { type: 'deployment.scale'; at: number; name: string; replicas: number }
  | { type: 'deployment.delete'; at: number; name: string }
  | { type: 'node.register'; at: number; node: NodeInfo }
  | { type: 'node.cordon'; at: number; name: string; unschedulable: boolean }
  | { type: 'unit.create'; at: number; uid: string; deployment: string; nodeName: string | null; scheduling: SchedulingRecord | null }
  | { type: 'unit.bind'; at: number; name: string; nodeName: string; scheduling: SchedulingRecord | null }
  | { type: 'unit.delete'; at: number; name: string; reason: string }
  | { type: 'noop' };

export type ApplyResult =
  | { ok: true; created?: boolean; name?: string; changed?: boolean }
  | { ok: false; code: 400 | 404 | 409; error: string };

export interface DesiredSnapshot {
  appliedIndex: number;
  deployments: DeploymentRecord[];
  units: UnitRecord[];
  nodes: NodeRecord[];
  counters: Record<string, number>;
}

export type ChangeKind = 'deployment' | 'unit' | 'node';
export type ChangeListener = (kind: ChangeKind, name: string) => void;

export class DesiredState {
  readonly deployments = new Map<string, DeploymentRecord>();
  readonly units = new Map<string, UnitRecord>();
  readonly nodes = new Map<string, NodeRecord>();
  readonly counters = new Map<string, number>();
  appliedIndex = 0;
  private listeners: ChangeListener[] = [];

  onChange(fn: ChangeListener): void {
    this.listeners.push(fn);
  }

  private changed(kind: ChangeKind, name: string): void {
    for (const fn of this.listeners) fn(kind, name);
  }

  /** Apply one committed command at log index `index`. Never throws on a
   *  well-typed command: refusals are results (404/409), applied on every
   *  replica alike. */
  apply(index: number, cmd: StoreCommand): ApplyResult {
    this.appliedIndex = index;
    switch (cmd.type) {
      case 'noop':
        return { ok: true };
      case 'deployment.apply': {
        const name = cmd.manifest.metadata.name;
        const prev = this.deployments.get(name);
        const replicas = cmd.manifest.spec.replicas;
        if (prev) {
          const specChanged = prev.specHash !== cmd.specHash || prev.replicas !== replicas;
          if (!specChanged && JSON.stringify(prev.manifest) === JSON.stringify(cmd.manifest)) return { ok: true, created: false, changed: false };
          prev.manifest = cmd.manifest;
          prev.unitSpec = cmd.unitSpec;
          prev.specHash = cmd.specHash;
          prev.replicas = replicas;
          if (specChanged) prev.generation++;
          prev.resourceVersion = index;
          this.changed('deployment', name);
          return { ok: true, created: false, changed: true };
        }
        this.deployments.set(name, {
          name,
          uid: cmd.uid,
          creationTimestamp: cmd.at,
          generation: 1,
          resourceVersion: index,
          manifest: cmd.manifest,
          replicas,
          unitSpec: cmd.unitSpec,
          specHash: cmd.specHash,
        });
        this.changed('deployment', name);
        return { ok: true, created: true, changed: true };
      }
      case 'deployment.scale': {
        const d = this.deployments.get(cmd.name);
        if (!d) return { ok: false, code: 404, error: `deployments "${cmd.name}" not found` };
        if (d.replicas === cmd.replicas) return { ok: true, changed: false };
        d.replicas = cmd.replicas;
        d.manifest = { ...d.manifest, spec: { ...d.manifest.spec, replicas: cmd.replicas } };
        d.generation++;
        d.resourceVersion = index;
        this.changed('deployment', cmd.name);
        return { ok: true, changed: true };
      }
      case 'deployment.delete': {
        if (!this.deployments.delete(cmd.name)) return { ok: false, code: 404, error: `deployments "${cmd.name}" not found` };
        // Its units stay bound until the reconcile loop unbinds and stops
        // them: deletion of the owner is level-triggered like everything else.
        this.changed('deployment', cmd.name);
        return { ok: true, changed: true };
      }
      case 'node.register': {
        const prev = this.nodes.get(cmd.node.name);
        if (prev && JSON.stringify(prev.info) === JSON.stringify(cmd.node)) return { ok: true, changed: false };
        this.nodes.set(cmd.node.name, {
          info: cmd.node,
          unschedulable: prev?.unschedulable ?? false,
          registeredAt: prev?.registeredAt ?? cmd.at,
          resourceVersion: index,
        });
        this.changed('node', cmd.node.name);
        return { ok: true, created: !prev, changed: true };
      }
      case 'node.cordon': {
        const n = this.nodes.get(cmd.name);
        if (!n) return { ok: false, code: 404, error: `nodes "${cmd.name}" not found` };
        if (n.unschedulable === cmd.unschedulable) return { ok: true, changed: false };
        n.unschedulable = cmd.unschedulable;
        n.resourceVersion = index;
        this.changed('node', cmd.name);
        return { ok: true, changed: true };
      }
      case 'unit.create': {
        const d = this.deployments.get(cmd.deployment);
        if (!d) return { ok: false, code: 404, error: `deployments "${cmd.deployment}" not found` };
        const n = (this.counters.get(cmd.deployment) ?? 0) + 1;
        this.counters.set(cmd.deployment, n);
        const name = `${cmd.deployment}-${n}`;
        this.units.set(name, {
          name,
          uid: cmd.uid,
          deployment: cmd.deployment,
          index: n,
          nodeName: cmd.nodeName,
          spec: d.unitSpec,
          specHash: d.specHash,
          creationTimestamp: cmd.at,
          resourceVersion: index,
          scheduling: cmd.scheduling,
        });
        this.changed('unit', name);
        return { ok: true, created: true, name };
      }
      case 'unit.bind': {
        const u = this.units.get(cmd.name);
        if (!u) return { ok: false, code: 404, error: `units "${cmd.name}" not found` };
        if (u.nodeName !== null) return { ok: false, code: 409, error: `unit ${cmd.name} is already bound to ${u.nodeName}` };
        u.nodeName = cmd.nodeName;
        u.scheduling = cmd.scheduling;
        u.resourceVersion = index;
        this.changed('unit', cmd.name);
        return { ok: true, changed: true };
      }
      case 'unit.delete': {
        if (!this.units.delete(cmd.name)) return { ok: false, code: 404, error: `units "${cmd.name}" not found` };
        this.changed('unit', cmd.name);
        return { ok: true, changed: true };
      }
    }
  }

  snapshot(): DesiredSnapshot {
    return {
      appliedIndex: this.appliedIndex,
      deployments: [...this.deployments.values()],
      units: [...this.units.values()],
      nodes: [...this.nodes.values()],
      counters: Object.fromEntries(this.counters),
    };
  }

  restore(s: DesiredSnapshot): void {
    this.deployments.clear();
    this.units.clear();
    this.nodes.clear();
    this.counters.clear();
    for (const d of s.deployments) this.deployments.set(d.name, d);
    for (const u of s.units) this.units.set(u.name, u);
    for (const n of s.nodes) this.nodes.set(n.info.name, n);
    for (const [k, v] of Object.entries(s.counters)) this.counters.set(k, v);
    this.appliedIndex = s.appliedIndex;
    for (const d of s.deployments) this.changed('deployment', d.name);
    for (const u of s.units) this.changed('unit', u.name);
    for (const n of s.nodes) this.changed('node', n.info.name);
  }

  /** Sum of requests bound to each node (capacity invariant, scheduling). */
  allocatedOn(node: string): { cpu: number; memory: number } {
    let cpu = 0;
    let memory = 0;
    for (const u of this.units.values()) {
      if (u.nodeName === node) {
        cpu += u.spec.resources.cpu;
        memory += u.spec.resources.memory;
      }
    }
    return { cpu, memory };
  }
}
