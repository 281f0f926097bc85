// Outbound jobs: HTTP calls a tenant asks Adal to make, with retries. The list, one job with its attempts and
// stored response bodies, and the form that sends one (owners: it is paid from the tenant's credits).

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, icon, badge, timeEl, fmtDuration, fmtBytes, plural, loading, emptyState, errorState, toast } from '../ui.js';
import { href, navigate } from '../router.js';
import { canManage, balanceAfter } from '../session.js';
import { limits, checks } from '../limits.js';
import { createForm } from '../form.js';
import { setTitle, pageHeader, liveIndicator, poller, nodeView, costLine, facts, section } from '../page.js';
import { dataTable, connectionList } from '../table.js';
import { ERROR_KINDS } from './shared.js';

const ACTIVE = new Set(['PENDING', 'IN_PROGRESS']);

export function viewOutboundJobs(ctx, main) {
  setTitle('Outbound jobs');
  const indicator = liveIndicator();
  const send = canManage()
    ? h('a.btn.btn-primary', { href: '#/outbound/new', dataset: { role: 'new-outbound' } }, icon('send'), 'Send a request')
    : null;
  const body = h('div', loading('Loading outbound jobs…'));
  mount(main, pageHeader({
    title: 'Outbound jobs',
    subtitle: 'HTTP calls Adal makes for you, retried on the stepped schedule until one succeeds. Each costs one credit.',
    actions: [indicator, send],
  }), body);
  const list = connectionList({
    ctx,
    el: body,
    noun: ['job', 'jobs'],
    fetchPage: (after) => gql(Q.OUTBOUND_JOBS, { first: 50, after }, { signal: ctx.signal }).then((d) => d.outboundJobs),
    empty: () => mount(body, emptyState('send', canManage() ? 'Send your first outbound request' : 'No outbound jobs yet',
      'An outbound job is one HTTP call — URL, method, headers, body — that Adal makes and retries for you, with every attempt recorded.',
      send ? h('a.btn.btn-primary', { href: '#/outbound/new' }, icon('send'), 'Send a request') : null)),
    table: {
      className: 'outbound',
      link: (j) => href('/outbound/' + j.id),
      rowProps: (j) => ({ dataset: { jobId: j.id, status: j.status } }),
      columns: [
        { label: 'Created', className: 'nowrap', cell: (j) => [h('a.row-link', { href: href('/outbound/' + j.id) }, timeEl(j.createdAt, 'relative')), h('div.cell-sub', timeEl(j.createdAt))] },
        { label: 'Request', className: 'path-cell', cell: (j) => [h('span.http-method', j.method), ' ', h('span.mono', j.url)] },
        { label: 'Status', cell: (j) => [badge(j.status), j.duplicateOf ? h('div.cell-sub', `duplicate of #${j.duplicateOf.id}`) : null] },
        { label: 'Attempts', cell: (j) => `${j.attemptCount} of ${j.maxAttempts}` },
        { label: 'Next attempt', cell: (j) => (j.nextAttemptAt && ACTIVE.has(j.status) ? timeEl(j.nextAttemptAt, 'relative') : h('span.muted', '—')) },
      ],
    },
  });
  list.show();
  // No subscription covers outbound jobs: read them again while any is on its way.
  poller(ctx, { refresh: () => list.load().catch(() => {}), indicator, ms: 3000, shouldPoll: () => list.rows.some((j) => ACTIVE.has(j.status)) });
}

const METHODS = ['POST', 'PUT', 'PATCH', 'DELETE', 'GET'];

// headerLines reads "Name: value" lines; a line without a colon is refused with the API's words.
function headerLines(text) {
  const out = [];
  for (const line of (text || '').split('\n')) {
    if (!line.trim()) continue;
    const i = line.indexOf(':');
    out.push(i < 1 ? { bad: line.trim() } : { name: line.slice(0, i).trim(), value: line.slice(i + 1).trim() });
  }
  return out;
}

export async function viewNewOutbound(ctx, main) {
  setTitle('Send a request');
  mount(main, loading('Loading…'));
  let L;
  try { L = await limits(); } catch (err) { if (ctx.alive) mount(main, errorState(err, () => viewNewOutbound(ctx, main))); return; }
  if (!ctx.alive) return;
  const form = createForm({
    role: 'outbound-form',
    fields: [
      { name: 'url', label: 'URL', type: 'url', mono: true, required: false, optionalNote: false, check: checks.outboundUrl(L), attrs: { placeholder: 'https://api.example.com/notify' } },
      { name: 'method', label: 'Method', type: 'select', value: 'POST', options: METHODS.map((m) => ({ value: m, label: m })), optionalNote: false },
      {
        name: 'headers', label: 'Headers', type: 'textarea', mono: true, attrs: { rows: 3, placeholder: 'Content-Type: application/json' },
        hint: 'One "Name: value" per line. Host, Content-Length, hop-by-hop and X-Adal-* headers are set by Adal.',
        check: (v) => { const bad = headerLines(v).find((x) => x.bad); return bad ? `header name ${JSON.stringify(bad.bad)} is not a valid HTTP header name` : ''; },
      },
      { name: 'body', label: 'Body', type: 'textarea', mono: true, raw: true, attrs: { rows: 8 }, check: checks.outboundBody(L), hint: `At most ${fmtBytes(L.outboundBodyMaxBytes)}.` },
      { name: 'idempotencyKey', label: 'Idempotency key', hint: 'A second job with the same key, while the first is kept, is recorded as a duplicate: not sent, not charged.' },
      { name: 'storeResponseBody', label: 'Keep each attempt\u2019s response body (up to 64 KiB)', type: 'checkbox', value: true },
    ],
    cost: () => costLine(L.creditsPerAction, 'An outbound job'),
    submitLabel: `Send · ${plural(L.creditsPerAction, 'credit')}`,
    onCancel: () => navigate('#/outbound'),
    onSubmit: (v) => gql(Q.SEND_OUTBOUND, { input: {
      url: v.url, method: v.method, body: v.body || null,
      headers: headerLines(v.headers).map(({ name, value }) => ({ name, value })),
      idempotencyKey: v.idempotencyKey || null, storeResponseBody: v.storeResponseBody,
    } }),
    onDone: async (result) => {
      const j = result.sendOutbound;
      if (j.status === 'DUPLICATE') toast(`Recorded as a duplicate of job #${j.duplicateOf.id}: not sent, not charged.`, 'warning');
      else toast(`Job #${j.id} accepted; it runs now.${await balanceAfter()}`);
      navigate(href('/outbound/' + j.id));
    },
  });
  mount(main, pageHeader({
    crumbs: [{ label: 'Outbound jobs', href: '#/outbound' }, { label: 'Send a request' }],
    title: 'Send a request',
    subtitle: `Adal makes the call and retries it on the stepped schedule, up to ${L.outboundMaxAttempts} attempts, until a 2xx answer.`,
  }), h('div.card.form-card', form.el));
  form.focus();
}

