// Team: the tenant's tokens — who holds one, what role, until when — issuing one and revoking one.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, icon, badge, timeEl, loading, emptyState, toast, confirmAction } from '../ui.js';
import { isOwner } from '../session.js';
import { limits } from '../limits.js';
import { setTitle, pageHeader, costLine } from '../page.js';
import { dataTable, connectionList } from '../table.js';
import { issueTokenFlow } from './shared.js';

export function viewTeam(ctx, main) {
  setTitle('Team');
  if (!isOwner()) {
    mount(main, pageHeader({ title: 'Team' }), emptyState('users', 'Only owners manage tokens',
      'Ask an owner of your tenant for a token for a colleague, or to revoke one.'));
    return;
  }
  const issue = h('button.btn.btn-primary', { type: 'button', dataset: { role: 'issue-token' }, onclick: async () => {
    if (await issueTokenFlow({ limits: await limits() })) list.load();
  } }, icon('key'), 'Issue a token');
  const body = h('div', loading('Loading tokens…'));
  mount(main, pageHeader({ title: 'Team', subtitle: 'Everyone who signs in — people, CLIs, deploy scripts — does so with a token of this tenant.', actions: issue }), body);
  const list = tokenList(ctx, body, null, { card: true });
  list.load();
}

export function tokenStatus(t) {
  if (t.revokedAt) return badge('CANCELED', 'Revoked');
  if (new Date(t.expiresAt).getTime() <= Date.now()) return badge('FAILED', 'Expired');
  return badge('ACTIVE', 'Active');
}

// tokenList lists tokens (a tenant's, when tenantId is set for operators) with a revoke button each.
export function tokenList(ctx, el, tenantId, { card = false } = {}) {
  const where = tenantId ? { hasTenantWith: [{ id: tenantId }] } : null;
  const list = connectionList({
    ctx,
    el,
    noun: ['token', 'tokens'],
    fetchPage: (after) => gql(Q.TOKENS, { first: 50, after, where }, { signal: ctx.signal }).then((d) => d.tokens),
    empty: () => mount(el, emptyState('key', 'No tokens yet', 'Issue one for each person or machine that signs in, so each can be revoked alone.')),
    draw: () => {
      const table = dataTable({
        className: 'tokens',
        rows: list.rows,
        rowProps: (t) => ({ dataset: { tokenId: t.id, subject: t.subject } }),
        columns: [
          { label: 'Holder', cell: (t) => [h('div.cell-title', t.subject), h('div.cell-sub', 'Issued by ', t.issuedBy)] },
          { label: 'Role', cell: (t) => t.role.charAt(0) + t.role.slice(1).toLowerCase() },
          { label: 'Issued', className: 'nowrap', cell: (t) => timeEl(t.createdAt) },
          { label: 'Expires', className: 'nowrap', cell: (t) => timeEl(t.expiresAt) },
          { label: 'Status', cell: (t) => tokenStatus(t) },
          { label: '', right: true, cell: (t) => (t.revokedAt ? null : h('button.btn.btn-danger-ghost.btn-sm', { type: 'button', dataset: { role: 'revoke' }, onclick: () => revokeFlow(t, list.load) }, 'Revoke')) },
        ],
      });
      mount(el, card ? h('div.card.table-card', table) : table, list.pager());
    },
  });
  return { load: list.show };
}

async function revokeFlow(t, reload) {
  const result = await confirmAction({
    title: `Revoke ${t.subject}'s token?`,
    body: [h('p', 'Every process refuses it within seconds, and its live connections (consoles, CLIs) close. This cannot be undone: issue a new token instead.'), costLine(0)],
    confirmLabel: 'Revoke token',
    tone: 'danger',
    action: () => gql(Q.REVOKE_TOKEN, { id: t.id }),
  });
  if (!result) return;
  toast(`Token of ${t.subject} revoked.`);
  reload();
}
