/**
 * The leasehold web console: vanilla TypeScript, no framework, no bundler (tsc emits ES modules the
 * browser loads as they are). Data comes from `/ui/api/...` (server-side filtered windows) and one
 * push channel (`/ui/api/stream`, server-sent events); nothing polls.
 */
import type {
  ConsoleFeedItem,
  ConsoleHello,
  ConsoleLeases,
  ConsolePage,
  ConsoleResourceRow,
  ConsoleSessionRow,
  ConsoleTaskRow,
  ConsoleTimeline,
} from './console-api.js';
import { VirtualList } from './virtual-list.js';

const ROW_HEIGHT = 28;
const FEED_MAX = 500;

function byId(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`#${id} missing`);
  return el;
}

function inputById(id: string): HTMLInputElement {
  return byId(id) as HTMLInputElement;
}

function cell(text: string, className?: string): HTMLElement {
  const el = document.createElement('span');
  el.textContent = text;
  if (className !== undefined) el.className = className;
  return el;
}

function clock(ms: number): string {
  const d = new Date(ms);
  return `${d.toLocaleTimeString([], { hour12: false })}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

class UnauthenticatedError extends Error {}

async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const res = await fetch(path, {
    ...init,
    credentials: 'same-origin',
    headers: { 'x-leasehold-console': '1', ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
  });
  if (res.status === 401) throw new UnauthenticatedError('log in');
  const text = await res.text();
  const body = (text === '' ? {} : JSON.parse(text)) as T & { code?: string; message?: string };
  if (!res.ok) throw new Error(`${body.code ?? res.status}: ${body.message ?? ''}`);
  return body;
}

// --- lease countdown: session deadlines from the `leases` tick, counted down locally ----------------
const deadlines = new Map<string, number>();
let coordinatorId = '';

function leaseLeft(row: ConsoleResourceRow): string {
  if (row.owner === null) return '';
  const at = deadlines.get(row.owner.sessionId);
  if (at === undefined) return row.owner.coordinatorId === null ? '?' : `on ${row.owner.coordinatorId}`;
  return `${(Math.max(0, at - performance.now()) / 1000).toFixed(1)}s`;
}

// --- views -----------------------------------------------------------------------------------------
/** The states a list can be filtered by (after "any state"), filled into both lists' selects. */
const STATE_FILTERS = ['leased', 'pending', 'delayed', 'completed', 'failed', 'cancelled'] as const;
const resourceFilter = { q: '', state: '' };
const taskFilter = { q: '', state: '', queue: '' };

function query(filter: { q: string; state: string; queue?: string }, offset: number, limit: number): string {
  const p = new URLSearchParams({ offset: String(offset), limit: String(limit) });
  if (filter.q !== '') p.set('q', filter.q);
  if (filter.state !== '') p.set('state', filter.state);
  if (filter.queue !== undefined && filter.queue !== '') p.set('queue', filter.queue);
  return p.toString();
}

/** The resource rows drawn now, for the countdown cells. */
const currentRows = new Map<string, ConsoleResourceRow>();

function renderResource(row: ConsoleResourceRow): HTMLElement {
  currentRows.set(row.resource, row);
  const el = document.createElement('div');
  el.className = `row state-${row.state}`;
  el.dataset.resource = row.resource;
  el.dataset.testid = 'resource-row';
  const stale = row.token !== null && row.fence !== null && row.fence !== row.token;
  el.append(
    cell(row.resource, 'c-resource'),
    cell(row.taskId ?? '', 'c-task'),
    cell(row.state, 'c-state'),
    cell(row.owner?.workerId ?? '', 'c-owner'),
    cell(row.token ?? '', 'c-token'),
    cell(row.fence ?? '', stale ? 'c-fence mismatch' : 'c-fence'),
    cell(leaseLeft(row), 'c-left'),
    cell(`${row.attempts}/${row.maxAttempts}`, 'c-tries'),
  );
  el.addEventListener('click', () => {
    void showTimeline(row.resource);
  });
  return el;
}

function renderTask(row: ConsoleTaskRow): HTMLElement {
  const el = document.createElement('div');
  el.className = `row state-${row.state}`;
  el.dataset.task = row.taskId;
  el.dataset.testid = 'task-row';
  const actions = cell('', 'c-actions');
  const button = (label: string, action: 'cancel' | 'retry') => {
    const b = document.createElement('button');
    b.textContent = label;
    b.dataset.action = action;
    b.addEventListener('click', (e) => {
      e.stopPropagation();
      void taskAction(row.taskId, action);
    });
    actions.append(b);
  };
  if (row.state === 'pending' || row.state === 'leased' || row.state === 'delayed') button('cancel', 'cancel');
  if (row.state === 'failed') button('retry', 'retry');
  el.append(
    cell(row.taskId, 'c-task'),
    cell(row.resource, 'c-resource'),
    cell(row.queue, 'c-queue'),
    cell(row.state, 'c-state'),
    cell(`${row.attempts}/${row.maxAttempts}`, 'c-tries'),
    cell(row.lastError ?? '', 'c-error'),
    cell(row.atMs === 0 ? '' : clock(row.atMs), 'c-time'),
    actions,
  );
  return el;
}

let resources: VirtualList<ConsoleResourceRow> | undefined;
let tasks: VirtualList<ConsoleTaskRow> | undefined;

function renderCounts(target: HTMLElement, counts: Readonly<Record<string, number>>): void {
  target.textContent = Object.entries(counts)
    .map(([state, n]) => `${state} ${n}`)
    .join(' · ');
}

/**
 * One server-filtered window of the console: `<view>-list` rows fetched from `/ui/api/<view>`, with
 * `<view>-counts` (per state) and `<view>-total` kept up to date from each page.
 */
function windowList<T>(
  view: 'resources' | 'tasks',
  filter: { q: string; state: string; queue?: string },
  keyOf: (row: T) => string,
  render: (row: T) => HTMLElement,
): VirtualList<T> {
  return new VirtualList<T>({
    viewport: byId(`${view}-list`),
    rowHeight: ROW_HEIGHT,
    pageSize: 100,
    keyOf,
    render,
    fetchPage: async (offset, limit) => {
      const page = await api<ConsolePage<T>>(`/ui/api/${view}?${query(filter, offset, limit)}`);
      renderCounts(byId(`${view}-counts`), page.counts);
      return page;
    },
    onTotal: (total) => {
      byId(`${view}-total`).textContent = `${total} ${view}`;
    },
  });
}

function buildLists(): void {
  resources = windowList<ConsoleResourceRow>('resources', resourceFilter, (r) => r.resource, renderResource);
  tasks = windowList<ConsoleTaskRow>('tasks', taskFilter, (r) => r.taskId, renderTask);
}

function renderSessions(rows: readonly ConsoleSessionRow[]): void {
  const target = byId('sessions-body');
  const groups = new Map<string, ConsoleSessionRow[]>();
  for (const r of rows) groups.set(r.coordinatorId, [...(groups.get(r.coordinatorId) ?? []), r]);
  const nodes: HTMLElement[] = [];
  for (const [coordinator, list] of groups) {
    const head = document.createElement('h3');
    head.textContent = `${coordinator}${coordinator === coordinatorId ? ' (this coordinator)' : ''} — ${list.length} sessions`;
    nodes.push(head);
    for (const s of list) {
      const el = document.createElement('div');
      el.className = `row session${s.ending ? ' ending' : ''}`;
      el.dataset.testid = 'session-row';
      const left = cell('', 'c-left');
      left.dataset.session = s.sessionId;
      el.append(
        cell(s.workerId, 'c-owner'),
        cell(s.sessionId, 'c-session'),
        cell(`${s.leases} leases`, 'c-tries'),
        left,
      );
      nodes.push(el);
    }
  }
  byId('sessions-total').textContent = `${rows.length} sessions`;
  target.replaceChildren(...nodes);
}

function renderFeed(item: ConsoleFeedItem): HTMLElement {
  const el = document.createElement('div');
  el.className = `feed ${item.source}${item.stale ? ' stale' : ''}${item.problem ? ' problem' : ''}`;
  el.dataset.testid = 'feed-item';
  el.dataset.kind = item.kind;
  if (item.resource !== null) el.dataset.resource = item.resource;
  el.append(cell(clock(item.atMs), 'f-time'), cell(item.source, 'f-source'), cell(item.text, 'f-text'));
  if (item.stale && item.token !== null && item.fence !== null) {
    const tokens = cell(`token ${item.token} < fence ${item.fence}`, 'f-tokens');
    tokens.dataset.testid = 'stale-tokens';
    el.append(tokens);
  }
  if (item.resource !== null) {
    const r = item.resource;
    el.addEventListener('click', () => {
      void showTimeline(r);
    });
  }
  return el;
}

function addFeed(items: readonly ConsoleFeedItem[], reset = false): void {
  const list = byId('feed-list');
  if (reset) list.replaceChildren();
  for (const item of items) list.prepend(renderFeed(item));
  while (list.childElementCount > FEED_MAX) list.lastElementChild?.remove();
}

async function showTimeline(resource: string): Promise<void> {
  const t = await api<ConsoleTimeline>(`/ui/api/resources/${encodeURIComponent(resource)}/timeline`);
  const panel = byId('timeline');
  panel.hidden = false;
  panel.dataset.resource = resource;
  byId('timeline-title').textContent =
    resource +
    (t.row === null
      ? ''
      : ` — ${t.row.state}${t.row.owner === null ? '' : ` by ${t.row.owner.workerId}`}, token ${t.row.token ?? '—'}, fence ${t.row.fence ?? '?'}`);
  byId('timeline-body').replaceChildren(
    ...t.entries.map((e) => {
      const el = document.createElement('li');
      el.className = `${e.stale ? 'stale' : ''}${e.problem ? ' problem' : ''}`;
      el.dataset.kind = e.kind;
      el.append(cell(clock(e.atMs), 'f-time'), cell(e.text, 'f-text'));
      return el;
    }),
  );
}

async function taskAction(taskId: string, action: 'cancel' | 'retry'): Promise<void> {
  try {
    const task = await api<{ state: string }>(`/ui/api/tasks/${encodeURIComponent(taskId)}/${action}`, {
      method: 'POST',
    });
    toast(`${taskId}: ${action} done, now ${task.state}`);
  } catch (err) {
    toast(`${taskId}: ${action} refused — ${err instanceof Error ? err.message : String(err)}`, true);
  }
  tasks?.refresh();
}

function toast(text: string, bad = false): void {
  const el = byId('toast');
  el.textContent = text;
  el.className = bad ? 'bad' : 'good';
}

// --- the push channel ------------------------------------------------------------------------------
let refreshTimer: number | undefined;
function refreshSoon(): void {
  refreshTimer ??= window.setTimeout(() => {
    refreshTimer = undefined;
    resources?.refresh();
    tasks?.refresh();
  }, 400);
}

function setConnection(state: 'live' | 'reconnecting' | 'offline', detail = ''): void {
  const el = byId('conn');
  el.dataset.state = state;
  el.textContent = state === 'live' ? `live · ${coordinatorId}` : `${state}${detail === '' ? '' : ` · ${detail}`}`;
}

let source: EventSource | undefined;
function connect(): void {
  source?.close();
  const es = new EventSource('/ui/api/stream');
  source = es;
  // Each handler names the shape of its event's data (the server's console-types.ts).
  const on = (name: string, handle: (data: never) => void): void => {
    es.addEventListener(name, (e) => {
      handle(JSON.parse((e as MessageEvent<string>).data) as never);
    });
  };
  on('hello', (h: ConsoleHello) => {
    coordinatorId = h.coordinatorId;
    setConnection('live');
    byId('sink').dataset.state = h.sinkConnected ? 'up' : 'down';
    addFeed(h.recent, true);
    // Whatever changed while the stream was down: read the windows again.
    resources?.refresh();
    tasks?.refresh();
  });
  on('feed', (item: ConsoleFeedItem) => {
    addFeed([item]);
  });
  on('resource', (row: ConsoleResourceRow) => {
    resources?.patch(row);
    refreshSoon();
  });
  on('task', (row: ConsoleTaskRow) => {
    tasks?.patch(row);
    refreshSoon();
  });
  on('sessions', (rows: readonly ConsoleSessionRow[]) => {
    renderSessions(rows);
  });
  on('leases', (l: ConsoleLeases) => {
    const now = performance.now();
    deadlines.clear();
    for (const [sessionId, ms] of Object.entries(l.remainingMs)) deadlines.set(sessionId, now + ms);
  });
  on('sink', (s: { connected: boolean }) => {
    byId('sink').dataset.state = s.connected ? 'up' : 'down';
  });
  on('refresh', refreshSoon);
  es.addEventListener('error', () => {
    if (source !== es) return;
    setConnection('reconnecting', 'coordinator unreachable');
    // A refused reconnect (401, 503) closes an EventSource for good: start a new one ourselves.
    if (es.readyState === EventSource.CLOSED) {
      window.setTimeout(() => {
        void api('/ui/api/whoami').then(connect, (err: unknown) => {
          if (err instanceof UnauthenticatedError) showLogin();
          else window.setTimeout(connect, 1000);
        });
      }, 1000);
    }
  });
}

// --- live countdown cells (no DOM rebuild: text only) ----------------------------------------------
function tickCountdowns(): void {
  const now = performance.now();
  for (const el of document.querySelectorAll<HTMLElement>('[data-session]')) {
    const at = deadlines.get(el.dataset.session ?? '');
    el.textContent = at === undefined ? '' : `${(Math.max(0, at - now) / 1000).toFixed(1)}s left`;
  }
  for (const el of document.querySelectorAll<HTMLElement>('#resources-list .row')) {
    const left = el.querySelector('.c-left');
    const resource = el.dataset.resource;
    if (left === null || resource === undefined) continue;
    const row = currentRows.get(resource);
    if (row !== undefined) left.textContent = leaseLeft(row);
  }
}
// --- login -----------------------------------------------------------------------------------------
function showLogin(): void {
  source?.close();
  source = undefined;
  byId('login').hidden = false;
  byId('app').hidden = true;
  setConnection('offline', 'logged out');
}

async function start(): Promise<void> {
  byId('login').hidden = true;
  byId('app').hidden = false;
  if (resources === undefined) buildLists();
  connect();
  renderSessions((await api<{ sessions: ConsoleSessionRow[] }>('/ui/api/sessions')).sessions);
}

function wire(): void {
  byId('login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = inputById('login-key');
    void api('/ui/api/login', { method: 'POST', body: JSON.stringify({ key: input.value }) }).then(
      () => {
        input.value = '';
        byId('login-error').textContent = '';
        return start();
      },
      (err: unknown) => {
        // 401: a wrong key; anything else says why (429: this address backs off after wrong keys).
        byId('login-error').textContent =
          err instanceof UnauthenticatedError ? 'wrong admin key' : err instanceof Error ? err.message : String(err);
      },
    );
  });
  byId('logout').addEventListener('click', () => {
    void api('/ui/api/logout', { method: 'POST' }).finally(showLogin);
  });
  const bindFilter = (
    input: string,
    select: string,
    filter: { q: string; state: string },
    list: () => VirtualList<unknown> | undefined,
  ) => {
    byId(input).addEventListener('input', (e) => {
      filter.q = (e.target as HTMLInputElement).value.trim();
      list()?.refresh();
    });
    const states = byId(select);
    for (const state of STATE_FILTERS) {
      const option = document.createElement('option');
      option.textContent = state;
      states.append(option);
    }
    states.addEventListener('change', (e) => {
      filter.state = (e.target as HTMLSelectElement).value;
      list()?.refresh();
    });
  };
  bindFilter('resources-q', 'resources-state', resourceFilter, () => resources as VirtualList<unknown> | undefined);
  bindFilter('tasks-q', 'tasks-state', taskFilter, () => tasks as VirtualList<unknown> | undefined);
  byId('tasks-queue').addEventListener('input', (e) => {
    taskFilter.queue = (e.target as HTMLInputElement).value.trim();
    tasks?.refresh();
  });
  for (const tab of document.querySelectorAll<HTMLButtonElement>('[data-tab]')) {
    tab.addEventListener('click', () => {
      for (const t of document.querySelectorAll<HTMLElement>('[data-tab]')) t.classList.toggle('active', t === tab);
      for (const v of document.querySelectorAll<HTMLElement>('[data-view]'))
        v.hidden = v.dataset.view !== tab.dataset.tab;
      resources?.refresh();
      tasks?.refresh();
    });
  }
  byId('timeline-close').addEventListener('click', () => {
    byId('timeline').hidden = true;
  });
  window.setInterval(tickCountdowns, 200);
}

wire();
void api('/ui/api/whoami').then(start, showLogin);
