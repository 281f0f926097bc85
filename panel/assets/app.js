// The Adal panel: a hash-routed single-page app over the GraphQL API.
//
//   #/signin              paste a token
//   #/servers             servers with their inbound URLs and recipients
//   #/servers/:id         a server's requests, newest first (?status=FAILED&after=… / &before=…)
//   #/requests/:id        one request: deliveries grouped by recipient, attempts, headers, body; live
//   #/credits             balance, plan and ledger

import * as Q from './queries.js';
import { auth, gql, live, onUnauthenticated } from './gql.js';
import {
  h, mount, icon, badge, dot, toneOf, titleCase, timeEl, tickTimes, fmtNumber, fmtDuration, fmtBytes,
  plural, copyButton, loading, emptyState, errorAlert, errorState, toast, confirmAction, debounce,
} from './ui.js';

const PAGE_SIZE = 25;
const REQUEST_STATUSES = ['PENDING', 'DELIVERED', 'FAILED', 'PARTIAL'];
const ACTIVE_DELIVERY = new Set(['PENDING', 'IN_PROGRESS']);

const header = document.getElementById('header');
const main = document.getElementById('main');

const state = {
  viewer: null,
  // signInNotice explains why the sign-in page is shown (token expired, …).
  signInNotice: null,
};

// ---- routing -----------------------------------------------------------------------------------------------

let current = null;

function newContext() {
  const controller = new AbortController();
  const ctx = {
    alive: true,
    signal: controller.signal,
    cleanups: [],
    onCleanup(fn) { this.cleanups.push(fn); },
    dispose() {
      this.alive = false;
      controller.abort();
      for (const fn of this.cleanups) {
        try { fn(); } catch (e) { console.error(e); }
      }
    },
  };
  return ctx;
}

function parseHash() {
  const raw = location.hash.replace(/^#/, '');
  const [pathPart, queryPart = ''] = raw.split('?');
  const segments = pathPart.split('/').filter(Boolean).map((s) => {
    try { return decodeURIComponent(s); } catch { return s; }
  });
  return { raw, segments, query: new URLSearchParams(queryPart) };
}

function href(path, params) {
  const qs = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v != null && v !== '')).toString() : '';
  return '#' + path + (qs ? '?' + qs : '');
}

function navigate(to) {
  if (location.hash === to) render();
  else location.hash = to;
}

let lastPath = '';

async function render() {
  if (current) current.dispose();
  const ctx = newContext();
  current = ctx;
  const { raw, segments, query } = parseHash();
  const path = segments.join('/');
  if (path !== lastPath) window.scrollTo(0, 0);
  lastPath = path;

  if (!segments.length) { location.replace('#/servers'); return; }
  if (segments[0] === 'signin' || !auth.token) {
    renderHeader(null);
    const next = segments[0] === 'signin' ? query.get('next') : '#' + raw;
    viewSignIn(ctx, next || '#/servers');
    return;
  }
  if (!state.viewer) {
    renderHeader(null);
    mount(main, loading('Signing in…'));
    try {
      await refreshViewer();
    } catch (err) {
      if (!ctx.alive || err.code === 'UNAUTHENTICATED') return;
      mount(main, errorState(err, render));
      return;
    }
    if (!ctx.alive) return;
  } else {
    // The balance moves with every accepted webhook: refresh it on each navigation, without waiting.
    refreshViewer().catch(() => {});
  }
  renderHeader(segments[0]);
  switch (segments[0]) {
    case 'servers':
      if (segments[1]) viewServerRequests(ctx, segments[1], query);
      else viewServers(ctx);
      break;
    case 'requests':
      viewRequest(ctx, segments[1]);
      break;
    case 'credits':
      viewCredits(ctx);
      break;
    default:
      setTitle('Not found');
      mount(main, emptyState('alert', 'Page not found', 'There is nothing at this address.',
        h('a.btn.btn-secondary', { href: '#/servers' }, 'Go to servers')));
  }
}

onUnauthenticated((err) => {
  auth.clear();
  live.reset();
  state.viewer = null;
  state.signInNotice = 'Your token was not accepted (' + err.message + '). It may have expired — paste a new one.';
  const { raw, segments } = parseHash();
  if (segments[0] !== 'signin') navigate(href('/signin', { next: '#' + raw }));
});

function setTitle(title) {
  document.title = title ? `${title} · Adal` : 'Adal';
}

// ---- viewer and header -------------------------------------------------------------------------------------

async function refreshViewer() {
  const data = await gql(Q.VIEWER);
  state.viewer = data.viewer;
  if (current && current.alive) updateBalance();
  return state.viewer;
}

const balance = () => (state.viewer && state.viewer.tenant ? state.viewer.tenant.creditBalance : null);

function updateBalance() {
  const el = header.querySelector('[data-role="balance"]');
  const b = balance();
  if (el && b != null) {
    el.textContent = fmtNumber(b);
    el.closest('.balance-pill').classList.toggle('low', b <= 0);
  }
}

const ROLE_LABELS = { ADMIN: 'Operator', OWNER: 'Owner', MEMBER: 'Member' };

