// dashboard/app.js -- the cluster dashboard served by every replica at `/`.
// Plain DOM, no dependencies. Live from the API's watch streams (JSON lines)
// for nodes, units, deployments, endpoints (services) and events; /v1/cluster
// (which has no watch) is polled once a second. The token lives in this
// tab's sessionStorage (a `#token=...` link moves it there). When the replica
// serving the page stops answering, the page moves to another replica it
// learnt from /v1/cluster, carrying the token in the URL fragment.

const TOKEN_KEY = 'mo-token';
const REPLICAS_KEY = 'mo-replicas';
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

// ---- token ----
const hash = new URLSearchParams(location.hash.slice(1));
if (hash.get('token')) {
  sessionStorage.setItem(TOKEN_KEY, hash.get('token'));
  history.replaceState(null, '', location.pathname + location.search);
}
let token = sessionStorage.getItem(TOKEN_KEY);

const state = {
  nodes: new Map(),
  units: new Map(),
  deployments: new Map(),
  endpoints: new Map(),
  events: [],
  cluster: null,
  selected: null,
  log: '',
  logFor: null,
};
let replicaUrls = JSON.parse(sessionStorage.getItem(REPLICAS_KEY) || '[]');
let lastOk = Date.now();
const streams = [];
let started = false;

// One line at the top; `source` says who set it, so only it clears it.
let problemSource = '';
function problem(text, source = '') {
  const p = $('problem');
  p.textContent = text || '';
  p.hidden = !text;
  problemSource = text ? source : '';
}
function clearProblem(source) {
  if (problemSource === source) problem('');
}

function showLogin(why) {
  $('app').hidden = true;
  $('logout').hidden = true;
  $('login').hidden = false;
  problem(why);
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const r = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) {
    let msg = text;
    try {
      msg = JSON.parse(text).error ?? text;
    } catch {
      /* text */
    }
    throw new ApiError(r.status, msg);
  }
  lastOk = Date.now();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function handleError(e, what, source = '') {
  if (e instanceof ApiError && e.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    token = null;
    stopAll();
    showLogin(`invalid token (${what}): enter the cluster token`);
  } else if (e instanceof ApiError && e.status === 503) {
    problem(`no quorum: ${e.message}`, source);
  } else if (e instanceof ApiError) {
    problem(`${what}: ${e.message}`, source);
  } else {
    problem(`${what}: ${e?.message ?? e}`, source);
  }
}

// ---- watch streams ----
function watch(resource, onLine) {
  const s = { stop: false, ctrl: null };
  streams.push(s);
  (async () => {
    while (!s.stop) {
      s.ctrl = new AbortController();
      try {
        const r = await fetch(`/v1/${resource}?watch=1`, { headers: { authorization: `Bearer ${token}` }, signal: s.ctrl.signal });
        if (!r.ok) {
          let msg = '';
          try {
            msg = (await r.json()).error;
          } catch {
            /* none */
          }
          throw new ApiError(r.status, msg || r.statusText);
        }
        lastOk = Date.now();
        clearProblem('watch');
        onLine(null); // a new stream starts with every object as ADDED
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          lastOk = Date.now();
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i).trim();
            buf = buf.slice(i + 1);
            if (line) {
              try {
                onLine(JSON.parse(line));
              } catch {
                /* skip a bad line */
              }
            }
          }
          schedule();
        }
      } catch (e) {
        if (s.stop) return;
        if (e instanceof ApiError) handleError(e, `watch ${resource}`, 'watch');
        if (!token) return;
      }
      if (!s.stop) await new Promise((r) => setTimeout(r, 300));
    }
  })();
}

function mapWatch(map) {
  return (ev) => {
    if (ev === null) {
      map.clear();
      return;
    } // a new stream lists everything again
    const name = ev.object?.metadata?.name;
    if (!name) return;
    if (ev.type === 'DELETED') map.delete(name);
    else if (ev.type === 'ADDED' || ev.type === 'MODIFIED') map.set(name, ev.object);
  };
}

function stopAll() {
  for (const s of streams) {
    s.stop = true;
    s.ctrl?.abort();
  }
  streams.length = 0;
  clearInterval(clusterTimer);
  started = false;
}

