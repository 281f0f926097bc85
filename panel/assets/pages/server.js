// One server: its requests (filtered by status, event type and time, live), its recipients, its requests per
// hour, and its settings (name, retention, rate limit, CLI backlog, where a request's event type is read and
// whether bodies are checked against its schema, sender verification with its recent rejections, allowed
// methods, the answer senders get, inbound key rotation, deletion).

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import {
  h, mount, icon, badge, dot, toneOf, titleCase, timeEl, plural, copyButton, loading, emptyState, errorState, toast,
  confirmAction,
} from '../ui.js';
import { href, navigate } from '../router.js';
import { canManage, isOperator, refreshViewer } from '../session.js';
import { limits, checks, printable, methodList } from '../limits.js';
import { createForm } from '../form.js';
import { setTitle, pageHeader, tabs, liveIndicator, watch, poller, orNotFound, costLine, snippet, section } from '../page.js';
import { dataTable } from '../table.js';
import { SCHEDULES, deliveryMethod, stateBadge, confirmDelete } from './shared.js';
import { serverFields, serverInput } from './servers.js';
import { stateActions } from './recipient.js';
import { bulkController } from './bulk.js';
import { serverActivity } from './charts.js';

const PAGE_SIZE = 25;
const REQUEST_STATUSES = ['PENDING', 'DELIVERED', 'FAILED', 'PARTIAL'];
const RANGES = { '': 'Any time', '1h': 'Last hour', '24h': 'Last 24 hours', '7d': 'Last 7 days', custom: 'Custom range' };
const RANGE_MS = { '1h': 3600e3, '24h': 86400e3, '7d': 7 * 86400e3 };
// A search is 3 to 256 characters, as the API takes it.
const SEARCH_MIN = 3;
const SEARCH_MAX = 256;
const searchError = (v) => {
  const n = [...v].length;
  return v && (n < SEARCH_MIN || n > SEARCH_MAX) ? `search must be ${SEARCH_MIN} to ${SEARCH_MAX} characters, got ${n}` : '';
};

export function viewServer(ctx, main, id, tab, query) {
  setTitle('Server');
  const head = h('div', pageHeader({ crumbs: [{ label: 'Servers', href: '#/servers' }, { label: '…' }], title: '\u00a0' }));
  const body = h('div', loading('Loading server…'));
  mount(main, head, body);

  const load = async () => {
    let data;
    try {
      data = await gql(Q.SERVER, { id, withTenant: isOperator() }, { signal: ctx.signal }).catch(orNotFound);
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') mount(body, errorState(err, load));
      return;
    }
    if (!ctx.alive) return;
    const s = data && data.server;
    if (!s || s.deletedAt) {
      mount(head, pageHeader({ crumbs: [{ label: 'Servers', href: '#/servers' }], title: 'Server not found' }));
      mount(body, emptyState('alert', 'Server not found', 'It may have been deleted, or it belongs to another tenant.',
        h('a.btn.btn-secondary', { href: '#/servers' }, 'All servers')));
      return;
    }
    setTitle(s.name);
    mount(head, serverHeader(s, tab));
    if (tab === 'recipients') recipientsTab(ctx, body, s);
    else if (tab === 'settings') settingsTab(ctx, body, s, load);
    else if (tab === 'activity') mount(body, section('Requests per hour', { id: 'activity', sub: 'Stored per UTC hour, by the time they were received' }, serverActivity(ctx, s.id)));
    else requestsTab(ctx, body, s, query);
  };
  load();
}

function serverHeader(s, tab) {
  const base = '/servers/' + s.id;
  return [
    pageHeader({
      crumbs: [{ label: 'Servers', href: '#/servers' }, { label: s.name }],
      title: s.name,
      subtitle: [
        s.tenant ? h('div.muted', 'Tenant ', h('a', { href: href('/tenants/' + s.tenant.id) }, s.tenant.name)) : null,
        h('div.inbound.inbound-inline', h('span.inbound-label', 'Inbound URL'), h('code.inbound-url', s.inboundUrl), copyButton(s.inboundUrl)),
      ],
    }),
    tabs([
      { key: 'requests', label: 'Requests', href: href(base), icon: 'inbox' },
      { key: 'recipients', label: 'Recipients', href: href(base + '/recipients'), icon: 'send', count: s.recipients.length },
      { key: 'activity', label: 'Activity', href: href(base + '/activity'), icon: 'chart' },
      { key: 'settings', label: 'Settings', href: href(base + '/settings'), icon: 'settings' },
    ], tab),
  ];
}

// ---- requests ----------------------------------------------------------------------------------------------

// timeWhere turns the range in the address into the requests filter.
function timeWhere(query) {
  const range = query.get('range') || '';
  if (RANGE_MS[range]) return { receivedAtGTE: new Date(Date.now() - RANGE_MS[range]).toISOString() };
  const out = {};
  const since = query.get('since');
  const until = query.get('until');
  if (since && !Number.isNaN(Date.parse(since))) out.receivedAtGTE = new Date(since).toISOString();
  if (until && !Number.isNaN(Date.parse(until))) out.receivedAtLTE = new Date(until).toISOString();
  return out;
}

