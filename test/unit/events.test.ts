// test/unit/events.test.ts -- the event log's bounds: equal events are
// counted rather than repeated, and one owner (a crash-looping deployment
// whose units get new names every round) cannot push out other objects'
// events however long it runs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventLog, EventRing, MAX_EVENTS, MAX_EVENTS_PER_OWNER, eventOwner, type ClusterEvent, type NewEvent } from '../../control-plane/events.ts';

test('an event equal to one already kept is counted, with its first and last time, and moves to the end', () => {
  let now = 1000;
  const log = new EventLog('cp-1', () => now);
  log.record('Warning', 'Unhealthy', 'Unit', 'web-1', 'readiness probe failed');
  now = 2000;
  log.record('Normal', 'Started', 'Unit', 'web-2', 'started');
  now = 3000;
  log.record('Warning', 'Unhealthy', 'Unit', 'web-1', 'readiness probe failed');
  const list = log.list();
  const again = list[1];
  assert.equal(list.length, 2);
  assert.equal(again.involvedObject.name, 'web-1');
  assert.equal(again.count, 2);
  assert.equal(again.firstTimestamp, 1000);
  assert.equal(again.timestamp, 3000);
});

test("a deployment crash-looping for 10,000 rounds keeps at most MAX_EVENTS_PER_OWNER events and never pushes out another deployment's", () => {
  const log = new EventLog('cp-1', () => 0);
  log.record('Normal', 'Scheduled', 'Unit', 'good-1', 'assigned good-1 to node-a');
  log.record('Normal', 'Started', 'Unit', 'good-1', 'started on node-a');
  for (let i = 1; i <= 10_000; i++) {
    log.record('Normal', 'Scheduled', 'Unit', `bad-${i}`, `assigned bad-${i} to node-b`);
    log.record('Warning', 'BackOff', 'Unit', `bad-${i}`, `Back-off ${i}s restarting failed unit bad-${i}`);
  }
  const list = log.list();
  assert.ok(list.length <= MAX_EVENTS);
  assert.equal(list.filter((e) => e.involvedObject.name.startsWith('bad-')).length, MAX_EVENTS_PER_OWNER);
  assert.ok(
    list.some((e) => e.involvedObject.name === 'good-1' && e.reason === 'Scheduled'),
    "good-1's first event is still there",
  );
  assert.ok(
    list.some((e) => e.involvedObject.name === 'bad-10000'),
    'the newest of the loop is kept',
  );
});

test('owners: a unit belongs to its deployment, other objects to themselves', () => {
  assert.equal(eventOwner('Unit', 'web-17'), 'Deployment/web');
  assert.equal(eventOwner('Unit', 'my-app-3'), 'Deployment/my-app');
  assert.equal(eventOwner('Deployment', 'web'), 'Deployment/web');
  assert.equal(eventOwner('Node', 'node-a'), 'Node/node-a');
});

test('replicated: only the leader records, in batches committed through the store; listeners hear events as they are applied, and every replica applying the log keeps the same ring', async () => {
  const { DesiredState } = await import('../../control-plane/store/desired-state.ts');
  const replicas = [new DesiredState(), new DesiredState()];
  let index = 0;
  let leader = true;
  const heard: string[] = [];
  const log = new EventLog('cp-1', () => 5, {
    ring: replicas[0].events,
    isLeader: () => leader,
    commit: async (events) => {
      index++;
      for (const r of replicas) r.apply(index, { type: 'events.record', at: 5, events });
    },
  });
  replicas[0].onEvent((e) => log.applied(e));
  log.subscribe((e) => heard.push(e.involvedObject.name));
  for (let i = 1; i <= 300; i++) log.record('Normal', 'Scheduled', 'Unit', `web-${i}`, `assigned web-${i}`);
  log.flush();
  await new Promise((r) => setImmediate(r));
  assert.equal(index, 3, '300 events in batches of 128');
  assert.equal(heard.length, 300);
  assert.deepEqual(replicas[1].events.list(), replicas[0].events.list());
  assert.deepEqual(log.list(), replicas[0].events.list());
  // A follower records nothing of its own.
  leader = false;
  log.record('Normal', 'Started', 'Unit', 'web-1', 'started');
  log.flush();
  assert.equal(index, 3);
  // Snapshots carry the ring.
  const restored = new DesiredState();
  restored.restore(replicas[0].snapshot());
  assert.deepEqual(restored.events.list(), replicas[0].events.list());
  log.stop();
});

