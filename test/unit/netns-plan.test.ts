// test/unit/netns-plan.test.ts -- the pure parts of `npm start -- --netns`
// and `npm run net`: the address plan and names, the ip/tc/iptables command
// lines (every one confined to the cluster's own namespaces and subnet),
// reading our rules back from iptables/tc output, the host-route overlap
// check, the launcher's command lines in a namespace, and the flags of both
// commands. The cleanup guard script run for real (against a fake `ip`) is
// in test/e2e/netns-guard.test.ts.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseLauncherArgs, UsageError } from '../../launcher/args.ts';
import { clusterCommands, serverUrls, shellQuote, type ClusterLayout } from '../../launcher/command-lines.ts';
import { LESSON_NODES } from '../../shared/nodes-file.ts';
import { formatFaults, NetUsageError, parseNetArgs } from '../../netns/cli.ts';
import {
  claimCommands,
  cutOneWay,
  delayOneWay,
  delayRootCommands,
  deleteRuleCommand,
  enterCommand,
  findProcess,
  formatOwner,
  lossOneWay,
  NetnsError,
  overlappingRoutes,
  parseDelay,
  parseDropRules,
  parseLoss,
  parseNetnsList,
  parseOwner,
  parseQdiscs,
  planTopology,
  setupCommands,
  teardownCommands,
  undelayOneWay,
  type NetnsLayout,
  type PlanInput,
} from '../../netns/plan.ts';

const LESSON_PROCESSES: PlanInput['processes'] = [
  { name: 'cp-1', kind: 'control-plane', port: 7001 },
  { name: 'cp-2', kind: 'control-plane', port: 7002 },
  { name: 'cp-3', kind: 'control-plane', port: 7003 },
  { name: 'node-a', kind: 'node-agent' },
  { name: 'node-b', kind: 'node-agent' },
  { name: 'node-c', kind: 'node-agent' },
  { name: 'node-d', kind: 'node-agent' },
];

function lesson(basePort = 7000): NetnsLayout {
  return planTopology({ basePort, processes: LESSON_PROCESSES });
}

function addressesIn(argv: readonly string[]): string[] {
  return argv.flatMap((a) => a.match(/\d+\.\d+\.\d+\.\d+/g) ?? []);
}

describe('netns address plan', () => {
  test('the default cluster on base port 7000 gets 10.213.88.0/24: host .1, replicas .11-.13, agents .21-.24', () => {
    const layout = lesson();
    assert.equal(layout.subnet, '10.213.88.0/24');
    assert.equal(layout.prefix, 'mo-7000-');
    assert.equal(layout.hub, 'mo-7000-hub');
    assert.deepEqual(layout.host, { veth: 'mo-7000-host', address: '10.213.88.1', uplink: 'mo-7000-up' });
    assert.deepEqual(
      layout.processes.map((p) => [p.name, p.netns, p.address, p.hubVeth, p.port]),
      [
        ['cp-1', 'mo-7000-cp-1', '10.213.88.11', 'p0', 7001],
        ['cp-2', 'mo-7000-cp-2', '10.213.88.12', 'p1', 7002],
        ['cp-3', 'mo-7000-cp-3', '10.213.88.13', 'p2', 7003],
        ['node-a', 'mo-7000-node-a', '10.213.88.21', 'p3', undefined],
        ['node-b', 'mo-7000-node-b', '10.213.88.22', 'p4', undefined],
        ['node-c', 'mo-7000-node-c', '10.213.88.23', 'p5', undefined],
        ['node-d', 'mo-7000-node-d', '10.213.88.24', 'p6', undefined],
      ],
    );
  });

  test('every interface name the plan makes in a shared namespace fits the kernel limit of 15 characters', () => {
    const layout = lesson(65535);
    for (const name of [layout.host.veth, layout.host.uplink, ...layout.processes.map((p) => p.hubVeth)]) {
      assert.ok(name.length <= 15, `${name} is ${name.length} characters`);
    }
  });

  test('names that cannot be namespaces, are reserved or repeat are refused with the name in the message', () => {
    const plan = (name: string): NetnsLayout => planTopology({ basePort: 7000, processes: [{ name, kind: 'node-agent' }] });
    assert.throws(
      () => plan('Node_A'),
      (e: Error) => e instanceof NetnsError && e.message.includes('"Node_A"'),
    );
    assert.throws(() => plan('hub'), /"hub" is reserved/);
    assert.throws(() => plan('../etc'), NetnsError);
    assert.throws(
      () =>
        planTopology({
          basePort: 7000,
          processes: [
            { name: 'a', kind: 'node-agent' },
            { name: 'a', kind: 'node-agent' },
          ],
        }),
      /"a" is used twice/,
    );
  });

  test('more agents than one /24 holds are refused, and the last one that fits gets .254', () => {
    const agents = (n: number): PlanInput['processes'] => Array.from({ length: n }, (_, i) => ({ name: `n${i}`, kind: 'node-agent' as const }));
    const full = planTopology({ basePort: 7000, processes: agents(234) });
    assert.equal(full.processes.at(-1)!.address, '10.213.88.254');
    assert.throws(() => planTopology({ basePort: 7000, processes: agents(235) }), /at most 234 node agents/);
  });

  test('an unknown process name is an error that lists the ones there are', () => {
    assert.throws(() => findProcess(lesson(), 'node-z'), /no process "node-z".*cp-1, cp-2, cp-3, node-a/);
  });
});