function renderHeader(section) {
  const v = state.viewer;
  const brand = h('a.brand', { href: v ? '#/servers' : '#/signin' },
    h('img.brand-mark', { src: '/assets/favicon.svg', alt: '', width: 26, height: 26 }), h('span', 'Adal'));
  if (!v) {
    mount(header, h('div.topbar-inner', brand));
    return;
  }
  const nav = h('nav.nav',
    h('a.nav-link', { href: '#/servers', class: section === 'servers' || section === 'requests' ? 'active' : '' }, 'Servers'),
    h('a.nav-link', { href: '#/credits', class: section === 'credits' ? 'active' : '' }, 'Credits'));
  const b = balance();
  const pill = v.tenant
    ? h('a.balance-pill', { href: '#/credits', title: 'Credit balance', class: b <= 0 ? 'low' : '' },
      icon('coins'), h('strong', { dataset: { role: 'balance' } }, fmtNumber(b)), h('span', 'credits'))
    : null;
  const who = h('div.who',
    h('span.who-name', v.tenant ? v.tenant.name : 'All tenants'),
    h('span.who-meta', h('span.role-chip', ROLE_LABELS[v.role] || v.role), v.subject));
  const signOut = h('button.btn.btn-ghost.btn-sm', { type: 'button', title: 'Sign out', onclick: signOutNow }, icon('logout'), h('span', 'Sign out'));
  mount(header, h('div.topbar-inner', brand, nav, h('div.spacer'), pill, who, signOut));
}

function signOutNow() {
  auth.clear();
  live.reset();
  state.viewer = null;
  state.signInNotice = null;
  navigate('#/signin');
}

// ---- shared page pieces ------------------------------------------------------------------------------------

function pageHeader({ crumbs = [], title, subtitle, actions }) {
  return h('div.page-head',
    crumbs.length ? h('nav.crumbs', { 'aria-label': 'Breadcrumb' }, crumbs.map((c, i) => [
      i ? h('span.crumb-sep', '/') : null,
      c.href ? h('a', { href: c.href }, c.label) : h('span', c.label),
    ])) : null,
    h('div.page-head-row',
      h('div.page-head-text', h('h1', title), subtitle ? h('div.page-sub', subtitle) : null),
      actions ? h('div.page-actions', actions) : null));
}

// liveIndicator shows the state of the subscription (or of the polling that replaces it).
function liveIndicator() {
  const el = h('span.live', { dataset: { state: 'connecting' } }, h('span.live-dot'), h('span.live-text', 'Connecting…'));
  const labels = {
    connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…', offline: 'Offline — retrying',
    polling: 'Auto-refresh', idle: 'Paused',
  };
  el.set = (s, title) => {
    el.dataset.state = s;
    el.querySelector('.live-text').textContent = labels[s] || s;
    el.title = title || (s === 'live' ? 'Updates arrive as they happen' : '');
  };
  return el;
}

// watch keeps a view fresh: it subscribes to query/variables and calls refresh (debounced) on every event and
// on every (re)connection. If the subscription is refused or fails, it polls every pollMs instead while
// shouldPoll() says there is something to wait for.
function watch(ctx, { query, variables, refresh, indicator, pollMs = 5000, shouldPoll = () => true }) {
  const debounced = debounce(refresh, 250);
  let pollTimer = 0;
  let unsubscribe = () => {};
  const poll = () => {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(async () => {
      if (!ctx.alive) return;
      if (shouldPoll() && document.visibilityState === 'visible') await refresh();
      poll();
    }, pollMs);
  };
  unsubscribe = live.subscribe(query, variables, {
    next: () => debounced(),
    // On every (re)connection, catch up: events between the page's first load and the subscription, or
    // during a disconnection, were not delivered.
    connected: () => debounced(),
    status: (s) => indicator && indicator.set(s),
    error: (err) => {
      console.warn('live updates unavailable, polling instead:', err);
      indicator && indicator.set('polling', `Live updates are unavailable (${err.message}); refreshing every ${pollMs / 1000} s.`);
      poll();
    },
    complete: () => {
      indicator && indicator.set('polling');
      poll();
    },
  });
  ctx.onCleanup(() => {
    debounced.cancel();
    clearTimeout(pollTimer);
    unsubscribe();
  });
}

const costLine = (verb) => {
  const b = balance();
  return h('div.cost',
    icon('coins'),
    h('span', verb, ' costs ', h('strong', '1 credit'), '.'),
    b == null
      ? h('span.cost-balance', 'Charged to the request\u2019s tenant.')
      : b > 0
        ? h('span.cost-balance', 'Balance ', h('strong', fmtNumber(b)), ' → ', h('strong', fmtNumber(b - 1)))
        : h('span.cost-balance', 'Balance ', h('strong', fmtNumber(b))),
    b != null && b <= 0 ? h('div.cost-warning', 'Your balance is empty: this will be refused until credits are added.') : null);
};

async function balanceAfter() {
  try {
    const v = await refreshViewer();
    return v.tenant ? ` New balance: ${plural(v.tenant.creditBalance, 'credit')}.` : '';
  } catch {
    return '';
  }
}

// ---- sign in -----------------------------------------------------------------------------------------------

function viewSignIn(ctx, next) {
  setTitle('Sign in');
  const notice = state.signInNotice;
  const errorSlot = h('div.form-error');
  const input = h('textarea.input.token-input', {
    id: 'token', name: 'token', rows: 4, required: true, spellcheck: 'false', autocomplete: 'off',
    placeholder: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9…',
  });
  const submit = h('button.btn.btn-primary.btn-block', { type: 'submit' }, 'Sign in');
  const form = h('form.signin-card.card',
    h('div.signin-brand', h('img', { src: '/assets/favicon.svg', alt: '', width: 40, height: 40 })),
    h('h1', 'Sign in to Adal'),
    h('p.muted', 'Paste an API token. Operators print one with ', h('code', 'go run ./cmd/server token --admin'),
      '; tenant owners and members get theirs from an operator.'),
    notice ? h('div.alert.alert-warning', icon('alert'), h('div.alert-body', notice)) : null,
    h('label.field-label', { for: 'token' }, 'API token'),
    input,
    errorSlot,
    submit,
    h('p.fineprint', icon('key'), 'The token stays in this browser\u2019s local storage until you sign out.'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const token = input.value.trim().replace(/^Bearer\s+/i, '');
    if (!token) return;
    submit.disabled = true;
    submit.classList.add('busy');
    errorSlot.replaceChildren();
    try {
      const data = await gql(Q.VIEWER, {}, { token });
      auth.set(token);
      live.reset();
      state.viewer = data.viewer;
      state.signInNotice = null;
      navigate(next && next !== '#/signin' && !next.startsWith('#/signin?') ? next : '#/servers');
    } catch (err) {
      if (!ctx.alive) return;
      errorSlot.replaceChildren(errorAlert(err));
      submit.disabled = false;
      submit.classList.remove('busy');
    }
  });
  mount(main, h('div.signin', form));
  if (auth.token && state.viewer) {
    form.append(h('p.fineprint', 'Signed in as ', h('strong', state.viewer.subject), '. ',
      h('a', { href: '#/servers' }, 'Back to the panel')));
  }
  input.focus();
}

