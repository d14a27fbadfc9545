// launcher/readiness.ts -- knows when the cluster is up: every replica
// answers GET /healthz, and one answers GET /readyz (it knows a leader).
// Then the launcher prints the banner with the next steps. The probes need
// no token; the leader's name comes from GET /v1/cluster when it answers.

export const PROBE_INTERVAL_MS = 250;
/** One probe request may take this long before it counts as "not up". */
export const PROBE_TIMEOUT_MS = 1000;
/** After this long without the cluster up, the stream says what it still waits for (once). */
export const SLOW_START_NOTICE_MS = 20_000;

async function answers200(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}

/** The leader's id per GET /v1/cluster (`{"leader": "cp-2", ...}`), if some replica says. */
async function leaderName(servers: readonly string[], token: string): Promise<string | undefined> {
  for (const server of servers) {
    try {
      const res = await fetch(`${server}/v1/cluster`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
      });
      if (res.status !== 200) {
        await res.body?.cancel();
        continue;
      }
      const body: unknown = await res.json();
      if (typeof body === 'object' && body !== null && 'leader' in body) {
        const leader = (body as { leader?: unknown }).leader;
        if (typeof leader === 'string' && leader !== '') return leader;
      }
    } catch {
      // not this one; try the next replica
    }
  }
  return undefined;
}

export interface ClusterUp {
  leader?: string;
}

export interface WaitOptions {
  servers: readonly string[];
  token: string;
  /** Aborted on shutdown: the wait then resolves undefined. */
  signal: AbortSignal;
  /** Told once, after SLOW_START_NOTICE_MS, what is still missing. */
  onSlow: (missing: string) => void;
}

/** Resolves once every replica is healthy and a leader is known; undefined if aborted first. */
export async function waitForCluster(options: WaitOptions): Promise<ClusterUp | undefined> {
  const { servers, token, signal, onSlow } = options;
  const startedAt = Date.now();
  let noticed = false;
  while (!signal.aborted) {
    const healthy = await Promise.all(servers.map((s) => answers200(`${s}/healthz`)));
    const ready = healthy.every(Boolean) && (await Promise.all(servers.map((s) => answers200(`${s}/readyz`)))).some(Boolean);
    if (signal.aborted) return undefined;
    if (ready) return { leader: await leaderName(servers, token) };
    if (!noticed && Date.now() - startedAt > SLOW_START_NOTICE_MS) {
      noticed = true;
      const down = servers.filter((_, i) => !healthy[i]);
      onSlow(down.length > 0 ? `no answer on /healthz from ${down.join(', ')}` : 'no replica knows a leader yet (/readyz)');
    }
    await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
  }
  return undefined;
}