describe('netns command lines', () => {
  test("building touches only the cluster's own namespaces and addresses inside its subnet", () => {
    const layout = lesson();
    const cmds = [...claimCommands(layout, { pid: 42, startTime: '9' }), ...setupCommands(layout)];
    for (const cmd of cmds) {
      const n = cmd.indexOf('-n');
      if (n !== -1) assert.ok(cmd[n + 1].startsWith('mo-7000-'), `${cmd.join(' ')} enters a namespace not ours`);
      for (const addr of addressesIn(cmd)) assert.ok(addr.startsWith('10.213.88.'), `${cmd.join(' ')} uses ${addr}`);
    }
    // The claim comes first: the host veth pair, with the owner in its alias.
    assert.deepEqual(cmds[0], ['link', 'add', 'mo-7000-host', 'type', 'veth', 'peer', 'name', 'mo-7000-up']);
    assert.deepEqual(cmds[1], ['link', 'set', 'mo-7000-host', 'alias', 'mo-netns-owner pid=42 start=9']);
    // Each process: a veth made inside the hub with its peer born in the process namespace, loopback up, its address.
    assert.ok(cmds.some((c) => c.join(' ') === '-n mo-7000-hub link add p3 type veth peer name eth0 netns mo-7000-node-a'));
    assert.ok(cmds.some((c) => c.join(' ') === '-n mo-7000-node-a link set lo up'));
    assert.ok(cmds.some((c) => c.join(' ') === '-n mo-7000-node-a addr add 10.213.88.21/24 dev eth0'));
    assert.ok(cmds.some((c) => c.join(' ') === 'addr add 10.213.88.1/24 dev mo-7000-host'));
  });

  test('teardown removes the host veth first, then every namespace, the hub last', () => {
    const cmds = teardownCommands(lesson()).map((c) => c.join(' '));
    assert.equal(cmds[0], 'link del mo-7000-host');
    assert.equal(cmds.at(-1), 'netns del mo-7000-hub');
    assert.equal(cmds.length, 1 + 8);
  });

  test('a process enters its namespace with nsenter (network only), or ip netns exec without nsenter', () => {
    assert.deepEqual(enterCommand('mo-7000-cp-1', true), ['nsenter', '--net=/var/run/netns/mo-7000-cp-1', '--']);
    assert.deepEqual(enterCommand('mo-7000-cp-1', false), ['ip', 'netns', 'exec', 'mo-7000-cp-1']);
  });

  test("a cut is a silent DROP in the sender's own namespace, tagged so heal and status find it", () => {
    const layout = lesson();
    const [cp1, nodeA] = [findProcess(layout, 'cp-1'), findProcess(layout, 'node-a')];
    assert.equal(cutOneWay(cp1, nodeA).join(' '), 'ip netns exec mo-7000-cp-1 iptables -w -A OUTPUT -d 10.213.88.21/32 -m comment --comment mo-cut -j DROP');
    assert.equal(
      lossOneWay(nodeA, cp1, 30).join(' '),
      'ip netns exec mo-7000-node-a iptables -w -A OUTPUT -d 10.213.88.11/32 -m statistic --mode random --probability 0.30000000000 -m comment --comment mo-loss -j DROP',
    );
  });

  test('our rules are read back from iptables -S, other rules are left alone, and -D repeats the rule', () => {
    const text = [
      '-P INPUT ACCEPT',
      '-P OUTPUT ACCEPT',
      '-A OUTPUT -d 10.213.88.21/32 -m comment --comment mo-cut -j DROP',
      '-A OUTPUT -d 10.213.88.22/32 -m statistic --mode random --probability 0.30000000000 -m comment --comment mo-loss -j DROP',
      '-A OUTPUT -d 10.213.88.23/32 -j DROP',
    ].join('\n');
    const rules = parseDropRules(text);
    assert.deepEqual(
      rules.map((r) => [r.kind, r.to, r.percent]),
      [
        ['cut', '10.213.88.21', undefined],
        ['loss', '10.213.88.22', 30],
      ],
    );
    const cp1 = findProcess(lesson(), 'cp-1');
    assert.equal(deleteRuleCommand(cp1, rules[0]).join(' '), 'ip netns exec mo-7000-cp-1 iptables -w -D OUTPUT -d 10.213.88.21/32 -m comment --comment mo-cut -j DROP');
  });

  test('a delay is an htb class per destination with a netem leaf, matched by destination address', () => {
    const layout = lesson();
    const [cp2, nodeB] = [findProcess(layout, 'cp-2'), findProcess(layout, 'node-b')];
    assert.deepEqual(delayRootCommands(cp2)[0], ['tc', '-n', 'mo-7000-cp-2', 'qdisc', 'add', 'dev', 'eth0', 'root', 'handle', '1:', 'htb', 'default', '1']);
    const cmds = delayOneWay(cp2, nodeB, 200).map((c) => c.join(' '));
    assert.match(cmds[0], /class add dev eth0 parent 1: classid 1:104 htb/);
    assert.equal(cmds[1], 'tc -n mo-7000-cp-2 qdisc add dev eth0 parent 1:104 handle 104: netem delay 200ms');
    assert.equal(cmds[2], 'tc -n mo-7000-cp-2 filter add dev eth0 parent 1: pref 104 protocol ip u32 match ip dst 10.213.88.22/32 flowid 1:104');
    assert.deepEqual(
      undelayOneWay(cp2, nodeB).map((c) => c.slice(3, 5).join(' ')),
      ['filter del', 'class del'],
    );
    const shown = 'qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0\nqdisc netem 104: parent 1:104 limit 1000 delay 200ms\n';
    assert.deepEqual(parseQdiscs(shown), { hasRoot: true, delays: [{ toOrdinal: nodeB.ordinal, delay: '200ms' }] });
    assert.deepEqual(parseQdiscs('qdisc noqueue 0: root refcnt 2\n'), { hasRoot: false, delays: [] });
  });
});