// ---- servers -----------------------------------------------------------------------------------------------

function viewServers(ctx) {
  setTitle('Servers');
  const sub = h('span', '\u00a0');
  const body = h('div.stack', loading('Loading servers…'));
  mount(main, pageHeader({ title: 'Servers', subtitle: sub }), body);

  let servers = [];
  let pageInfo = null;
  let total = 0;

  const draw = () => {
    sub.textContent = total ? `${plural(total, 'server')} · each relays what reaches its inbound URL to its recipients` : '\u00a0';
    if (!servers.length) {
      mount(body, emptyState('server', 'No servers yet',
        'A server gives you an inbound URL; every request sent to it is stored and delivered to the server\u2019s recipients. Create one with the createServer mutation, then add recipients with createRecipient.'));
      return;
    }
    const more = pageInfo && pageInfo.hasNextPage
      ? h('div.more', h('button.btn.btn-secondary', { type: 'button', onclick: loadMore }, 'Load more servers'))
      : null;
    mount(body, servers.map(serverCard), more);
  };

  const fetchPage = (after) => gql(Q.SERVERS, { first: 50, after }, { signal: ctx.signal });

  const load = async () => {
    mount(body, loading('Loading servers…'));
    try {
      const data = await fetchPage(null);
      if (!ctx.alive) return;
      servers = data.servers.edges.map((e) => e.node);
      pageInfo = data.servers.pageInfo;
      total = data.servers.totalCount;
      draw();
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') mount(body, errorState(err, load));
    }
  };

  async function loadMore(e) {
    const btn = e.currentTarget;
    btn.disabled = true;
    btn.classList.add('busy');
    try {
      const data = await fetchPage(pageInfo.endCursor);
      if (!ctx.alive) return;
      servers = servers.concat(data.servers.edges.map((x) => x.node));
      pageInfo = data.servers.pageInfo;
      draw();
    } catch (err) {
      if (!ctx.alive) return;
      btn.disabled = false;
      btn.classList.remove('busy');
      toast(err.message, 'danger');
    }
  }

  // Recipient states and CLI connections change without any delivery event: refresh quietly now and then.
  const timer = setInterval(async () => {
    if (document.visibilityState !== 'visible' || !servers.length || servers.length > 50) return;
    try {
      const data = await fetchPage(null);
      if (!ctx.alive) return;
      const next = data.servers.edges.map((x) => x.node);
      if (JSON.stringify(next) === JSON.stringify(servers)) return;
      servers = next;
      pageInfo = data.servers.pageInfo;
      total = data.servers.totalCount;
      draw();
    } catch { /* keep what is shown */ }
  }, 15000);
  ctx.onCleanup(() => clearInterval(timer));
  load();
}

function serverCard(s) {
  const url = href('/servers/' + s.id);
  const retention = s.retentionDays != null ? `Keeps requests ${plural(s.retentionDays, 'day')}` : 'Keeps requests per plan';
  return h('article.card.server-card', { dataset: { serverId: s.id } },
    h('header.card-head',
      h('div.card-head-text',
        h('h2.card-title', h('a', { href: url }, s.name)),
        h('div.card-sub', h('span', `ID ${s.id}`), h('span', retention),
          h('span', s.deliverPendingOnConnect ? 'CLI backlog delivered on connect' : 'CLI backlog held on connect'))),
      h('a.btn.btn-primary', { href: url, dataset: { role: 'open-server' } }, 'View requests', icon('arrowRight'))),
    h('div.inbound',
      h('span.inbound-label', 'Inbound URL'),
      h('code.inbound-url', s.inboundUrl),
      copyButton(s.inboundUrl)),
    recipientsTable(s.recipients));
}

const SCHEDULES = { QUADRATIC: 'Quadratic', STEPPED: 'Stepped', EXPONENTIAL: 'Exponential' };

function deliveryMethod(r) {
  if (r.method === 'CLI') {
    const connected = r.cliConnected;
    return h('span.method', icon('terminal'), 'adal CLI',
      h('span.cli-status', { class: connected ? 'on' : 'off', dataset: { cliConnected: String(connected) } },
        h('span.status-dot', { class: connected ? 'tone-success' : 'tone-neutral' }),
        connected ? 'CLI connected' : 'CLI not connected'));
  }
  return h('span.method', icon('globe'), 'Direct HTTP');
}

