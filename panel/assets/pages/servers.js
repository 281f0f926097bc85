// Servers: every server with its inbound URL and recipients; creating one.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, icon, badge, plural, copyButton, loading, emptyState, errorState, toast } from '../ui.js';
import { href, navigate } from '../router.js';
import { canManage, isOperator } from '../session.js';
import { limits, checks } from '../limits.js';
import { formDialog } from '../form.js';
import { setTitle, pageHeader, costLine } from '../page.js';
import { connectionList } from '../table.js';
import { SCHEDULES, deliveryMethod } from './shared.js';

export function viewServers(ctx, main) {
  setTitle('Servers');
  const sub = h('span', '\u00a0');
  const body = h('div.stack', loading('Loading servers…'));
  const create = canManage()
    ? h('button.btn.btn-primary', { type: 'button', dataset: { role: 'new-server' }, onclick: () => createServerFlow() }, icon('plus'), 'New server')
    : null;
  mount(main, pageHeader({ title: 'Servers', subtitle: sub, actions: create }), body);

  const withTenant = isOperator();
  const list = connectionList({
    ctx,
    noun: ['server', 'servers'],
    fetchPage: (after) => gql(Q.SERVERS, { first: 50, after, withTenant }, { signal: ctx.signal }).then((d) => d.servers),
    draw: () => {
      sub.textContent = list.total ? `${plural(list.total, 'server')} · each relays what reaches its inbound URL to its recipients` : '\u00a0';
      if (!list.rows.length) {
        mount(body, canManage()
          ? emptyState('server', 'Create a server',
            'A server gives you an inbound URL: every request sent to it is stored, charged one credit and delivered to the server\u2019s recipients.',
            h('button.btn.btn-primary', { type: 'button', dataset: { role: 'empty-new-server' }, onclick: () => createServerFlow() }, icon('plus'), 'Create a server'))
          : emptyState('server', 'No servers yet', 'An owner of your tenant creates servers; they appear here.'));
        return;
      }
      mount(body, list.rows.map(serverCard), list.pageInfo.hasNextPage ? list.pager() : null);
    },
  });
  const load = () => list.load().catch((err) => {
    if (ctx.alive && err.name !== 'AbortError') mount(body, errorState(err, load));
  });
  // Recipient states and CLI connections change without any delivery event: refresh quietly now and then.
  ctx.every(10000, async () => {
    if (!list.rows.length || list.rows.length > 50) return;
    const before = JSON.stringify(list.rows);
    try {
      const conn = (await gql(Q.SERVERS, { first: 50, withTenant }, { signal: ctx.signal })).servers;
      if (!ctx.alive || JSON.stringify(conn.edges.map((e) => e.node)) === before) return;
      await list.load();
    } catch { /* keep what is shown */ }
  });
  load();
}

function serverCard(s) {
  const url = href('/servers/' + s.id);
  const retention = s.retentionDays != null ? `Keeps requests ${plural(s.retentionDays, 'day')}` : 'Keeps requests per plan';
  return h('article.card.server-card', { dataset: { serverId: s.id } },
    h('header.card-head',
      h('div.card-head-text',
        h('h2.card-title', h('a', { href: url }, s.name)),
        h('div.card-sub',
          s.tenant ? h('span', 'Tenant ', h('a', { href: href('/tenants/' + s.tenant.id) }, s.tenant.name)) : null,
          h('span', `ID ${s.id}`), h('span', retention),
          s.maxRequestsPerSecond ? h('span', `At most ${s.maxRequestsPerSecond} requests/s`) : null,
          h('span', s.deliverPendingOnConnect ? 'CLI backlog delivered on connect' : 'CLI backlog held on connect'))),
      h('a.btn.btn-primary', { href: url, dataset: { role: 'open-server' } }, 'View requests', icon('arrowRight'))),
    h('div.inbound',
      h('span.inbound-label', 'Inbound URL'),
      h('code.inbound-url', s.inboundUrl),
      copyButton(s.inboundUrl)),
    recipientsTable(s));
}

function recipientsTable(s) {
  const recipients = s.recipients;
  if (!recipients.length) {
    return h('div.card-empty', 'No recipients: requests to this server are stored but delivered nowhere. ',
      canManage() ? h('a', { href: href(`/servers/${s.id}/recipients/new`) }, 'Add a recipient') : null);
  }
  return h('div.table-wrap', h('table.table.recipients',
    h('thead', h('tr', h('th', 'Recipient'), h('th', 'Delivery'), h('th', 'Retries'), h('th.right', 'State'))),
    h('tbody', recipients.map((r) => h('tr', { dataset: { recipientId: r.id } },
      h('td', h('div.cell-title', h('a', { href: href('/recipients/' + r.id) }, r.name)),
        r.method === 'CLI' ? h('div.cell-sub', 'Forwarded to a developer\u2019s localhost') : h('div.cell-sub.mono', r.url)),
      h('td', deliveryMethod(r)),
      h('td', h('div', `Up to ${plural(r.maxAttempts, 'attempt')}`), h('div.cell-sub', `${SCHEDULES[r.retrySchedule] || r.retrySchedule} schedule`)),
      h('td.right', badge(r.state)))))));
}

