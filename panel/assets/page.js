// The pieces every page is made of: its title and header, tabs, live indicators and refresh, the cost line of
// a mutation, copyable snippets and fact lists.

import { gql, live } from './gql.js';
import { h, mount, icon, debounce, fmtNumber, plural, copyButton, emptyState, errorState } from './ui.js';
import { balance } from './session.js';

export function setTitle(title) {
  document.title = title ? `${title} · Adal` : 'Adal';
}

export function pageHeader({ crumbs = [], title, subtitle, actions }) {
  return h('div.page-head',
    crumbs.length ? h('nav.crumbs', { 'aria-label': 'Breadcrumb' }, crumbs.map((c, i) => [
      i ? h('span.crumb-sep', '/') : null,
      c.href ? h('a', { href: c.href }, c.label) : h('span', c.label),
    ])) : null,
    h('div.page-head-row',
      h('div.page-head-text', h('h1', title), subtitle ? h('div.page-sub', subtitle) : null),
      actions ? h('div.page-actions', actions) : null));
}

// tabs is a row of links between a record's pages; the current one is marked for screen readers too.
export function tabs(items, current) {
  return h('nav.tabs', { 'aria-label': 'Sections' }, items.map((t) => h('a.tab', {
    href: t.href, class: t.key === current ? 'active' : '', 'aria-current': t.key === current ? 'page' : null,
    dataset: { tab: t.key },
  }, t.icon ? icon(t.icon) : null, t.label, t.count != null ? h('span.count', String(t.count)) : null)));
}

// liveIndicator shows the state of the subscription (or of the polling that replaces it).
export function liveIndicator() {
  const el = h('span.live', { dataset: { state: 'connecting' }, role: 'status' }, h('span.live-dot'), h('span.live-text', 'Connecting…'));
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
export function watch(ctx, { query, variables, refresh, indicator, pollMs = 5000, shouldPoll = () => true }) {
  const debounced = debounce(refresh, 250);
  let pollTimer = 0;
  const poll = () => {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(async () => {
      if (!ctx.alive) return;
      if (shouldPoll() && document.visibilityState === 'visible') await refresh();
      poll();
    }, pollMs);
  };
  const unsubscribe = live.subscribe(query, variables, {
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

// poller refreshes a view that no subscription covers (recipient state, a CLI's connection, outbound jobs)
// every ms while the page is visible and shouldPoll() holds, and shows it on the indicator.
export function poller(ctx, { refresh, indicator, ms = 3000, shouldPoll = () => true }) {
  if (indicator) indicator.set('polling', `Refreshed every ${ms / 1000} s`);
  ctx.every(ms, () => { if (shouldPoll()) refresh(); });
}

// orNotFound turns a NOT_FOUND answer into "no data", which the views show as their own not-found state.
export function orNotFound(err) {
  if (err && err.code === 'NOT_FOUND') return null;
  throw err;
}

// readNode runs the query of a detail page that shows data.node in el: it resolves with the data, or with null
// after putting into el a failure (with retry, unless quiet) or, when there is no node with field set (none,
// or another type), missing: [title, text, link, label].
export async function readNode(ctx, el, { query, variables, field, missing, retry, quiet = false }) {
  let data;
  try {
    data = await gql(query, variables, { signal: ctx.signal }).catch(orNotFound);
  } catch (err) {
    if (ctx.alive && !quiet && err.name !== 'AbortError') mount(el, errorState(err, retry));
    return null;
  }
  if (!ctx.alive) return null;
  if (data && data.node && data.node[field]) return data;
  const [title, text, link, label] = missing;
  mount(el, emptyState('alert', title, text, h('a.btn.btn-secondary', { href: link }, label)));
  return null;
}

// nodeView is the load(quiet) of a page that reads its node (as readNode) again and again: it calls
// show(node) when the node differs from what the last load showed, or load.forget() was called since.
export function nodeView(ctx, el, { show, ...opts }) {
  let last = '';
  const load = async (quiet) => {
    const data = await readNode(ctx, el, { ...opts, quiet, retry: () => load(false) });
    const snap = data && JSON.stringify(data.node);
    if (!snap || snap === last) return;
    last = snap;
    await show(data.node);
  };
  load.forget = () => { last = ''; };
  return load;
}

// costLine says, before a mutation runs, what it costs and what the balance becomes. credits: what it
// debits (a positive number), 0 for a free change, or { grant: n, to: name, balance } for credits added.
export function costLine(credits, what = 'This') {
  if (credits && typeof credits === 'object') {
    const b = credits.balance;
    return h('div.cost', { dataset: { role: 'cost' } }, icon('coins'),
      h('span', 'Adds ', h('strong', plural(credits.grant, 'credit')), credits.to ? [' to ', h('strong', credits.to)] : null, '.'),
      b != null ? h('span.cost-balance', 'Balance ', h('strong', fmtNumber(b)), ' → ', h('strong', fmtNumber(b + credits.grant))) : null);
  }
  if (!credits) {
    return h('div.cost.cost-free', { dataset: { role: 'cost' } }, icon('coins'), h('span', 'Free: ', h('strong', 'no credits'), ' are spent.'));
  }
  const b = balance();
  return h('div.cost', { dataset: { role: 'cost' } },
    icon('coins'),
    h('span', what, ' costs ', h('strong', plural(credits, 'credit')), '.'),
    b == null
      ? h('span.cost-balance', 'Charged to the tenant\u2019s balance.')
      : b >= credits
        ? h('span.cost-balance', 'Balance ', h('strong', fmtNumber(b)), ' → ', h('strong', fmtNumber(b - credits)))
        : h('span.cost-balance', 'Balance ', h('strong', fmtNumber(b))),
    b != null && b < credits ? h('div.cost-warning', 'The balance is too low: this will be refused until credits are added.') : null);
}

// snippet is a block of text to copy, such as a command line.
export function snippet(text, label = 'Copy', role) {
  return h('div.snippet-wrap', { dataset: role ? { role } : {} },
    h('pre.snippet', text), copyButton(text, label));
}

// facts is a definition list of label → value pairs, two or three to a row.
export function facts(items) {
  return h('dl.meta-grid', items.filter(Boolean).map(([label, value]) => h('div.meta-item', h('dt', label), h('dd', value))));
}

// section is a titled card.
export function section(title, { sub, actions, id } = {}, ...body) {
  return h('section.card.section-card', { dataset: id ? { section: id } : {} },
    h('header.card-title-bar', h('h2', title), sub ? h('span.muted', sub) : null, h('div.spacer'), actions || null),
    h('div.section-body', body));
}