// localInput is a time as a datetime-local input shows it.
function localInput(iso) {
  if (!iso || Number.isNaN(Date.parse(iso))) return '';
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function requestsTab(ctx, body, s, query) {
  const serverId = s.id;
  const base = '/servers/' + serverId;
  const status = REQUEST_STATUSES.includes(query.get('status')) ? query.get('status') : '';
  const range = query.get('since') || query.get('until') ? 'custom' : (RANGES[query.get('range')] ? query.get('range') || '' : '');
  const typed = query.get('q') || '';
  const badSearch = searchError(typed);
  const search = badSearch ? '' : typed;
  const type = (query.get('type') || '').trim();
  const filters = { status, range: range === 'custom' ? '' : range, since: query.get('since'), until: query.get('until'), q: search, type };
  const after = query.get('after') || null;
  const before = search ? null : query.get('before') || null;
  const indicator = liveIndicator();

  const rangeSelect = h('select.input.plain.input-sm', { id: 'range', 'aria-label': 'Received' },
    Object.entries(RANGES).map(([v, label]) => h('option', { value: v, selected: v === range }, label)));
  const since = h('input.input.plain.input-sm', { type: 'datetime-local', id: 'since', value: localInput(filters.since) });
  const until = h('input.input.plain.input-sm', { type: 'datetime-local', id: 'until', value: localInput(filters.until) });
  const custom = h('form.time-range', { hidden: range !== 'custom', dataset: { role: 'custom-range' } },
    h('label.sr', { for: 'since' }, 'From'), h('span.muted.sm', 'From'), since,
    h('label.sr', { for: 'until' }, 'To'), h('span.muted.sm', 'to'), until,
    h('button.btn.btn-secondary.btn-sm', { type: 'submit' }, 'Apply'));
  const go = (params) => navigate(href(base, { ...filters, ...params }));
  rangeSelect.addEventListener('change', () => {
    if (rangeSelect.value === 'custom') { custom.hidden = false; since.focus(); return; }
    go({ range: rangeSelect.value, since: null, until: null });
  });
  custom.addEventListener('submit', (e) => {
    e.preventDefault();
    go({ range: null, since: since.value ? new Date(since.value).toISOString() : null, until: until.value ? new Date(until.value).toISOString() : null });
  });

  // The search is in the address like the other filters, so a search can be linked and reloaded.
  const searchInput = h('input.input.plain.input-sm.search-input', {
    type: 'search', id: 'search', name: 'q', value: typed, placeholder: 'Text in the path, headers or body',
    maxlength: SEARCH_MAX, autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'search-error',
    'aria-invalid': badSearch ? 'true' : 'false',
  });
  const searchErr = h('span.field-error', { id: 'search-error', role: 'alert' }, badSearch);
  const searchForm = h('form.search-form', { role: 'search', dataset: { role: 'search' }, novalidate: true },
    h('label.sr', { for: 'search' }, 'Search requests'), searchInput,
    h('button.btn.btn-secondary.btn-sm', { type: 'submit' }, 'Search'),
    search ? h('a.btn.btn-ghost.btn-sm', { href: href(base, { ...filters, q: null }), dataset: { role: 'clear-search' } }, 'Clear') : null,
    searchErr);
  searchForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const v = searchInput.value;
    const msg = searchError(v);
    searchErr.textContent = msg;
    searchInput.setAttribute('aria-invalid', msg ? 'true' : 'false');
    if (msg) { searchInput.focus(); return; }
    go({ q: v || null });
  });
  searchInput.addEventListener('input', () => {
    if (searchErr.textContent && !searchError(searchInput.value)) { searchErr.textContent = ''; searchInput.setAttribute('aria-invalid', 'false'); }
  });

  // The type filter offers the tenant's event types, and takes any name: requests keep a deleted type's.
  const typeInput = h('input.input.plain.input-sm.type-input', {
    type: 'text', id: 'event-type', name: 'type', value: type, list: 'event-type-names', placeholder: 'Any type',
    autocomplete: 'off', spellcheck: 'false', dataset: { role: 'type-filter' },
  });
  const typeNames = h('datalist', { id: 'event-type-names' });
  gql(Q.EVENT_TYPE_NAMES, {}, { signal: ctx.signal })
    .then((d) => mount(typeNames, d.eventTypes.edges.map((e) => h('option', { value: e.node.name }))))
    .catch(() => { /* the field still takes a typed name */ });
  const typeForm = h('form.search-form', { dataset: { role: 'type-form' }, novalidate: true },
    h('label.inline-label', { for: 'event-type' }, 'Type'), typeInput, typeNames,
    type ? h('a.btn.btn-ghost.btn-sm', { href: href(base, { ...filters, type: null }), dataset: { role: 'clear-type' } }, 'Any type') : null);
  const byType = (e) => {
    e.preventDefault();
    if (typeInput.value.trim() !== type) go({ type: typeInput.value.trim() || null });
  };
  typeForm.addEventListener('submit', byType);
  typeInput.addEventListener('change', byType);

  const toolbar = h('div.toolbar',
    searchForm,
    h('div.segmented', { role: 'group', 'aria-label': 'Filter by status' },
      ['', ...REQUEST_STATUSES].map((st) => h('a.segment', {
        href: href(base, { ...filters, status: st }),
        class: st === status ? 'active' : '',
        'aria-current': st === status ? 'true' : null,
        dataset: { filter: st || 'ALL' },
      }, st ? h('span.status-dot', { class: 'tone-' + toneOf(st) }) : null, st ? titleCase(st) : 'All'))),
    h('label.inline-label', { for: 'range' }, 'Received'), rangeSelect, custom,
    typeForm,
    h('div.spacer'),
    indicator);
  const list = h('div', loading('Loading requests…'));
  const times = timeWhere(query);
  let load = () => {};
  const bulk = bulkController(ctx, { server: s, scope: { search, status, eventType: type, ...times }, reloadList: () => load(true) });
  mount(body, toolbar, bulk.progressSlot, bulk.bar, list, bulk.jobsSlot);

  let loaded = false;
  let lastSnapshot = '';
  const where = { ...times };
  if (status) where.status = status;
  if (type) where.eventType = type;
  const variables = { serverId, where: Object.keys(where).length ? where : null };
  if (search) variables.search = search;
  if (before) Object.assign(variables, { last: PAGE_SIZE, before });
  else Object.assign(variables, { first: PAGE_SIZE, after });
  const filtered = !!(status || search || Object.keys(where).length);

  load = async (quiet) => {
    if (!quiet) mount(list, loading(search ? 'Searching…' : 'Loading requests…'));
    try {
      const data = await gql(Q.SERVER_REQUESTS, variables, { signal: ctx.signal }).catch(orNotFound);
      if (!ctx.alive) return;
      if (!data || !data.server) {
        mount(list, emptyState('alert', 'Server not found', 'It may have been deleted, or it belongs to another tenant.'));
        return;
      }
      const snapshot = JSON.stringify(data);
      if (quiet && loaded && snapshot === lastSnapshot) return; // nothing changed: keep the DOM (and any selection)
      lastSnapshot = snapshot;
      // A new request spent a credit: the header's balance follows.
      if (loaded) refreshViewer().catch(() => {});
      loaded = true;
      bulk.setRows(data.requests.edges.map((e) => e.node), data.requests.pageInfo.hasNextPage || !!after || !!before);
      mount(list, requestsTable(data.requests, data.server, { status, filtered, base, filters, search, after, select: bulk.column }));
    } catch (err) {
      if (!ctx.alive || err.name === 'AbortError') return;
      if (quiet && loaded) return; // keep the table; the next event retries
      mount(list, errorState(err, () => load(false)));
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

// curlLine is a test webhook a person can paste into a shell.
export const curlLine = (inboundUrl) => `curl -X POST '${inboundUrl}/test' -H 'Content-Type: application/json' -d '{"hello": "adal"}'`;

function requestsTable(conn, server, { status, filtered, base, filters, search, after, select }) {
  const rows = conn.edges.map((e) => e.node);
  const p = conn.pageInfo;
  const keep = { status, range: filters.range, since: filters.since, until: filters.until, q: filters.q, type: filters.type };
  if (!rows.length) {
    if (search) {
      const older = conn.search && conn.search.stoppedEarly && p.hasNextPage;
      return emptyState('inbox', `No requests contain “${search}”`,
        conn.search ? `${plural(conn.search.scanned, 'request')} examined${older ? ', the search stopped at its bound: older ones were not examined yet' : ''}.` : 'Nothing matches the search.',
        older ? h('a.btn.btn-secondary', { href: href(base, { ...keep, after: p.endCursor }), dataset: { role: 'search-older' } }, 'Search older requests') : null,
        h('a.btn.btn-secondary', { href: href(base, { ...keep, q: null }) }, 'Clear the search'));
    }
    if (filtered) {
      const what = status ? `No ${titleCase(status).toLowerCase()} requests` : filters.type ? 'No requests' : 'No requests in this range';
      return emptyState('inbox', filters.type ? `${what} of type ${filters.type}` : what, 'Nothing matches the filter.',
        h('a.btn.btn-secondary', { href: href(base) }, 'Show all requests'));
    }
    return emptyState('inbox', 'Send a test webhook',
      'Send any HTTP request to the inbound URL — any method, path and query after it — and it appears here at once, with its deliveries.',
      snippet(curlLine(server.inboundUrl), 'Copy command', 'curl'),
      !server.recipients.length && canManage()
        ? h('p.muted', 'It will be stored but delivered nowhere until the server has a recipient: ',
          h('a', { href: href(base + '/recipients/new') }, 'add one'), '.')
        : null);
  }
  const table = h('div.card.table-card', dataTable({
    className: 'requests',
    rows,
    link: (r) => href('/requests/' + r.id),
    rowProps: (r) => ({ dataset: { requestId: r.id, status: r.status } }),
    columns: [
      select || null,
      { label: 'Received', className: 'nowrap', cell: (r) => [h('a.row-link', { href: href('/requests/' + r.id) }, timeEl(r.receivedAt, 'relative')), h('div.cell-sub', timeEl(r.receivedAt))] },
      { label: 'Method', cell: (r) => h('span.http-method', r.method) },
      { label: 'Path', className: 'path-cell', cell: (r) => [h('span.mono', r.path || '/', r.query ? h('span.muted', '?' + r.query) : null), r.replayOf ? h('a.tag', { href: href('/requests/' + r.replayOf.id) }, `replay of #${r.replayOf.id}`) : null] },
      { label: 'Type', className: 'type-cell', cell: (r) => typeCell(r, base, keep) },
      { label: 'Status', cell: (r) => badge(r.status) },
      { label: 'Deliveries', cell: (r) => deliveriesSummary(r.deliveries || []) },
    ].filter(Boolean),
  }));
  if (search) {
    // A search pages forward only; its count is this page's matches.
    const sr = conn.search || { scanned: 0, stoppedEarly: false };
    return [table, h('div.pager', { dataset: { role: 'search-pager' } },
      h('span.muted', { dataset: { role: 'search-summary' } },
        `${plural(conn.totalCount, 'match', 'matches')} for “${search}” · ${plural(sr.scanned, 'request')} examined`,
        sr.stoppedEarly ? ' · stopped at the search\u2019s bound' : ''),
      h('div.spacer'),
      after ? h('a.btn.btn-secondary.btn-sm', { href: href(base, keep), dataset: { role: 'newest' } }, icon('arrowLeft'), 'Newest') : null,
      p.hasNextPage
        ? h('a.btn.btn-secondary.btn-sm', { href: href(base, { ...keep, after: p.endCursor }), dataset: { role: 'older' } }, 'Search older', icon('arrowRight'))
        : h('button.btn.btn-secondary.btn-sm', { type: 'button', disabled: true }, 'Search older', icon('arrowRight')))];
  }
  const pager = h('div.pager',
    h('span.muted', `${plural(conn.totalCount, status ? titleCase(status).toLowerCase() + ' request' : 'request')}`),
    h('div.spacer'),
    p.hasPreviousPage
      ? h('a.btn.btn-secondary.btn-sm', { href: href(base, { ...keep, before: p.startCursor }), dataset: { role: 'newer' } }, icon('arrowLeft'), 'Newer')
      : h('button.btn.btn-secondary.btn-sm', { type: 'button', disabled: true }, icon('arrowLeft'), 'Newer'),
    p.hasNextPage
      ? h('a.btn.btn-secondary.btn-sm', { href: href(base, { ...keep, after: p.endCursor }), dataset: { role: 'older' } }, 'Older', icon('arrowRight'))
      : h('button.btn.btn-secondary.btn-sm', { type: 'button', disabled: true }, 'Older', icon('arrowRight')));
  return [table, pager];
}

// typeCell is a request's event type, a link to the list of that type, and why its body does not follow the
// type's schema when a server in shadow mode accepted it anyway.
function typeCell(r, base, keep) {
  return [
    r.eventType
      ? h('a.type-tag.mono', { href: href(base, { ...keep, type: r.eventType }), dataset: { role: 'event-type' }, title: `Only requests of type ${r.eventType}` }, r.eventType)
      : h('span.muted', '—'),
    r.schemaError ? h('div.cell-sub.schema-error', { dataset: { role: 'schema-error' }, title: r.schemaError }, icon('alert'), 'Does not follow the schema') : null,
  ];
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
    dataset: { status: d.status },
  }, dot(d.status), h('span.chip-text', d.recipient.name))),
  chips.length > shown.length ? h('span.chip.chip-more', `+${chips.length - shown.length}`) : null);
}

