// Plans (operators): what each plan gives, creating one, and changing one — limits apply to its tenants at
// once; selectable plans are the ones owners may switch to themselves.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, icon, badge, fmtNumber, plural, loading, emptyState, errorState, toast } from '../ui.js';
import { limits, checks } from '../limits.js';
import { formDialog } from '../form.js';
import { setTitle, pageHeader, costLine } from '../page.js';
import { dataTable } from '../table.js';

// readPlans resolves with the plans, or with null after showing in el, when there are none, how to create the
// first: text says why, action is the button or link that does.
export async function readPlans(ctx, el, text, action) {
  const plans = (await gql(Q.PLANS, {}, { signal: ctx.signal })).plans;
  if (!ctx.alive) return null;
  if (plans.length) return plans;
  mount(el, emptyState('layers', 'Create your first plan', text, action));
  return null;
}

export function viewPlans(ctx, main, query) {
  setTitle('Plans');
  const body = h('div', loading('Loading plans…'));
  const create = h('button.btn.btn-primary', { type: 'button', dataset: { role: 'new-plan' }, onclick: () => open(null) }, icon('plus'), 'New plan');
  mount(main, pageHeader({ title: 'Plans', subtitle: 'What a tenant gets each month. Owners may switch only to plans marked selectable.', actions: create }), body);
  const open = async (plan) => {
    if (await planDialog(plan)) load();
  };
  const load = async () => {
    try {
      const plans = await readPlans(ctx, body,
        'A plan sets a tenant\u2019s monthly credits, how long its requests are kept, and how many servers and recipients it may have. Tenants come next.',
        h('button.btn.btn-primary', { type: 'button', dataset: { role: 'empty-new-plan' }, onclick: () => open(null) }, icon('plus'), 'Create your first plan'));
      if (!plans) return;
      mount(body, h('div.card.table-card', dataTable({
        className: 'plans',
        rows: plans,
        rowProps: (p) => ({ dataset: { planId: p.id, planName: p.name } }),
        columns: [
          { label: 'Plan', cell: (p) => h('div.cell-title', p.name) },
          { label: 'Credits / month', right: true, cell: (p) => fmtNumber(p.monthlyCredits) },
          { label: 'Retention', right: true, cell: (p) => plural(p.retentionDays, 'day') },
          { label: 'Servers', right: true, cell: (p) => fmtNumber(p.maxServers) },
          { label: 'Recipients / server', right: true, cell: (p) => fmtNumber(p.maxRecipientsPerServer) },
          { label: 'Rate limit', right: true, cell: (p) => (p.maxRequestsPerSecond ? `${fmtNumber(p.maxRequestsPerSecond)}/s` : h('span.muted', 'none')) },
          { label: 'Owners may pick', cell: (p) => (p.selectable ? badge('ACTIVE', 'Selectable') : badge('CANCELED', 'Operators only')) },
          { label: '', right: true, cell: (p) => h('button.btn.btn-secondary.btn-sm', { type: 'button', dataset: { role: 'edit-plan' }, onclick: () => open(p) }, icon('edit'), 'Edit') },
        ],
      })));
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') mount(body, errorState(err, load));
    }
  };
  load();
  if (query && query.get('new')) open(null);
}

// planDialog creates a plan (plan null) or edits one; it resolves with the result or null.
export async function planDialog(plan) {
  const L = await limits();
  const p = plan || {};
  const result = await formDialog({
    title: plan ? `Edit ${plan.name}` : 'New plan',
    intro: plan ? h('p', 'Limits apply to every tenant on the plan at once; a new monthly amount from the next month\u2019s grant.') : null,
    role: 'plan-form',
    fields: [
      { name: 'name', label: 'Name', required: true, value: p.name || '', check: checks.requiredName(L), attrs: { placeholder: 'starter' } },
      { name: 'monthlyCredits', label: 'Credits each month', type: 'number', required: true, value: p.monthlyCredits ?? '', check: checks.notNegative('monthlyCredits')(L), hint: 'Granted at the start of each calendar month (UTC), and at once to a new tenant.' },
      { name: 'retentionDays', label: 'Keep requests for (days)', type: 'number', required: true, value: p.retentionDays ?? 7, check: checks.retentionDays(L) },
      { name: 'maxServers', label: 'Servers', type: 'number', required: true, value: p.maxServers ?? 5, check: checks.atLeastOne('maxServers')(L) },
      { name: 'maxRecipientsPerServer', label: 'Recipients per server', type: 'number', required: true, value: p.maxRecipientsPerServer ?? 5, check: checks.atLeastOne('maxRecipientsPerServer')(L) },
      { name: 'maxRequestsPerSecond', label: 'Rate limit (requests per second)', type: 'number', value: p.maxRequestsPerSecond ?? '', check: checks.atLeastOne('maxRequestsPerSecond')(L), optionalNote: 'none if empty', hint: 'Across all of a tenant\u2019s servers, counted per process; over it senders get 429.' },
      { name: 'selectable', label: 'Owners may switch to this plan themselves', type: 'checkbox', value: !!p.selectable },
    ],
    cost: () => costLine(0),
    submitLabel: plan ? 'Save plan' : 'Create plan',
    onSubmit: (v) => {
      const input = {
        name: v.name, monthlyCredits: v.monthlyCredits, retentionDays: v.retentionDays, maxServers: v.maxServers,
        maxRecipientsPerServer: v.maxRecipientsPerServer, selectable: v.selectable,
      };
      if (v.maxRequestsPerSecond != null) input.maxRequestsPerSecond = v.maxRequestsPerSecond;
      if (!plan) return gql(Q.CREATE_PLAN, { input });
      if (v.maxRequestsPerSecond == null) input.clearMaxRequestsPerSecond = true;
      return gql(Q.UPDATE_PLAN, { id: plan.id, input });
    },
  });
  if (result) toast(plan ? `Plan ${result.updatePlan.name} saved.` : `Plan ${result.createPlan.name} created.`);
  return result;
}