function recipientsTable(recipients) {
  if (!recipients.length) {
    return h('div.card-empty', 'No recipients: requests to this server are stored but delivered nowhere. Add one with createRecipient.');
  }
  return h('div.table-wrap', h('table.table.recipients',
    h('thead', h('tr', h('th', 'Recipient'), h('th', 'Delivery'), h('th', 'Retries'), h('th.right', 'State'))),
    h('tbody', recipients.map((r) => h('tr', { dataset: { recipientId: r.id } },
      h('td', h('div.cell-title', r.name), r.method === 'CLI' ? h('div.cell-sub', 'Forwarded to a developer\u2019s localhost') : h('div.cell-sub.mono', r.url)),
      h('td', deliveryMethod(r)),
      h('td', h('div', `Up to ${plural(r.maxAttempts, 'attempt')}`), h('div.cell-sub', `${SCHEDULES[r.retrySchedule] || titleCase(r.retrySchedule)} schedule`)),
      h('td.right', badge(r.state)))))));
}

// ---- a server's requests -----------------------------------------------------------------------------------

function viewServerRequests(ctx, serverId, query) {
  setTitle('Requests');
  const status = REQUEST_STATUSES.includes(query.get('status')) ? query.get('status') : '';
  const after = query.get('after') || null;
  const before = query.get('before') || null;
  const indicator = liveIndicator();
  const head = h('div', pageHeader({ crumbs: [{ label: 'Servers', href: '#/servers' }, { label: '…' }], title: 'Requests' }));
  const filters = h('div.toolbar',
    h('div.segmented', { role: 'tablist', 'aria-label': 'Filter by status' },
      ['', ...REQUEST_STATUSES].map((s) => h('a.segment', {
        href: href('/servers/' + serverId, { status: s }),
        class: s === status ? 'active' : '',
        role: 'tab',
        'aria-selected': String(s === status),
        dataset: { filter: s || 'ALL' },
      }, s ? h('span.status-dot', { class: 'tone-' + toneOf(s) }) : null, s ? titleCase(s) : 'All'))),
    h('div.spacer'),
    indicator);
  const body = h('div', loading('Loading requests…'));
  mount(main, head, filters, body);

  let loaded = false;
  let lastSnapshot = '';
  const variables = { serverId, where: status ? { status } : null };
  if (before) Object.assign(variables, { last: PAGE_SIZE, before });
  else Object.assign(variables, { first: PAGE_SIZE, after });

  const load = async (quiet) => {
    if (!quiet) mount(body, loading('Loading requests…'));
    try {
      const data = await gql(Q.SERVER_REQUESTS, variables, { signal: ctx.signal }).catch(orNotFound);
      if (!ctx.alive) return;
      if (!data || !data.server) {
        mount(head, pageHeader({ crumbs: [{ label: 'Servers', href: '#/servers' }], title: 'Server not found' }));
        filters.remove();
        mount(body, emptyState('alert', 'Server not found', 'It may have been deleted, or it belongs to another tenant.',
          h('a.btn.btn-secondary', { href: '#/servers' }, 'All servers')));
        return;
      }
      const snapshot = JSON.stringify(data);
      if (quiet && loaded && snapshot === lastSnapshot) return; // nothing changed: keep the DOM (and any selection)
      lastSnapshot = snapshot;
      loaded = true;
      const s = data.server;
      setTitle(s.name);
      mount(head, pageHeader({
        crumbs: [{ label: 'Servers', href: '#/servers' }, { label: s.name }],
        title: s.name,
        subtitle: h('div.inbound.inbound-inline', h('span.inbound-label', 'Inbound URL'), h('code.inbound-url', s.inboundUrl), copyButton(s.inboundUrl)),
      }));
      mount(body, requestsTable(data.requests, s, status, serverId));
    } catch (err) {
      if (!ctx.alive || err.name === 'AbortError') return;
      if (quiet && loaded) return; // keep the table; the next event retries
      mount(body, errorState(err, () => load(false)));
    }
  };
  load(false);
  watch(ctx, {
    query: Q.DELIVERY_UPDATED_FOR_SERVER,
    variables: { serverId },
    refresh: () => load(true),
    indicator,
    pollMs: 10000,
  });
}

function requestsTable(conn, server, status, serverId) {
  const rows = conn.edges.map((e) => e.node);
  if (!rows.length) {
    if (status) {
      return emptyState('inbox', `No ${titleCase(status).toLowerCase()} requests`, 'Nothing on this page matches the filter.',
        h('a.btn.btn-secondary', { href: href('/servers/' + serverId) }, 'Show all requests'));
    }
    return emptyState('inbox', 'No requests yet',
      'Send any HTTP request to the inbound URL and it appears here at once, with its deliveries.',
      h('pre.snippet', `curl -X POST ${server.inboundUrl} \\\n  -H 'Content-Type: application/json' \\\n  -d '{"hello": "adal"}'`));
  }
  const p = conn.pageInfo;
  const base = '/servers/' + serverId;
  const table = h('div.card.table-card', h('div.table-wrap', h('table.table.requests.clickable',
    h('thead', h('tr', h('th', 'Received'), h('th', 'Method'), h('th', 'Path'), h('th', 'Status'), h('th', 'Deliveries'))),
    h('tbody', rows.map((r) => {
      const to = href('/requests/' + r.id);
      const tr = h('tr', { dataset: { requestId: r.id, status: r.status } },
        h('td.nowrap', h('a.row-link', { href: to }, timeEl(r.receivedAt, 'relative')), h('div.cell-sub', timeEl(r.receivedAt))),
        h('td', h('span.http-method', r.method)),
        h('td.path-cell', h('span.mono', r.path || '/', r.query ? h('span.muted', '?' + r.query) : null),
          r.replayOf ? h('span.tag', `replay of #${r.replayOf.id}`) : null),
        h('td', badge(r.status)),
        h('td', deliveriesSummary(r.deliveries || [])));
      tr.addEventListener('click', (e) => {
        if (e.target.closest('a, button') || window.getSelection().toString()) return;
        location.hash = to;
      });
      return tr;
    })))));
  const pager = h('div.pager',
    h('span.muted', `${plural(conn.totalCount, status ? titleCase(status).toLowerCase() + ' request' : 'request')}`),
    h('div.spacer'),
    p.hasPreviousPage
      ? h('a.btn.btn-secondary.btn-sm', { href: href(base, { status, before: p.startCursor }), dataset: { role: 'newer' } }, icon('arrowLeft'), 'Newer')
      : h('button.btn.btn-secondary.btn-sm', { type: 'button', disabled: true }, icon('arrowLeft'), 'Newer'),
    p.hasNextPage
      ? h('a.btn.btn-secondary.btn-sm', { href: href(base, { status, after: p.endCursor }), dataset: { role: 'older' } }, 'Older', icon('arrowRight'))
      : h('button.btn.btn-secondary.btn-sm', { type: 'button', disabled: true }, 'Older', icon('arrowRight')));
  return [table, pager];
}

