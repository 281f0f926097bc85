// Credits: a tenant's balance and plan, credits spent per day, usage by month, switching among the plans open
// to owners, and the ledger. Operators get the ledger of every tenant, each entry naming its tenant.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, icon, fmtNumber, plural, loading, emptyState, errorState, toast, confirmAction } from '../ui.js';
import { isOwner, setBalance, balanceAfter } from '../session.js';
import { setTitle, pageHeader, costLine, section } from '../page.js';
import { connectionList } from '../table.js';
import { ledgerTable, usageSection, planLimits } from './shared.js';
import { creditsPerDay } from './charts.js';

export function viewCredits(ctx, main) {
  setTitle('Credits');
  const body = h('div.stack', loading('Loading credits…'));
  mount(main, pageHeader({ title: 'Credits', subtitle: 'Every accepted request, manual retry, replay and outbound job costs one credit; automatic retries are free.' }), body);
  const ledger = ledgerList(ctx, null);
  const load = async () => {
    try {
      const data = await gql(Q.CREDITS, {}, { signal: ctx.signal });
      if (!ctx.alive) return;
      const t = data.viewer.tenant;
      if (!t) {
        mount(body, h('div.alert.alert-info', icon('coins'), h('div.alert-body', h('strong.alert-title', 'Operator view'),
          h('span.alert-message', 'Operators have no balance of their own: see each tenant\u2019s on its page, and every entry in the ledger.'))),
        h('a.btn.btn-secondary', { href: '#/ledger' }, 'Open the ledger'));
        return;
      }
      setBalance(t.creditBalance);
      mount(body,
        summaryCards(t),
        section('Credits per day', { id: 'credits-per-day', sub: 'Last 7 days, UTC' }, creditsPerDay(t.creditsPerDay)),
        section('Usage', { id: 'usage', sub: 'Last 6 months, from the ledger' }, usageSection(t.usageHistory)),
        planSection(t, data.plans, load),
        section('Ledger', { id: 'ledger', sub: 'Newest first' }, ledger.el));
      await ledger.load();
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') mount(body, errorState(err, load));
    }
  };
  load();
}

function summaryCards(t) {
  const p = t.plan;
  return h('div.stat-grid',
    h('div.card.stat', { class: t.creditBalance <= 0 ? 'low' : '' },
      h('div.stat-label', 'Balance'),
      h('div.stat-value', { dataset: { role: 'credits-balance' } }, fmtNumber(t.creditBalance), h('span.stat-unit', 'credits')),
      h('div.stat-sub', t.creditBalance <= 0 ? 'Out of credits: new requests are refused with 402 until credits are added.' : `${t.name}`)),
    h('div.card.stat',
      h('div.stat-label', 'Plan'),
      h('div.stat-value.sm', { dataset: { role: 'plan-name' } }, p.name),
      h('div.stat-sub', planLimits(p))));
}

// planSection lets an owner switch among the selectable plans; others see what is open.
function planSection(t, plans, reload) {
  const others = plans.filter((p) => p.selectable && p.id !== t.plan.id);
  if (!others.length) {
    return section('Plan', { id: 'plan' }, h('p.muted', 'No other plan is open to owners: an operator can move your tenant to another one.'));
  }
  const rows = others.map((p) => h('div.plan-option', { dataset: { planId: p.id } },
    h('div.plan-option-text', h('strong', p.name), h('span.muted.sm', planLimits(p))),
    isOwner()
      ? h('button.btn.btn-secondary.btn-sm', { type: 'button', dataset: { role: 'switch-plan' }, onclick: () => switchPlanFlow(t, p, reload) }, 'Switch to ', p.name)
      : null));
  return section('Plan', { id: 'plan', sub: isOwner() ? 'Plans you can switch to' : 'Only an owner switches plans' }, rows);
}

async function switchPlanFlow(t, p, reload) {
  const result = await confirmAction({
    title: `Switch to ${p.name}?`,
    body: [
      h('ul.consequences',
        h('li', 'Its limits apply at once: ', planLimits(p), '.'),
        h('li', 'Its retention applies to requests accepted from now on.'),
        h('li', `Your ${plural(t.creditBalance, 'credit')} stay; its ${fmtNumber(p.monthlyCredits)} monthly credits come with next month\u2019s grant.`)),
      costLine(0),
    ],
    confirmLabel: `Switch to ${p.name}`,
    action: () => gql(Q.CHANGE_TENANT_PLAN, { tenantId: t.id, planId: p.id }),
  });
  if (!result) return;
  toast(`Now on ${result.changeTenantPlan.plan.name}.${await balanceAfter()}`);
  reload();
}

// ledgerList is a ledger with a pager: tenantId narrows it (operators), null means the viewer's own (or all).
export function ledgerList(ctx, tenantId, { withTenant = false } = {}) {
  const el = h('div', loading('Loading the ledger…'));
  const list = connectionList({
    ctx,
    el,
    noun: ['entry', 'entries'],
    fetchPage: (after) => gql(Q.LEDGER, { first: 50, after, tenantId }, { signal: ctx.signal }).then((d) => d.ledger),
    empty: () => mount(el, emptyState('coins', 'No ledger entries yet', 'Grants, accepted requests, retries, replays and outbound jobs appear here as they happen.')),
    draw: () => mount(el, ledgerTable(list.rows, { withTenant }), list.pager()),
  });
  return { el, load: list.show };
}

export function viewLedger(ctx, main) {
  setTitle('Ledger');
  const ledger = ledgerList(ctx, null, { withTenant: true });
  mount(main, pageHeader({ title: 'Ledger', subtitle: 'Every change of every tenant\u2019s balance, newest first.' }),
    h('section.card.table-card', ledger.el));
  ledger.load();
}
