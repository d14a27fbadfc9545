// test/unit/launcher-args.test.ts -- the launcher's pure parts: flag parsing
// (defaults, every option, every kind of bad usage naming its cause), the
// exact command lines of replicas and agents, shell quoting, and the line
// splitter/prefixer of the live stream, and that the examples the banner
// points at are valid.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { parseLauncherArgs, UsageError } from '../../launcher/args.ts';
import { clusterCommands, controlPlaneCommands, formatTaint, nodeAgentCommands, serverUrls, shellQuote, type ClusterLayout } from '../../launcher/command-lines.ts';
import { LineSplitter, LogStream, shouldUseColor } from '../../launcher/stream.ts';
import { Supervisor } from '../../launcher/supervisor.ts';
import { parseManifestObject, validateManifest } from '../../shared/manifest.ts';
import type { NodeInfo } from '../../shared/model.ts';
import { LESSON_NODES, parseNodesFile } from '../../shared/nodes-file.ts';

describe('launcher flags', () => {
  test('no flags give the docs/contract.md defaults: .mo, base port 7000, 3 replicas, the four default nodes, no restarts', () => {
    assert.deepEqual(parseLauncherArgs([]), { dataDir: '.mo', basePort: 7000, replicas: 3, help: false });
  });

  test('every option is read, in both the "--flag value" and "--flag=value" forms', () => {
    assert.deepEqual(parseLauncherArgs(['--data-dir', '/tmp/x', '--base-port=7100', '--replicas', '5', '--nodes=n.yaml', '--restart-after', '2.5']), {
      dataDir: '/tmp/x',
      basePort: 7100,
      replicas: 5,
      nodesFile: 'n.yaml',
      restartAfterMs: 2500,
      help: false,
    });
  });

  test('--help and -h ask for the usage text', () => {
    assert.equal(parseLauncherArgs(['--help']).help, true);
    assert.equal(parseLauncherArgs(['-h']).help, true);
  });

  const bad: Array<[string, string[], RegExp]> = [
    ['an unknown option is named', ['--replica', '3'], /^unknown option --replica \(see --help\)$/],
    ['an unknown short option is named', ['-x'], /^unknown option -x/],
    ['a stray word is named', ['start'], /^unexpected argument "start"/],
    ['a flag without its value says so', ['--base-port'], /^--base-port needs a value$/],
    ['a flag followed by another flag says its value is missing', ['--data-dir', '--replicas', '3'], /^--data-dir needs a value$/],
    ['a replica count other than 1, 3 or 5 is refused', ['--replicas', '2'], /^--replicas must be 1, 3 or 5/],
    ['a non-numeric replica count is refused', ['--replicas', 'three'], /^--replicas wants a whole number, got "three"$/],
    ['a base port that is not a number is refused', ['--base-port', '70a0'], /^--base-port wants a whole number/],
    ['a base port of 0 is refused', ['--base-port', '0'], /^--base-port must be between 1 and 65534/],
    ['a base port too close to 65535 for the replicas is refused', ['--base-port', '65533'], /leaves no room for 3 replicas/],
    ['a zero restart delay is refused', ['--restart-after', '0'], /^--restart-after must be more than 0/],
    ['a negative-looking restart delay is refused', ['--restart-after', '-1'], /^--restart-after wants seconds/],
    ['a restart delay with units is refused', ['--restart-after', '5s'], /^--restart-after wants seconds \(like 2 or 0\.5\), got "5s"$/],
    ['an empty data dir is refused', ['--data-dir='], /^--data-dir must not be empty$/],
  ];
  for (const [name, argv, message] of bad) {
    test(`bad usage: ${name}, in one line`, () => {
      assert.throws(
        () => parseLauncherArgs(argv),
        (err: unknown) => {
          assert.ok(err instanceof UsageError, 'a UsageError (main exits 2 on it)');
          assert.match(err.message, message);
          assert.ok(!err.message.includes('\n'), 'one line');
          return true;
        },
      );
    });
  }
});

const NODE = '/usr/bin/node';
const lessonNodes: NodeInfo[] = [
  { name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} },
  { name: 'node-c', capacity: { cpu: 4000, memory: 8192 }, taints: [{ key: 'gpu-only', effect: 'NoSchedule' }], labels: { zone: 'b' } },
];
const layout: ClusterLayout = { nodeExecPath: NODE, dataDir: '.mo', basePort: 7000, replicas: 3, token: 'tok', nodes: lessonNodes };