// ---- recipients --------------------------------------------------------------------------------------------

function recipientsTab(ctx, body, s) {
  const base = '/servers/' + s.id;
  const indicator = liveIndicator();
  const add = canManage()
    ? h('a.btn.btn-primary', { href: href(base + '/recipients/new'), dataset: { role: 'new-recipient' } }, icon('plus'), 'Add recipient')
    : null;
  const draw = (recipients) => {
    if (!recipients.length) {
      return emptyState('send', 'Add a recipient',
        'A recipient is where this server\u2019s requests go: a URL (direct HTTP), or a developer\u2019s machine through the adal CLI. Each has its own retries.',
        add ? h('a.btn.btn-primary', { href: href(base + '/recipients/new'), dataset: { role: 'empty-new-recipient' } }, icon('plus'), 'Add a recipient') : null);
    }
    return h('div.card.table-card', dataTable({
      className: 'recipients',
      rows: recipients,
      link: (r) => href('/recipients/' + r.id),
      rowProps: (r) => ({ dataset: { recipientId: r.id, state: r.state } }),
      columns: [
        {
          label: 'Recipient',
          cell: (r) => [h('div.cell-title', h('a.row-link', { href: href('/recipients/' + r.id) }, r.name)),
            r.method === 'CLI' ? h('div.cell-sub', 'Forwarded to a developer\u2019s localhost') : h('div.cell-sub.mono', r.url),
            r.eventTypes && r.eventTypes.length ? h('div.cell-sub', { dataset: { role: 'event-types' } }, 'Takes ', h('span.mono', r.eventTypes.join(', '))) : null],
        },
        { label: 'Delivery', cell: (r) => deliveryMethod(r) },
        { label: 'Retries', cell: (r) => [h('div', `Up to ${plural(r.maxAttempts, 'attempt')}`), h('div.cell-sub', `${SCHEDULES[r.retrySchedule] || r.retrySchedule} · ${r.timeoutSeconds} s timeout`)] },
        { label: 'State', cell: (r) => stateBadge(r) },
        canManage() ? { label: 'Actions', right: true, cell: (r) => h('div.row-actions', stateActions(r, refresh, { compact: true })) } : null,
      ].filter(Boolean),
    }));
  };
  const listEl = h('div', draw(s.recipients));
  mount(body, h('div.toolbar', h('span.muted', plural(s.recipients.length, 'recipient')), h('div.spacer'), indicator, add), listEl);
  let last = JSON.stringify(s.recipients);
  async function refresh() {
    try {
      const data = await gql(Q.SERVER, { id: s.id, withTenant: false }, { signal: ctx.signal });
      if (!ctx.alive || !data.server) return;
      const now = JSON.stringify(data.server.recipients);
      if (now === last) return;
      last = now;
      mount(listEl, draw(data.server.recipients));
    } catch { /* keep what is shown */ }
  }
  // A recipient's state and its CLI's connection change without delivery events.
  poller(ctx, { refresh, indicator, ms: 3000 });
}

