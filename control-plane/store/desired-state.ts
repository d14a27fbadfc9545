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

import { shareStrings } from './share-strings.ts';
import type { DeploymentManifest, NodeInfo, PodTemplate, ServiceManifest, UnitSpec } from '../../shared/model.ts';
import type { SchedulingNodeView, SchedulingView } from '../../shared/api-types.ts';
import { DEFAULT_REVISION_HISTORY_LIMIT, NODE_PORT_MAX, NODE_PORT_MIN, unitSpecHash } from '../../shared/manifest.ts';
import { EventRing, type ClusterEvent, type NewEvent } from '../events.ts';

export interface SchedulingRecord {
  message: string;
  /**
   * Per-node outcome (SchedulingNodeView[]), trimmed to a named maximum
   * (MAX_RECORDED_NODES), as JSON text: one string per unit for the
   * collector to mark instead of about a dozen objects (the list, and each
   * node's object, reasons and scores). The API parses it when it renders
   * the unit (schedulingView).
   */
  nodes: string;
  at: number;
}

/** A record as log entries and snapshots written before SchedulingRecord.nodes was text carry it. */
interface ListedSchedulingRecord {
  message: string;
  nodes: SchedulingNodeView[];
  at: number;
}

/** A unit's scheduling record as the state keeps it, from either form a log entry or snapshot may carry. */
export function compactScheduling(r: SchedulingRecord | ListedSchedulingRecord | null | undefined): SchedulingRecord | null {
  if (r === null || r === undefined) return null;
  return { message: r.message, nodes: typeof r.nodes === 'string' ? r.nodes : JSON.stringify(r.nodes), at: r.at };
}

/** The API's shape of a kept record: its nodes as a list again. */
export function schedulingView(r: SchedulingRecord | null): SchedulingView | null {
  return r === null ? null : { message: r.message, nodes: JSON.parse(r.nodes) as SchedulingNodeView[], at: r.at };
}

/**
 * One revision of a deployment's pod template (Kubernetes keeps one
 * ReplicaSet per revision; here units carry the spec hash instead). A
 * template applied again, by apply or undo, takes a new revision number and
 * leaves its old one, as in Kubernetes.
 */
export interface RevisionRecord {
  revision: number;
  specHash: string;
  unitSpec: UnitSpec;
  template: PodTemplate;
  createdAt: number;
  /** What made it: 'apply', 'undo to revision 2', 'restart'. */
  cause: string;
}

export interface DeploymentCondition {
  type: 'Available' | 'Progressing';
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastUpdateTime: number;
  lastTransitionTime: number;
}

/** What the leader last concluded about a deployment (replicated, so every replica tells it). */
export interface DeploymentStatusRecord {
  observedGeneration: number;
  conditions: DeploymentCondition[];
}

/**
 * Crash-loop back-off of a deployment: its units that fail soon after start
 * are replaced no sooner than `until` (leader clock). Replicated, so a new
 * leader keeps the back-off and every replica shows it.
 */
export interface BackoffRecord {
  /** Consecutive rounds of quick failures. */
  failures: number;
  /** When the current back-off round ends. */
  until: number;
  /** When it was decided. */
  at: number;
  /** The failure that started it: 'exit code 1 after 0.02s'. */
  lastFailure: string;
}