describe('launcher command lines', () => {
  test('replica i gets id cp-i, listens on base+i, knows every peer, and keeps its state in <data-dir>/cp-i', () => {
    const [, cp2] = controlPlaneCommands(layout);
    assert.equal(cp2.name, 'cp-2');
    assert.equal(cp2.kind, 'control-plane');
    assert.equal(cp2.port, 7002);
    assert.deepEqual(cp2.argv, [
      NODE,
      '--max-semi-space-size=16',
      '--no-memory-reducer',
      '--import',
      'tsx',
      'control-plane/main.ts',
      '--id',
      'cp-2',
      '--listen',
      '127.0.0.1:7002',
      '--peers',
      'cp-1=ws://127.0.0.1:7001,cp-2=ws://127.0.0.1:7002,cp-3=ws://127.0.0.1:7003',
      '--data-dir',
      '.mo/cp-2',
      '--token',
      'tok',
      '--kube-listen',
      '127.0.0.1:7012',
      '--ca-dir',
      '.mo',
    ]);
    // glibc keeps a replica's large buffers out of its main heap, and its heap's top between bursts (REPLICA_ENV).
    const tunables = 'glibc.malloc.trim_threshold=8388608:glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2';
    assert.deepEqual(cp2.env, { MALLOC_MMAP_THRESHOLD_: '131072', GLIBC_TUNABLES: tunables });
    // The death line's command starts it the same way, with the values the replica got.
    assert.equal(
      Supervisor.handCommand(cp2, {}),
      `MALLOC_MMAP_THRESHOLD_=131072 GLIBC_TUNABLES=${tunables} ${NODE} --max-semi-space-size=16 --no-memory-reducer --import tsx control-plane/main.ts --id cp-2 ${cp2.argv.slice(8).join(' ')}`,
    );
    assert.match(Supervisor.handCommand(cp2, { MALLOC_MMAP_THRESHOLD_: '65536' }), /^MALLOC_MMAP_THRESHOLD_=65536 GLIBC_TUNABLES=glibc\.malloc\.trim_threshold=8388608:\S+ \//);
  });

  test('an agent gets its capacity, taints in kubectl notation, labels, every replica, the token and its state dir', () => {
    const [, nodeC] = nodeAgentCommands(layout);
    assert.deepEqual(nodeC.argv, [
      NODE,
      '--import',
      'tsx',
      'node-agent/main.ts',
      '--name',
      'node-c',
      '--cpu',
      '4000',
      '--memory',
      '8192',
      '--taint',
      'gpu-only',
      '--label',
      'zone=b',
      '--control-plane',
      'ws://127.0.0.1:7001,ws://127.0.0.1:7002,ws://127.0.0.1:7003',
      '--token',
      'tok',
      '--state-dir',
      '.mo/agents/node-c',
      // Its own loopback address (Service proxies on one machine) and a slice of host ports.
      '--address',
      '127.0.1.2',
      '--port-range',
      '20500-20999',
    ]);
  });

  test('replicas come before agents, one process per replica and per node', () => {
    assert.deepEqual(
      clusterCommands({ ...layout, replicas: 1 }).map((s) => s.name),
      ['cp-1', 'node-a', 'node-c'],
    );
  });

  test('an absolute data dir with a trailing slash still gives clean sub-folders', () => {
    const [cp1] = controlPlaneCommands({ ...layout, dataDir: '/var/mo/', replicas: 1 });
    assert.equal(cp1.argv[cp1.argv.indexOf('--data-dir') + 1], '/var/mo/cp-1');
  });

  test('the test hook swaps only the entry script, keeping every flag', () => {
    const [cp1] = controlPlaneCommands({ ...layout, controlPlaneScript: 'test/fixtures/fake-child.ts' });
    assert.deepEqual(cp1.argv.slice(5, 8), ['test/fixtures/fake-child.ts', '--id', 'cp-1']);
  });

  test("config.json servers are the replicas' HTTP URLs on base+1 ... base+N", () => {
    assert.deepEqual(serverUrls(7100, 3), ['http://127.0.0.1:7101', 'http://127.0.0.1:7102', 'http://127.0.0.1:7103']);
  });

  test('taints print like kubectl: effect left out only when it is NoSchedule', () => {
    assert.equal(formatTaint({ key: 'gpu-only', effect: 'NoSchedule' }), 'gpu-only');
    assert.equal(formatTaint({ key: 'gpu', value: 'a100', effect: 'NoSchedule' }), 'gpu=a100');
    assert.equal(formatTaint({ key: 'gpu', effect: 'NoExecute' }), 'gpu:NoExecute');
    assert.equal(formatTaint({ key: 'gpu', value: 'x', effect: 'PreferNoSchedule' }), 'gpu=x:PreferNoSchedule');
  });

  test('shell quoting leaves plain words bare and quotes spaces, quotes and empty words', () => {
    assert.equal(shellQuote(['node', '--peers', 'cp-1=ws://127.0.0.1:7001,cp-2=ws://h:1']), 'node --peers cp-1=ws://127.0.0.1:7001,cp-2=ws://h:1');
    assert.equal(shellQuote(['a b', "it's", '', '$HOME', '*']), `'a b' 'it'\\''s' '' '$HOME' '*'`);
  });
});

describe('launcher stream', () => {
  test('a line written in several chunks comes out once, whole, and CRLF loses its CR', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    s.push('part-one ');
    s.push('part-two\nsecond\r\nthi');
    assert.deepEqual(lines, ['part-one part-two', 'second']);
    s.push('rd');
    s.flush();
    assert.deepEqual(lines, ['part-one part-two', 'second', 'third']);
  });

  test('a line longer than the maximum is printed in pieces instead of growing the buffer', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l), 4);
    s.push('abcdefghij');
    assert.deepEqual(lines, ['abcd ↩', 'efgh ↩']);
    s.push('\n');
    assert.deepEqual(lines, ['abcd ↩', 'efgh ↩', 'ij']);
  });

  test('prefixes are padded to the longest name (launcher included) and end in a bar', () => {
    const out: string[] = [];
    const log = new LogStream({ write: (t: string) => out.push(t) }, ['cp-1', 'node-a'], false);
    log.line('cp-1', 'elected');
    log.launcher('started cp-1 pid=1');
    assert.equal(out[0], 'cp-1    | elected\n');
    assert.match(out[1], /^launcher\| \d\d:\d\d:\d\d\.\d{3} started cp-1 pid=1\n$/, "the launcher's own lines carry their time");
  });

  test('colour only on a terminal, never with NO_COLOR, and FORCE_COLOR forces it', () => {
    assert.equal(shouldUseColor(true, {}), true);
    assert.equal(shouldUseColor(false, {}), false);
    assert.equal(shouldUseColor(undefined, {}), false);
    assert.equal(shouldUseColor(true, { NO_COLOR: '1' }), false);
    assert.equal(shouldUseColor(false, { FORCE_COLOR: '1' }), true);
    const out: string[] = [];
    new LogStream({ write: (t: string) => out.push(t) }, ['cp-1'], true).line('cp-1', 'x');
    assert.match(out[0], /^\x1b\[\d+mcp-1    \|\x1b\[0m x\n$/);
  });
});

