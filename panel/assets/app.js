// The Adal console: a hash-routed single-page app over the GraphQL API, one ES module per page (pages/),
// with shared helpers for forms (form.js, limits.js), tables (table.js), page furniture (page.js) and the
// session (session.js). No build step: the browser loads the modules as they are.
//
// Operators:  #/tenants, #/tenants/:id, #/plans, #/servers, #/ledger
// Tenants:    #/servers, #/servers/:id[/recipients|/activity|/settings|/recipients/new], #/recipients/:id,
//             #/requests/:id, #/event-types, #/outbound[/new|/:id], #/credits, #/alerts, #/team (owners)
// Everyone:   #/signin[?code=…] — a one-time code from a sign-in link is redeemed at once.

import { auth, live, onUnauthenticated } from './gql.js';
import { h, mount, icon, fmtNumber, loading, emptyState, errorState, tickTimes } from './ui.js';
import { parseHash, href, navigate, onNavigate, newContext } from './router.js';
import { session, refreshViewer, onViewer, balance } from './session.js';
import { forgetLimits } from './limits.js';
import { setTitle } from './page.js';
import { viewSignIn } from './pages/signin.js';
import { viewServers } from './pages/servers.js';
import { viewServer } from './pages/server.js';
import { viewRecipient, viewNewRecipient } from './pages/recipient.js';
import { viewRequest } from './pages/request.js';
import { viewOutboundJobs, viewNewOutbound, viewOutboundJob } from './pages/outbound.js';
import { viewCredits, viewLedger } from './pages/credits.js';
import { viewTeam } from './pages/team.js';
import { viewPlans } from './pages/plans.js';
import { viewTenants, viewTenant } from './pages/tenants.js';
import { viewAlerts } from './pages/alerts.js';
import { viewEventTypes } from './pages/eventtypes.js';

const header = document.getElementById('header');
const main = document.getElementById('main');

// Routes, first match wins: literal segments before parameters. roles limits a page to those roles.
const ROUTES = [
  { path: 'servers', view: (ctx) => viewServers(ctx, main) },
  { path: 'servers/:id', view: (ctx, p, q) => viewServer(ctx, main, p.id, 'requests', q) },
  { path: 'servers/:id/recipients', view: (ctx, p, q) => viewServer(ctx, main, p.id, 'recipients', q) },
  { path: 'servers/:id/recipients/new', roles: ['ADMIN', 'OWNER'], view: (ctx, p) => viewNewRecipient(ctx, main, p.id) },
  { path: 'servers/:id/settings', view: (ctx, p, q) => viewServer(ctx, main, p.id, 'settings', q) },
  { path: 'servers/:id/activity', view: (ctx, p, q) => viewServer(ctx, main, p.id, 'activity', q) },
  { path: 'recipients/:id', view: (ctx, p) => viewRecipient(ctx, main, p.id) },
  { path: 'requests/:id', view: (ctx, p) => viewRequest(ctx, main, p.id) },
  { path: 'event-types', roles: ['OWNER', 'MEMBER'], view: (ctx) => viewEventTypes(ctx, main) },
  { path: 'outbound', view: (ctx) => viewOutboundJobs(ctx, main) },
  { path: 'outbound/new', roles: ['ADMIN', 'OWNER'], view: (ctx) => viewNewOutbound(ctx, main) },
  { path: 'outbound/:id', view: (ctx, p) => viewOutboundJob(ctx, main, p.id) },
  { path: 'credits', view: (ctx) => viewCredits(ctx, main) },
  { path: 'alerts', roles: ['OWNER', 'MEMBER'], view: (ctx) => viewAlerts(ctx, main) },
  { path: 'team', roles: ['OWNER', 'MEMBER'], view: (ctx) => viewTeam(ctx, main) },
  { path: 'ledger', roles: ['ADMIN'], view: (ctx) => viewLedger(ctx, main) },
  { path: 'plans', roles: ['ADMIN'], view: (ctx, p, q) => viewPlans(ctx, main, q) },
  { path: 'tenants', roles: ['ADMIN'], view: (ctx, p, q) => viewTenants(ctx, main, q) },
  { path: 'tenants/:id', roles: ['ADMIN'], view: (ctx, p) => viewTenant(ctx, main, p.id) },
].map((r) => ({ ...r, parts: r.path.split('/') }));

function match(segments) {
  for (const r of ROUTES) {
    if (r.parts.length !== segments.length) continue;
    const params = {};
    if (r.parts.every((part, i) => (part.startsWith(':') ? ((params[part.slice(1)] = segments[i]), true) : part === segments[i]))) {
      return { route: r, params };
    }
  }
  return null;
}

