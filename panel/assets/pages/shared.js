// Pieces several pages show: how a recipient delivers, a ledger, usage by month, a plan's limits, and the
// flow that issues a token.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, icon, badge, titleCase, timeEl, fmtNumber, plural, copyButton, confirmAction, toast } from '../ui.js';
import { href } from '../router.js';
import { barChart } from '../chart.js';
import { dataTable } from '../table.js';
import { formDialog, showResult } from '../form.js';
import { costLine, snippet } from '../page.js';

export const SCHEDULES = { QUADRATIC: 'Quadratic', STEPPED: 'Stepped', EXPONENTIAL: 'Exponential' };
export const TRIGGERS = { AUTOMATIC: 'Automatic', MANUAL_RETRY: 'Manual retry' };
export const ERROR_KINDS = {
  HTTP_STATUS: 'HTTP status', TIMEOUT: 'Timeout', DNS: 'DNS', TLS: 'TLS', CONNECTION: 'Connection',
  CLI_LOCAL: 'Local service unreachable', INTERRUPTED: 'Interrupted', BROKER_REFUSED: 'Refused by the broker',
  TRANSFORM: 'Transformation failed', AUTH: 'Authentication failed',
};
// METHODS names the delivery methods, with their icons; broker marks those that publish to a broker.
export const METHODS = {
  DIRECT_HTTP: { label: 'Direct HTTP', icon: 'globe' },
  CLI: { label: 'adal CLI', icon: 'terminal' },
  RABBITMQ: { label: 'RabbitMQ', icon: 'layers', broker: true },
  NATS: { label: 'NATS JetStream', icon: 'layers', broker: true },
  REDIS_STREAM: { label: 'Redis stream', icon: 'layers', broker: true },
  MQTT: { label: 'MQTT', icon: 'layers', broker: true },
};
export const isBroker = (method) => !!(METHODS[method] && METHODS[method].broker);
export const REASONS = {
  PLAN_GRANT: 'Plan grant', CREDIT_GRANT: 'Credit grant', REQUEST_ACCEPTED: 'Request accepted', MANUAL_RETRY: 'Manual retry',
  REPLAY: 'Replay', OUTBOUND: 'Outbound job', PLAN_CHANGE: 'Plan change',
};
export const STATE_TEXT = {
  ACTIVE: 'Deliveries go out as they come due.',
  PAUSED: 'Deliveries wait without spending attempts until it is resumed.',
  DISABLED: 'Too many attempts failed: deliveries wait, and one probe attempt goes out every 10 schedule minutes; a success re-enables it.',
  FROZEN: 'Failing for too long: nothing is attempted until it is enabled again.',
};

// deliveryMethod says how a recipient delivers, and for a CLI whether one is attached.
export function deliveryMethod(r) {
  const m = METHODS[r.method] || { label: titleCase(r.method), icon: 'send' };
  if (r.method === 'CLI') {
    const connected = r.cliConnected;
    return h('span.method', { dataset: { method: r.method } }, icon(m.icon), m.label,
      h('span.cli-status', { class: connected ? 'on' : 'off', dataset: { cliConnected: String(connected) } },
        h('span.status-dot', { class: connected ? 'tone-success' : 'tone-neutral' }),
        connected ? 'CLI connected' : 'CLI not connected'));
  }
  return h('span.method', { dataset: { method: r.method } }, icon(m.icon), m.label);
}

// stateBadge is a recipient's state with why, when it is not simply active.
export function stateBadge(r) {
  return h('span.state-line', badge(r.state), r.state !== 'ACTIVE' && r.stateReason ? h('span.muted.sm', r.stateReason) : null);
}

// planLimits is one line of what a plan gives.
export function planLimits(p) {
  return [
    `${fmtNumber(p.monthlyCredits)} credits a month`,
    `requests kept ${plural(p.retentionDays, 'day')}`,
    plural(p.maxServers, 'server'),
    `${plural(p.maxRecipientsPerServer, 'recipient')} per server`,
    p.maxRequestsPerSecond ? `${fmtNumber(p.maxRequestsPerSecond)} requests/s` : 'no rate cap',
  ].join(' · ');
}

// ledgerTable lists ledger entries; withTenant adds whose balance each changed (operators).
export function ledgerTable(entries, { withTenant = false } = {}) {
  const columns = [
    { label: 'Date', className: 'nowrap', cell: (e) => timeEl(e.createdAt) },
    withTenant ? { label: 'Tenant', cell: (e) => h('a', { href: href('/tenants/' + e.tenant.id), dataset: { role: 'ledger-tenant' } }, e.tenant.name) } : null,
    { label: 'Reason', cell: (e) => h('span.reason', { class: 'reason-' + e.reason.toLowerCase() }, REASONS[e.reason] || titleCase(e.reason)) },
    { label: 'Reference', className: 'mono muted break', cell: (e) => e.reference || '—' },
    { label: 'Amount', right: true, className: 'mono', cell: (e) => h('span.amount', { class: e.amount > 0 ? 'pos' : e.amount < 0 ? 'neg' : '' }, (e.amount > 0 ? '+' : '') + fmtNumber(e.amount)) },
    { label: 'Balance after', right: true, className: 'mono', cell: (e) => fmtNumber(e.balanceAfter) },
  ].filter(Boolean);
  return dataTable({ columns, rows: entries, className: 'ledger', rowProps: (e) => ({ dataset: { entryId: e.id } }) });
}