function deliveriesSummary(deliveries) {
  if (!deliveries.length) return h('span.muted', 'No recipients');
  // One chip per recipient, showing its latest delivery (a manual retry supersedes the earlier one).
  const latest = new Map();
  for (const d of deliveries) {
    const prev = latest.get(d.recipient.id);
    if (!prev || Number(d.id) > Number(prev.id)) latest.set(d.recipient.id, d);
  }
  const chips = [...latest.values()];
  const shown = chips.slice(0, 3);
  return h('div.chips', shown.map((d) => h('span.chip', {
    title: `${d.recipient.name}: ${titleCase(d.status)}, ${plural(d.attemptCount, 'attempt')}${d.trigger === 'MANUAL_RETRY' ? ' (manual retry)' : ''}`,
  }, dot(d.status), h('span.chip-text', d.recipient.name))),
  chips.length > shown.length ? h('span.chip.chip-more', `+${chips.length - shown.length}`) : null);
}

// orNotFound turns a NOT_FOUND answer into "no data", which the views show as their own not-found state.
function orNotFound(err) {
  if (err && err.code === 'NOT_FOUND') return null;
  throw err;
}

// ---- one request -------------------------------------------------------------------------------------------

const TRIGGERS = { AUTOMATIC: 'Automatic', MANUAL_RETRY: 'Manual retry' };
const ERROR_KINDS = {
  HTTP_STATUS: 'HTTP status', TIMEOUT: 'Timeout', DNS: 'DNS', TLS: 'TLS', CONNECTION: 'Connection',
  CLI_LOCAL: 'Local service unreachable', INTERRUPTED: 'Interrupted',
};

function viewRequest(ctx, id) {
  setTitle(`Request #${id}`);
  const indicator = liveIndicator();
  const root = h('div', loading('Loading request…'));
  mount(main, root);
  // UI state that survives live re-renders.
  const ui = { headersOpen: false, bodyOpen: true, pretty: true, statuses: new Map(), request: null };
  let loaded = false;
  let lastSnapshot = '';

  const load = async (quiet) => {
    if (!quiet) mount(root, loading('Loading request…'));
    try {
      const data = await gql(Q.REQUEST, { id }, { signal: ctx.signal }).catch(orNotFound);
      if (!ctx.alive) return;
      if (!data || !data.request) {
        mount(root, pageHeader({ crumbs: [{ label: 'Servers', href: '#/servers' }], title: 'Request not found' }),
          emptyState('alert', 'Request not found', 'It may have expired and been purged with its deliveries, or it belongs to another tenant.',
            h('a.btn.btn-secondary', { href: '#/servers' }, 'All servers')));
        return;
      }
      const snapshot = JSON.stringify(data.request);
      if (quiet && loaded && snapshot === lastSnapshot) return; // nothing changed: keep the DOM (and any selection)
      lastSnapshot = snapshot;
      loaded = true;
      ui.request = data.request;
      mount(root, requestPage(data.request, ui, indicator, () => load(true)));
    } catch (err) {
      if (!ctx.alive || err.name === 'AbortError') return;
      if (quiet && loaded) {
        toast(`Could not refresh: ${err.message}`, 'danger');
        return;
      }
      mount(root, errorState(err, () => load(false)));
    }
  };
  load(false);
  watch(ctx, {
    query: Q.DELIVERY_UPDATED_FOR_REQUEST,
    variables: { requestId: id },
    refresh: () => load(true),
    indicator,
    pollMs: 4000,
    shouldPoll: () => !ui.request || (ui.request.deliveries || []).some((d) => ACTIVE_DELIVERY.has(d.status)),
  });
}

function requestPage(r, ui, indicator, reload) {
  setTitle(`${r.method} ${r.path || '/'} · #${r.id}`);
  const replayBtn = h('button.btn.btn-secondary', { type: 'button', dataset: { role: 'replay' }, onclick: () => replayFlow(r) },
    icon('replay'), 'Replay request', h('span.btn-cost', '1 credit'));
  const head = pageHeader({
    crumbs: [
      { label: 'Servers', href: '#/servers' },
      { label: r.server.name, href: href('/servers/' + r.server.id) },
      { label: `Request #${r.id}` },
    ],
    title: h('span.request-title', h('span.http-method.lg', r.method),
      h('span.mono', r.path || '/', r.query ? h('span.muted', '?' + r.query) : null)),
    subtitle: h('div.title-badges', badge(r.status), indicator),
    actions: replayBtn,
  });

  const meta = h('dl.meta-grid',
    metaItem('Received', h('span', timeEl(r.receivedAt), h('span.muted', ' · ', timeEl(r.receivedAt, 'relative')))),
    metaItem('Expires', h('span', timeEl(r.expiresAt), h('span.muted', ' · ', timeEl(r.expiresAt, 'relative')))),
    metaItem('Request key', h('span.key-line', h('code.mono', r.key), copyButton(r.key, 'Copy'))),
    metaItem('Source', h('span.mono', r.sourceAddr || '—')),
    metaItem('Body', fmtBytes(r.bodySize)),
    metaItem('Lineage', lineage(r)));

  return [
    head,
    h('section.card.meta-card', meta),
    h('section.section',
      h('div.section-head', h('h2', 'Deliveries'), h('span.muted', deliveryCounts(r.deliveries || []))),
      deliveriesByRecipient(r, ui, reload)),
    headersSection(r, ui),
    bodySection(r, ui),
  ];
}

