// One request: its event type (and why its body does not follow the type's schema, when accepted anyway), its
// deliveries grouped by recipient with every attempt and the transformation version it ran, live, and the
// recipients its routing filters or subscriptions left out; headers and body; links between a replay and its
// original; retry, cancel and replay, each with its cost before and the new balance after.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import {
  h, mount, icon, badge, titleCase, timeEl, fmtDuration, fmtBytes, copyButton, loading, emptyState, errorState,
  toast, confirmAction,
} from '../ui.js';
import { href, navigate } from '../router.js';
import { balanceAfter } from '../session.js';
import { setTitle, pageHeader, liveIndicator, watch, orNotFound, costLine } from '../page.js';
import { TRIGGERS, ERROR_KINDS, deliveryMethod, isBroker } from './shared.js';

const ACTIVE_DELIVERY = new Set(['PENDING', 'IN_PROGRESS']);

// isAlert: an alert Adal raised (docs/alerts.md) is stored as a request of the tenant's hidden alerts server,
// with no source address and its type in a header. Retrying or replaying it costs nothing.
const isAlert = (r) => !r.sourceAddr && (r.headers || []).some((x) => x.name.toLowerCase() === 'adal-alert-type');
// price is what a retry or a replay of r costs.
const price = (r) => (isAlert(r) ? 0 : 1);
const priceLabel = (r) => (price(r) ? '1 credit' : 'free');

export function viewRequest(ctx, main, id) {
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
    icon('replay'), 'Replay request', h('span.btn-cost', priceLabel(r)));
  const head = pageHeader({
    crumbs: isAlert(r)
      ? [{ label: 'Alerts', href: '#/alerts' }, { label: `Alert #${r.id}` }]
      : [
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
    metaItem('Event type', r.eventType
      ? h('a.type-tag.mono', { href: href('/servers/' + r.server.id, { type: r.eventType }), dataset: { role: 'event-type' } }, r.eventType)
      : h('span.muted', { dataset: { role: 'event-type' } }, 'None')),
    metaItem('Lineage', lineage(r)));

  return [
    head,
    h('section.card.meta-card', meta, schemaNote(r)),
    h('section.section',
      h('div.section-head', h('h2', 'Deliveries'), h('span.muted', deliveryCounts(r.deliveries || []))),
      deliveriesByRecipient(r, ui, reload)),
    filteredOutSection(r),
    headersSection(r, ui),
    bodySection(r, ui),
  ];
}

// schemaNote says why the body does not follow its type's schema: the server checks in shadow mode, so it was
// accepted and delivered all the same.
function schemaNote(r) {
  if (!r.schemaError) return null;
  return h('div.note.tone-warning.schema-note', { dataset: { role: 'schema-error' } }, icon('alert'),
    h('span', 'The body does not follow the schema of ', h('strong.mono', r.eventType), ': ', h('span.mono', r.schemaError),
      h('span.muted', ' · accepted and delivered anyway: the server checks in shadow mode.')));
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
    if ((r.filteredOut || []).length) {
      return emptyState('inbox', 'No deliveries', 'No recipient\u2019s routing filter or event types matched this request (see below). Replay it to route it by them as they are now.');
    }
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
      g.recipient.state !== 'ACTIVE' ? badge(g.recipient.state, `Recipient ${titleCase(g.recipient.state).toLowerCase()}`) : null,
      h('a.btn.btn-ghost.btn-sm', { href: href('/recipients/' + g.recipient.id), dataset: { role: 'open-recipient' } }, 'Recipient', icon('arrowRight'))),
    g.deliveries.map((d) => deliveryBlock(d, r, changed.has(d.id), reload)))));
}