// ---- settings ----------------------------------------------------------------------------------------------

// drafts are, by server, the unsaved changes of its settings forms while the tab is rebuilt after a save.
const drafts = new Map();

async function settingsTab(ctx, body, s, reload) {
  if (!canManage()) {
    mount(body, h('div.alert.alert-info', icon('settings'), h('div.alert-body',
      h('strong.alert-title', 'Read only'), h('span.alert-message', 'Only the tenant\u2019s owner or an operator changes a server\u2019s settings.'))));
    return;
  }
  mount(body, loading('Loading…'));
  let L;
  try { L = await limits(); } catch (err) { if (ctx.alive) mount(body, errorState(err, () => settingsTab(ctx, body, s, reload))); return; }
  if (!ctx.alive) return;
  const form = createForm({
    role: 'server-settings',
    fields: serverFields(L, s),
    cost: () => costLine(0),
    submitLabel: 'Save changes',
    onSubmit: (v) => gql(Q.UPDATE_SERVER, { id: s.id, input: serverInput(v, false) }),
    onDone: () => { toast(`Settings of ${s.name} saved.`); reloadKeeping('server-settings'); },
  });

  const graceOptions = [
    { value: '0', label: 'Refuse the old URL at once' },
    { value: '3600', label: 'Keep the old URL for 1 hour' },
    { value: String(L.keyGraceSecondsDefault), label: `Keep the old URL for ${L.keyGraceSecondsDefault / 3600} hours` },
    { value: String(7 * 86400), label: 'Keep the old URL for 7 days' },
    { value: String(L.keyGraceSecondsMax), label: `Keep the old URL for ${L.keyGraceSecondsMax / 86400} days` },
  ];
  const rotate = createForm({
    role: 'rotate-key',
    fields: [{ name: 'graceSeconds', label: 'The old URL', type: 'select', value: String(L.keyGraceSecondsDefault), options: graceOptions, optionalNote: false }],
    cost: () => costLine(0),
    submitLabel: 'Rotate inbound key',
    onSubmit: async (v) => {
      const grace = Number(v.graceSeconds);
      const ok = await confirmAction({
        title: `Rotate the inbound key of ${s.name}`,
        body: [
          h('p', 'The server gets a new inbound URL at once. Give it to your senders.'),
          h('p', grace
            ? `The current URL keeps working for ${graceOptions.find((o) => o.value === v.graceSeconds).label.replace('Keep the old URL for ', '')}, then answers 404: senders still using it stop working.`
            : 'The current URL stops working at once: it answers 404 from now on.'),
          costLine(0),
        ],
        confirmLabel: 'Rotate key',
        action: () => gql(Q.ROTATE_INBOUND_KEY, { serverId: s.id, graceSeconds: grace }),
      });
      return ok;
    },
    onDone: (result) => {
      if (!result) return;
      const r = result.rotateInboundKey;
      toast(r.previousKeyExpiresAt ? `New inbound URL ready; the old one works until ${new Date(r.previousKeyExpiresAt).toLocaleString()}.` : 'New inbound URL ready; the old one is refused.');
      reloadKeeping('rotate-key');
    },
  });

  const verification = createForm({
    role: 'verification-form',
    fields: verificationFields(s.verification, L),
    cost: () => costLine(0),
    submitLabel: 'Save verification',
    onSubmit: (v) => gql(Q.UPDATE_SERVER, { id: s.id, input: { verification: verificationInput(v) } }),
    onDone: (_, v) => {
      const kind = v['verification.kind'];
      toast(kind === 'NONE' ? `${s.name} verifies nothing now.` : `${s.name} now verifies ${KIND_LABELS[kind]}${v['verification.enforce'] === 'false' ? ', in shadow mode' : ''}.`);
      reloadKeeping('verification-form');
    },
  });
  const intake = createForm({
    role: 'intake-form',
    fields: intakeFields(s, L),
    cost: () => costLine(0),
    submitLabel: 'Save methods and answer',
    onSubmit: (v) => gql(Q.UPDATE_SERVER, { id: s.id, input: intakeInput(v) }),
    onDone: () => { toast(`What ${s.name} accepts and answers is saved.`); reloadKeeping('intake-form'); },
  });
  // Saving one form rebuilds the tab from the saved server; what the user changed in the others and has not
  // saved yet is carried over to the rebuilt forms.
  const forms = { 'server-settings': form, 'rotate-key': rotate, 'verification-form': verification, 'intake-form': intake };
  const reloadKeeping = (saved) => {
    const kept = {};
    for (const [role, f] of Object.entries(forms)) if (role !== saved) kept[role] = f.edited();
    drafts.set(s.id, kept);
    reload();
  };
  const kept = drafts.get(s.id);
  drafts.delete(s.id);
  if (kept) for (const [role, f] of Object.entries(forms)) f.restore(kept[role]);

  const deleteBtn = h('button.btn.btn-danger-ghost', { type: 'button', dataset: { role: 'delete-server' }, onclick: () => deleteServerFlow(s) }, icon('trash'), 'Delete server');
  mount(body, h('div.stack',
    section('Settings', { id: 'settings' }, form.el),
    section('Sender verification', { id: 'verification', sub: 'Check that requests come from your sender' },
      verificationStatus(s.verification), verification.el),
    rejectionsSection(ctx, s),
    section('Methods and answer', { id: 'intake', sub: 'What senders may send, and what they get back' }, intake.el),
    section('Inbound key', {
      id: 'rotate', sub: s.previousKeyExpiresAt ? ['A replaced key works until ', timeEl(s.previousKeyExpiresAt)] : 'Rotate it if the URL leaked',
    }, h('p.muted', 'Rotating gives the server a new inbound URL. The old one can keep working for a while so senders can move over.'), rotate.el),
    section('Delete this server', { id: 'danger' },
      h('p', 'Intake stops at once; its recipients are deleted and their pending deliveries canceled. Stored requests stay readable until they expire.'),
      deleteBtn)));
}