describe('netns host checks', () => {
  test('a host route that overlaps the subnet is found; default routes and our own veth are not', () => {
    const routes = [
      { dst: 'default', gateway: '192.0.2.1', dev: 'eth0' },
      { dst: '192.0.2.0/24', dev: 'eth0' },
      { dst: '10.213.88.0/24', dev: 'mo-7000-host' },
    ];
    assert.deepEqual(overlappingRoutes(routes, '10.213.88.0/24', 'mo-7000-host'), []);
    assert.deepEqual(overlappingRoutes([...routes, { dst: '10.0.0.0/8', dev: 'tun0' }], '10.213.88.0/24', 'mo-7000-host'), ['10.0.0.0/8 dev tun0']);
    assert.deepEqual(overlappingRoutes([{ dst: '10.213.88.7', dev: 'wg0' }], '10.213.88.0/24', 'x'), ['10.213.88.7 dev wg0']);
    assert.deepEqual(overlappingRoutes([{ dst: '10.213.89.0/24', dev: 'mo-7001-host' }], '10.213.88.0/24', 'x'), []);
  });

  test('ip netns list output gives the names, with or without ids', () => {
    assert.deepEqual(parseNetnsList('mo-7000-hub (id: 7)\nmo-7000-cp-1\n\n'), ['mo-7000-hub', 'mo-7000-cp-1']);
  });

  test('the owner written into the host veth alias reads back, and anything else is no owner', () => {
    assert.deepEqual(parseOwner(formatOwner({ pid: 1234, startTime: '567' })), { pid: 1234, startTime: '567' });
    assert.equal(parseOwner('some admin note'), undefined);
    assert.equal(parseOwner(undefined), undefined);
  });
});