let clusterTimer = null;
let failures = 0;
async function pollCluster() {
  try {
    const c = await api('GET', '/v1/cluster');
    state.cluster = c;
    replicaUrls = c.replicas.map((r) => r.url);
    sessionStorage.setItem(REPLICAS_KEY, JSON.stringify(replicaUrls));
    if (!c.leader) problem('no quorum: no replica is the leader (a majority of the replicas must be up)', 'cluster');
    else clearProblem('cluster');
    $('conn').textContent = `connected to ${location.host}`;
    failures = 0;
    schedule();
  } catch (e) {
    if (e instanceof ApiError) handleError(e, 'cluster status', 'cluster');
    else {
      // Refused or reset: this replica is gone. Try once more soon, then move.
      $('conn').textContent = `${location.host} is not answering…`;
      if (++failures === 1 && token) setTimeout(pollCluster, 300);
      else if (token) failover();
    }
  }
  if (token && Date.now() - lastOk > 2500) failover();
}

let failingOver = false;
async function failover() {
  if (failingOver) return;
  failingOver = true;
  const here = location.origin;
  for (const url of replicaUrls) {
    if (url === here) continue;
    try {
      await fetch(`${url}/healthz`, { mode: 'no-cors', signal: AbortSignal.timeout(800) });
      $('conn').textContent = `moving to ${url}…`;
      location.replace(`${url}/#token=${encodeURIComponent(token)}`);
      return;
    } catch {
      /* try the next */
    }
  }
  failingOver = false;
}

function start() {
  if (started) return;
  started = true;
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  problem('');
  // Five streams: a browser keeps at most six HTTP/1.1 connections to one
  // origin, so one stays free for /v1/cluster, actions and logs. Services
  // are drawn from their Endpoints objects (name, ports, addresses).
  for (const r of ['nodes', 'units', 'deployments', 'endpoints']) watch(r, mapWatch(state[r]));
  watch('events', (ev) => {
    if (ev === null) {
      state.events = [];
      return;
    }
    if (ev.object) state.events.push(ev.object);
    if (state.events.length > 1000) state.events.splice(0, state.events.length - 1000);
  });
  pollCluster();
  clusterTimer = setInterval(pollCluster, 1000);
}

// ---- rendering ----
let pending = false;
function schedule() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    render();
  });
}

function set(id, html) {
  const el = $(id);
  if (el.contains(document.activeElement) && document.activeElement.tagName === 'INPUT') return; // do not steal typing
  if (el.dataset.html !== html) {
    el.innerHTML = html;
    el.dataset.html = html;
  }
}

const pct = (a, b) => (b > 0 ? Math.min(100, Math.round((a / b) * 100)) : 0);