// ---- senders: verification, rejections, methods, answer -------------------------------------------------------

const KINDS = [
  ['NONE', 'Nothing (every request is accepted)'],
  ['HMAC', 'HMAC signature in a header of your choice'],
  ['GITHUB', 'GitHub (X-Hub-Signature-256)'],
  ['STRIPE', 'Stripe (Stripe-Signature)'],
  ['SHOPIFY', 'Shopify (X-Shopify-Hmac-Sha256)'],
  ['SLACK', 'Slack (X-Slack-Signature)'],
  ['STANDARD_WEBHOOKS', 'Standard Webhooks (webhook-signature)'],
  ['BASIC', 'HTTP Basic authentication'],
  ['API_KEY', 'An API key in a header or the query'],
];
const KIND_LABELS = {
  NONE: 'nothing', HMAC: 'an HMAC signature', GITHUB: 'GitHub signatures', STRIPE: 'Stripe signatures', SHOPIFY: 'Shopify signatures',
  SLACK: 'Slack signatures', STANDARD_WEBHOOKS: 'Standard Webhooks signatures', BASIC: 'HTTP Basic credentials', API_KEY: 'an API key',
};
const TIMESTAMPED = ['STRIPE', 'SLACK', 'STANDARD_WEBHOOKS'];
const SECRET_WORD = { BASIC: 'password', API_KEY: 'key' };
const RESERVED_HEADER = /^(x-adal-.*|host|content-length|transfer-encoding|connection)$/i;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}$/;