export interface DeploymentRecord {
  name: string;
  uid: string;
  creationTimestamp: number;
  generation: number;
  resourceVersion: number; // log index of the last change
  manifest: DeploymentManifest;
  replicas: number;
  /** The current revision's spec and its hash (what new units run). */
  unitSpec: UnitSpec;
  specHash: string;
  revision: number;
  /** The current revision and up to revisionHistoryLimit older ones, oldest first. */
  revisions: RevisionRecord[];
  status: DeploymentStatusRecord;
  backoff: BackoffRecord | null;
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
  /** The deployment revision whose template it runs. */
  revision: number;
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

export interface ServiceRecord {
  name: string;
  uid: string;
  creationTimestamp: number;
  resourceVersion: number;
  /** As applied, with every nodePort filled in. */
  manifest: ServiceManifest;
}

export type StoreCommand =
  | { type: 'deployment.apply'; at: number; uid: string; manifest: DeploymentManifest; unitSpec: UnitSpec; specHash: string }
  | { type: 'deployment.scale'; at: number; name: string; replicas: number }
  | { type: 'deployment.delete'; at: number; name: string }
  /** Roll back to a revision's template (0: the one before the current). */
  | { type: 'deployment.undo'; at: number; name: string; toRevision: number }
  /** A new revision of the same template (`mo rollout restart`). */
  | { type: 'deployment.restart'; at: number; name: string }
  | { type: 'deployment.pause'; at: number; name: string; paused: boolean }
  /** The leader's conclusions: observed generation, Available/Progressing. */
  /** The leader's conclusions about several deployments, batched (one log entry per flush, not per deployment). */
  | { type: 'deployment.status'; at: number; items: Array<{ name: string; status: DeploymentStatusRecord }> }
  | { type: 'deployment.backoff'; at: number; name: string; backoff: BackoffRecord | null }
  | { type: 'node.register'; at: number; node: NodeInfo }
  | { type: 'node.cordon'; at: number; name: string; unschedulable: boolean }
  /** specHash: run that revision's template (a paused rollout scales the old one); absent: the current. */
  | { type: 'unit.create'; at: number; uid: string; deployment: string; nodeName: string | null; scheduling: SchedulingRecord | ListedSchedulingRecord | null; specHash?: string }
  | { type: 'unit.bind'; at: number; name: string; nodeName: string; scheduling: SchedulingRecord | ListedSchedulingRecord | null }
  | { type: 'unit.delete'; at: number; name: string; reason: string }
  /** Create or update a Service; nodePorts not given are picked here (lowest free), deterministically. */
  | { type: 'service.apply'; at: number; uid: string; manifest: ServiceManifest }
  | { type: 'service.delete'; at: number; name: string }
  /** A batch of the leader's events (see events.ts). */
  | { type: 'events.record'; at: number; events: NewEvent[] }
  | { type: 'noop' };

export type ApplyResult = { ok: true; created?: boolean; name?: string; changed?: boolean; revision?: number } | { ok: false; code: 400 | 404 | 409; error: string };

export interface DesiredSnapshot {
  appliedIndex: number;
  deployments: DeploymentRecord[];
  units: UnitRecord[];
  nodes: NodeRecord[];
  counters: Record<string, number>;
  /** Absent in snapshots written before events were replicated. */
  events?: { seq: number; events: ClusterEvent[] };
  /** Absent in snapshots written before Services existed. */
  services?: ServiceRecord[];
}

/** What changed: one record of a kind, by name; or 'all' (name ''): the whole state was replaced (a snapshot restored), so anything may have, records gone included. */
export type ChangeKind = 'deployment' | 'unit' | 'node' | 'service' | 'all';
export type ChangeListener = (kind: ChangeKind, name: string) => void;

export class DesiredState {
  readonly deployments = new Map<string, DeploymentRecord>();
  readonly units = new Map<string, UnitRecord>();
  /** The same units by deployment (an index kept with `units`: a reconcile pass reads one deployment's without a walk over all). */
  private readonly unitsByDeployment = new Map<string, Map<string, UnitRecord>>();
  /** The requests of the units bound to each node, kept as units come, go and are bound (requestsOn). */
  private readonly requestsByNode = new Map<string, { cpu: number; memory: number }>();
  readonly nodes = new Map<string, NodeRecord>();
  readonly counters = new Map<string, number>();
  readonly services = new Map<string, ServiceRecord>();
  /** The replicated event history (bounded; see events.ts). */
  readonly events = new EventRing();
  appliedIndex = 0;
  private listeners: ChangeListener[] = [];
  private eventListeners: Array<(e: ClusterEvent) => void> = [];