export function viewOutboundJob(ctx, main, id) {
  setTitle(`Outbound job #${id}`);
  const indicator = liveIndicator();
  const root = h('div', loading('Loading job…'));
  mount(main, root);
  let job = null;
  const open = new Set();
  const load = nodeView(ctx, root, {
    query: Q.OUTBOUND_JOB, variables: { id }, field: 'url',
    missing: ['Job not found', 'It may have expired and been purged, or it belongs to another tenant.', '#/outbound', 'All jobs'],
    show: (j) => {
      job = j;
      mount(root, jobPage(j, indicator, open));
    },
  });
  load(false);
  poller(ctx, { refresh: () => load(true), indicator, ms: 2000, shouldPoll: () => !job || ACTIVE.has(job.status) });
}

function jobPage(j, indicator, open) {
  const attempts = [...j.attempts].sort((a, b) => a.number - b.number);
  return [
    pageHeader({
      crumbs: [{ label: 'Outbound jobs', href: '#/outbound' }, { label: `Job #${j.id}` }],
      title: h('span.request-title', h('span.http-method.lg', j.method), h('span.mono', j.url)),
      subtitle: h('div.title-badges', badge(j.status), indicator),
    }),
    h('section.card.meta-card', facts([
      ['Created', timeEl(j.createdAt)],
      ['Attempts', `${j.attemptCount} of ${j.maxAttempts}`],
      ['Next attempt', j.nextAttemptAt && ACTIVE.has(j.status) ? timeEl(j.nextAttemptAt, 'relative') : '—'],
      ['Finished', j.finishedAt ? timeEl(j.finishedAt) : '—'],
      ['Kept until', timeEl(j.expiresAt)],
      ['Idempotency key', j.idempotencyKey ? h('code', j.idempotencyKey) : '—'],
      j.duplicateOf ? ['Duplicate of', h('a', { href: href('/outbound/' + j.duplicateOf.id) }, `#${j.duplicateOf.id}`)] : null,
      ['Response bodies', j.storeResponseBody ? 'Kept (up to 64 KiB each)' : 'Not kept'],
    ])),
    section('Attempts', { id: 'attempts', sub: plural(attempts.length, 'attempt') },
      attempts.length
        ? attempts.map((a) => attemptBlock(a, j, open))
        : h('p.muted', j.status === 'DUPLICATE' ? 'A duplicate is never sent.' : 'No attempt yet: the first one is on its way.')),
    section('Request', { id: 'request', sub: fmtBytes(j.bodySize) },
      j.headers.length ? dataTable({ className: 'kv', rows: j.headers, columns: [{ label: 'Header', className: 'mono', cell: (x) => x.name }, { label: 'Value', className: 'mono break', cell: (x) => x.value }] }) : h('p.muted', 'No headers.'),
      j.bodySize ? h('pre.code-block', j.body) : h('p.muted', 'Empty body.')),
  ];
}

function attemptBlock(a, j, open) {
  const ok = a.httpStatus != null && a.httpStatus >= 200 && a.httpStatus < 300;
  const det = h('details.attempt', { open: open.has(a.number) || null, dataset: { attempt: a.number, status: a.status } },
    h('summary',
      h('span.num', `#${a.number}`), badge(a.status),
      a.httpStatus != null ? h('span.http-code', { class: ok ? 'ok' : 'bad' }, String(a.httpStatus)) : null,
      h('span.muted', timeEl(a.startedAt)), h('span.mono.muted', fmtDuration(a.durationMs)),
      a.errorKind ? h('span.error-kind', ERROR_KINDS[a.errorKind] || a.errorKind) : null),
    a.errorMessage ? h('p.error-message', a.errorMessage) : null,
    j.storeResponseBody
      ? (a.responseBody != null
        ? [h('div.field-label', 'Response body', a.responseTruncated ? h('span.optional', 'cut at 64 KiB') : null), h('pre.code-block', { dataset: { role: 'response-body' } }, a.responseBody || '(empty)')]
        : h('p.muted', 'No response body.'))
      : h('p.muted', 'Response bodies are not kept for this job.'));
  det.addEventListener('toggle', () => { if (det.open) open.add(a.number); else open.delete(a.number); });
  return det;
}