// verificationStatus says what the server checks now, and whether secrets are set (never what they are).
function verificationStatus(ver) {
  if (ver.kind === 'NONE') {
    return h('p.muted', { dataset: { role: 'verification-status', kind: 'NONE' } }, 'Now: nothing is checked; deliveries carry no X-Adal-Verified header.');
  }
  const where = ver.queryParameter ? `the ${ver.queryParameter} query parameter` : ver.headers.join(', ');
  return h('p', { dataset: { role: 'verification-status', kind: ver.kind, enforce: String(ver.enforce) } },
    h('strong', `Now: ${KINDS.find(([k]) => k === ver.kind)[1]}`), ` · reads ${where} · `,
    ver.enforce ? 'enforced: failures are refused with 401 and not stored' : 'shadow mode: failures are accepted, marked X-Adal-Verified: false',
    ' · ', h('span', { dataset: { role: 'secret-count' } }, ver.secretCount ? `${plural(ver.secretCount, 'secret')} set` : 'no secret set'), '.');
}

// verificationFields edit a server's verification; ver is the current one. Secrets are write-only: the form
// only says how many are set.
function verificationFields(ver, L) {
  const kind = (v) => v['verification.kind'];
  const is = (...kinds) => (v) => kinds.includes(kind(v));
  const keyIn = (where) => (v) => kind(v) === 'API_KEY' && v.keyIn === where;
  const same = (v) => kind(v) === ver.kind && ver.secretCount > 0;
  return [
    {
      name: 'verification.kind', label: 'Check', type: 'select', value: ver.kind, options: KINDS.map(([value, label]) => ({ value, label })),
      hint: 'A request that fails the check is answered 401 and kept only as a rejection (no body), unless in shadow mode.',
    },
    {
      name: 'verification.enforce', label: 'When a request fails', type: 'radio', value: String(ver.kind === 'NONE' ? true : ver.enforce), show: (v) => kind(v) !== 'NONE',
      options: [
        { value: 'true', label: 'Enforce', hint: 'Refuse it with 401: nothing is stored, charged or delivered' },
        { value: 'false', label: 'Shadow mode', hint: 'Accept and deliver it, marked X-Adal-Verified: false, to try the settings first' },
      ],
    },
    {
      name: 'keyIn', label: 'The key is sent in', type: 'radio', value: ver.queryParameter ? 'query' : 'header', show: is('API_KEY'),
      options: [
        { value: 'header', label: 'A header', hint: 'As is, or after Bearer' },
        { value: 'query', label: 'A query parameter', hint: 'Of the URL the sender calls' },
      ],
    },
    {
      name: 'verification.header', label: 'Header', mono: true, value: ver.header || '', show: (v) => kind(v) === 'HMAC' || keyIn('header')(v), optionalNote: false,
      attrs: { placeholder: 'X-Signature' },
      check: (v, all) => {
        if (!v) return kind(all) === 'HMAC' ? 'verification.header is required for HMAC' : 'verification: API_KEY takes exactly one of header or queryParameter';
        if (!HEADER_NAME.test(v)) return 'verification.header must be a valid HTTP header name of at most 100 characters';
        if (RESERVED_HEADER.test(v)) return `verification.header "${v}" is not a header a sender controls`;
        return '';
      },
    },
    {
      name: 'verification.queryParameter', label: 'Query parameter', mono: true, value: ver.queryParameter || '', show: keyIn('query'), optionalNote: false,
      attrs: { placeholder: 'api_key' },
      check: (v) => {
        if (!v) return 'verification: API_KEY takes exactly one of header or queryParameter';
        return v.length > 100 || !printable(v) ? 'verification.queryParameter must be at most 100 printable characters' : '';
      },
    },
    {
      name: 'verification.algorithm', label: 'Algorithm', type: 'select', value: ver.algorithm || 'SHA256', show: is('HMAC'),
      options: [{ value: 'SHA256', label: 'HMAC-SHA256' }, { value: 'SHA1', label: 'HMAC-SHA1' }, { value: 'SHA512', label: 'HMAC-SHA512' }],
    },
    {
      name: 'verification.encoding', label: 'Encoding', type: 'select', value: ver.encoding || 'HEX', show: is('HMAC'),
      options: [{ value: 'HEX', label: 'Hexadecimal' }, { value: 'BASE64', label: 'Base64' }],
    },
    {
      name: 'verification.prefix', label: 'Prefix', mono: true, raw: true, value: ver.prefix || '', show: is('HMAC'), attrs: { placeholder: 'sha256=' },
      hint: 'What precedes the signature in its header, if anything.',
      check: (v) => (v.length > 64 || !printable(v) ? 'verification.prefix must be at most 64 printable characters' : ''),
    },
    {
      name: 'verification.toleranceSeconds', label: 'Tolerance (seconds)', type: 'number', required: true, value: ver.toleranceSeconds ?? 300, show: is(...TIMESTAMPED),
      hint: 'How far a signature\u2019s timestamp may be from now, either way: older ones are refused as replays.',
      check: (v) => (v != null && (v < 1 || v > L.verificationToleranceSecondsMax) ? `verification.toleranceSeconds must be between 1 and ${L.verificationToleranceSecondsMax}` : ''),
    },
    {
      name: 'verification.username', label: 'User name', value: ver.username || '', show: is('BASIC'), optionalNote: false,
      check: (v) => (!v || v.length > 200 || v.includes(':') || !printable(v) ? 'verification.username is required for BASIC: at most 200 printable characters, no \':\'' : ''),
    },
    {
      name: 'verification.secrets', label: 'Secret', type: 'password', mono: true, raw: true, value: '', show: (v) => kind(v) !== 'NONE',
      optionalNote: 'write-only', attrs: { autocomplete: 'new-password' },
      hint: (ver.kind !== 'NONE' && ver.secretCount ? `${plural(ver.secretCount, 'secret')} set, never shown. Leave both empty to keep ${ver.secretCount === 1 ? 'it' : 'them'} (same check); type new ones to replace them. ` : 'Write-only: never shown again. ')
        + 'The signing secret; BASIC: the password; API_KEY: the key; Standard Webhooks: whsec_\u2026',
      check: (v, all) => {
        const k = kind(all);
        if (!v && !all.secret2 && !same(all)) return `verification.secrets is required for ${k} (${SECRET_WORD[k] || 'signing secret'})`;
        return secretCheck(L, k, v);
      },
    },
    {
      name: 'secret2', label: 'Second secret', type: 'password', mono: true, raw: true, value: '', show: (v) => kind(v) !== 'NONE',
      optionalNote: 'while a sender rotates', attrs: { autocomplete: 'new-password' },
      hint: 'A request passes when it matches either secret: add the new one here, let the sender switch, then save the new one alone.',
      check: (v, all) => secretCheck(L, kind(all), v),
    },
  ];
}

