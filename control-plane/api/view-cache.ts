// control-plane/api/view-cache.ts -- the lists of units and deployments
// rendered for watches and list answers, each object's view and JSON reused
// while the inputs it was made from are unchanged. A watch re-renders its
// resource after every change (watch.ts); without this every unit report
// during a 1,000-unit apply built and stringified all 1,000 unit views, and
// every change beside 10,000 deployments all 10,000 of theirs, on the
// leader's event loop.
//
// An object's inputs are compared by identity and resourceVersion: the
// desired state bumps a record's resourceVersion on every change
// (store/desired-state.ts) and replaces a record on restore, the registry
// replaces a unit's report when anything it shows changes
// (registry/node-registry.ts unitStatus). What depends on the clock is
// never reused: a unit's back-off countdown; a deployment's counts (which
// read the clock for minReadySeconds) are computed afresh each time and are
// part of its key. The renderings equal views.ts's allUnitViews and
// allDeploymentViews exactly (test/unit/view-cache.test.ts), with one
// exception that keeps a list from stopping the loop: a rendering of the
// deployments counts afresh for LIST_COUNTS_BUDGET_MS at most, and shows
// the rest with the counts they last had (deploymentList).

import type { UnitReport } from '../../shared/model.ts';
import { deploymentOfUnitName } from '../events.ts';
import { isQuickFailure } from '../reconcile/reconcile.ts';
import type { NodeRegistry, ObservedNodeState, RegistryChange, Reporters } from '../registry/node-registry.ts';
import type { ChangeKind, DeploymentRecord, DesiredState, UnitRecord } from '../store/desired-state.ts';
import type { ApiObject, DeploymentIndex, ViewSource } from './views.ts';
import { Slicer } from './slicer.ts';
import { compareUnitNames, deploymentCounts, deploymentIndex, deploymentViewOf, observedUnitIndex, orphanUnitView, splitName, unitView } from './views.ts';

/** One object of a list: its name and its view as JSON (only the JSON is kept: 10,000 deployments' views would be ~10 MiB more). */
export interface Rendered {
  name: string;
  text: string;
}

/** One object's JSON, with its name. */
function rendered(name: string, object: ApiObject): Rendered {
  return { name, text: JSON.stringify(object) };
}

/** Objects rendered without a cache (the few nodes, services, endpoints). */
export function renderAll(objects: ApiObject[]): Rendered[] {
  return objects.map((object) => rendered(object.metadata.name, object));
}

/** Renderings by name, kept while their key (the inputs, compared element by element) is the same. */
export class Memo<R = Rendered> {
  private readonly entries = new Map<string, { key: unknown[]; r: R; pass: number }>();
  private pass = 0;
  /** Renderings built so far (the rest were reused). */
  built = 0;

  /** Start a rendering of the whole list; `end()` then forgets the objects it did not ask for. */
  begin(): void {
    this.pass++;
  }

  /** The rendering kept for `name` if its key is `key`, else `build()` (kept under `key`; null: never kept). */
  get(name: string, key: unknown[] | null, build: () => R): R {
    const e = this.entries.get(name);
    if (e && key !== null && sameKey(e.key, key)) {
      e.pass = this.pass;
      return e.r;
    }
    this.built++;
    const r = build();
    if (key === null) this.entries.delete(name);
    else this.entries.set(name, { key, r, pass: this.pass });
    return r;
  }