// createServerFlow asks for a server's name and settings and opens it once created.
export async function createServerFlow() {
  const L = await limits();
  const fields = [];
  if (isOperator()) {
    const tenants = (await gql(Q.TENANT_OPTIONS)).tenants.edges.map((e) => e.node);
    if (!tenants.length) {
      toast('Create a tenant first: a server belongs to a tenant.', 'danger');
      navigate('#/tenants');
      return;
    }
    fields.push({ name: 'tenantId', label: 'Tenant', type: 'select', required: true, options: tenants.map((t) => ({ value: t.id, label: t.name })) });
  }
  fields.push(...serverFields(L, {}));
  const result = await formDialog({
    title: 'New server',
    intro: h('p', 'A server is an inbound URL. Whatever is sent to it is stored, costs one credit, and goes to each of its recipients.'),
    role: 'server-form',
    fields,
    cost: () => costLine(0),
    submitLabel: 'Create server',
    onSubmit: (v) => gql(Q.CREATE_SERVER, { input: serverInput(v, true) }),
  });
  if (!result) return;
  const s = result.createServer;
  toast(`Server ${s.name} created. Its inbound URL is ready.`);
  navigate(href('/servers/' + s.id));
}

// SCHEMA_VALIDATION are the ways a server checks a body against its event type's schema.
const SCHEMA_VALIDATION = [
  { value: 'OFF', label: 'Off', hint: 'Bodies are not checked' },
  { value: 'SHADOW', label: 'Shadow', hint: 'Accepted and delivered, marked with why they do not follow the schema' },
  { value: 'ENFORCE', label: 'Enforce', hint: 'Refused with 422 and the first error: neither stored nor charged' },
];

// typeSourceOf says where a server reads a request's event type: PATH, HEADER or NONE.
const typeSourceOf = (s) => (s.eventTypePath ? 'PATH' : s.eventTypeHeader ? 'HEADER' : 'NONE');

// eventTypeFields are where an existing server reads a request's event type, and how it checks bodies.
function eventTypeFields(L, s) {
  const from = (src) => (v) => v.eventTypeSource === src;
  return [
    {
      name: 'eventTypeSource', label: 'Event type of a request', type: 'radio', value: typeSourceOf(s), options: [
        { value: 'NONE', label: 'Not read', hint: 'Requests have no type' },
        { value: 'PATH', label: 'A field of the JSON body', hint: 'e.g. type, or data.object.type' },
        { value: 'HEADER', label: 'A header', hint: 'e.g. X-GitHub-Event' },
      ],
      hint: 'The type names the request on its page and in the list, picks the schema its body is checked against, and which recipients get it.',
    },
    {
      name: 'eventTypePath', label: 'JSON path', mono: true, value: s.eventTypePath || '', show: from('PATH'), optionalNote: false,
      check: checks.eventTypePath(L), attrs: { placeholder: 'data.object.type' },
      hint: 'Dotted field names, array items by index (items.0.kind). A body that is not JSON, or has no string or number there, has no type.',
    },
    {
      name: 'eventTypeHeader', label: 'Header', mono: true, value: s.eventTypeHeader || '', show: from('HEADER'), optionalNote: false,
      check: checks.eventTypeHeader(L), attrs: { placeholder: 'X-GitHub-Event' },
    },
    {
      name: 'schemaValidation', label: 'Check bodies against their type\u2019s schema', type: 'radio', value: s.schemaValidation || 'OFF',
      options: SCHEMA_VALIDATION, show: (v) => v.eventTypeSource !== 'NONE',
      hint: 'A request without a type, or of a type without a schema, is never refused. Schemas are set on the Event types page.',
    },
  ];
}

// serverFields are a server's settings; s holds the current values when editing.
export function serverFields(L, s) {
  return [
    { name: 'name', label: 'Name', required: true, value: s.name || '', check: checks.name(L), hint: 'For people: the sender it receives from, e.g. "stripe".', attrs: { maxlength: String(L.nameMaxLength * 4) } },
    {
      name: 'retentionDays', label: 'Keep requests for (days)', type: 'number', value: s.retentionDays ?? '', check: checks.retentionDays(L),
      hint: 'Shorter than the plan\u2019s retention if set; empty: the plan\u2019s.', optionalNote: 'plan\u2019s if empty',
    },
    {
      name: 'maxRequestsPerSecond', label: 'Rate limit (requests per second)', type: 'number', value: s.maxRequestsPerSecond ?? '',
      check: checks.atLeastOne('maxRequestsPerSecond')(L), optionalNote: 'none if empty',
      hint: 'Over it, senders get 429 with Retry-After, nothing stored or charged. Counted per process.',
    },
    {
      name: 'deliverPendingOnConnect', label: 'Deliver a CLI\u2019s backlog when it connects', type: 'checkbox', value: !!s.deliverPendingOnConnect,
      hint: 'Off: requests that arrived while no adal CLI was attached are held for a manual retry; on: sent as soon as one attaches.',
    },
    ...(s.id ? eventTypeFields(L, s) : []),
  ];
}

// serverInput turns the form's values into createServer's or updateServer's input.
export function serverInput(v, create) {
  const input = { name: v.name, deliverPendingOnConnect: v.deliverPendingOnConnect };
  if (create) {
    if (v.tenantId) input.tenantId = v.tenantId;
    if (v.retentionDays != null) input.retentionDays = v.retentionDays;
    if (v.maxRequestsPerSecond != null) input.maxRequestsPerSecond = v.maxRequestsPerSecond;
    return input;
  }
  if (v.retentionDays != null) input.retentionDays = v.retentionDays;
  else input.clearRetentionDays = true;
  if (v.maxRequestsPerSecond != null) input.maxRequestsPerSecond = v.maxRequestsPerSecond;
  else input.clearMaxRequestsPerSecond = true;
  if (v.eventTypeSource === 'PATH') input.eventTypePath = v.eventTypePath;
  else if (v.eventTypeSource === 'HEADER') input.eventTypeHeader = v.eventTypeHeader;
  else input.clearEventTypeSource = true;
  // Without a source no request has a type, so nothing is checked: validation goes back to off.
  input.schemaValidation = v.eventTypeSource === 'NONE' ? 'OFF' : v.schemaValidation;
  return input;
}