function secretCheck(L, kind, v) {
  if (!v) return '';
  if (new TextEncoder().encode(v).length > L.verificationSecretMaxBytes) return `verification.secrets: each must be 1 to ${L.verificationSecretMaxBytes} bytes`;
  if (kind === 'STANDARD_WEBHOOKS') {
    if (!v.startsWith('whsec_')) return 'verification.secrets: a STANDARD_WEBHOOKS secret starts with whsec_';
    let ok = false;
    try { ok = atob(v.slice(6)).length > 0; } catch { ok = false; }
    if (!ok) return 'verification.secrets: a STANDARD_WEBHOOKS secret is whsec_ followed by the key in base64';
  }
  if ((kind === 'BASIC' || kind === 'API_KEY') && !printable(v)) return `verification.secrets: a ${SECRET_WORD[kind]} must be printable characters`;
  return '';
}

// verificationInput is updateServer's verification: only the settings the kind uses (the API refuses others),
// and secrets only when typed (left out, those set are kept).
function verificationInput(v) {
  const kind = v['verification.kind'];
  if (kind === 'NONE') return { kind };
  const input = { kind, enforce: v['verification.enforce'] !== 'false' };
  const secrets = [v['verification.secrets'], v.secret2].filter(Boolean);
  if (secrets.length) input.secrets = secrets;
  if (kind === 'HMAC') {
    Object.assign(input, { header: v['verification.header'], algorithm: v['verification.algorithm'], encoding: v['verification.encoding'] });
    if (v['verification.prefix']) input.prefix = v['verification.prefix'];
  }
  if (TIMESTAMPED.includes(kind)) input.toleranceSeconds = v['verification.toleranceSeconds'];
  if (kind === 'BASIC') input.username = v['verification.username'];
  if (kind === 'API_KEY') {
    if (v.keyIn === 'query') input.queryParameter = v['verification.queryParameter'];
    else input.header = v['verification.header'];
  }
  return input;
}