  /** Told of every event as it is applied (watch streams, the live stream). */
  onEvent(fn: (e: ClusterEvent) => void): void {
    this.eventListeners.push(fn);
  }

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
      case 'service.apply': {
        const name = cmd.manifest.metadata.name;
        const prev = this.services.get(name);
        // nodePorts taken by other Services; a port this Service already
        // has stays with it across updates.
        const taken = new Map<number, string>();
        for (const other of this.services.values()) {
          if (other.name === name) continue;
          for (const p of other.manifest.spec.ports) if (p.nodePort !== undefined) taken.set(p.nodePort, other.name);
        }
        const ports = cmd.manifest.spec.ports.map((p) => ({ ...p }));
        for (const p of ports) {
          if (p.nodePort !== undefined && taken.has(p.nodePort)) {
            return { ok: false, code: 409, error: `spec.ports: nodePort ${p.nodePort} of service ${name} is already used by service ${taken.get(p.nodePort)}` };
          }
        }
        const mine = new Set(ports.map((p) => p.nodePort).filter((n): n is number => n !== undefined));
        for (const p of ports) {
          if (p.nodePort !== undefined) continue;
          const kept = prev?.manifest.spec.ports.find((q) => q.port === p.port)?.nodePort;
          if (kept !== undefined && !taken.has(kept) && !mine.has(kept)) {
            p.nodePort = kept;
          } else {
            let n = NODE_PORT_MIN;
            while (n <= NODE_PORT_MAX && (taken.has(n) || mine.has(n))) n++;
            if (n > NODE_PORT_MAX) return { ok: false, code: 409, error: `no free nodePort left in ${NODE_PORT_MIN}..${NODE_PORT_MAX}` };
            p.nodePort = n;
          }
          mine.add(p.nodePort);
        }
        const manifest: ServiceManifest = { ...cmd.manifest, spec: { ...cmd.manifest.spec, ports } };
        if (prev && JSON.stringify(prev.manifest) === JSON.stringify(manifest)) return { ok: true, created: false, changed: false };
        this.services.set(name, { name, uid: prev?.uid ?? cmd.uid, creationTimestamp: prev?.creationTimestamp ?? cmd.at, resourceVersion: index, manifest });
        this.changed('service', name);
        return { ok: true, created: !prev, changed: true };
      }
      case 'service.delete': {
        if (!this.services.delete(cmd.name)) return { ok: false, code: 404, error: `services "${cmd.name}" not found` };
        this.changed('service', cmd.name);
        return { ok: true, changed: true };
      }
      case 'events.record': {
        for (const n of cmd.events) {
          const e = this.events.add(n);
          for (const fn of this.eventListeners) fn(e);
        }
        return { ok: true, changed: true };
      }
      case 'deployment.apply': {
        shareStrings(cmd.unitSpec, cmd.manifest.spec.template);
        const name = cmd.manifest.metadata.name;
        const prev = this.deployments.get(name);
        const replicas = cmd.manifest.spec.replicas;
        if (prev) {
          if (JSON.stringify(prev.manifest) === JSON.stringify(cmd.manifest) && prev.specHash === cmd.specHash) {
            return { ok: true, created: false, changed: false, revision: prev.revision };
          }
          const templateChanged = prev.specHash !== cmd.specHash;
          prev.manifest = cmd.manifest;
          prev.replicas = replicas;
          prev.generation++;
          if (templateChanged) this.newRevision(prev, cmd.unitSpec, cmd.specHash, cmd.manifest.spec.template, cmd.at, 'apply');
          this.trimHistory(prev);
          prev.resourceVersion = index;
          this.changed('deployment', name);
          return { ok: true, created: false, changed: true, revision: prev.revision };
        }
        const d: DeploymentRecord = {
          name,
          uid: cmd.uid,
          creationTimestamp: cmd.at,
          generation: 1,
          resourceVersion: index,
          manifest: cmd.manifest,
          replicas,
          unitSpec: cmd.unitSpec,
          specHash: cmd.specHash,
          revision: 0,
          revisions: [],
          status: { observedGeneration: 0, conditions: [] },
          backoff: null,
        };
        this.newRevision(d, cmd.unitSpec, cmd.specHash, cmd.manifest.spec.template, cmd.at, 'apply');
        this.deployments.set(name, d);
        this.changed('deployment', name);
        return { ok: true, created: true, changed: true, revision: d.revision };
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
      case 'deployment.undo': {
        const d = this.deployments.get(cmd.name);
        if (!d) return { ok: false, code: 404, error: `deployments "${cmd.name}" not found` };
        const target = cmd.toRevision === 0 ? [...d.revisions].reverse().find((r) => r.revision < d.revision) : d.revisions.find((r) => r.revision === cmd.toRevision);
        if (!target) {
          const known = d.revisions.map((r) => r.revision).join(', ');
          return {
            ok: false,
            code: 400,
            error:
              cmd.toRevision === 0
                ? `deployment ${cmd.name} has no previous revision to roll back to (revisions: ${known})`
                : `revision ${cmd.toRevision} of deployment ${cmd.name} not found (revisions: ${known})`,
          };
        }
        if (target.revision === d.revision) return { ok: true, changed: false, revision: d.revision };
        d.manifest = { ...d.manifest, spec: { ...d.manifest.spec, template: target.template } };
        d.generation++;
        this.newRevision(d, target.unitSpec, target.specHash, target.template, cmd.at, `undo to revision ${target.revision}`);
        this.trimHistory(d);
        d.resourceVersion = index;
        this.changed('deployment', cmd.name);
        return { ok: true, changed: true, revision: d.revision };
      }
      case 'deployment.restart': {
        const d = this.deployments.get(cmd.name);
        if (!d) return { ok: false, code: 404, error: `deployments "${cmd.name}" not found` };
        // Like kubectl's restartedAt annotation: a template that differs
        // only in the restart time, so every unit is replaced by a rollout.
        const unitSpec: UnitSpec = { ...d.unitSpec, restartedAt: new Date(cmd.at).toISOString() };
        d.generation++;
        this.newRevision(d, unitSpec, unitSpecHash(unitSpec), d.manifest.spec.template, cmd.at, 'restart');
        this.trimHistory(d);
        d.resourceVersion = index;
        this.changed('deployment', cmd.name);
        return { ok: true, changed: true, revision: d.revision };
      }
      case 'deployment.pause': {
        const d = this.deployments.get(cmd.name);
        if (!d) return { ok: false, code: 404, error: `deployments "${cmd.name}" not found` };
        if ((d.manifest.spec.paused ?? false) === cmd.paused) return { ok: true, changed: false };
        const spec = { ...d.manifest.spec };
        if (cmd.paused) spec.paused = true;
        else delete spec.paused;
        d.manifest = { ...d.manifest, spec };
        d.generation++;
        d.resourceVersion = index;
        this.changed('deployment', cmd.name);
        return { ok: true, changed: true };
      }
      case 'deployment.status': {
        // A deployment deleted meanwhile is skipped, not an error.
        for (const item of cmd.items) {
          const d = this.deployments.get(item.name);
          if (!d) continue;
          d.status = item.status;
          d.resourceVersion = index;
          this.changed('deployment', item.name);
        }
        return { ok: true, changed: true };
      }
      case 'deployment.backoff': {
        const d = this.deployments.get(cmd.name);
        if (!d) return { ok: false, code: 404, error: `deployments "${cmd.name}" not found` };
        d.backoff = cmd.backoff;
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
        const rev = cmd.specHash === undefined ? undefined : d.revisions.find((r) => r.specHash === cmd.specHash);
        if (cmd.specHash !== undefined && !rev) {
          // Scheduled for a spec the deployment no longer keeps: its resources were checked, not the current ones.
          return { ok: false, code: 409, error: `deployment ${cmd.deployment} no longer has the revision (spec ${cmd.specHash}) the unit was scheduled for` };
        }
        const n = (this.counters.get(cmd.deployment) ?? 0) + 1;
        this.counters.set(cmd.deployment, n);
        const name = `${cmd.deployment}-${n}`;
        this.setUnit({
          name,
          uid: cmd.uid,
          deployment: cmd.deployment,
          index: n,
          nodeName: cmd.nodeName,
          spec: rev?.unitSpec ?? d.unitSpec,
          specHash: rev?.specHash ?? d.specHash,
          revision: rev?.revision ?? d.revision,
          creationTimestamp: cmd.at,
          resourceVersion: index,
          scheduling: compactScheduling(cmd.scheduling),
        });
        this.changed('unit', name);
        return { ok: true, created: true, name };
      }
      case 'unit.bind': {
        const u = this.units.get(cmd.name);
        if (!u) return { ok: false, code: 404, error: `units "${cmd.name}" not found` };
        if (u.nodeName !== null) return { ok: false, code: 409, error: `unit ${cmd.name} is already bound to ${u.nodeName}` };
        u.nodeName = cmd.nodeName;
        this.addRequests(u, +1);
        u.scheduling = compactScheduling(cmd.scheduling);
        u.resourceVersion = index;
        this.changed('unit', cmd.name);
        return { ok: true, changed: true };
      }
      case 'unit.delete': {
        if (!this.deleteUnit(cmd.name)) return { ok: false, code: 404, error: `units "${cmd.name}" not found` };
        this.changed('unit', cmd.name);
        return { ok: true, changed: true };
      }
    }
  }