/** The ring as it was first written (a scan of the newest 400 for an equal event, an owner's oldest by scanning every owner): the model the indexed ring must equal. */
class ScanRing {
  private ring: ClusterEvent[] = [];
  private owners: string[] = [];
  private seq = 0;
  add(n: NewEvent): ClusterEvent {
    const { kind, name } = n.involvedObject;
    const owner = eventOwner(kind, name);
    let count = 1;
    let firstTimestamp = n.timestamp;
    for (let i = this.ring.length - 1; i >= 0 && i >= this.ring.length - MAX_EVENTS_PER_OWNER * 4; i--) {
      const old = this.ring[i];
      if (old.involvedObject.name === name && old.involvedObject.kind === kind && old.reason === n.reason && old.type === n.type && old.message === n.message) {
        count = old.count + 1;
        firstTimestamp = old.firstTimestamp;
        this.remove(i);
        break;
      }
    }
    const e: ClusterEvent = { ...n, involvedObject: { kind, name }, seq: ++this.seq, count, firstTimestamp };
    this.ring.push(e);
    this.owners.push(owner);
    if (this.owners.filter((o) => o === owner).length > MAX_EVENTS_PER_OWNER) this.remove(this.owners.indexOf(owner));
    while (this.ring.length > MAX_EVENTS) this.remove(0);
    return e;
  }
  list(): ClusterEvent[] {
    return this.ring.slice();
  }
  private remove(i: number): void {
    this.ring.splice(i, 1);
    this.owners.splice(i, 1);
  }
}

test('the indexed ring keeps exactly what a scan of the kept events keeps: counts, owners, the window, a snapshot loaded mid-way', () => {
  let state = 20261203;
  const rnd = (n: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state % n;
  };
  const kinds = ['Unit', 'Unit', 'Unit', 'Node', 'Deployment'] as const;
  for (let round = 0; round < 4; round++) {
    const model = new ScanRing();
    let ring = new EventRing();
    // Few names, reasons and messages: many equal events (counted), owners over their 100, and
    // equal events that fell out of the newest 400 (added anew beside the old one). The last
    // round is a fleet's placement: a new unit name every time over 12 deployments, so each
    // owner's oldest goes from the middle of the ring.
    const fleet = round === 3;
    for (let k = 0; k < 6000; k++) {
      const kind = fleet ? 'Unit' : kinds[rnd(kinds.length)];
      const name = fleet ? `d${rnd(12)}-${k}` : kind === 'Unit' ? `d${rnd(4)}-${rnd(150)}` : `${kind.toLowerCase()}-${rnd(30)}`;
      const n: NewEvent = {
        type: rnd(5) === 0 ? 'Warning' : 'Normal',
        reason: `R${rnd(3)}`,
        message: fleet ? `m${rnd(2)}` : `m${rnd(round === 0 ? 2 : 20)}`,
        involvedObject: { kind, name },
        source: 'cp-1',
        timestamp: k,
      };
      assert.deepEqual(ring.add(n), model.add(n), `event ${k} of round ${round}`);
      if (k === 3000) {
        // As a replica restoring a snapshot does: the rest must go on the same.
        const restored = new EventRing();
        restored.load(structuredClone(ring.save()));
        ring = restored;
      }
      if (k % 500 === 0) assert.deepEqual(ring.list(), model.list(), `the ring after event ${k} of round ${round}`);
    }
    assert.deepEqual(ring.list(), model.list());
  }
});