const REJECTIONS_SHOWN = 20;
const REASONS = { MISSING: 'Missing', MALFORMED: 'Malformed', MISMATCH: 'Mismatch', STALE: 'Stale' };

// rejectionsSection lists the latest requests refused for failing verification, refreshed while shown.
function rejectionsSection(ctx, s) {
  const count = h('span.muted', { dataset: { role: 'rejected-count' } }, plural(s.rejectedCount, 'rejection'));
  const list = h('div', loading('Loading rejections…'));
  let last = '';
  const draw = (server) => {
    count.textContent = `${plural(server.rejectedCount, 'request')} refused since the server was created`;
    count.dataset.count = String(server.rejectedCount);
    const rows = server.rejections.edges.map((e) => e.node);
    if (!rows.length) {
      return h('p.muted', server.verification && server.verification.kind === 'NONE'
        ? 'None: this server verifies nothing, so it refuses nothing.'
        : 'None so far. A request that fails an enforced check appears here, without its body.');
    }
    return dataTable({
      className: 'rejections',
      rows,
      rowProps: (r) => ({ dataset: { rejectionId: r.id, reason: r.reason } }),
      columns: [
        { label: 'Time', className: 'nowrap', cell: (r) => [timeEl(r.at, 'relative'), h('div.cell-sub', timeEl(r.at))] },
        { label: 'Method', cell: (r) => h('span.http-method', r.method) },
        { label: 'Path', className: 'path-cell', cell: (r) => h('span.mono.break', r.path || '/') },
        { label: 'Source', cell: (r) => h('span.mono', r.sourceAddr) },
        { label: 'Reason', cell: (r) => [h('span.tag', { dataset: { role: 'reason' } }, REASONS[r.reason] || r.reason), h('div.cell-sub', r.message)] },
      ],
    });
  };
  const refresh = async () => {
    // Saving a setting draws the tab again, with its own list: this one is gone.
    if (last && !list.isConnected) return;
    try {
      const data = await gql(Q.SERVER_REJECTIONS, { id: s.id, first: REJECTIONS_SHOWN }, { signal: ctx.signal });
      if (!ctx.alive || !data.server) return;
      const snap = JSON.stringify(data.server);
      if (snap === last) return;
      last = snap;
      mount(list, draw({ ...data.server, verification: s.verification }));
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError' && !last) mount(list, errorState(err, refresh));
    }
  };
  refresh();
  ctx.every(3000, refresh);
  return section('Rejected requests', { id: 'rejections', sub: count },
    h('p.muted', `The latest ${REJECTIONS_SHOWN} refused for failing verification, newest first: 401 was answered and nothing stored or charged.`),
    list);
}

// intakeFields are the methods a server accepts and the answer its senders get.
function intakeFields(s, L) {
  const custom = (v) => v.customResponse;
  return [
    {
      name: 'allowedMethods', label: 'Allowed methods', mono: true, value: (s.allowedMethods || []).join(', '), check: checks.allowedMethods(L),
      optionalNote: 'all if empty', attrs: { placeholder: 'POST, PUT' },
      hint: 'Comma-separated. Other methods get 405 with an Allow header, and nothing is stored or charged.',
    },
    {
      name: 'customResponse', label: 'Answer stored requests with my own response', type: 'checkbox', value: !!s.response, wide: true,
      hint: 'Off: senders get 202 with {"requestId": …}. Some senders want a particular status or body.',
    },
    {
      name: 'response.status', label: 'Status', type: 'number', required: true, value: s.response ? s.response.status : 200, show: custom,
      check: checks.responseStatus(),
    },
    {
      name: 'response.contentType', label: 'Content type', mono: true, value: s.response ? s.response.contentType : '', show: custom,
      check: checks.responseContentType(), optionalNote: 'text/plain if a body', attrs: { placeholder: 'application/json' },
    },
    {
      name: 'response.body', label: 'Body', type: 'textarea', raw: true, value: s.response ? s.response.body : '', show: custom,
      check: checks.responseBody(L), attrs: { rows: 3, placeholder: '{"ok": true}' }, hint: `At most ${L.responseBodyMaxBytes} bytes; none for 204 and 205.`,
    },
  ];
}

function intakeInput(v) {
  const input = {};
  const methods = methodList(v.allowedMethods);
  if (methods.length) input.allowedMethods = methods;
  else input.clearAllowedMethods = true;
  if (v.customResponse) {
    input.response = { status: v['response.status'] };
    if (v['response.contentType']) input.response.contentType = v['response.contentType'];
    if (v['response.body']) input.response.body = v['response.body'];
  } else {
    input.clearResponse = true;
  }
  return input;
}

function deleteServerFlow(s) {
  const pending = s.recipients.length;
  return confirmDelete({
    title: `Delete ${s.name}?`,
    consequences: [
      ['Its inbound URL answers ', h('strong', '404'), ' from now on: nothing more is accepted or charged.'],
      pending ? `Its ${plural(pending, 'recipient')} ${pending === 1 ? 'is' : 'are'} deleted and their pending deliveries canceled.` : 'It has no recipients.',
      'Requests already stored stay readable until their retention ends, then are purged.',
      'This cannot be undone: a new server gets a new URL.',
    ],
    confirmLabel: 'Delete server',
    action: () => gql(Q.DELETE_SERVER, { id: s.id }),
    done: `Server ${s.name} deleted.`,
    then: () => navigate('#/servers'),
  });
}
