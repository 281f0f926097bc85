// Tenants (operators): every tenant with its plan, balance and this month's usage; creating one; a tenant's
// page with its credits per day, usage, servers, tokens and ledger, where credits are granted, the plan
// changed and an owner's token issued.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, icon, fmtNumber, plural, copyButton, loading, emptyState, errorState, toast, timeEl } from '../ui.js';
import { href, navigate } from '../router.js';
import { limits, checks } from '../limits.js';
import { formDialog } from '../form.js';
import { setTitle, pageHeader, costLine, section, readNode } from '../page.js';
import { dataTable, connectionList } from '../table.js';
import { ledgerTable, usageSection, planLimits, issueTokenFlow } from './shared.js';
import { creditsPerDay } from './charts.js';
import { tokenList } from './team.js';
import { planDialog, readPlans } from './plans.js';

export function viewTenants(ctx, main) {
  setTitle('Tenants');
  const body = h('div', loading('Loading tenants…'));
  const create = h('button.btn.btn-primary', { type: 'button', dataset: { role: 'new-tenant' }, onclick: () => createTenantFlow() }, icon('plus'), 'New tenant');
  mount(main, pageHeader({ title: 'Tenants', subtitle: 'Accounts on a plan, each with a credit balance.', actions: create }), body);
  const list = connectionList({
    ctx,
    el: body,
    noun: ['tenant', 'tenants'],
    fetchPage: (after) => gql(Q.TENANTS, { first: 50, after }, { signal: ctx.signal }).then((d) => d.tenants),
    table: {
      className: 'tenants',
      link: (t) => href('/tenants/' + t.id),
      rowProps: (t) => ({ dataset: { tenantId: t.id, tenantName: t.name } }),
      columns: [
        { label: 'Tenant', cell: (t) => [h('a.row-link', { href: href('/tenants/' + t.id) }, t.name), h('div.cell-sub', `ID ${t.id}`)] },
        { label: 'Plan', cell: (t) => t.plan.name },
        { label: 'Balance', right: true, className: 'mono', cell: (t) => h('span', { dataset: { role: 'tenant-balance' }, class: t.creditBalance <= 0 ? 'amount neg-strong' : '' }, fmtNumber(t.creditBalance)) },
        { label: 'Requests this month', right: true, className: 'mono', cell: (t) => fmtNumber(t.usage.requestsAccepted) },
        { label: 'Spent this month', right: true, className: 'mono', cell: (t) => fmtNumber(t.usage.creditsSpent) },
      ],
    },
  });
  const load = async () => {
    try {
      const plans = await readPlans(ctx, body,
        'Welcome to Adal. Tenants are accounts on a plan: start with a plan (monthly credits, retention, limits), then create a tenant on it and issue its owner a token.',
        h('a.btn.btn-primary', { href: '#/plans?new=1', dataset: { role: 'first-plan' } }, icon('plus'), 'Create your first plan'));
      if (!plans) return;
      await list.load();
      if (ctx.alive && !list.rows.length) {
        mount(body, emptyState('users', 'Create your first tenant',
          'A tenant is an account: its owner creates servers and recipients, and every request is paid from its balance.',
          h('button.btn.btn-primary', { type: 'button', dataset: { role: 'first-tenant' }, onclick: () => createTenantFlow() }, icon('plus'), 'Create a tenant')));
      }
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') mount(body, errorState(err, load));
    }
  };
  load();
}

async function createTenantFlow() {
  const [L, plans] = await Promise.all([limits(), gql(Q.PLANS).then((d) => d.plans)]);
  if (!plans.length) {
    if (await planDialog(null)) createTenantFlow();
    return;
  }
  const byId = new Map(plans.map((p) => [p.id, p]));
  const result = await formDialog({
    title: 'New tenant',
    intro: h('p', 'The tenant gets its plan\u2019s monthly credits at once. Issue its owner a token next.'),
    role: 'tenant-form',
    fields: [
      { name: 'name', label: 'Name', required: true, check: checks.requiredName(L), attrs: { placeholder: 'acme' } },
      { name: 'planId', label: 'Plan', type: 'select', options: plans.map((p) => ({ value: p.id, label: `${p.name} — ${fmtNumber(p.monthlyCredits)} credits/month` })), optionalNote: false },
    ],
    cost: (v) => {
      const p = byId.get(v.planId);
      return p ? costLine({ grant: p.monthlyCredits, to: v.name || 'the tenant', balance: 0 }) : null;
    },
    submitLabel: 'Create tenant',
    onSubmit: (v) => gql(Q.CREATE_TENANT, { input: { name: v.name, planId: v.planId } }),
  });
  if (!result) return;
  const t = result.createTenant;
  toast(`Tenant ${t.name} created with ${plural(t.creditBalance, 'credit')}.`);
  navigate(href('/tenants/' + t.id));
}