describe('launcher in --netns mode', () => {
  test('--netns is a switch: absent by default, set when given, and takes no value', () => {
    assert.equal(parseLauncherArgs([]).netns, undefined);
    assert.equal(parseLauncherArgs(['--netns', '--base-port', '7100']).netns, true);
    assert.throws(
      () => parseLauncherArgs(['--netns=yes']),
      (e: Error) => e instanceof UsageError && /takes no value/.test(e.message),
    );
  });

  test('each process starts inside its namespace, listens on its address, and peers and agents use those addresses', () => {
    const layout = lesson();
    const network = {
      addresses: Object.fromEntries(layout.processes.map((p) => [p.name, p.address])),
      enter: Object.fromEntries(layout.processes.map((p) => [p.name, enterCommand(p.netns, true)])),
    };
    const cluster: ClusterLayout = {
      nodeExecPath: '/usr/bin/node',
      dataDir: '.mo',
      basePort: 7000,
      replicas: 3,
      token: 't',
      nodes: LESSON_NODES,
      controlPlaneScript: 'dist/control-plane.mjs',
      nodeAgentScript: 'dist/node-agent.mjs',
      network,
    };
    const specs = clusterCommands(cluster);
    const cp1 = specs.find((s) => s.name === 'cp-1')!;
    assert.equal(
      shellQuote(cp1.argv),
      'nsenter --net=/var/run/netns/mo-7000-cp-1 -- /usr/bin/node --max-semi-space-size=16 --no-memory-reducer dist/control-plane.mjs --id cp-1 --listen 10.213.88.11:7001 ' +
        '--peers cp-1=ws://10.213.88.11:7001,cp-2=ws://10.213.88.12:7002,cp-3=ws://10.213.88.13:7003 --data-dir .mo/cp-1 --token t ' +
        // The Kubernetes API (HTTPS, P + 10 + i) on the same namespace address, with the cluster CA of the data dir.
        '--kube-listen 10.213.88.11:7011 --ca-dir .mo',
    );
    const nodeC = specs.find((s) => s.name === 'node-c')!;
    assert.deepEqual(nodeC.argv.slice(0, 4), ['nsenter', '--net=/var/run/netns/mo-7000-node-c', '--', '/usr/bin/node']);
    assert.equal(nodeC.argv[nodeC.argv.indexOf('--control-plane') + 1], 'ws://10.213.88.11:7001,ws://10.213.88.12:7002,ws://10.213.88.13:7003');
    assert.deepEqual(serverUrls(7000, 3, network), ['http://10.213.88.11:7001', 'http://10.213.88.12:7002', 'http://10.213.88.13:7003']);
    // Without a network nothing changes: loopback, no prefix.
    assert.deepEqual(serverUrls(7000, 1), ['http://127.0.0.1:7001']);
  });
});

describe('npm run net', () => {
  test('every command parses with its arguments and values; --data-dir works before or after', () => {
    assert.deepEqual(parseNetArgs(['cut', 'cp-1', 'node-a']), { dataDir: '.mo', command: { op: 'cut', a: 'cp-1', b: 'node-a' } });
    assert.deepEqual(parseNetArgs(['heal', 'cp-1']).command, { op: 'heal-process', a: 'cp-1' });
    assert.deepEqual(parseNetArgs(['delay', 'cp-1', 'node-a', '1.5s', '--data-dir', '/d']), {
      dataDir: '/d',
      command: { op: 'delay', a: 'cp-1', b: 'node-a', delayMs: 1500 },
    });
    assert.deepEqual(parseNetArgs(['--data-dir=/d', 'loss', 'cp-1', 'node-a', '30%']).command, { op: 'loss', a: 'cp-1', b: 'node-a', percent: 30 });
    assert.deepEqual(parseNetArgs(['status']).command, { op: 'status' });
  });

  test('bad usage names its cause', () => {
    assert.throws(
      () => parseNetArgs([]),
      (e: Error) => e instanceof NetUsageError && /a command is missing/.test(e.message),
    );
    assert.throws(() => parseNetArgs(['cut', 'cp-1']), /cut takes 2 argument\(s\), got 1/);
    assert.throws(() => parseNetArgs(['explode']), /unknown command "explode"/);
    assert.throws(() => parseNetArgs(['loss', 'a', 'b', '100%']), /less than 100%/);
    assert.throws(() => parseNetArgs(['delay', 'a', 'b', 'soon']), /a duration like 200ms/);
    assert.throws(() => parseNetArgs(['--force', 'status']), /unknown option --force/);
  });

  test('delays and losses read like people write them', () => {
    assert.equal(parseDelay('200ms'), 200);
    assert.equal(parseDelay('2s'), 2000);
    assert.equal(parseDelay('50'), 50);
    assert.throws(() => parseDelay('0ms'), /more than 0/);
    assert.throws(() => parseDelay('2m'), /a duration/);
    assert.equal(parseLoss('30%'), 30);
    assert.equal(parseLoss('0.5'), 0.5);
    assert.throws(() => parseLoss('0%'), /more than 0%/);
  });

  test('status shows a fault that holds both ways as one line, and a one-way fault with its direction', () => {
    assert.deepEqual(
      formatFaults([
        { from: 'cp-1', to: 'node-a', kind: 'cut' },
        { from: 'node-a', to: 'cp-1', kind: 'cut' },
        { from: 'cp-2', to: 'node-b', kind: 'loss', value: '30%' },
        { from: 'node-b', to: 'cp-2', kind: 'loss', value: '10%' },
      ]),
      ['cp-1 <-> node-a: cut', 'cp-2 -> node-b: loss 30%', 'node-b -> cp-2: loss 10%'],
    );
  });
});