  /** One deployment's units (its name need not be a stored deployment's: a deleted one's units stay until unbound). */
  unitsOf(deployment: string): ReadonlyMap<string, UnitRecord> | undefined {
    return this.unitsByDeployment.get(deployment);
  }

  /** Names of the deployments that have units. */
  deploymentsWithUnits(): IterableIterator<string> {
    return this.unitsByDeployment.keys();
  }

  private setUnit(u: UnitRecord): void {
    const before = this.units.get(u.name);
    if (before) this.addRequests(before, -1);
    this.units.set(u.name, u);
    this.addRequests(u, +1);
    let of = this.unitsByDeployment.get(u.deployment);
    if (!of) this.unitsByDeployment.set(u.deployment, (of = new Map()));
    of.set(u.name, u);
  }

  private deleteUnit(name: string): boolean {
    const u = this.units.get(name);
    if (!u) return false;
    this.addRequests(u, -1);
    this.units.delete(name);
    const of = this.unitsByDeployment.get(u.deployment);
    of?.delete(name);
    if (of?.size === 0) this.unitsByDeployment.delete(u.deployment);
    return true;
  }

  snapshot(): DesiredSnapshot {
    return {
      appliedIndex: this.appliedIndex,
      deployments: [...this.deployments.values()],
      units: [...this.units.values()],
      nodes: [...this.nodes.values()],
      counters: Object.fromEntries(this.counters),
      events: this.events.save(),
      services: [...this.services.values()],
    };
  }