  end(): void {
    for (const [name, e] of this.entries) if (e.pass !== this.pass) this.entries.delete(name);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Forget `name`'s rendering. */
  forget(name: string): void {
    this.entries.delete(name);
  }

  /** Forget every rendering. */
  clear(): void {
    this.entries.clear();
  }

  /** Whether `r` is the rendering kept for `name`. */
  holds(name: string, r: R): boolean {
    return this.entries.get(name)?.r === r;
  }

  /** The rendering kept for `name`, whatever its key, or undefined. */
  peek(name: string): R | undefined {
    return this.entries.get(name)?.r;
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }
}

/** `each` on every item, in slices of `sliceMs` (slicer.ts, the clock read every `checkEvery` items); `newSlice` is true for the first item of each slice. */
async function inSlices<T>(items: readonly T[], sliceMs: number, each: (item: T, newSlice: boolean) => void, checkEvery?: number): Promise<void> {
  const slicer = new Slicer(sliceMs, undefined, undefined, checkEvery);
  let newSlice = true;
  for (const item of items) {
    if (slicer.due()) {
      await slicer.pause();
      newSlice = true;
    }
    each(item, newSlice);
    newSlice = false;
  }
}

function sameKey(a: unknown[], b: unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

type Counts = ReturnType<typeof deploymentCounts>;

/**
 * Longest a rendering of the deployment list spends counting units afresh.
 * While the 5,000-agent fleet bench placed 50,000 units, every change
 * touched every deployment, so each rendering counted all 50,000 units and
 * their reports in one go: 110-190 ms stops of the leader per list or watch
 * refresh. Past the budget a deployment shows the counts it last had (a few
 * ms old), the stalest are counted first next time, and the caller renders
 * again soon (renderedStale).
 */
export const LIST_COUNTS_BUDGET_MS = 10;

/**
 * These renderings as the Kubernetes API reads them (ViewCache.kubeViews):
 * a pod or a Deployment there is made again only when its /v1 view changed.
 */
export interface KubeViews {
  /** allUnitViews, rendered. */
  units(): Rendered[];
  /** Whether `r` (of units()) is a unit's view made from its binding, and kept: then it shows that binding's node. */
  keptBound(r: Rendered): boolean;
  /** The rendering kept of one unit (its binding's view) or deployment, as last made (it may be behind: a rendering checks). */
  kept(resource: 'units' | 'deployments', name: string): Rendered | undefined;
  /** allDeploymentViews, rendered (counts may be a few ms old: deploymentsStale). */
  deployments(): Rendered[];
  /** One deployment's view, rendered, its counts current; undefined when there is none. */
  deployment(name: string): Rendered | undefined;
  /** The last deployments() showed counts not current: render again soon. */
  deploymentsStale(): boolean;
  /** Render what is not rendered yet, in slices (a first list of 10,000 never stops the loop). */
  warm(resource: 'units' | 'deployments'): Promise<void>;
}

export class ViewCache {
  private readonly bound = new Memo();
  private readonly orphans = new Memo();
  private readonly deployments = new Memo();
  /**
   * With follow(): each deployment's counts as last computed, kept until a
   * change that may touch them (storeChanged, registryChanged) drops them. A
   * list of 50 deployments of 1,000 units each had walked all 50,000 units
   * and their reports at every rendering, in one go: 100-300 ms of the
   * leader at every GET /v1/deployments while the fleet bench placed them.
   * Counts that read the clock (minReadySeconds) are never kept.
   */
  private readonly counts = new Map<string, { c: Counts; at: number }>();
  /** Counts a change dropped, as they were, with when they were made (this.now()): shown by a rendering past its budget. */
  private readonly lastCounts = new Map<string, { c: Counts; at: number }>();
  /** Whether the last deploymentList() showed any of lastCounts: its caller should render again. */
  renderedStale = false;
  private tracking = false;

  /** `budgetMs`: deploymentList's LIST_COUNTS_BUDGET_MS; `now`: its clock in ms. */
  constructor(
    private readonly budgetMs = LIST_COUNTS_BUDGET_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}
  /** The number of nodes observed when the kept counts were made (a node seeded without a change drops them all). */
  private countsNodes = -1;

  /**
   * From now on be told of every change of `state` and `registry`, so
   * counts are kept between renderings and a units rendering makes again
   * only the units changes touched since the last one (units()). The
   * registry also says which nodes report a unit's name.
   */
  follow(state: DesiredState, registry: Pick<NodeRegistry, 'onChange' | 'reportersOf'>): void {
    state.onChange((kind, name) => this.storeChanged(kind, name, state));
    registry.onChange((c) => this.registryChanged(c, state));
    this.reporters = (name) => registry.reportersOf(name);
    this.tracking = true;
  }

  private reporters: (name: string) => Reporters | undefined = () => undefined;

  /** These renderings as the Kubernetes API reads them, each made from `src()` as it is then. */
  kubeViews(src: () => ViewSource): KubeViews {
    return {
      units: () => this.units(src()),
      keptBound: (r) => this.keptBound(r),
      kept: (resource, name) => this.kept(resource, name),
      deployments: () => this.deploymentList(src()),
      deployment: (name) => this.deploymentOne(name, src()),
      deploymentsStale: () => this.renderedStale,
      warm: (resource) => this.warm(resource, src),
    };
  }

  /** A change of the desired state (DesiredState.onChange): the counts of the deployment it touches go. */
  private storeChanged(kind: ChangeKind, name: string, state: DesiredState): void {
    if (kind === 'deployment') {
      this.drop(name);
      if (!state.deployments.has(name)) this.lastCounts.delete(name);
      // A unit's view reads its deployment's back-off (a failed unit's CrashLoopBackOff).
      if (this.lastUnits !== null && !this.unitsAll) for (const u of state.unitsOf(name)?.keys() ?? []) this.unitChanged(u);
    } else if (kind === 'unit') {
      this.unitTouched(name, state);
      this.unitChanged(name);
    } else if (kind === 'all') {
      this.dropAll();
      for (const gone of [...this.lastCounts.keys()]) if (!state.deployments.has(gone)) this.lastCounts.delete(gone);
      this.unitsAll = true;
    }
  }

  /** A change of the observed state (NodeRegistry.onChange): the counts of the deployments it touches go; a node's readiness touches all. */
  private registryChanged(c: RegistryChange, state: DesiredState): void {
    switch (c.type) {
      case 'unit':
        this.drop(c.unit.deployment);
        if (c.previous) this.drop(c.previous.deployment);
        this.unitTouched(c.unit.name, state);
        this.unitChanged(c.unit.name);
        return;
      case 'unit-gone':
        this.drop(c.deployment);
        this.unitTouched(c.name, state);
        this.unitChanged(c.name);
        return;
      case 'node-ready':
      case 'node-not-ready':
      case 'node-registered':
        this.dropAll();
        this.unitsAll = true;
        return;
    }
  }

  /**
   * The last units rendering (when following changes): its objects in
   * order, the names whose view reads the clock, and the sizes it was made
   * at; each name's place and the names shown twice (a binding and another
   * node's report) are found when first needed (while units come, every
   * rendering walks all and never needs them).
   */
  private lastUnits: { out: Rendered[]; places: { at: Map<string, number>; twice: Set<string> } | null; timed: Set<string>; units: number; nodes: number } | null = null;
  /** Units renderings made by walking every unit, and made from the last one and the changes since, units come or gone among them (tests, probes). */
  readonly unitRenderings = { whole: 0, since: 0, comeOrGone: 0 };
  /** Units whose view a change may have touched since lastUnits. */
  private readonly unitsDirty = new Set<string>();
  /** A change since lastUnits that the next rendering cannot take one unit at a time: it walks them all. */
  private unitsAll = true;

  /** Unit `name`'s record or reports changed: the next rendering looks at it (unitsSince). */
  private unitChanged(name: string): void {
    if (this.lastUnits === null || this.unitsAll) return;
    this.unitsDirty.add(name);
    // Most units touched: walking them all is no dearer.
    if (this.unitsDirty.size > this.lastUnits.out.length / 4) this.unitsAll = true;
  }

  /**
   * Whether the units changed since `last` can each be made again alone,
   * and which of them came or went: null when not. A changed unit still has
   * a record, had one in the last rendering, was shown once, and no node but
   * the one it is bound to reports its name (else which report a view shows,
   * and which reports are listed apart, may change). A unit come (a record,
   * not shown before) is reported by no node but its own; a unit gone (no
   * record, shown once from its record before) by none. Anything else (a
   * report without a record, a node come or gone) makes the rendering walk
   * every unit.
   */
  private changesSince(last: NonNullable<ViewCache['lastUnits']>, src: ViewSource): { changed: string[]; come: string[]; gone: string[] } | null {
    if (src.observed.size !== last.nodes) return null;
    if (last.places === null) {
      const at = new Map<string, number>();
      const twice = new Set<string>();
      last.out.forEach((r, i) => {
        if (at.has(r.name)) twice.add(r.name);
        else at.set(r.name, i);
      });
      last.places = { at, twice };
    }
    const changed: string[] = [];
    const come: string[] = [];
    const gone: string[] = [];
    for (const name of this.unitsDirty) {
      const u = src.state.units.get(name);
      const i = last.places.at.get(name);
      const on = this.reporters(name);
      // A unit with a record in the last rendering: its view kept, or made afresh each time (timed).
      const bound = this.bound.has(name) || last.timed.has(name);
      if (i !== undefined && (!bound || last.places.twice.has(name))) return null;
      if (u === undefined) {
        if (on !== undefined) return null; // a report without a record: listed apart
        if (i !== undefined) gone.push(name); // else come and gone again since: nothing to show
        continue;
      }
      // Reported by another node than its binding's, or by more than one (a list): rendered afresh.
      if (on !== undefined && (typeof on !== 'string' || on !== u.nodeName)) return null;
      (i === undefined ? come : changed).push(name);
    }
    if (last.units + come.length - gone.length !== src.state.units.size) return null;
    return { changed, come, gone };
  }

  /** A unit's record or report changed: its record's deployment and the one its name says. */
  private unitTouched(name: string, state: DesiredState): void {
    const record = state.units.get(name)?.deployment;
    if (record !== undefined) this.drop(record);
    const named = deploymentOfUnitName(name);
    if (named !== null) this.drop(named);
  }

  /** `name`'s counts are not current any more: kept aside as they were. */
  private drop(name: string): void {
    const kept = this.counts.get(name);
    if (kept === undefined) return;
    this.counts.delete(name);
    this.lastCounts.set(name, kept);
  }

  private dropAll(): void {
    for (const name of [...this.counts.keys()]) this.drop(name);
  }

  /** `d`'s counts: kept ones when tracking and nothing touched them since, else made now (and kept). */
  private countsOf(d: DeploymentRecord, src: ViewSource, di: DeploymentIndex | undefined): Counts {
    if (!this.tracking || (d.manifest.spec.minReadySeconds ?? 0) > 0) return deploymentCounts(d, src, di);
    if (src.observed.size !== this.countsNodes) {
      this.dropAll();
      this.countsNodes = src.observed.size;
    }
    const kept = this.counts.get(d.name);
    if (kept !== undefined) return kept.c;
    const c = deploymentCounts(d, src, di);
    this.counts.set(d.name, { c, at: this.now() });
    this.lastCounts.delete(d.name);
    return c;
  }

  /** Whether `d` has counts kept (tests, warm()). */
  private hasCounts(d: DeploymentRecord): boolean {
    return this.tracking && (d.manifest.spec.minReadySeconds ?? 0) === 0 && this.counts.has(d.name);
  }

  /** Whether `r` (of units()) is a unit's view made from its binding, and kept (a view that reads the clock is never kept). */
  keptBound(r: Rendered): boolean {
    return this.bound.holds(r.name, r);
  }

  /** The rendering kept of one unit (its binding's view) or deployment, as last made; undefined when none is. */
  kept(resource: 'units' | 'deployments', name: string): Rendered | undefined {
    return (resource === 'units' ? this.bound : this.deployments).peek(name);
  }

  /**
   * allUnitViews(src), rendered. Following changes, a rendering after
   * the last one makes again only the units changes touched since (and
   * those whose view reads the clock): at 50,000 units the walk of all of
   * them, kept or not, was 80-170 ms of the leader per /v1 or Kubernetes
   * list or watch refresh. A change it cannot take one unit at a time (a
   * unit come or gone, a name reported by a node it is not bound to, a
   * node's readiness) makes it walk them all, as without follow().
   */
  units(src: ViewSource): Rendered[] {
    const last = this.lastUnits;
    const changes = last !== null && !this.unitsAll ? this.changesSince(last, src) : null;
    if (last !== null && changes !== null) {
      const since = this.unitsSince(last, src, changes);
      if (since !== null) return since;
    }
    this.unitRenderings.whole++;
    const idx = observedUnitIndex(src.observed);
    const now = src.now ?? Date.now();
    const out: Rendered[] = [];
    const timed = new Set<string>();
    this.bound.begin();
    for (const u of src.state.units.values()) {
      const seen = idx.get(u.name);
      const key = this.unitKey(u, seen, src);
      if (key === null) timed.add(u.name);
      out.push(this.bound.get(u.name, key, () => rendered(u.name, unitView(u, seen, src.observed, src.state.deployments.get(u.deployment), now))));
    }
    this.bound.end();
    this.orphans.begin();
    for (const [name, seen] of idx) {
      if (src.state.units.get(name)?.nodeName === seen.node.name) continue;
      out.push(this.orphans.get(name, [seen.report, seen.node.name, seen.node.ready], () => rendered(name, orphanUnitView(seen.report, seen.node.name, seen.node.ready))));
    }
    this.orphans.end();
    const sorted = this.sorted(out);
    this.unitsDirty.clear();
    if (this.tracking) {
      this.unitsAll = false;
      this.lastUnits = { out: sorted, places: null, timed, units: src.state.units.size, nodes: src.observed.size };
    }
    return sorted;
  }

  /**
   * The last rendering with the units changed since made again, the units
   * gone taken out and the units come put where the order puts them (a
   * copy: a watch may still be reading the last one); null when a unit
   * come has another's place in the order (the same prefix and number: then
   * the order the units were gathered in decides, which only a rendering
   * that walks them all knows). At 50,000 units, a unit come or gone had
   * made a Kubernetes pods watch refresh walk them all: 200-262 ms.
   */
  private unitsSince(last: NonNullable<ViewCache['lastUnits']>, src: ViewSource, changes: { changed: string[]; come: string[]; gone: string[] }): Rendered[] | null {
    // Names come and gone are each listed once (changesSince walks a set).
    const { changed, gone } = changes;
    const come = [...changes.come].sort(compareUnitNames);
    for (let i = 0; i < come.length; i++) {
      const at = placeOf(last.out, come[i]);
      if ((at < last.out.length && compareUnitNames(last.out[at].name, come[i]) === 0) || (i > 0 && compareUnitNames(come[i - 1], come[i]) === 0)) return null;
    }
    this.unitRenderings.since++;
    const out = last.out.slice();
    const now = src.now ?? Date.now();
    const view = (name: string): Rendered => {
      const u = src.state.units.get(name)!;
      // Only the bound node reports the name, if any (changesSince), so that report is the view's.
      const node = u.nodeName === null ? undefined : src.observed.get(u.nodeName);
      const report = node?.units.get(name);
      const seen = node !== undefined && report !== undefined ? { node, report } : undefined;
      const key = this.unitKey(u, seen, src);
      if (key === null) last.timed.add(name);
      else last.timed.delete(name);
      return this.bound.get(name, key, () => rendered(name, unitView(u, seen, src.observed, src.state.deployments.get(u.deployment), now)));
    };
    const again = (name: string): void => {
      out[last.places!.at.get(name)!] = view(name);
    };
    for (const name of changed) again(name);
    for (const name of last.timed) if (!this.unitsDirty.has(name)) again(name);
    for (const i of gone.map((name) => last.places!.at.get(name)!).sort((a, b) => b - a)) out.splice(i, 1);
    for (const name of gone) {
      last.timed.delete(name);
      this.bound.forget(name);
    }
    for (const name of come) out.splice(placeOf(out, name), 0, view(name));
    if (come.length > 0 || gone.length > 0) {
      last.places = null;
      this.unitRenderings.comeOrGone++;
    }
    last.units = src.state.units.size;
    this.unitsDirty.clear();
    last.out = out;
    return out;
  }

  /** The names of the last units rendering as gathered, and the order allUnitViews shows them in. */
  private gathered: string[] = [];
  private order: number[] = [];

  /**
   * Forget every object's JSON and the last units rendering (the counts,
   * small, stay): the next rendering makes each object again. For a replica
   * at rest with no watch open (WatchHub.release): after a list of 10,000
   * deployments these texts are ~18 MiB that nothing reads until the next
   * list, which then renders cold, in slices (warm()).
   */
  release(): void {
    this.bound.clear();
    this.orphans.clear();
    this.deployments.clear();
    this.lastUnits = null;
    this.unitsAll = true;
    this.unitsDirty.clear();
    this.gathered = [];
    this.order = [];
  }

  /**
   * `out` in allUnitViews' order: by name prefix, then number. The same
   * names gathered in the same order sort the same way (the sort is
   * stable), so a rendering without a unit come or gone reuses the last
   * order instead of sorting again (at 20,000 units the sort and its
   * split names were a third of a rendering).
   */
  private sorted(out: Rendered[]): Rendered[] {
    const names = out.map((r) => r.name);
    let same = names.length === this.gathered.length;
    for (let i = 0; same && i < names.length; i++) same = names[i] === this.gathered[i];
    if (!same) {
      const keyed = names.map((name, i) => ({ i, k: splitName(name) }));
      keyed.sort((a, b) => (a.k[0] < b.k[0] ? -1 : a.k[0] > b.k[0] ? 1 : a.k[1] - b.k[1]));
      this.gathered = names;
      this.order = keyed.map((x) => x.i);
    }
    return this.order.map((i) => out[i]);
  }

  /**
   * allDeploymentViews(src), rendered. The deployments whose counts a
   * change dropped are counted afresh, the stalest first, for budgetMs at
   * most; any left show the counts they last had, and renderedStale says so.
   */
  deploymentList(src: ViewSource): Rendered[] {
    // Counts not kept read each deployment's own reports (src.reportsOf), or one index of them all.
    let di: DeploymentIndex | undefined;
    const index = (): DeploymentIndex | undefined => (src.reportsOf ? undefined : (di ??= deploymentIndex(src)));
    const all = [...src.state.deployments.values()];
    this.renderedStale = false;
    const stale = new Set<string>();
    if (this.tracking) {
      const start = this.now();
      const dropped = all.filter((d) => this.lastCounts.has(d.name) && (d.manifest.spec.minReadySeconds ?? 0) === 0);
      dropped.sort((a, b) => this.lastCounts.get(a.name)!.at - this.lastCounts.get(b.name)!.at);
      for (const d of dropped) {
        if (this.now() - start >= this.budgetMs) stale.add(d.name);
        else this.countsOf(d, src, index());
      }
    }
    const out: Rendered[] = [];
    this.deployments.begin();
    for (const d of all.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (stale.has(d.name)) {
        this.renderedStale = true;
        out.push(this.render(d, this.lastCounts.get(d.name)!.c));
      } else out.push(this.deployment(d, src, this.hasCounts(d) ? undefined : index()));
    }
    this.deployments.end();
    return out;
  }

  /**
   * One deployment's rendering, as deploymentList would make it now with
   * its counts current (counted afresh when no kept ones hold, and then
   * kept: a list after it shows the same counts); undefined when there is
   * no such deployment.
   */
  deploymentOne(name: string, src: ViewSource): Rendered | undefined {
    const d = src.state.deployments.get(name);
    return d === undefined ? undefined : this.deployment(d, src, undefined);
  }

  /**
   * Build, in slices of `sliceMs` with a turn of the event loop between,
   * the objects of `resource` not rendered yet (a changed one is left to the
   * rendering, which checks every key anyway): a first list of 10,000
   * deployments is ~250 ms of views and JSON, five election timeouts'
   * worth on a loaded machine. The rendering that follows (synchronous, so
   * one consistent state) reuses all but what changed meanwhile.
   */
  async warm(resource: string, src: () => ViewSource, sliceMs = 8): Promise<void> {
    // Each slice reads the state as it is then; its index is built only if it has something to render.
    let s = src();
    if (resource === 'deployments') {
      // Also the counts not kept: the rendering after this then makes only those touched meanwhile.
      let di: DeploymentIndex | null = null;
      // The clock is read at every deployment: one's counts walk its units, so 32 deployments of
      // 1,000 units (the fleet bench's, whose list it polls every second) were one slice of
      // 145-188 ms in the leader's CPU profile while 50,000 units arrived.
      await inSlices(
        [...s.state.deployments.values()],
        sliceMs,
        (d, newSlice) => {
          if (newSlice) [s, di] = [src(), null];
          if (s.state.deployments.get(d.name) !== d || (this.deployments.has(d.name) && (!this.tracking || this.hasCounts(d)))) return;
          this.deployment(d, s, s.reportsOf ? undefined : (di ??= deploymentIndex(s)));
        },
        1,
      );
    } else if (resource === 'units') {
      // One index of the reports for the whole warm-up, not one per slice (each is a walk of every
      // report: per slice, 50,000 units took half a minute). A report that came since is seen by the
      // rendering's key check, which makes that unit again.
      let idx: ReturnType<typeof observedUnitIndex> | null = null;
      await inSlices([...s.state.units.values()], sliceMs, (u, newSlice) => {
        if (newSlice) s = src();
        if (s.state.units.get(u.name) !== u || this.bound.has(u.name)) return;
        const seen = (idx ??= observedUnitIndex(s.observed)).get(u.name);
        const key = this.unitKey(u, seen, s);
        if (key !== null) this.bound.get(u.name, key, () => rendered(u.name, unitView(u, seen, s.observed, s.state.deployments.get(u.deployment), s.now ?? Date.now())));
      });
    }
  }

  /** A deployment's rendering: its view is made from its record and its counts (which read the clock). */
  private deployment(d: DeploymentRecord, src: ViewSource, di: DeploymentIndex | undefined): Rendered {
    return this.render(d, this.countsOf(d, src, di));
  }

  private render(d: DeploymentRecord, c: Counts): Rendered {
    return this.deployments.get(d.name, [d, d.resourceVersion, c.replicas, c.updated, c.ready, c.available, c.backoff, c.oldAlive], () => rendered(d.name, deploymentViewOf(d, c)));
  }

  /** What a bound unit's view is made from; null when it reads the clock (never reused). */
  private unitKey(u: UnitRecord, seen: { node: ObservedNodeState; report: UnitReport } | undefined, src: ViewSource): unknown[] | null {
    const d = src.state.deployments.get(u.deployment);
    const node = u.nodeName ? src.observed.get(u.nodeName) : undefined;
    const report = seen && seen.node.name === u.nodeName ? seen.report : undefined;
    const lost = u.nodeName !== null && node?.ready !== true;
    // A unit backing off shows a countdown: rendered afresh every time.
    const timed = report !== undefined && !lost && d?.backoff != null && isQuickFailure(report);
    return timed ? null : [u, u.resourceVersion, report, lost];
  }

  /** Objects held, and views built so far (for tests: what was forgotten, what was reused). */
  get size(): { units: number; deployments: number; unitsBuilt: number; deploymentsBuilt: number } {
    return {
      units: this.bound.size + this.orphans.size,
      deployments: this.deployments.size,
      unitsBuilt: this.bound.built + this.orphans.built,
      deploymentsBuilt: this.deployments.built,
    };
  }
}

/** The first place in `list` (in allUnitViews' order) whose name does not come before `name`. */
function placeOf(list: readonly Rendered[], name: string): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareUnitNames(list[mid].name, name) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