// lineage links a replay to its original and an original to its replays.
function lineage(r) {
  const link = (x) => h('a', { href: href('/requests/' + x.id), dataset: { role: 'lineage' } }, `#${x.id}`);
  const replays = [...(r.replays || [])].sort((a, b) => Number(a.id) - Number(b.id));
  const parts = [];
  if (r.replayOf) parts.push(h('span', 'Replay of ', link(r.replayOf)));
  if (replays.length) {
    parts.push(h('span', 'Replayed as ', replays.slice(0, 5).map((x, i) => [i ? ', ' : '', link(x)]),
      replays.length > 5 ? ` and ${replays.length - 5} more` : ''));
  }
  if (!parts.length) return h('span.muted', 'Original, never replayed');
  return h('span.lineage', parts.map((p, i) => [i ? h('span.muted', ' · ') : null, p]));
}

function metaItem(label, value) {
  return h('div.meta-item', h('dt', label), h('dd', value));
}

function deliveryCounts(deliveries) {
  const counts = {};
  for (const d of deliveries) counts[d.status] = (counts[d.status] || 0) + 1;
  return Object.entries(counts).map(([s, n]) => `${n} ${titleCase(s).toLowerCase()}`).join(' · ');
}

function deliveriesByRecipient(r, ui, reload) {
  const deliveries = [...(r.deliveries || [])].sort((a, b) => Number(a.id) - Number(b.id));
  if (!deliveries.length) {
    return emptyState('inbox', 'No deliveries', 'The server had no active recipients when this request arrived. Replay it to deliver it to the recipients configured now.');
  }
  const groups = new Map();
  for (const d of deliveries) {
    if (!groups.has(d.recipient.id)) groups.set(d.recipient.id, { recipient: d.recipient, deliveries: [] });
    groups.get(d.recipient.id).deliveries.push(d);
  }
  // Highlight what changed since the last render (a live update), never on the first one.
  const changed = new Set();
  const firstRender = ui.statuses.size === 0;
  for (const d of deliveries) {
    const key = `${d.status}/${d.attemptCount}`;
    if (!firstRender && ui.statuses.get(d.id) !== key) changed.add(d.id);
    ui.statuses.set(d.id, key);
  }
  return h('div.stack', [...groups.values()].map((g) => h('article.card.recipient-group', { dataset: { recipientId: g.recipient.id } },
    h('header.group-head',
      h('div.group-title',
        h('h3', g.recipient.name),
        h('div.group-sub', deliveryMethod(g.recipient), g.recipient.method !== 'CLI' ? h('span.mono.muted.url', g.recipient.url) : null)),
      g.recipient.state !== 'ACTIVE' ? badge(g.recipient.state, `Recipient ${titleCase(g.recipient.state).toLowerCase()}`) : null),
    g.deliveries.map((d) => deliveryBlock(d, r, changed.has(d.id), reload)))));
}

function deliveryBlock(d, r, flash, reload) {
  const actions = [];
  if (['FAILED', 'CANCELED', 'SUCCEEDED'].includes(d.status)) {
    actions.push(h('button.btn.btn-secondary.btn-sm', { type: 'button', dataset: { role: 'retry' }, onclick: () => retryFlow(d, reload) },
      icon('retry'), 'Retry', h('span.btn-cost', '1 credit')));
  }
  if (d.status === 'PENDING') {
    actions.push(h('button.btn.btn-danger-ghost.btn-sm', { type: 'button', dataset: { role: 'cancel' }, onclick: () => cancelFlow(d, reload) },
      icon('x'), 'Cancel'));
  }
  const facts = [
    h('span', TRIGGERS[d.trigger] || titleCase(d.trigger)),
    h('span', d.attemptCount ? `Attempt ${d.attemptCount} of ${d.maxAttempts}` : `No attempt yet · up to ${d.maxAttempts}`),
    h('span', 'Created ', timeEl(d.createdAt)),
    d.finishedAt ? h('span', 'Finished ', timeEl(d.finishedAt)) : null,
  ];
  return h('div.delivery', { class: flash ? 'flash' : '', dataset: { deliveryId: d.id, status: d.status } },
    h('div.delivery-head',
      badge(d.status),
      h('div.delivery-facts', facts),
      h('div.spacer'),
      actions),
    nextAttemptNote(d),
    attemptsTable(d));
}

function nextAttemptNote(d) {
  if (d.status === 'IN_PROGRESS') return h('div.note.tone-info', h('span.spinner.sm'), 'Attempt in progress…');
  if (d.status !== 'PENDING') return null;
  const rec = d.recipient;
  if (rec.method === 'CLI' && !rec.cliConnected) {
    return h('div.note.tone-warning', icon('terminal'), 'Waiting for the adal CLI to connect — no attempt is spent meanwhile.');
  }
  if (rec.state === 'PAUSED') return h('div.note.tone-warning', 'Recipient paused — waiting without spending attempts.');
  if (rec.state === 'FROZEN') return h('div.note.tone-warning', 'Recipient frozen after too many failures — no attempts until it is re-enabled.');
  if (d.nextAttemptAt) {
    const label = d.attemptCount ? 'Next attempt' : 'First attempt';
    const due = new Date(d.nextAttemptAt).getTime() <= Date.now();
    return h('div.note.tone-warning', `${label} `, due ? 'due now' : timeEl(d.nextAttemptAt, 'relative'), h('span.muted', ' · ', timeEl(d.nextAttemptAt)));
  }
  return h('div.note.tone-warning', 'Waiting to be scheduled.');
}