function render() {
  const c = state.cluster;
  set(
    'replicas',
    c
      ? `<table><thead><tr><th>replica</th><th>role</th><th>term</th><th>commit</th><th>applied</th><th>url</th></tr></thead><tbody>${c.replicas
          .map(
            (r) =>
              `<tr class="${r.id === c.leader ? 'leader' : ''} ${r.reachable ? '' : 'unreachable'}" data-replica="${esc(r.id)}" data-role="${esc(r.role)}"><td>${esc(r.id)}</td><td>${r.reachable ? esc(r.role) : 'unreachable'}</td><td>${esc(r.term ?? '–')}</td><td>${esc(r.commitIndex ?? '–')}</td><td>${esc(r.appliedIndex ?? '–')}</td><td><a href="${esc(r.url)}/">${esc(r.url.replace(/^https?:\/\//, ''))}</a></td></tr>`,
          )
          .join('')}</tbody></table>`
      : '<p>loading…</p>',
  );

  const byNode = new Map();
  for (const u of state.units.values()) {
    const n = u.spec?.nodeName ?? '(unscheduled)';
    if (!byNode.has(n)) byNode.set(n, []);
    byNode.get(n).push(u);
  }
  const unitBlock = (u) => {
    const ph = u.status?.phase ?? 'Pending';
    const name = u.metadata.name;
    return `<button type="button" class="unit ${esc(ph)}" data-unit="${esc(name)}" data-phase="${esc(ph)}" aria-pressed="${state.selected === name}" aria-label="unit ${esc(name)} ${esc(ph)}${u.status?.pid ? ` pid ${u.status.pid}` : ''}">${esc(name)}${u.status?.pid ? ` · ${u.status.pid}` : ''}</button>`;
  };
  const nodes = [...state.nodes.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  let nodesHtml = nodes
    .map((n) => {
      const name = n.metadata.name;
      const st = n.status ?? {};
      const cap = st.capacity ?? { cpu: 0, memory: 0 };
      const al = st.allocated ?? { cpu: 0, memory: 0 };
      const cordoned = n.spec?.unschedulable;
      const units = (byNode.get(name) ?? []).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
      return `<article class="node ${st.ready ? '' : 'notready'}" data-node="${esc(name)}" data-ready="${st.ready ? 'true' : 'false'}">
      <h3>${esc(name)} <span class="badge ${st.ready ? 'ready' : 'notready-b'}">${st.ready ? 'Ready' : 'NotReady'}</span>
      ${cordoned ? '<span class="badge cordoned">cordoned</span>' : ''}
      ${(n.spec?.taints ?? []).map((t) => `<span class="badge taint">${esc(t.key)}${t.value ? '=' + esc(t.value) : ''}:${esc(t.effect)}</span>`).join('')}
      <button type="button" data-action="${cordoned ? 'uncordon' : 'cordon'}" data-node="${esc(name)}" aria-label="${cordoned ? 'Uncordon' : 'Cordon'} node ${esc(name)}">${cordoned ? 'Uncordon' : 'Cordon'}</button>
      <button type="button" data-action="drain" data-node="${esc(name)}" aria-label="Drain node ${esc(name)}">Drain</button></h3>
      <div class="barlabel">cpu ${al.cpu}m / ${cap.cpu}m</div><div class="bar" role="img" aria-label="cpu ${pct(al.cpu, cap.cpu)}% allocated"><span style="width:${pct(al.cpu, cap.cpu)}%"></span></div>
      <div class="barlabel">memory ${al.memory}Mi / ${cap.memory}Mi</div><div class="bar" role="img" aria-label="memory ${pct(al.memory, cap.memory)}% allocated"><span style="width:${pct(al.memory, cap.memory)}%"></span></div>
      <div class="units">${units.map(unitBlock).join('') || '<span class="barlabel">no units</span>'}</div></article>`;
    })
    .join('');
  const unscheduled = byNode.get('(unscheduled)');
  if (unscheduled) nodesHtml += `<article class="node"><h3>not scheduled</h3><div class="units">${unscheduled.map(unitBlock).join('')}</div></article>`;
  set('nodes', nodesHtml || '<p>no nodes</p>');

  const deps = [...state.deployments.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  set(
    'deployments',
    deps.length
      ? `<table><thead><tr><th>name</th><th>desired</th><th>ready</th><th>updated</th><th>available</th><th>rollout</th><th>actions</th></tr></thead><tbody>${deps
          .map((d) => {
            const s = d.status ?? {};
            const name = esc(d.metadata.name);
            const prog = (s.conditions ?? []).find((x) => x.type === 'Progressing');
            const rollout = d.spec?.paused
              ? 'paused'
              : (s.updatedReplicas ?? 0) < d.spec.replicas || (s.oldReplicas ?? 0) > 0
                ? `rolling out (${s.updatedReplicas ?? 0}/${d.spec.replicas} updated)`
                : (prog?.reason ?? 'complete');
            return `<tr data-deployment="${name}"><td>${name}</td><td>${d.spec.replicas}</td><td data-field="ready">${s.readyReplicas ?? 0}</td><td>${s.updatedReplicas ?? 0}</td><td>${s.availableReplicas ?? 0}</td><td>${esc(rollout)}</td>
      <td class="row"><label class="row">replicas <input type="number" min="0" value="${d.spec.replicas}" data-scale-input="${name}" aria-label="Replicas for ${name}"></label>
      <button type="button" data-action="scale" data-deployment="${name}" aria-label="Scale ${name}">Scale</button>
      <button type="button" data-action="restart" data-deployment="${name}" aria-label="Restart rollout of ${name}">Restart</button>
      <button type="button" data-action="undo" data-deployment="${name}" aria-label="Undo rollout of ${name}">Undo</button></td></tr>`;
          })
          .join('')}</tbody></table>`
      : '<p>no deployments</p>',
  );

  const svcs = [...state.endpoints.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  set(
    'services',
    svcs.length
      ? `<table><thead><tr><th>service</th><th>port → nodePort</th><th>endpoints</th></tr></thead><tbody>${svcs
          .map((ep) => {
            const subsets = ep.subsets ?? [];
            const addrs = subsets.flatMap((ss) => [
              ...(ss.addresses ?? []).map((a) => `${a.ip}:${a.port} (${a.unit})`),
              ...(ss.notReadyAddresses ?? []).map((a) => `${a.ip}:${a.port} (${a.unit}, not ready)`),
            ]);
            return `<tr data-service="${esc(ep.metadata.name)}"><td>${esc(ep.metadata.name)}</td><td>${subsets.map((ss) => `${esc(ss.port?.port)}${ss.port?.nodePort ? ' → ' + esc(ss.port.nodePort) : ''}`).join(', ')}</td><td>${addrs.map(esc).join('<br>') || 'none'}</td></tr>`;
          })
          .join('')}</tbody></table>`
      : '<p>no services</p>',
  );

  const f = $('event-filter').value.trim().toLowerCase();
  const warnOnly = $('event-warnings').checked;
  const evs = state.events
    .filter((e) => (!warnOnly || e.type === 'Warning') && (!f || `${e.reason} ${e.involvedObject?.kind} ${e.involvedObject?.name} ${e.message}`.toLowerCase().includes(f)))
    .slice(-200)
    .reverse();
  const evHtml = evs
    .map(
      (e) =>
        `<li class="${esc(e.type)}"><time>${esc((e.lastTimestamp ?? '').slice(11, 19))}</time> <b>${esc(e.reason)}</b> ${esc(e.involvedObject?.kind)}/${esc(e.involvedObject?.name)}: ${esc(e.message)}${e.count > 1 ? ` (×${e.count})` : ''}</li>`,
    )
    .join('');
  const list = $('events');
  if (list.dataset.html !== evHtml) {
    list.innerHTML = evHtml;
    list.dataset.html = evHtml;
  }

  renderUnit();
}

function renderUnit() {
  const sec = $('unit-section');
  const name = state.selected;
  if (!name) {
    sec.hidden = true;
    return;
  }
  sec.hidden = false;
  const u = state.units.get(name);
  const s = u?.status ?? {};
  const sch = s.scheduling;
  const evs = state.events.filter((e) => e.involvedObject?.name === name).slice(-20);
  set(
    'unit',
    `<h3>${esc(name)} <button type="button" data-action="delete-unit" data-unit="${esc(name)}" aria-label="Delete unit ${esc(name)}">Delete</button>
      <button type="button" data-action="close-unit" aria-label="Close unit details">Close</button></h3>
    ${u ? `<p>phase <b>${esc(s.phase)}</b>${s.pid ? `, pid ${s.pid}` : ''} on ${esc(u.spec?.nodeName ?? 'no node')}${s.reason ? ` — ${esc(s.reason)}` : ''}${s.message ? `: ${esc(s.message)}` : ''}</p>` : '<p>this unit is gone</p>'}
    <h4>Scheduling</h4>${
      sch
        ? `<p>${esc(sch.message)}</p><table><thead><tr><th>node</th><th>verdict</th><th>score</th></tr></thead><tbody>${sch.nodes
            .map(
              (n) =>
                `<tr><td>${esc(n.node)}</td><td>${n.feasible ? 'feasible' : esc(n.reasons.join('; '))}</td><td>${n.total ?? ''}${
                  n.scores
                    ? ` <small>(${Object.entries(n.scores)
                        .map(([k, v]) => `${esc(k)}=${v}`)
                        .join(' ')})</small>`
                    : ''
                }</td></tr>`,
            )
            .join('')}</tbody></table>`
        : '<p>no decision recorded</p>'
    }
    <h4>Events</h4><ol class="events">${evs.map((e) => `<li class="${esc(e.type)}">${esc((e.lastTimestamp ?? '').slice(11, 19))} <b>${esc(e.reason)}</b> ${esc(e.message)}</li>`).join('') || '<li>none</li>'}</ol>
    <h4>Log (last 50 lines) <button type="button" data-action="refresh-log" aria-label="Refresh the log of ${esc(name)}">Refresh</button></h4><pre>${esc(state.logFor === name ? state.log : 'loading…')}</pre>`,
  );
}

async function loadLog(name) {
  try {
    const r = await fetch(`/v1/units/${encodeURIComponent(name)}/log?tailLines=50`, { headers: { authorization: `Bearer ${token}` } });
    const text = await r.text();
    let out = text;
    if (!r.ok) {
      try {
        out = `(${r.status}) ${JSON.parse(text).error}`;
      } catch {
        out = `(${r.status}) ${text}`;
      }
    }
    if (state.selected === name) {
      state.log = out || '(empty)';
      state.logFor = name;
      schedule();
    }
  } catch (e) {
    if (state.selected === name) {
      state.log = `(log unavailable: ${e.message})`;
      state.logFor = name;
      schedule();
    }
  }
}

// ---- actions ----
async function act(fn, what) {
  try {
    await fn();
    clearProblem('action');
  } catch (e) {
    handleError(e, what, 'action');
  }
}

document.addEventListener('click', (ev) => {
  const t = ev.target.closest('button');
  if (!t) return;
  const d = t.dataset;
  if (d.unit && !d.action) {
    state.selected = d.unit;
    state.logFor = null;
    schedule();
    loadLog(d.unit);
    return;
  }
  switch (d.action) {
    case 'cordon':
    case 'uncordon':
      act(() => api('PATCH', `/v1/nodes/${encodeURIComponent(d.node)}`, { unschedulable: d.action === 'cordon' }), `${d.action} ${d.node}`);
      break;
    case 'drain':
      // As mo drain: cordon, then delete every unit bound there (their deployments replace them elsewhere).
      if (confirm(`Drain node ${d.node}? It is cordoned and its units are deleted (replaced elsewhere).`)) {
        act(async () => {
          await api('PATCH', `/v1/nodes/${encodeURIComponent(d.node)}`, { unschedulable: true });
          for (const u of [...state.units.values()].filter((x) => x.spec?.nodeName === d.node)) {
            await api('DELETE', `/v1/units/${encodeURIComponent(u.metadata.name)}`).catch((e) => {
              if (!(e instanceof ApiError && e.status === 404)) throw e;
            });
          }
        }, `drain ${d.node}`);
      }
      break;
    case 'scale': {
      const input = document.querySelector(`input[data-scale-input="${CSS.escape(d.deployment)}"]`);
      const n = Number(input?.value);
      if (!Number.isInteger(n) || n < 0) {
        problem('replicas: enter a whole number >= 0', 'action');
        return;
      }
      input?.blur();
      act(() => api('PATCH', `/v1/deployments/${encodeURIComponent(d.deployment)}/scale`, { replicas: n }), `scale ${d.deployment}`);
      break;
    }
    case 'restart':
    case 'undo':
      act(() => api('POST', `/v1/deployments/${encodeURIComponent(d.deployment)}/${d.action}`, d.action === 'undo' ? {} : undefined), `${d.action} ${d.deployment}`);
      break;
    case 'delete-unit':
      if (confirm(`Delete unit ${d.unit}? Its deployment replaces it.`)) act(() => api('DELETE', `/v1/units/${encodeURIComponent(d.unit)}`), `delete ${d.unit}`);
      break;
    case 'close-unit':
      state.selected = null;
      schedule();
      break;
    case 'refresh-log':
      if (state.selected) loadLog(state.selected);
      break;
  }
});
$('event-filter').addEventListener('input', schedule);
$('event-warnings').addEventListener('change', schedule);
$('logout').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  token = null;
  stopAll();
  showLogin('');
});
$('login').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  token = $('token').value.trim();
  $('token').value = '';
  try {
    await api('GET', '/v1/cluster');
    sessionStorage.setItem(TOKEN_KEY, token);
    start();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) showLogin('invalid token: try again');
    else handleError(e, 'log in');
  }
});

if (token) start();
else showLogin('');