// filteredOutSection names the recipients whose routing filter did not match the request when it was
// accepted, or which do not take its event type: they got no delivery of it.
function filteredOutSection(r) {
  const out = [...(r.filteredOut || [])].sort((a, b) => a.name.localeCompare(b.name));
  if (!out.length) return null;
  return h('section.section', { dataset: { section: 'filtered-out' } },
    h('div.section-head', h('h2', 'Filtered out'), h('span.muted', `${out.length} ${out.length === 1 ? 'recipient' : 'recipients'}`)),
    h('div.card.filtered-out',
      h('div.note.tone-info', icon('send'),
        h('span', out.length === 1 ? 'This recipient\u2019s routing filter or event types' : 'These recipients\u2019 routing filters or event types',
          ' did not match this request when it was accepted: ', h('strong', 'no delivery'), ' was made to ',
          out.length === 1 ? 'it' : 'them', '. A replay is routed by the filters and event types as they are then.')),
      h('ul.filtered-list', out.map((x) => h('li', { dataset: { recipientId: x.id, role: 'filtered-out' } },
        h('a', { href: href('/recipients/' + x.id) }, x.name),
        h('span.muted', ' · '), deliveryMethod(x),
        x.method !== 'CLI' && x.url ? h('span.mono.muted.url', ' ', x.url) : null,
        x.state !== 'ACTIVE' ? [' ', badge(x.state)] : null)))));
}

function deliveryBlock(d, r, flash, reload) {
  const actions = [];
  if (['FAILED', 'CANCELED', 'SUCCEEDED'].includes(d.status)) {
    actions.push(h('button.btn.btn-secondary.btn-sm', { type: 'button', dataset: { role: 'retry' }, onclick: () => retryFlow(d, r, reload) },
      icon('retry'), 'Retry', h('span.btn-cost', priceLabel(r))));
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
  // A broker's answer (a confirm, a sequence, an entry ID, a PUBACK) takes the place of the HTTP status.
  const broker = isBroker(d.recipient.method);
  const answer = (a) => (a.answer ? h('span.mono', { dataset: { role: 'answer' } }, a.answer) : h('span.muted', '—'));
  // The transformation version that ran, for recipients that have had one.
  const shaped = attempts.some((a) => a.transformVersion != null);
  return h('div.table-wrap', h('table.table.attempts', { class: [broker ? 'broker' : '', shaped ? 'shaped' : ''].join(' ').trim() },
    h('thead', h('tr', h('th.num', '#'), h('th', 'Started'), h('th', 'Status'), h('th', broker ? 'Broker answer' : 'HTTP'),
      shaped ? h('th', 'Transformation') : null, h('th.right', 'Duration'), h('th', 'Error'))),
    h('tbody', attempts.map((a) => h('tr', { dataset: { attempt: a.number, status: a.status } },
      h('td.num', String(a.number)),
      h('td.nowrap', timeEl(a.startedAt)),
      h('td', badge(a.status)),
      broker ? h('td.answer-cell', answer(a))
        : h('td', a.httpStatus != null ? h('span.http-code', { class: a.httpStatus >= 200 && a.httpStatus < 300 ? 'ok' : 'bad' }, String(a.httpStatus)) : h('span.muted', '—')),
      shaped ? h('td.nowrap', a.transformVersion != null
        ? h('a.mono', { href: href('/recipients/' + d.recipient.id), dataset: { role: 'transform-version' }, title: 'The version of the recipient\u2019s transformation this attempt ran' }, `v${a.transformVersion}`)
        : h('span.muted', 'None')) : null,
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

async function retryFlow(d, r, reload) {
  const result = await confirmAction({
    title: `Retry delivery to ${d.recipient.name}`,
    body: [
      h('p', 'Sends this request to ', h('strong', d.recipient.name),
        ' again as a new delivery, with its own attempts and retry schedule. Other recipients are not affected.'),
      costLine(price(r), 'A manual retry'),
    ],
    confirmLabel: `Retry · ${priceLabel(r)}`,
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
      h('p.muted', 'You can retry a canceled delivery later (1 credit).'),
      costLine(0),
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
      costLine(price(r), 'A replay'),
    ],
    confirmLabel: `Replay · ${priceLabel(r)}`,
    action: () => gql(Q.REPLAY_REQUEST, { id: r.id }),
  });
  if (!result) return;
  const after = await balanceAfter();
  const id = result.replayRequest.id;
  toast(`Replayed as request #${id}.${after}`);
  navigate(href('/requests/' + id));
}