  /** Replace the whole state by a snapshot's (snapshot() or capture()'s shape), in one go. */
  restore(s: DesiredSnapshot): void {
    for (const _ of wholeRecords(s));
    this.swapIn(s);
  }

  /**
   * restore() without a long stop: the snapshot's records are made whole
   * (the shared specs put back, strings shared) with `pause` awaited every
   * 64 records, while this state stays as it was and answers readers; then
   * they replace it in one step, its change notice in the same task, so no
   * reader ever sees half of each. With 85,000 deployments, restore()
   * in one go held an installing follower's loop 230-240 ms (measured),
   * about half of it this preparation (profiled).
   */
  async restoreInSlices(s: DesiredSnapshot, pause: () => Promise<void>): Promise<void> {
    for (const _ of wholeRecords(s)) await pause();
    this.swapIn(s);
  }

  /**
   * The state becomes the snapshot's whole records (restore's last step),
   * and every listener hears it once, as 'all': a notice per record (85,000
   * deployments) was half of this step's time (profiled), and records the
   * snapshot no longer has got none.
   */
  private swapIn(s: DesiredSnapshot): void {
    this.deployments.clear();
    this.units.clear();
    this.unitsByDeployment.clear();
    this.requestsByNode.clear();
    this.nodes.clear();
    this.counters.clear();
    for (const d of s.deployments) this.deployments.set(d.name, d);
    for (const u of s.units) this.setUnit(u);
    for (const n of s.nodes) this.nodes.set(n.info.name, n);
    for (const [k, v] of Object.entries(s.counters)) this.counters.set(k, v);
    this.events.load(s.events);
    this.services.clear();
    for (const svc of s.services ?? []) this.services.set(svc.name, svc);
    this.appliedIndex = s.appliedIndex;
    this.changed('all', '');
  }

  /**
   * Make `unitSpec` the current template. One that is already in the
   * history moves to the new number (Kubernetes: its ReplicaSet is adopted
   * again), so its running units count as updated. A new template resets
   * the crash-loop back-off: the next failure is a new story.
   */
  private newRevision(d: DeploymentRecord, unitSpec: UnitSpec, specHash: string, template: PodTemplate, at: number, cause: string): void {
    const next = d.revisions.reduce((m, r) => Math.max(m, r.revision), d.revision) + 1;
    d.revisions = d.revisions.filter((r) => r.specHash !== specHash);
    d.revisions.push({ revision: next, specHash, unitSpec, template, createdAt: at, cause });
    d.unitSpec = unitSpec;
    d.specHash = specHash;
    d.revision = next;
    d.backoff = null;
  }

  /** Keep the current revision and revisionHistoryLimit older ones. */
  private trimHistory(d: DeploymentRecord): void {
    const limit = d.manifest.spec.revisionHistoryLimit ?? DEFAULT_REVISION_HISTORY_LIMIT;
    const old = d.revisions.filter((r) => r.revision !== d.revision);
    const keep = new Set(old.slice(Math.max(0, old.length - limit)).map((r) => r.revision));
    d.revisions = d.revisions.filter((r) => r.revision === d.revision || keep.has(r.revision));
  }