// Which nav entry a page belongs to.
const SECTION_OF = { requests: 'servers', recipients: 'servers' };

const NAV = {
  ADMIN: [['tenants', 'Tenants'], ['plans', 'Plans'], ['servers', 'Servers'], ['ledger', 'Ledger']],
  OWNER: [['servers', 'Servers'], ['event-types', 'Event types'], ['outbound', 'Outbound'], ['credits', 'Credits'], ['alerts', 'Alerts'], ['team', 'Team']],
  MEMBER: [['servers', 'Servers'], ['event-types', 'Event types'], ['outbound', 'Outbound'], ['credits', 'Credits'], ['alerts', 'Alerts']],
};

export const home = () => (session.viewer && session.viewer.role === 'ADMIN' ? '#/tenants' : '#/servers');

let current = null;
let lastPath = '';

async function render() {
  if (current) current.dispose();
  const ctx = newContext();
  current = ctx;
  const { raw, segments, query } = parseHash();
  const path = segments.join('/');
  if (path !== lastPath) window.scrollTo(0, 0);
  lastPath = path;

  if (segments[0] === 'signin' || !auth.token) {
    renderHeader(null);
    const next = segments[0] === 'signin' ? query.get('next') : (segments.length ? '#' + raw : null);
    viewSignIn(ctx, main, { code: segments[0] === 'signin' ? query.get('code') : null, next, home });
    return;
  }
  if (!session.viewer) {
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
  if (!segments.length) { location.replace(home()); return; }
  const found = match(segments);
  renderHeader(SECTION_OF[segments[0]] || segments[0]);
  if (!found || (found.route.roles && !found.route.roles.includes(session.viewer.role))) {
    setTitle('Not found');
    mount(main, emptyState('alert', 'Page not found', found ? 'Your role has no page at this address.' : 'There is nothing at this address.',
      h('a.btn.btn-secondary', { href: home() }, 'Go to the start page')));
    return;
  }
  found.route.view(ctx, found.params, query);
}

onNavigate(render);

onUnauthenticated((err) => {
  auth.clear();
  live.reset();
  forgetLimits();
  session.viewer = null;
  session.notice = 'Your token was not accepted (' + err.message + '). It may have expired or been revoked — sign in again.';
  const { raw, segments } = parseHash();
  if (segments[0] !== 'signin') navigate(href('/signin', { next: '#' + raw }));
});

// ---- header ------------------------------------------------------------------------------------------------

const ROLE_LABELS = { ADMIN: 'Operator', OWNER: 'Owner', MEMBER: 'Member' };

onViewer(() => {
  const el = header.querySelector('[data-role="balance"]');
  const b = balance();
  if (el && b != null) {
    el.textContent = fmtNumber(b);
    el.closest('.balance-pill').classList.toggle('low', b <= 0);
  }
});

function renderHeader(section) {
  const v = session.viewer;
  const brand = h('a.brand', { href: v ? home() : '#/signin' },
    h('img.brand-mark', { src: '/assets/favicon.svg', alt: '', width: 26, height: 26 }), h('span', 'Adal'));
  if (!v) {
    mount(header, h('div.topbar-inner', brand));
    return;
  }
  const nav = h('nav.nav', { 'aria-label': 'Main' }, (NAV[v.role] || []).map(([key, label]) =>
    h('a.nav-link', { href: '#/' + key, class: section === key ? 'active' : '', 'aria-current': section === key ? 'page' : null }, label)));
  const b = balance();
  const pill = v.tenant
    ? h('a.balance-pill', { href: '#/credits', title: 'Credit balance', class: b <= 0 ? 'low' : '' },
      icon('coins'), h('strong', { dataset: { role: 'balance' } }, fmtNumber(b)), h('span', 'credits'))
    : null;
  const who = h('div.who',
    h('span.who-name', v.tenant ? v.tenant.name : 'All tenants'),
    h('span.who-meta', h('span.role-chip', ROLE_LABELS[v.role] || v.role), v.subject));
  const signOut = h('button.btn.btn-ghost.btn-sm', { type: 'button', title: 'Sign out', onclick: signOutNow }, icon('logout'), h('span.sign-out-text', 'Sign out'));
  mount(header, h('div.topbar-inner', brand, nav, h('div.spacer'), pill, who, signOut));
}

function signOutNow() {
  auth.clear();
  live.reset();
  forgetLimits();
  session.viewer = null;
  session.notice = null;
  navigate('#/signin');
}

// ---- start -------------------------------------------------------------------------------------------------

window.addEventListener('hashchange', render);
setInterval(() => tickTimes(main), 15000);
render();
