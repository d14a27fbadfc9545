// bench/failover-client.ts -- the fleet benchmark's failover client
// (bench/fleet.ts, step 4): a small process of its own that SIGKILLs the
// leader and writes to the survivors until one write is acknowledged, then
// tells its parent how long that took and what each try got.
//
// Why a process of its own: the bench's main process runs at nice 0 in the
// shell's session, while the simulator's workers each lead a session at the
// leader's priority, and the replicas theirs (control-plane/priority.ts). During a
// failover all five are busy on this machine's 2 cores, and a client in
// the bench's process was scheduled so seldom that its 5 ms pause between
// two tries lasted 188 ms (an ad-hoc trace of one run: kill, a 503 after
// 426 ms, the next try 188 ms later). A client of a real cluster runs on a
// machine of its own; this one gets its own session at the replicas'
// priority, as the simulator's workers do, so what it measures is the
// cluster's failover rather than its own wait for a CPU. It is started
// before the kill and waits for the parent's word, so its start-up is not
// measured either.
//
//   node failover-client.mjs --urls http://..,http://.. --token T
//   parent -> child (IPC): { type: 'go', pid, path, body }
//   child -> parent (IPC): { type: 'ready' }, then { type: 'acked', killedAt, ms, tries }

import { requestText } from './http.ts';
import { parseCommandLine } from '../shared/flags.ts';
import { DEFAULT_REPLICA_NICE, setOwnPriority } from '../control-plane/priority.ts';

export interface FailoverGo {
  type: 'go';
  /** The leader's pid, to SIGKILL. */
  pid: number;
  /** The API path to PUT, and the JSON body. */
  path: string;
  body: string;
}

export interface FailoverTry {
  url: string;
  /** ms after the kill that the try started and ended. */
  startMs: number;
  endMs: number;
  /** The HTTP status, or 0 when the request failed; `error` says why it was not acknowledged. */
  status: number;
  error?: string;
}

/** `killedAt`: the kill's wall-clock time (performance.timeOrigin + performance.now(), ms), which the parent's clock reads the same way. */
export type FailoverReport = { type: 'ready' } | { type: 'acked'; killedAt: number; ms: number; tries: FailoverTry[] } | { type: 'failed'; error: string; tries: FailoverTry[] };

/** Give up this long after the kill. */
const GIVE_UP_MS = 30_000;
/** Each try's own timeout. */
const TRY_TIMEOUT_MS = 1000;
/** The pause between two tries. */
const PAUSE_MS = 5;

/** The status and, for a refusal, the error the API gave (its one-line `error`). */
async function put(url: string, token: string, p: string, body: string): Promise<{ status: number; error?: string }> {
  const { status, text } = await requestText('PUT', `${url}${p}`, {
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
    timeoutMs: TRY_TIMEOUT_MS,
  });
  if (status >= 200 && status < 300) return { status };
  try {
    return { status, error: String((JSON.parse(text) as { error?: unknown }).error ?? text.slice(0, 200)) };
  } catch {
    return { status, error: text.slice(0, 200) }; // not JSON: the text itself
  }
}

async function run(urls: string[], token: string, go: FailoverGo): Promise<FailoverReport> {
  const tries: FailoverTry[] = [];
  const t0 = performance.now();
  process.kill(go.pid, 'SIGKILL');
  for (let n = 0; ; n++) {
    const url = urls[n % urls.length];
    const startMs = performance.now() - t0;
    let status = 0;
    let error: string | undefined;
    try {
      ({ status, error } = await put(url, token, go.path, go.body));
    } catch (err) {
      error = (err as Error).message;
    }
    const endMs = performance.now() - t0;
    tries.push({ url, startMs, endMs, status, ...(error === undefined ? {} : { error }) });
    if (status >= 200 && status < 300) return { type: 'acked', killedAt: performance.timeOrigin + t0, ms: endMs, tries };
    if (endMs > GIVE_UP_MS) return { type: 'failed', error: `no write acknowledged within ${GIVE_UP_MS / 1000} s of the leader kill`, tries };
    await new Promise((r) => setTimeout(r, PAUSE_MS));
  }
}

function main(): void {
  let urls: string[];
  let token: string;
  try {
    const { values } = parseCommandLine(process.argv.slice(2), { urls: { type: 'string' }, token: { type: 'string' } });
    urls = (values.urls ?? '').split(',').filter(Boolean);
    token = values.token ?? '';
    if (urls.length === 0 || token === '') throw new Error('--urls and --token are required');
  } catch (err) {
    console.error(`failover-client: ${(err as Error).message}`);
    process.exit(2);
  }
  if (!process.send) {
    console.error('failover-client: must be started with an IPC channel (by bench/fleet.ts)');
    process.exit(2);
  }
  setOwnPriority(DEFAULT_REPLICA_NICE); // as the leader and the simulator's workers; refused without root, like theirs
  process.on('message', (m: FailoverGo) => {
    if (m?.type !== 'go') return;
    void run(urls, token, m)
      .catch((err: Error): FailoverReport => ({ type: 'failed', error: err.message, tries: [] }))
      .then((report) => process.send!(report, () => process.exit(0)));
  });
  process.send({ type: 'ready' } satisfies FailoverReport);
}

main();