  /**
   * The requests of the units bound to `node`, from the index kept as units
   * come, go and are bound: O(1), where the scan below is O(units) (the
   * scheduler's snapshot asked it for every node at every pass: 50-300 ms at
   * 50,000 units). A copy.
   */
  requestsOn(node: string): { cpu: number; memory: number } {
    const r = this.requestsByNode.get(node);
    return r ? { cpu: r.cpu, memory: r.memory } : { cpu: 0, memory: 0 };
  }

  private addRequests(u: UnitRecord, sign: 1 | -1): void {
    if (u.nodeName === null) return;
    let r = this.requestsByNode.get(u.nodeName);
    if (!r) this.requestsByNode.set(u.nodeName, (r = { cpu: 0, memory: 0 }));
    r.cpu += sign * u.spec.resources.cpu;
    r.memory += sign * u.spec.resources.memory;
    if (r.cpu === 0 && r.memory === 0) this.requestsByNode.delete(u.nodeName);
  }

  /** Sum of requests bound to a node, by a scan of every unit: what checkers compare requestsOn (and capacity) against. */
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

/**
 * Make a snapshot's records whole, in place (restore's preparation): every
 * deployment, then every unit. Yields after every 64 records, so that a
 * caller may pause there (restoreInSlices) or not (restore).
 */
function* wholeRecords(s: DesiredSnapshot): Generator<void, void, void> {
  const byName = new Map<string, DeploymentRecord>();
  for (let i = 0; i < s.deployments.length; i++) {
    byName.set(s.deployments[i].name, (s.deployments[i] = wholeDeployment(s.deployments[i])));
    if ((i & 63) === 63) yield;
  }
  for (let i = 0; i < s.units.length; i++) {
    s.units[i] = wholeUnit(s.units[i], byName);
    if ((i & 63) === 63) yield;
  }
}

/** A deployment record from a snapshot as the state holds it: upgraded, its shared revisions filled in. */
function wholeDeployment(d: DeploymentRecord): DeploymentRecord {
  return unshareRevisions(upgradeDeployment(d));
}

/** A unit record from a snapshot as the state holds it: a spec left out (null) is its revision's, of the snapshot's deployment (`byName`). */
function wholeUnit(u: UnitRecord, byName: ReadonlyMap<string, DeploymentRecord>): UnitRecord {
  return {
    ...u,
    spec: u.spec ?? sharedUnitSpec(u, byName), // null: shared (snapshot-slices.ts)
    revision: u.revision ?? 1,
    scheduling: compactScheduling(u.scheduling as SchedulingRecord | ListedSchedulingRecord | null),
  };
}

/** The spec a snapshot left out of a unit (snapshot-slices.ts capture()): its revision's. */
function sharedUnitSpec(u: UnitRecord, byName: ReadonlyMap<string, DeploymentRecord>): UnitSpec {
  const spec = byName.get(u.deployment)?.revisions.find((r) => r.specHash === u.specHash)?.unitSpec;
  if (spec === undefined) throw new Error(`snapshot: unit ${u.name} has no spec and deployment ${u.deployment} no revision ${u.specHash} to take it from`);
  return spec;
}

/** A snapshot's revisions with a null unitSpec or template share the deployment's current ones (snapshot-slices.ts capture()). */
function unshareRevisions(d: DeploymentRecord): DeploymentRecord {
  for (const r of d.revisions) {
    r.unitSpec ??= d.unitSpec;
    r.template ??= d.manifest.spec.template;
    if (r.unitSpec !== d.unitSpec) shareStrings(r.unitSpec, r.template);
  }
  shareStrings(d.unitSpec, d.manifest.spec.template);
  return d;
}

/** A deployment record from a snapshot written before revisions existed. */
function upgradeDeployment(d: DeploymentRecord): DeploymentRecord {
  if (d.revisions !== undefined) return d;
  const revision = 1;
  return {
    ...d,
    revision,
    revisions: [{ revision, specHash: d.specHash, unitSpec: d.unitSpec, template: d.manifest.spec.template, createdAt: d.creationTimestamp, cause: 'apply' }],
    status: { observedGeneration: 0, conditions: [] },
    backoff: null,
  };
}