const monthFmt = new Intl.DateTimeFormat(undefined, { month: 'short', year: '2-digit', timeZone: 'UTC' });
const monthLabel = (period) => monthFmt.format(new Date(period + '-01T00:00:00Z'));

// usageSection charts usage over the months given (oldest first) and lists the figures.
export function usageSection(history) {
  const series = [
    { key: 'requestsAccepted', label: 'Requests accepted', className: 'bar-requests' },
    { key: 'creditsSpent', label: 'Credits spent', className: 'bar-spent' },
    { key: 'creditsGranted', label: 'Credits granted', className: 'bar-granted' },
  ];
  const groups = history.map((u) => ({ label: monthLabel(u.period), values: u }));
  const chart = barChart({ series, groups, title: `Usage over the last ${history.length} months` });
  const table = dataTable({
    className: 'usage',
    rows: [...history].reverse(),
    rowProps: (u) => ({ dataset: { period: u.period } }),
    columns: [
      { label: 'Month', cell: (u) => u.period },
      { label: 'Requests', right: true, cell: (u) => fmtNumber(u.requestsAccepted) },
      { label: 'Retries', right: true, cell: (u) => fmtNumber(u.manualRetries) },
      { label: 'Replays', right: true, cell: (u) => fmtNumber(u.replays) },
      { label: 'Spent', right: true, cell: (u) => fmtNumber(u.creditsSpent) },
      { label: 'Granted', right: true, cell: (u) => fmtNumber(u.creditsGranted) },
    ],
  });
  return h('div.usage', { dataset: { role: 'usage' } }, chart,
    h('details.usage-figures', h('summary', 'Figures by month'), table));
}

const TTLS = [
  { value: String(24 * 3600), label: '1 day' },
  { value: String(7 * 24 * 3600), label: '7 days' },
  { value: String(30 * 24 * 3600), label: '30 days' },
  { value: String(90 * 24 * 3600), label: '90 days' },
  { value: String(365 * 24 * 3600), label: '1 year' },
];

// issueTokenFlow asks who a token is for, issues it and shows it once. tenantId is set for operators (the
// tenant's first owner); owners issue in their own tenant. It resolves with the issued token or null.
export async function issueTokenFlow({ tenantId = null, tenantName = '', defaultRole = 'MEMBER', limits }) {
  const ttlDefault = String(limits ? limits.tokenTtlSecondsDefault : 30 * 24 * 3600);
  const issued = await formDialog({
    title: tenantName ? `Issue a token for ${tenantName}` : 'Issue a token',
    intro: h('p', 'A token signs its holder in to this console and to the API (and the adal CLI). It is shown once, when issued.'),
    role: 'issue-token',
    fields: [
      {
        name: 'role', label: 'Role', type: 'radio', value: defaultRole, options: [
          { value: 'OWNER', label: 'Owner', hint: 'Servers, recipients, plan, outbound jobs and tokens' },
          { value: 'MEMBER', label: 'Member', hint: 'Reads requests and retries, cancels and replays deliveries' },
        ],
      },
      { name: 'subject', label: 'Who it is for', hint: 'Shown in the token list, e.g. "alice" or "ci-deploy".', attrs: { placeholder: 'alice' } },
      { name: 'ttlSeconds', label: 'Valid for', type: 'select', value: TTLS.some((t) => t.value === ttlDefault) ? ttlDefault : TTLS[2].value, options: TTLS, optionalNote: false },
    ],
    cost: () => costLine(0),
    submitLabel: 'Issue token',
    onSubmit: (v) => gql(Q.ISSUE_TOKEN, { input: { role: v.role, tenantId, subject: v.subject || null, ttlSeconds: Number(v.ttlSeconds) } }),
  });
  if (!issued) return null;
  const t = issued.issueToken;
  await showResult({
    title: 'Token issued',
    body: [
      h('p', 'Copy it now: it is not shown again. Paste it on the console\u2019s sign-in page, or give it to the adal CLI.'),
      h('div.token-box', h('code', { dataset: { role: 'issued-token' } }, t.token), copyButton(t.token, 'Copy token')),
      h('p.muted.sm', 'Expires ', timeEl(t.expiresAt), '. Revoke it at any time from the token list.'),
      snippet(`adal login --server ${location.origin} --token ${t.token}`, 'Copy'),
    ],
  });
  return t;
}

// confirmDelete asks before a deletion, which costs nothing, with its consequences (each the children of one
// item) after intro; once it is done it says done and calls then().
export async function confirmDelete({ title, intro = null, consequences, confirmLabel, action, done, then }) {
  const result = await confirmAction({
    title,
    body: [intro, h('ul.consequences', consequences.map((c) => h('li', c))), costLine(0)],
    confirmLabel,
    tone: 'danger',
    action,
  });
  if (!result) return;
  toast(done);
  then();
}