export function viewTenant(ctx, main, id) {
  setTitle('Tenant');
  const root = h('div', loading('Loading tenant…'));
  mount(main, root);
  const load = async () => {
    const data = await readNode(ctx, root, {
      query: Q.TENANT, variables: { id, tenantId: id }, field: 'plan', retry: load,
      missing: ['Tenant not found', 'There is no tenant with this ID.', '#/tenants', 'All tenants'],
    });
    if (!data) return;
    const t = data.node;
    setTitle(t.name);
    const tokensEl = h('div');
    const tokens = tokenList(ctx, tokensEl, t.id);
    const actions = [
      h('button.btn.btn-primary', { type: 'button', dataset: { role: 'grant-credits' }, onclick: () => grantFlow(t).then((ok) => ok && load()) }, icon('coins'), 'Grant credits'),
      h('button.btn.btn-secondary', { type: 'button', dataset: { role: 'change-plan' }, onclick: () => changePlanFlow(t).then((ok) => ok && load()) }, icon('layers'), 'Change plan'),
      h('button.btn.btn-secondary', { type: 'button', dataset: { role: 'issue-owner-token' }, onclick: async () => {
        if (await issueTokenFlow({ tenantId: t.id, tenantName: t.name, defaultRole: 'OWNER', limits: await limits() })) tokens.load();
      } }, icon('key'), 'Issue a token'),
    ];
    mount(root,
      pageHeader({ crumbs: [{ label: 'Tenants', href: '#/tenants' }, { label: t.name }], title: t.name, subtitle: `ID ${t.id} · since `, actions }),
      h('div.stat-grid',
        h('div.card.stat', { class: t.creditBalance <= 0 ? 'low' : '' }, h('div.stat-label', 'Balance'),
          h('div.stat-value', { dataset: { role: 'tenant-balance' } }, fmtNumber(t.creditBalance), h('span.stat-unit', 'credits')),
          h('div.stat-sub', t.creditBalance <= 0 ? 'Its webhooks are refused with 402 until credits are granted.' : 'Spent one per request, retry, replay and outbound job.')),
        h('div.card.stat', h('div.stat-label', 'Plan'), h('div.stat-value.sm', { dataset: { role: 'plan-name' } }, t.plan.name), h('div.stat-sub', planLimits(t.plan)))),
      h('div.stack',
        section('Credits per day', { id: 'credits-per-day', sub: 'Last 7 days, UTC' }, creditsPerDay(t.creditsPerDay)),
        section('Usage', { id: 'usage', sub: 'Last 6 months' }, usageSection(t.usageHistory)),
        section('Servers', { id: 'servers', sub: plural(t.servers.length, 'server') },
          t.servers.length
            ? dataTable({
              className: 'servers', rows: t.servers, link: (s) => href('/servers/' + s.id),
              columns: [
                { label: 'Server', cell: (s) => h('a.row-link', { href: href('/servers/' + s.id) }, s.name) },
                { label: 'Inbound URL', cell: (s) => h('span.key-line', h('code.mono', s.inboundUrl), copyButton(s.inboundUrl, 'Copy')) },
                { label: 'Recipients', right: true, cell: (s) => fmtNumber(s.recipients.length) },
              ],
            })
            : h('p.muted', 'None yet: its owner creates them after signing in with a token issued here.')),
        section('Tokens', { id: 'tokens' }, tokensEl),
        section('Ledger', {
          id: 'ledger', sub: `${plural(data.ledger.totalCount, 'entry', 'entries')}, the latest 20`,
          actions: h('a.btn.btn-ghost.btn-sm', { href: '#/ledger' }, 'All tenants\u2019 ledger', icon('arrowRight')),
        }, data.ledger.edges.length ? ledgerTable(data.ledger.edges.map((e) => e.node)) : h('p.muted', 'No entries.'))));
    const since = root.querySelector('.page-sub');
    if (since) since.append(timeEl(t.createdAt));
    tokens.load();
  };
  load();
}

async function grantFlow(t) {
  const L = await limits();
  const result = await formDialog({
    title: `Grant credits to ${t.name}`,
    role: 'grant-form',
    fields: [
      { name: 'amount', label: 'Credits', type: 'number', required: true, check: checks.positive('amount')(L), attrs: { placeholder: '1000' } },
      { name: 'reference', label: 'Reference', hint: 'Why, for the ledger: an invoice number, "goodwill", …', attrs: { placeholder: 'operator grant' } },
    ],
    cost: (v) => costLine({ grant: v.amount > 0 && Number.isInteger(v.amount) ? v.amount : 0, to: t.name, balance: t.creditBalance }),
    submitLabel: 'Grant credits',
    onSubmit: (v) => gql(Q.GRANT_CREDITS, { tenantId: t.id, amount: v.amount, reference: v.reference || null }),
  });
  if (!result) return false;
  const e = result.grantCredits;
  toast(`Granted ${plural(e.amount, 'credit')} to ${t.name}. New balance: ${fmtNumber(e.balanceAfter)}.`);
  return true;
}

async function changePlanFlow(t) {
  const plans = (await gql(Q.PLANS)).plans;
  const result = await formDialog({
    title: `Change the plan of ${t.name}`,
    intro: h('p', 'The new limits and retention apply at once. Credits already granted stay; the new monthly credits come with next month\u2019s grant.'),
    role: 'change-plan-form',
    fields: [{ name: 'planId', label: 'Plan', type: 'radio', value: t.plan.id, options: plans.map((p) => ({ value: p.id, label: p.name + (p.id === t.plan.id ? ' (current)' : ''), hint: planLimits(p) })) }],
    cost: () => costLine(0),
    submitLabel: 'Change plan',
    onSubmit: (v) => gql(Q.CHANGE_TENANT_PLAN, { tenantId: t.id, planId: v.planId }),
  });
  if (!result) return false;
  toast(`${t.name} is now on ${result.changeTenantPlan.plan.name}.`);
  return true;
}