describe('launcher examples', () => {
  const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

  test('examples/nodes.yaml is exactly the four default nodes the launcher starts by default', () => {
    assert.deepEqual(parseNodesFile(read('examples/nodes.yaml')), LESSON_NODES);
  });

  test('examples/web.yaml is the docs/lessons.md web deployment: 3 units of sleep 3600 at 1000m/2048Mi, no tolerations', () => {
    const { manifest, unitSpec } = validateManifest(parseManifestObject(read('examples/web.yaml')));
    assert.equal(manifest.metadata.name, 'web');
    assert.equal(manifest.spec.replicas, 3);
    assert.deepEqual(unitSpec.command, ['sleep', '3600']);
    assert.deepEqual(unitSpec.resources, { cpu: 1000, memory: 2048 });
    assert.deepEqual(unitSpec.tolerations, []);
  });

  test('the default agents get the default capacities and node-c its gpu-only taint', () => {
    const specs = nodeAgentCommands({ ...layout, nodes: LESSON_NODES });
    assert.deepEqual(
      specs.map((s) => s.name),
      ['node-a', 'node-b', 'node-c', 'node-d'],
    );
    const flag = (argv: string[], name: string): string[] => argv.flatMap((a, i) => (a === name ? [argv[i + 1]] : []));
    assert.deepEqual(
      specs.map((s) => [flag(s.argv, '--cpu')[0], flag(s.argv, '--memory')[0]]),
      [
        ['4000', '8192'],
        ['8000', '16384'],
        ['4000', '8192'],
        ['8000', '16384'],
      ],
    );
    assert.deepEqual(
      specs.map((s) => flag(s.argv, '--taint')),
      [[], [], ['gpu-only'], []],
    );
  });
});