function attemptsTable(d) {
  const attempts = [...(d.attempts || [])].sort((a, b) => a.number - b.number);
  if (!attempts.length) {
    if (d.status === 'CANCELED') return h('div.attempts-empty', 'Canceled before any attempt.');
    if (d.status === 'PENDING' || d.status === 'IN_PROGRESS') return null; // the note above says what it waits for
    return h('div.attempts-empty', 'No attempts.');
  }
  return h('div.table-wrap', h('table.table.attempts',
    h('thead', h('tr', h('th.num', '#'), h('th', 'Started'), h('th', 'Status'), h('th', 'HTTP'), h('th.right', 'Duration'), h('th', 'Error'))),
    h('tbody', attempts.map((a) => h('tr', { dataset: { attempt: a.number, status: a.status } },
      h('td.num', String(a.number)),
      h('td.nowrap', timeEl(a.startedAt)),
      h('td', badge(a.status)),
      h('td', a.httpStatus != null ? h('span.http-code', { class: a.httpStatus >= 200 && a.httpStatus < 300 ? 'ok' : 'bad' }, String(a.httpStatus)) : h('span.muted', '—')),
      h('td.right.nowrap.mono', fmtDuration(a.durationMs)),
      h('td.error-cell', a.errorKind
        ? [h('span.error-kind', ERROR_KINDS[a.errorKind] || titleCase(a.errorKind)), a.errorMessage ? h('span.error-message', a.errorMessage) : null]
        : h('span.muted', '—')))))));
}

function headersSection(r, ui) {
  const headers = r.headers || [];
  const det = h('details.card.collapsible', { open: ui.headersOpen, dataset: { section: 'headers' } },
    h('summary', icon('chevron', 'chev'), h('span.summary-title', 'Headers'), h('span.count', String(headers.length))),
    headers.length
      ? h('div.table-wrap', h('table.table.kv', h('tbody', headers.map((x) => h('tr', h('th.mono', x.name), h('td.mono.break', x.value))))))
      : h('div.card-empty', 'No headers.'));
  det.addEventListener('toggle', () => { ui.headersOpen = det.open; });
  return det;
}

function bodySection(r, ui) {
  const ct = (r.headers || []).find((x) => x.name.toLowerCase() === 'content-type');
  let pretty = null;
  if (r.body) {
    try { pretty = JSON.stringify(JSON.parse(r.body), null, 2); } catch { pretty = null; }
  }
  const pre = h('pre.code-block', { dataset: { role: 'body' } });
  const show = () => { pre.textContent = ui.pretty && pretty != null ? pretty : r.body; };
  show();
  const toggle = pretty != null
    ? h('div.segmented.sm',
      h('button.segment', { type: 'button', class: ui.pretty ? 'active' : '', onclick: (e) => { ui.pretty = true; setActive(e); show(); } }, 'Pretty'),
      h('button.segment', { type: 'button', class: ui.pretty ? '' : 'active', onclick: (e) => { ui.pretty = false; setActive(e); show(); } }, 'Raw'))
    : null;
  const det = h('details.card.collapsible', { open: ui.bodyOpen, dataset: { section: 'body' } },
    h('summary', icon('chevron', 'chev'), h('span.summary-title', 'Body'),
      h('span.count', fmtBytes(r.bodySize)), ct ? h('span.muted.mono.sm', ct.value) : null),
    r.bodySize
      ? [h('div.body-toolbar', toggle, h('div.spacer'), copyButton(r.body, 'Copy body')), pre]
      : h('div.card-empty', 'Empty body.'));
  det.addEventListener('toggle', () => { ui.bodyOpen = det.open; });
  return det;
}

function setActive(e) {
  const btn = e.currentTarget;
  for (const s of btn.parentElement.children) s.classList.toggle('active', s === btn);
}

// ---- actions -----------------------------------------------------------------------------------------------

async function retryFlow(d, reload) {
  const result = await confirmAction({
    title: `Retry delivery to ${d.recipient.name}`,
    body: [
      h('p', 'Sends this request to ', h('strong', d.recipient.name),
        ' again as a new delivery, with its own attempts and retry schedule. Other recipients are not affected.'),
      costLine('A manual retry'),
    ],
    confirmLabel: 'Retry · 1 credit',
    action: () => gql(Q.RETRY_DELIVERY, { id: d.id }),
  });
  if (!result) return;
  const after = await balanceAfter();
  toast(`Retry queued for ${d.recipient.name}.${after}`);
  reload();
}

async function cancelFlow(d, reload) {
  const result = await confirmAction({
    title: `Cancel delivery to ${d.recipient.name}`,
    body: [
      h('p', 'No further attempts will be made for this delivery. An attempt that is already in flight is not recalled.'),
      h('p.muted', 'Canceling is free. You can retry a canceled delivery later (1 credit).'),
    ],
    confirmLabel: 'Cancel delivery',
    dismissLabel: 'Keep',
    tone: 'danger',
    action: () => gql(Q.CANCEL_DELIVERY, { id: d.id }),
  });
  if (!result) return;
  toast(`Delivery to ${d.recipient.name} canceled.`);
  reload();
}

async function replayFlow(r) {
  const result = await confirmAction({
    title: `Replay request #${r.id}`,
    body: [
      h('p', 'Creates a new request with the same method, path, headers and body and delivers it to the recipients ',
        h('strong', r.server.name), ' has now. It gets a new key; this request stays unchanged.'),
      costLine('A replay'),
    ],
    confirmLabel: 'Replay · 1 credit',
    action: () => gql(Q.REPLAY_REQUEST, { id: r.id }),
  });
  if (!result) return;
  const after = await balanceAfter();
  const id = result.replayRequest.id;
  toast(`Replayed as request #${id}.${after}`);
  navigate(href('/requests/' + id));
}

// ---- credits -----------------------------------------------------------------------------------------------

const REASONS = {
  PLAN_GRANT: 'Plan grant', CREDIT_GRANT: 'Credit grant', REQUEST_ACCEPTED: 'Request accepted', MANUAL_RETRY: 'Manual retry',
  REPLAY: 'Replay', OUTBOUND: 'Outbound job', PLAN_CHANGE: 'Plan change',
};

function viewCredits(ctx) {
  setTitle('Credits');
  const body = h('div', loading('Loading credits…'));
  mount(main, pageHeader({ title: 'Credits', subtitle: 'Every accepted request, manual retry and replay costs one credit; automatic retries are free.' }), body);
  let entries = [];
  let pageInfo = null;
  let total = 0;
  let viewerData = null;
  const ledgerBody = h('div');

  const drawLedger = () => {
    if (!entries.length) {
      mount(ledgerBody, emptyState('coins', 'No ledger entries yet', 'Grants, accepted requests, retries and replays appear here as they happen.'));
      return;
    }
    mount(ledgerBody,
      h('div.table-wrap', h('table.table.ledger',
        h('thead', h('tr', h('th', 'Date'), h('th', 'Reason'), h('th', 'Reference'), h('th.right', 'Amount'), h('th.right', 'Balance after'))),
        h('tbody', entries.map((e) => h('tr', { dataset: { entryId: e.id } },
          h('td.nowrap', timeEl(e.createdAt)),
          h('td', h('span.reason', { class: 'reason-' + e.reason.toLowerCase() }, REASONS[e.reason] || titleCase(e.reason))),
          h('td.mono.muted.break', e.reference || '—'),
          h('td.right.mono.amount', { class: e.amount > 0 ? 'pos' : e.amount < 0 ? 'neg' : '' }, (e.amount > 0 ? '+' : '') + fmtNumber(e.amount)),
          h('td.right.mono', fmtNumber(e.balanceAfter))))))),
      h('div.pager', h('span.muted', `${plural(entries.length, 'entry', 'entries')} of ${fmtNumber(total)}`), h('div.spacer'),
        pageInfo.hasNextPage ? h('button.btn.btn-secondary.btn-sm', { type: 'button', onclick: more }, 'Load older entries') : null));
  };

  const load = async () => {
    mount(body, loading('Loading credits…'));
    try {
      const data = await gql(Q.LEDGER, { first: 50 }, { signal: ctx.signal });
      if (!ctx.alive) return;
      viewerData = data.viewer;
      entries = data.ledger.edges.map((e) => e.node);
      pageInfo = data.ledger.pageInfo;
      total = data.ledger.totalCount;
      if (viewerData.tenant) {
        state.viewer = { ...state.viewer, tenant: { ...state.viewer.tenant, creditBalance: viewerData.tenant.creditBalance } };
        updateBalance();
      }
      mount(body, summaryCards(viewerData), h('section.card.table-card', h('div.card-title-bar', h('h2', 'Ledger'), h('span.muted', 'Newest first')), ledgerBody));
      drawLedger();
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') mount(body, errorState(err, load));
    }
  };

  async function more(e) {
    const btn = e.currentTarget;
    btn.disabled = true;
    btn.classList.add('busy');
    try {
      const data = await gql(Q.LEDGER, { first: 50, after: pageInfo.endCursor }, { signal: ctx.signal });
      if (!ctx.alive) return;
      entries = entries.concat(data.ledger.edges.map((x) => x.node));
      pageInfo = data.ledger.pageInfo;
      drawLedger();
    } catch (err) {
      if (!ctx.alive) return;
      btn.disabled = false;
      btn.classList.remove('busy');
      toast(err.message, 'danger');
    }
  }
  load();
}

function summaryCards(v) {
  if (!v.tenant) {
    return h('div.alert.alert-info', icon('coins'), h('div.alert-body',
      h('strong.alert-title', 'Operator view'),
      h('span.alert-message', 'Operators have no balance of their own; the ledger below lists every tenant\u2019s entries.')));
  }
  const t = v.tenant;
  const p = t.plan;
  return h('div.stat-grid',
    h('div.card.stat', { class: t.creditBalance <= 0 ? 'low' : '' },
      h('div.stat-label', 'Balance'),
      h('div.stat-value', { dataset: { role: 'credits-balance' } }, fmtNumber(t.creditBalance), h('span.stat-unit', 'credits')),
      h('div.stat-sub', t.creditBalance <= 0 ? 'Out of credits: new requests are refused with 402 until credits are added.' : `${t.name}`)),
    h('div.card.stat',
      h('div.stat-label', 'Plan'),
      h('div.stat-value.sm', p ? p.name : '—'),
      h('div.stat-sub', p ? `${fmtNumber(p.monthlyCredits)} credits each month · requests kept ${plural(p.retentionDays, 'day')}` : '')));
}

// ---- start -------------------------------------------------------------------------------------------------

window.addEventListener('hashchange', render);
setInterval(() => tickTimes(main), 15000);
render();
