// One recipient: its health and why, pausing, resuming and enabling it, its settings with the schedule's due
// times, its concurrency cap, signature headers, routing filter (with a live "would match" preview against a
// stored request), event types and authentication to the receiver (secrets write-only), its transformation
// (an editor that tries a source on a stored request, saves versions and reloads old ones), its signing secret
// (revealed, copied, rotated), deleting it; for a CLI recipient, the adal command to run and whether a CLI is
// attached, live; for a broker recipient, where it publishes (its URL without the password, which is
// write-only); its attempts, success rate and durations per hour. Also the page that adds a recipient to a
// server.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import {
  h, mount, icon, badge, timeEl, plural, fmtNumber, loading, emptyState, errorState, errorAlert, toast, confirmAction, debounce,
} from '../ui.js';
import { href, navigate } from '../router.js';
import { canManage } from '../session.js';
import { limits, checks, dueTimes, scheduleOf, duration, parseRule, typeList, BROKER_SCHEMES, isTLS } from '../limits.js';
import { createForm } from '../form.js';
import { setTitle, pageHeader, liveIndicator, poller, orNotFound, nodeView, costLine, snippet, facts, section } from '../page.js';
import { dataTable } from '../table.js';
import { SCHEDULES, STATE_TEXT, METHODS, isBroker, confirmDelete } from './shared.js';
import { recipientActivity } from './charts.js';

// BROKER_URLS are an example URL of each broker method, and what its path means when it means anything.
const BROKER_URLS = {
  RABBITMQ: ['amqp://user:password@rabbit.example.com:5672/', 'the path is the virtual host'],
  NATS: ['nats://user:password@nats.example.com:4222'],
  REDIS_STREAM: ['redis://user:password@redis.example.com:6379/0', 'the path is the database number'],
  MQTT: ['mqtt://user:password@mqtt.example.com:1883'],
};

// BROKER_SETTINGS are the destination fields each broker method takes; the API refuses another method's.
const BROKER_SETTINGS = { RABBITMQ: ['exchange', 'routingKey'], NATS: ['subject'], REDIS_STREAM: ['stream', 'maxLen'], MQTT: ['topic'] };

// urlHint says what a recipient's URL is for its method. Editing a broker recipient, the field starts empty:
// the stored URL's password is never sent to the console, so only an empty field keeps it.
function urlHint(method, r) {
  if (!isBroker(method)) return 'The path and query received after the inbound URL are appended to it.';
  if (r.id) {
    return r.destination && r.destination.hasPassword
      ? `Now ${r.url}. Empty keeps it, password included; a new URL replaces it whole, so type the password again: it is write-only.`
      : `Now ${r.url}. Empty keeps it.`;
  }
  const [plain, tls] = BROKER_SCHEMES[method];
  const [, path] = BROKER_URLS[method];
  return `The broker\u2019s ${plain}:// URL, or ${tls}:// for TLS, with user and password if it asks${path ? ` (${path})` : ''}. The password is write-only: it is never shown again.`;
}

// tlsOf says whether the URL of a broker recipient asks for TLS: the one typed, else the stored one.
const tlsOf = (method, v, r) => (v.url ? isTLS(method, v.url) === true : !!(r.destination && r.destination.tls));

// recipientFields are a recipient's settings; r holds the current ones when editing (its method is fixed).
// preview, when given, is the routing filter's filterPreview; now.auth is the authentication set now, which
// the page keeps current after a save.
function recipientFields(L, r, preview, now = r) {
  const create = !r.id;
  const d = r.destination || {};
  const methodOf = (v) => v.method || r.method;
  const only = (m) => (v) => methodOf(v) === m;
  const schedules = L.retrySchedules.map((s) => ({
    value: s.schedule,
    label: `${SCHEDULES[s.schedule] || s.schedule} (up to ${s.maxAttempts} attempts)`,
  }));
  const fields = [];
  if (create) {
    fields.push({
      name: 'method', label: 'Delivers', type: 'radio', value: 'DIRECT_HTTP', options: [
        { value: 'DIRECT_HTTP', label: 'Direct HTTP', hint: 'Adal sends each request to a URL you own' },
        { value: 'CLI', label: 'adal CLI', hint: 'A developer\u2019s machine runs `adal listen` and forwards to localhost' },
        { value: 'RABBITMQ', label: METHODS.RABBITMQ.label, hint: 'Published to an exchange; the broker confirms each message' },
        { value: 'NATS', label: METHODS.NATS.label, hint: 'Published to a subject a JetStream stream takes, which acknowledges it' },
        { value: 'REDIS_STREAM', label: METHODS.REDIS_STREAM.label, hint: 'Added to a stream with XADD, trimmed to a length' },
        { value: 'MQTT', label: METHODS.MQTT.label, hint: 'Published to a topic at QoS 1; the broker answers with a PUBACK' },
      ],
    });
  }
  fields.push(
    { name: 'name', label: 'Name', required: true, value: r.name || '', check: checks.name(L), hint: 'For people, e.g. "billing-api" or "alice-laptop".' },
    {
      name: 'url', label: 'URL', type: 'url', mono: true, value: isBroker(r.method) ? '' : r.url || '', check: checks.recipientUrl(L, r.method),
      optionalNote: isBroker(r.method) ? 'empty keeps it' : false,
      show: (v) => methodOf(v) !== 'CLI',
      hint: (v) => urlHint(methodOf(v), r),
      placeholder: (v) => (isBroker(methodOf(v)) ? (r.id ? r.url : BROKER_URLS[methodOf(v)][0]) : 'https://api.example.com/webhooks'),
    },
    {
      name: 'exchange', label: 'Exchange', mono: true, value: d.exchange || '', check: checks.brokerName('exchange', false)(L), show: only('RABBITMQ'),
      optionalNote: 'the default exchange if empty', hint: 'Every message is published to it, e.g. "webhooks" or "amq.topic".',
    },
    {
      name: 'routingKey', label: 'Routing key', mono: true, value: d.routingKey || '', check: checks.routingKey(L), show: only('RABBITMQ'),
      optionalNote: 'optional with an exchange',
      hint: 'With the default exchange, the name of the queue. A message no queue takes fails the attempt.',
    },
    {
      name: 'subject', label: 'Subject', mono: true, required: true, value: d.subject || '', check: checks.brokerName('subject', true)(L), show: only('NATS'),
      hint: 'A JetStream stream must take it: its acknowledgement is the attempt\u2019s answer. No wildcards.', attrs: { placeholder: 'webhooks.orders' },
    },
    {
      name: 'stream', label: 'Stream', mono: true, required: true, value: d.stream || '', check: checks.brokerName('stream', true)(L), show: only('REDIS_STREAM'),
      hint: 'The stream\u2019s key; the entry ID Redis gives is the attempt\u2019s answer.', attrs: { placeholder: 'webhooks' },
    },
    {
      name: 'maxLen', label: 'Length', type: 'number', value: d.maxLen ?? 100000, check: checks.maxLen(L), show: only('REDIS_STREAM'),
      optionalNote: '100000 if empty', hint: 'The stream is trimmed to about this many entries at each addition.',
    },
    {
      name: 'topic', label: 'Topic', mono: true, required: true, value: d.topic || '', check: checks.brokerName('topic', true)(L), show: only('MQTT'),
      hint: 'Published at QoS 1: the broker\u2019s PUBACK is the attempt\u2019s answer. No wildcards.', attrs: { placeholder: 'webhooks/orders' },
    },
    {
      name: 'caCertificate', label: 'CA certificate', type: 'textarea', value: d.caCertificate || '', check: checks.caCertificate(L),
      show: (v) => isBroker(methodOf(v)) && tlsOf(methodOf(v), v, r), optionalNote: 'the system\u2019s authorities only if empty',
      hint: 'PEM certificates trusted for the broker\u2019s certificate besides the system\u2019s: for a broker whose certificate a private authority signed.',
      attrs: { rows: 4, placeholder: '-----BEGIN CERTIFICATE-----' },
    },
    { name: 'retrySchedule', label: 'Retry schedule', type: 'select', value: r.retrySchedule || 'QUADRATIC', options: schedules, optionalNote: false },
    {
      name: 'maxAttempts', label: 'Attempts', type: 'number', required: true, value: r.maxAttempts ?? scheduleOf(L, r.retrySchedule || 'QUADRATIC').maxAttempts,
      check: checks.maxAttempts(L), hint: 'The first attempt included; automatic retries cost nothing.',
      preview: (v) => schedulePreview(L, v.retrySchedule, v.maxAttempts),
    },
    {
      name: 'timeoutSeconds', label: 'Timeout (seconds)', type: 'number', required: true, value: r.timeoutSeconds ?? L.timeoutSecondsMax,
      check: checks.timeoutSeconds(L), hint: `Per attempt, reading the response included; at most ${L.timeoutSecondsMax}.`,
    },
    {
      name: 'sendIdempotencyKey', label: 'Send an X-Adal-Idempotency header', type: 'checkbox', value: !!r.sendIdempotencyKey,
      hint: 'The same value on every attempt of a delivery, so the receiver can drop repeats.',
    },
    {
      name: 'maxConcurrency', label: 'Concurrency cap', type: 'number', value: r.maxConcurrency ?? '', check: checks.maxConcurrency(L),
      show: (v) => methodOf(v) !== 'CLI', optionalNote: 'no cap if empty',
      hint: 'Attempts in flight at once across all processes (1: one at a time). A delivery waiting for a slot stays pending and spends no attempt.',
    },
    {
      name: 'signatureHeaders', label: 'Signature headers', type: 'radio', value: r.signatureHeaders || 'ADAL', wide: true, options: [
        { value: 'ADAL', label: 'Adal', hint: 'X-Adal-Webhook-Id, -Timestamp and -Signature; a sender\u2019s own webhook-* headers pass as sent' },
        { value: 'STANDARD_WEBHOOKS', label: 'Standard Webhooks', hint: 'webhook-id, webhook-timestamp and webhook-signature, replacing a sender\u2019s headers of those names' },
      ],
      hint: 'Every attempt is signed with the recipient\u2019s signing secret; this names the headers that carry the signature.',
    },
    {
      name: 'filter', label: 'Routing filter', type: 'textarea', raw: true, value: r.filter ? JSON.stringify(r.filter, null, 2) : '',
      check: checks.filter(L), optionalNote: 'every request if empty', attrs: { rows: 6, placeholder: '{"headers.x-github-event": "push", "body.amount": {"$gte": 100}}' },
      hint: 'A JSON rule over method, path, query, headers and body (dot paths; $eq $neq $gt $gte $lt $lte $in $nin $exists $regex $and $or $not). A request it does not match gets no delivery to this recipient.',
      preview: preview ? (v) => preview.update(v.filter) : null,
    },
    {
      name: 'eventTypes', label: 'Event types', type: 'textarea', value: (r.eventTypes || []).join('\n'), check: checks.eventTypes(L),
      optionalNote: 'every request if empty', attrs: { rows: 2, placeholder: 'order.paid\ninvoice.*' },
      hint: 'The types it takes, comma- or line-separated: order.* takes order.paid and order.paid.late, * every typed request. A request of another type, or of none, gets no delivery to it.',
    },
    ...authFields(r, now, only('DIRECT_HTTP')),
  );
  return fields;
}

// AUTH_SCHEMES are what may fill the Authorization header of attempts: one at most.
const AUTH_SCHEMES = [
  { value: '', label: 'None' },
  { value: 'BASIC', label: 'Basic: a user name and a password' },
  { value: 'BEARER', label: 'Bearer: a static token' },
  { value: 'OAUTH2', label: 'OAuth2 client credentials: a token from a token endpoint' },
];

// AUTH_FIELDS are the fields of the authentication, emptied once saved: their secrets are write-only.
const AUTH_FIELDS = [
  'auth.headers', 'auth.scheme', 'auth.basic.username', 'auth.basic.password', 'auth.bearer', 'auth.oauth2.tokenUrl',
  'auth.oauth2.clientId', 'auth.oauth2.clientSecret', 'auth.oauth2.scopes', 'auth.oauth2.audience',
  'auth.clientCertificate.certificatePem', 'auth.clientCertificate.keyPem', 'clearAuth',
];

// headerLines reads "Name: value" lines; bad is the first line that is not one.
function headerLines(text) {
  const out = [];
  let bad = null;
  for (const line of String(text || '').split('\n')) {
    if (!line.trim()) continue;
    const at = line.indexOf(':');
    if (at < 1) { bad = bad || line.trim(); continue; }
    out.push({ name: line.slice(0, at).trim(), value: line.slice(at + 1).trim() });
  }
  return { headers: out, bad };
}

// authSummary is what authentication is set, as Recipient.auth says it: never a secret.
export function authSummary(a) {
  if (!a) return h('span', { dataset: { role: 'auth-now' } }, 'None');
  const parts = [];
  if (a.headerNames.length) parts.push(['headers ', h('span.mono', a.headerNames.join(', '))]);
  if (a.basicUsername != null) parts.push(['Basic as ', h('span.mono', a.basicUsername)]);
  if (a.bearer) parts.push('a bearer token');
  if (a.oauth2TokenUrl) {
    parts.push(['OAuth2 as ', h('span.mono', a.oauth2ClientId), ' from ', h('span.mono', a.oauth2TokenUrl),
      a.oauth2Scopes && a.oauth2Scopes.length ? [' for ', h('span.mono', a.oauth2Scopes.join(' '))] : null]);
  }
  if (a.clientCertificateSubject) {
    parts.push(['the client certificate ', h('span.mono', a.clientCertificateSubject), ', valid until ', timeEl(a.clientCertificateNotAfter)]);
  }
  return h('span', { dataset: { role: 'auth-now' } }, parts.map((p, i) => [i ? ' · ' : '', p]));
}

// authFields are how a DIRECT_HTTP recipient authenticates to its receiver. Secrets are write-only: editing,
// the fields start empty and the heading says what is set; empty fields keep it, filled ones replace it whole.
function authFields(r, now, direct) {
  const create = !r.id;
  const on = (v) => direct(v) && !v.clearAuth;
  const uses = (scheme) => (v) => on(v) && v['auth.scheme'] === scheme;
  const secret = { autocomplete: 'new-password' };
  const fields = [
    {
      name: 'auth.headers', label: 'Custom headers', type: 'textarea', value: '', show: on, optionalNote: 'one a line',
      attrs: { rows: 2, placeholder: 'X-Api-Key: …' },
      hint: 'Name: value, sent on every attempt in place of a sender\u2019s header of that name.',
      check: (v) => {
        const { bad } = headerLines(v);
        return bad ? `auth.headers: ${JSON.stringify(bad)} is not Name: value` : '';
      },
      heading: {
        title: 'Authentication',
        text: () => {
          if (create) return 'How attempts authenticate to the receiver, if it asks. Secrets are write-only: once saved, they are never shown again.';
          if (!now.auth) return 'None set. Secrets are write-only: once saved, they are never shown again.';
          return h('span', 'Now: ', authSummary(now.auth), '. Leave these fields empty to keep it; what you fill in replaces it whole, secrets included.');
        },
      },
    },
    { name: 'auth.scheme', label: 'Authorization header', type: 'select', value: '', options: AUTH_SCHEMES, show: on },
    { name: 'auth.basic.username', label: 'User name', required: true, value: '', show: uses('BASIC'), attrs: { autocomplete: 'off' } },
    { name: 'auth.basic.password', label: 'Password', type: 'password', raw: true, required: true, value: '', show: uses('BASIC'), attrs: secret },
    {
      name: 'auth.bearer', label: 'Token', type: 'password', required: true, value: '', show: uses('BEARER'), attrs: secret,
      hint: 'Sent as Authorization: Bearer and the token: give the token alone.',
    },
    {
      name: 'auth.oauth2.tokenUrl', label: 'Token URL', type: 'url', mono: true, required: true, value: '', show: uses('OAUTH2'),
      attrs: { placeholder: 'https://auth.example.com/oauth/token' },
      check: (v) => (v && !/^https?:\/\/[^/]/i.test(v) ? 'oauth2.tokenURL must be an absolute http:// or https:// URL' : ''),
    },
    { name: 'auth.oauth2.clientId', label: 'Client ID', mono: true, required: true, value: '', show: uses('OAUTH2') },
    { name: 'auth.oauth2.clientSecret', label: 'Client secret', type: 'password', raw: true, required: true, value: '', show: uses('OAUTH2'), attrs: secret },
    { name: 'auth.oauth2.scopes', label: 'Scopes', mono: true, value: '', show: uses('OAUTH2'), optionalNote: 'the client\u2019s default if empty', hint: 'Space- or comma-separated.' },
    { name: 'auth.oauth2.audience', label: 'Audience', mono: true, value: '', show: uses('OAUTH2'), optionalNote: 'some providers ask for it' },
    {
      name: 'auth.clientCertificate.certificatePem', label: 'Client certificate', type: 'textarea', value: '', show: on,
      optionalNote: 'for a receiver that requires mutual TLS', attrs: { rows: 3, placeholder: '-----BEGIN CERTIFICATE-----' },
      hint: 'PEM, with its chain if any; presented in the TLS handshake.',
      check: (v, all) => (!v && all['auth.clientCertificate.keyPem'] ? 'clientCertificate.certificatePEM is required' : ''),
    },
    {
      name: 'auth.clientCertificate.keyPem', label: 'Its private key', type: 'textarea', value: '', show: on,
      optionalNote: 'write-only', attrs: { rows: 3, placeholder: '-----BEGIN PRIVATE KEY-----' },
      check: (v, all) => (!v && all['auth.clientCertificate.certificatePem'] ? 'clientCertificate.keyPEM is required' : ''),
    },
  ];
  if (!create) {
    fields.push({
      name: 'clearAuth', label: 'Remove authentication', type: 'checkbox', value: false, show: (v) => direct(v) && !!now.auth,
      hint: 'Attempts send no custom header, Authorization or client certificate from now on.',
    });
  }
  return fields;
}

// authInput is the authentication the form's values describe; null when none was typed, which keeps the one
// set (editing) or sets none (creating).
function authInput(v) {
  const auth = {};
  const { headers } = headerLines(v['auth.headers']);
  if (headers.length) auth.headers = headers;
  switch (v['auth.scheme']) {
    case 'BASIC':
      auth.basic = { username: v['auth.basic.username'], password: v['auth.basic.password'] };
      break;
    case 'BEARER':
      auth.bearer = v['auth.bearer'];
      break;
    case 'OAUTH2': {
      const o = { tokenUrl: v['auth.oauth2.tokenUrl'], clientId: v['auth.oauth2.clientId'], clientSecret: v['auth.oauth2.clientSecret'] };
      const scopes = typeList(v['auth.oauth2.scopes']);
      if (scopes.length) o.scopes = scopes;
      if (v['auth.oauth2.audience']) o.audience = v['auth.oauth2.audience'];
      auth.oauth2 = o;
      break;
    }
  }
  const cert = v['auth.clientCertificate.certificatePem'];
  const key = v['auth.clientCertificate.keyPem'];
  if (cert || key) auth.clientCertificate = { certificatePem: cert, keyPem: key };
  return Object.keys(auth).length ? auth : null;
}

// schedulePreview lists when each attempt comes due, were every attempt to fail.
function schedulePreview(L, schedule, attempts) {
  if (!schedule || attempts == null || Number.isNaN(attempts)) return null;
  const s = scheduleOf(L, schedule);
  if (attempts < s.minAttempts || attempts > s.maxAttempts) return null;
  const due = dueTimes(L, schedule, attempts);
  return h('div.schedule', { dataset: { role: 'schedule' } },
    h('div.schedule-head', icon('retry'), h('strong', 'If every attempt fails: '), due.summary),
    h('ol.schedule-steps', due.items.map((d) => h('li', h('span.step-n', `#${d.n}`), h('span', d.label)))));
}

// recipientInput is the API's input from the form's values; r is the recipient edited ({} for a new one).
function recipientInput(v, create, r = {}) {
  const input = {
    name: v.name, maxAttempts: v.maxAttempts, retrySchedule: v.retrySchedule, timeoutSeconds: v.timeoutSeconds,
    sendIdempotencyKey: v.sendIdempotencyKey, signatureHeaders: v.signatureHeaders,
  };
  if (create) input.method = v.method;
  const method = v.method || 'DIRECT_HTTP';
  if (method === 'DIRECT_HTTP' && v.url !== undefined) input.url = v.url;
  if (isBroker(method)) {
    // An empty URL keeps the stored one; the settings are sent whole, as the API replaces them whole.
    if (v.url) input.url = v.url;
    const dest = {};
    for (const k of BROKER_SETTINGS[method]) if (v[k] != null && v[k] !== '') dest[k] = v[k];
    if (tlsOf(method, v, r) && v.caCertificate) dest.caCertificate = v.caCertificate;
    input.destination = dest;
  }
  const capped = method !== 'CLI';
  if (capped && v.maxConcurrency != null) input.maxConcurrency = v.maxConcurrency;
  else if (capped && !create) input.clearMaxConcurrency = true;
  if (v.filter && v.filter.trim()) input.filter = parseRule(v.filter).rule;
  else if (!create) input.clearFilter = true;
  // Editing, the list replaces the stored one: [] takes every request again.
  const types = typeList(v.eventTypes);
  if (types.length || !create) input.eventTypes = types;
  if (method === 'DIRECT_HTTP') {
    const auth = authInput(v);
    if (!create && v.clearAuth) input.clearAuth = true;
    else if (auth) input.auth = auth;
  }
  return input;
}

// filterPreview says, as a rule is typed, whether it would match a stored request of the server — the latest,
// or the one whose ID the person gives — with testFilter, which saves nothing. update(text) returns its element.
function filterPreview(serverId) {
  const pickId = 'filter-request-' + serverId;
  const pick = h('input.input.plain.input-sm.filter-pick', {
    id: pickId, inputmode: 'numeric', autocomplete: 'off', list: pickId + '-list', placeholder: 'latest', 'aria-describedby': pickId + '-hint',
    dataset: { role: 'filter-request' },
  });
  const options = h('datalist', { id: pickId + '-list' });
  const pickHint = h('span.muted.sm', { id: pickId + '-hint' });
  const out = h('div.filter-result', { dataset: { role: 'filter-result', result: 'none' }, role: 'status' });
  const el = h('div.filter-preview', { dataset: { role: 'filter-preview' } },
    h('div.filter-preview-head', h('label.inline-label', { for: pickId }, 'Would it match request #'), pick, options, pickHint),
    out);
  let text = null;
  let seq = 0;
  let latest = null;
  const show = (result, ...children) => {
    out.dataset.result = result;
    mount(out, ...children);
  };

  // latestRequest reads the server's newest requests (the first is the latest) and offers them to pick from.
  const latestRequest = async () => {
    const data = await gql(Q.FILTER_REQUESTS, { serverId, first: 20 });
    const rows = data.requests.edges.map((e) => e.node);
    mount(options, rows.map((q) => h('option', { value: q.id }, `${q.method} ${q.path || '/'}`)));
    latest = rows[0] || null;
    pickHint.textContent = latest ? `Empty: the latest, #${latest.id} (${latest.method} ${latest.path || '/'})` : '';
    return latest;
  };

  const run = async () => {
    const mine = ++seq;
    if (!text.trim()) { show('none', h('span.muted', 'No filter: every request is delivered to this recipient.')); return; }
    const parsed = parseRule(text);
    if (parsed.error) { show('error', icon('alert'), h('span', `filter: $: ${parsed.error}`)); return; }
    let id = pick.value.trim().replace(/^#/, '');
    try {
      if (!id) {
        const q = await latestRequest();
        if (mine !== seq) return;
        if (!q) { show('none', h('span.muted', 'No stored request to test it against yet: send one to the server\u2019s inbound URL.')); return; }
        id = q.id;
      }
      if (!/^\d+$/.test(id)) { show('error', icon('alert'), h('span', 'A request ID is a number.')); return; }
      const res = (await gql(Q.TEST_FILTER, { filter: parsed.rule, requestId: id })).testFilter;
      if (mine !== seq) return;
      if (res.error) show('error', icon('alert'), h('span', 'filter: ' + res.error));
      else if (res.matches) show('match', icon('check'), h('span', 'Matches request ', h('a', { href: href('/requests/' + id) }, `#${id}`), ': it would be delivered to this recipient.'));
      else show('no-match', icon('x'), h('span', 'Doesn\u2019t match request ', h('a', { href: href('/requests/' + id) }, `#${id}`), ': it would get no delivery to this recipient.'));
    } catch (err) {
      if (mine !== seq) return;
      show('error', icon('alert'), h('span', err.code === 'NOT_FOUND' ? `No request #${id} on this server.` : err.message));
    }
  };
  const later = debounce(run, 300);
  pick.addEventListener('input', later);
  // Enter in the picker tests at once rather than saving the form.
  pick.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); later.cancel(); run(); } });
  return {
    update(value) {
      if (value !== text) { text = value || ''; later(); }
      return el;
    },
  };
}

// ---- a new recipient ---------------------------------------------------------------------------------------

export async function viewNewRecipient(ctx, main, serverId) {
  setTitle('Add a recipient');
  mount(main, loading('Loading…'));
  let L;
  let server;
  try {
    [L, server] = await Promise.all([limits(), gql(Q.SERVER, { id: serverId, withTenant: false }, { signal: ctx.signal }).then((d) => d.server).catch(orNotFound)]);
  } catch (err) {
    if (ctx.alive && err.name !== 'AbortError') mount(main, errorState(err, () => viewNewRecipient(ctx, main, serverId)));
    return;
  }
  if (!ctx.alive) return;
  if (!server) {
    mount(main, emptyState('alert', 'Server not found', 'It may have been deleted, or it belongs to another tenant.'));
    return;
  }
  const form = createForm({
    role: 'recipient-form',
    fields: recipientFields(L, {}, filterPreview(serverId)),
    cost: () => costLine(0),
    submitLabel: 'Add recipient',
    onCancel: () => navigate(href(`/servers/${serverId}/recipients`)),
    onSubmit: (v) => gql(Q.CREATE_RECIPIENT, { input: { serverId, ...recipientInput(v, true) } }),
    onDone: (result) => {
      const r = result.createRecipient;
      toast(`Recipient ${r.name} added: new requests to ${server.name} go to it.`);
      navigate(href('/recipients/' + r.id));
    },
  });
  mount(main,
    pageHeader({
      crumbs: [{ label: 'Servers', href: '#/servers' }, { label: server.name, href: href(`/servers/${serverId}/recipients`) }, { label: 'Add a recipient' }],
      title: 'Add a recipient',
      subtitle: `Requests ${server.name} accepts from now on go to it, with its own retries. Earlier ones are not sent to it (replay them if needed).`,
    }),
    h('div.card.form-card', form.el));
  form.focus();
}

// ---- one recipient -----------------------------------------------------------------------------------------

export function viewRecipient(ctx, main, id) {
  setTitle('Recipient');
  const indicator = liveIndicator();
  const root = h('div', loading('Loading recipient…'));
  mount(main, root);
  let formShown = false;
  const status = h('div');
  const cli = h('div');
  let cliEl = null;
  let secretEl = null;
  let settingsForm = null;
  // The authentication set now: the settings form says what it is, and follows it after a save.
  const now = { auth: null };

  const load = nodeView(ctx, root, {
    query: Q.RECIPIENT, variables: { id }, field: 'method',
    missing: ['Recipient not found', 'It may belong to another tenant.', '#/servers', 'All servers'],
    show: async (r) => {
      setTitle(r.name);
      const authChanged = JSON.stringify(r.auth) !== JSON.stringify(now.auth);
      now.auth = r.auth;
      if (!formShown) {
        formShown = true;
        await page(r);
      } else if (authChanged && settingsForm) {
        settingsForm.refresh();
      }
      mount(status, healthCard(r, () => load(true)));
      if (r.method === 'CLI') {
        if (!cliEl) mount(cli, (cliEl = cliCard(r)));
        cliEl.update(r);
      }
      if (secretEl) secretEl.update(r);
    },
  });

  const page = async (r) => {
    const head = pageHeader({
      crumbs: [{ label: 'Servers', href: '#/servers' }, { label: r.server.name, href: href(`/servers/${r.server.id}/recipients`) }, { label: r.name }],
      title: r.name,
      subtitle: h('div.title-badges', h('span.method', { dataset: { method: r.method } }, icon(METHODS[r.method].icon), METHODS[r.method].label), indicator),
    });
    const parts = [head, status, cli,
      section('Activity', { id: 'activity', sub: 'Attempts per UTC hour, by the hour they ended' }, recipientActivity(ctx, r.id))];
    if (r.deletedAt) {
      parts.push(h('div.alert.alert-warning', icon('trash'), h('div.alert-body', h('strong.alert-title', 'Deleted'),
        h('span.alert-message', 'This recipient was deleted ', timeEl(r.deletedAt), '; its deliveries stay in the requests\u2019 history.'))));
    } else if (canManage()) {
      const L = await limits();
      const form = createForm({
        role: 'recipient-settings',
        fields: recipientFields(L, r, filterPreview(r.server.id), now),
        cost: () => costLine(0),
        submitLabel: 'Save changes',
        onSubmit: (v) => gql(Q.UPDATE_RECIPIENT, { id: r.id, input: recipientInput({ ...v, method: r.method }, false, r) }),
        onDone: () => {
          toast(`Settings of ${r.name} saved. Deliveries created from now on use them.`);
          // Saved secrets leave the page: the heading says what is set once the recipient is read again.
          for (const name of AUTH_FIELDS) form.set(name, name === 'clearAuth' ? false : '');
          load.forget();
          load(true);
        },
      });
      settingsForm = form;
      parts.push(section('Settings', { id: 'settings', sub: 'New deliveries use them; those already created keep theirs.' }, form.el));
      if (r.method !== 'CLI') parts.push(transformCard(ctx, r));
      if (r.signingSecret) parts.push((secretEl = secretCard(r, L)));
      parts.push(section('Delete this recipient', { id: 'danger' },
        h('p', 'Its pending deliveries are canceled and nothing more is sent to it. Its history stays with the requests.'),
        h('button.btn.btn-danger-ghost', { type: 'button', dataset: { role: 'delete-recipient' }, onclick: () => deleteFlow(r) }, icon('trash'), 'Delete recipient')));
    } else {
      parts.push(section('Settings', { id: 'settings' }, facts([
        ['Schedule', `${SCHEDULES[r.retrySchedule]} · up to ${plural(r.maxAttempts, 'attempt')}`],
        ['Timeout', `${r.timeoutSeconds} s`],
        ['Idempotency header', r.sendIdempotencyKey ? 'Sent' : 'Not sent'],
        r.method === 'DIRECT_HTTP' ? ['URL', h('span.mono.break', r.url)] : null,
        ...destinationFacts(r),
        r.method !== 'CLI' ? ['Concurrency', r.maxConcurrency ? `At most ${plural(r.maxConcurrency, 'attempt')} at once` : 'No cap'] : null,
        ['Signature headers', r.signatureHeaders === 'STANDARD_WEBHOOKS' ? 'Standard Webhooks (webhook-*)' : 'Adal (X-Adal-Webhook-*)'],
        ['Routing filter', r.filter ? h('code.mono.break', { dataset: { role: 'filter-text' } }, JSON.stringify(r.filter)) : 'None: every request'],
        ['Event types', r.eventTypes && r.eventTypes.length ? h('span.mono', { dataset: { role: 'event-types' } }, r.eventTypes.join(', ')) : 'Every request'],
        r.method === 'DIRECT_HTTP' ? ['Authentication', authSummary(r.auth)] : null,
      ])));
      if (r.method !== 'CLI') parts.push(transformCard(ctx, r));
      parts.push(section('Signing secret', { id: 'secret' }, h('p.muted', { dataset: { role: 'secret-hidden' } },
        'Deliveries are signed with the recipient\u2019s secret. Only the tenant\u2019s owner or an operator can see it.')));
    }
    if (ctx.alive) mount(root, h('div.stack', parts));
  };

  load(false);
  // State and a CLI's connection change without delivery events: read them again every few seconds.
  poller(ctx, { refresh: () => load(true), indicator, ms: 2000 });
}

function healthCard(r, reload) {
  return h('section.card.health', { dataset: { role: 'health', state: r.state } },
    h('div.health-head', badge(r.state), h('span.health-text', STATE_TEXT[r.state] || ''), h('div.spacer'),
      canManage() && !r.deletedAt ? h('div.row-actions', stateActions(r, reload)) : null),
    facts([
      ['Why', r.stateReason || (r.state === 'ACTIVE' ? 'Healthy' : '—')],
      ['Since', r.stateChangedAt ? timeEl(r.stateChangedAt) : timeEl(r.createdAt)],
      ['Last success', r.lastSuccessAt ? timeEl(r.lastSuccessAt) : h('span.muted', 'None yet')],
      r.state === 'DISABLED' && r.nextProbeAt ? ['Next probe', timeEl(r.nextProbeAt, 'relative')] : null,
      r.method === 'DIRECT_HTTP' ? ['URL', h('span.mono.break', r.url)] : null,
      ...destinationFacts(r),
      ['Retries', `${SCHEDULES[r.retrySchedule] || r.retrySchedule} · up to ${plural(r.maxAttempts, 'attempt')} · ${r.timeoutSeconds} s timeout`],
    ]));
}

// destinationFacts are where a broker recipient publishes, none for the others: its URL as the API shows it,
// without the password (write-only), and its settings.
function destinationFacts(r) {
  if (!isBroker(r.method) || !r.destination) return [];
  const d = r.destination;
  const setting = (label, name, value) => (value == null ? null : [label, h('span.mono.break', { dataset: { setting: name } }, String(value))]);
  return [
    ['Broker URL', h('span', h('span.mono.break', { dataset: { role: 'broker-url' } }, r.url),
      d.hasPassword ? h('span.muted.sm', { dataset: { role: 'broker-password' } }, ' · password set, never shown') : null)],
    r.method === 'RABBITMQ' && !d.exchange ? ['Exchange', h('span', { dataset: { setting: 'exchange' } }, 'The default exchange')] : setting('Exchange', 'exchange', d.exchange),
    setting('Routing key', 'routingKey', d.routingKey),
    setting('Subject', 'subject', d.subject),
    setting('Stream', 'stream', d.stream),
    d.maxLen != null ? ['Length', h('span', { dataset: { setting: 'maxLen' } }, `About ${fmtNumber(d.maxLen)} entries`)] : null,
    setting('Topic', 'topic', d.topic),
    ['TLS', h('span', { dataset: { setting: 'tls' } }, d.tls ? (d.caCertificate ? 'Yes, with its own CA certificate' : 'Yes') : 'No')],
  ];
}

// cliCard shows how to attach the adal CLI to this recipient, and whether one is attached now.
function cliCard(r) {
  const forward = h('input.input', { id: 'forward', value: localStorage.getItem('adal.forward') || 'http://localhost:3000/webhooks', spellcheck: 'false', 'aria-describedby': 'forward-hint' });
  const commands = h('div');
  const draw = () => {
    const url = forward.value.trim() || 'http://localhost:3000/webhooks';
    mount(commands,
      h('div.field-label', '1. Sign the CLI in (once per machine) with a token of this tenant'),
      snippet(`adal login --server ${location.origin} --token <TOKEN>`, 'Copy', 'cli-login'),
      h('div.field-label', '2. Forward this recipient\u2019s deliveries to your local service'),
      snippet(`adal listen --recipient ${r.id} --forward ${url}`, 'Copy command', 'cli-command'));
  };
  forward.addEventListener('input', () => { try { localStorage.setItem('adal.forward', forward.value); } catch { /* private mode */ } draw(); });
  draw();
  const banner = h('div.cli-banner', { dataset: { role: 'cli-connected' }, role: 'status' });
  const el = section('adal CLI', { id: 'cli' },
    banner,
    h('label.field-label', { for: 'forward' }, 'Your local URL'),
    forward,
    h('p.field-hint', { id: 'forward-hint' }, 'The path and query after the inbound URL are appended. Build the CLI with ', h('code', 'go build ./cmd/adal'),
      '; a token comes from the Team page.', r.server.deliverPendingOnConnect ? ' Requests that arrived while no CLI was attached are sent when it connects.' : ' Requests that arrived while no CLI was attached wait for a manual retry (the server\u2019s settings change that).'),
    commands);
  // update shows whether a CLI is attached now, without touching what the person is typing.
  el.update = (now) => {
    const connected = now.cliConnected;
    banner.className = 'cli-banner ' + (connected ? 'on' : 'off');
    banner.dataset.connected = String(connected);
    mount(banner, h('span.status-dot', { class: connected ? 'tone-success' : 'tone-neutral' }),
      connected ? 'A CLI is connected: due deliveries go to it now.' : 'No CLI connected: deliveries wait, pending, without spending attempts.');
  };
  return el;
}

// secretCard shows the secret deliveries are signed with: hidden until revealed, copied, rotated with a grace
// during which both signatures are sent. update(r) follows changes read by the page's polling.
function secretCard(r, L) {
  let secret = r.signingSecret;
  let previousUntil = r.previousSecretExpiresAt;
  let shown = false;
  let rotatedAt = 0;
  const value = h('code.secret-value', { id: 'secret-' + r.id, dataset: { role: 'secret-value' } });
  const reveal = h('button.btn.btn-secondary.btn-sm', { type: 'button', dataset: { role: 'reveal-secret' }, 'aria-controls': 'secret-' + r.id });
  const copy = h('button.btn.btn-secondary.btn-sm', { type: 'button', dataset: { role: 'copy-secret' } });
  const rotate = h('button.btn.btn-secondary.btn-sm', { type: 'button', dataset: { role: 'rotate-secret' } }, icon('rotate'), 'Rotate');
  const grace = h('p.muted', { dataset: { role: 'secret-grace' } });
  const draw = () => {
    value.textContent = shown ? secret : 'whsec_' + '\u2022'.repeat(32);
    value.dataset.revealed = String(shown);
    reveal.setAttribute('aria-pressed', String(shown));
    mount(reveal, icon('key'), shown ? 'Hide' : 'Reveal');
    mount(grace, previousUntil && Date.parse(previousUntil) > Date.now()
      ? ['Until ', timeEl(previousUntil), ' deliveries also carry a signature made with the previous secret.']
      : null);
  };
  const copyLabel = (iconName, text) => mount(copy, icon(iconName), h('span', text));
  copyLabel('copy', 'Copy');
  reveal.addEventListener('click', () => { shown = !shown; draw(); });
  copy.addEventListener('click', async () => {
    let ok = false;
    try {
      if (navigator.clipboard && navigator.clipboard.writeText) { await navigator.clipboard.writeText(secret); ok = true; }
    } catch { ok = false; }
    if (!ok) {
      // No clipboard (an insecure origin, a refused permission): show the secret selected, for Ctrl+C.
      shown = true;
      draw();
      const range = document.createRange();
      range.selectNodeContents(value);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    }
    copyLabel(ok ? 'check' : 'copy', ok ? 'Copied' : 'Selected: press Ctrl+C');
    copy.classList.toggle('copied', ok);
    setTimeout(() => { copyLabel('copy', 'Copy'); copy.classList.remove('copied'); }, 2500);
  });
  rotate.addEventListener('click', async () => {
    const pickId = 'secret-grace-' + r.id;
    const hours = L.keyGraceSecondsDefault / 3600;
    const pick = h('select.input.plain', { id: pickId, dataset: { role: 'secret-grace-seconds' } },
      [
        ['0', 'No grace: only the new secret signs from now on'],
        ['3600', '1 hour'],
        [String(L.keyGraceSecondsDefault), `${hours} hours (the default)`],
        [String(7 * 86400), '7 days'],
        [String(L.keyGraceSecondsMax), `${L.keyGraceSecondsMax / 86400} days (the longest)`],
      ].map(([v, label]) => h('option', { value: v, selected: v === String(L.keyGraceSecondsDefault) }, label)));
    const result = await confirmAction({
      title: `Rotate the signing secret of ${r.name}`,
      body: [
        h('p', 'A new secret signs deliveries at once.'),
        h('p', 'During the grace, every delivery carries both signatures, space-separated, the new one first: give the recipient the new secret while it still accepts the old one. After it, only the new secret signs.'),
        h('div.field', h('label.field-label', { for: pickId }, 'Grace (both signatures sent)'), pick),
        costLine(0),
      ],
      confirmLabel: 'Rotate secret',
      action: () => gql(Q.ROTATE_RECIPIENT_SECRET, { id: r.id, graceSeconds: Number(pick.value) }),
    });
    if (!result) return;
    const now = result.rotateRecipientSecret;
    rotatedAt = Date.now();
    secret = now.signingSecret;
    previousUntil = now.previousSecretExpiresAt;
    shown = true;
    draw();
    toast(now.previousSecretExpiresAt
      ? `New signing secret of ${r.name} shown; the old one also signs for ${duration(Number(pick.value))}.`
      : `New signing secret of ${r.name} shown; the old one no longer signs.`);
  });
  draw();
  const el = section('Signing secret', { id: 'secret', sub: 'Give it to a Standard Webhooks library to verify deliveries' },
    h('div.secret-line', value, h('div.row-actions', reveal, copy, rotate)),
    grace);
  el.update = (now) => {
    if (!now.signingSecret || (now.signingSecret === secret && now.previousSecretExpiresAt === previousUntil)) return;
    // A poll sent before this page's own rotation answers with the replaced secret: not news.
    if (Date.now() - rotatedAt < 5000) return;
    secret = now.signingSecret;
    previousUntil = now.previousSecretExpiresAt;
    draw();
  };
  return el;
}

// ---- transformation ----------------------------------------------------------------------------------------

const TRANSFORM_TEMPLATE = 'function transform(request) {\n  return request;\n}';
const TRANSFORM_REASONS = { THROW: 'it threw', TIMEOUT: 'it ran out of time', MEMORY: 'it ran out of memory', RESULT: 'it returned no request' };

// transformCard is the recipient's transformation: an editor holding the current version's source (or a
// template), "Try it" on a stored request of the server (tryTransform, which saves and sends nothing), saving a
// new version, and the versions saved, each of which loads into the editor. Members try; managers also save.
function transformCard(ctx, r) {
  const id = 'transform-' + r.id;
  const editor = h('textarea.input.code-editor', {
    id, rows: 14, spellcheck: 'false', autocomplete: 'off', autocapitalize: 'off', wrap: 'off',
    'aria-describedby': `${id}-hint ${id}-error`, dataset: { role: 'transform-source' },
  });
  const error = h('div.field-error', { id: id + '-error', role: 'alert', dataset: { role: 'transform-error' } });
  const field = h('div.field.wide',
    h('label.field-label', { for: id }, 'Source'),
    editor,
    h('div.field-hint', { id: id + '-hint' },
      'transform(request) gets {method, path, query, headers, body} — body parsed when JSON — and returns it changed, or null to cancel the delivery. ',
      canManage() ? 'Saving an empty source removes the transformation.' : null),
    error);
  const state = h('span.muted.sm', { dataset: { role: 'transform-state' } });
  const pickId = id + '-request';
  const pick = h('select.input.plain.input-sm', { id: pickId, dataset: { role: 'transform-request' } }, h('option', { value: '' }, 'Loading requests…'));
  const pickOther = h('input.input.plain.input-sm.filter-pick', {
    inputmode: 'numeric', autocomplete: 'off', placeholder: 'or an ID', 'aria-label': 'Request ID to try it on', dataset: { role: 'transform-request-id' },
  });
  const tryBtn = h('button.btn.btn-secondary', { type: 'button', dataset: { role: 'try-transform' } }, icon('play'), 'Try it');
  const saveBtn = canManage() ? h('button.btn.btn-primary', { type: 'button', dataset: { role: 'save-transform' } }, 'Save') : null;
  const saveError = h('div.form-error');
  const result = h('div.transform-result', { dataset: { role: 'transform-result', result: 'none' }, 'aria-live': 'polite' });
  const versionsEl = h('div', { dataset: { role: 'transform-versions' } }, loading('Loading versions…'));
  let current = null; // the current version, null when none
  let baseline = ''; // what the editor held when loaded or last saved
  let typed = false; // a source typed before the current one arrived is kept

  const drawState = () => {
    const edited = canManage() && editor.value !== baseline;
    state.dataset.edited = String(edited);
    mount(state, current ? `Version ${current.number} runs on every attempt.` : 'No transformation: requests are sent as received.',
      edited ? h('strong', ' Unsaved changes.') : null);
  };
  const showError = (msg) => {
    error.textContent = msg || '';
    editor.setAttribute('aria-invalid', msg ? 'true' : 'false');
    field.classList.toggle('invalid', !!msg);
  };
  const showResult = (kind, ...children) => {
    result.dataset.result = kind;
    mount(result, ...children);
  };

  const drawVersions = (node) => {
    current = node.transform;
    const versions = node.transformVersions || [];
    if (!versions.length) {
      mount(versionsEl, h('p.muted', 'No version saved yet.'));
      return;
    }
    mount(versionsEl, dataTable({
      className: 'transform-versions',
      rows: versions,
      rowProps: (v) => ({ dataset: { version: v.number, current: String(!!current && v.id === current.id) } }),
      columns: [
        { label: 'Version', cell: (v) => [h('strong', `v${v.number}`), current && v.id === current.id ? [' ', badge('ACTIVE', 'Current')] : null] },
        { label: 'Saved by', cell: (v) => v.createdBy },
        { label: 'When', className: 'nowrap', cell: (v) => timeEl(v.createdAt) },
        { label: 'Source', className: 'mono muted', cell: (v) => (v.source.trim() ? firstLine(v.source) : 'Removed the transformation') },
        {
          label: '', right: true,
          cell: (v) => h('button.btn.btn-secondary.btn-sm', {
            type: 'button', dataset: { role: 'load-version' }, 'aria-label': `Load version ${v.number} into the editor`,
            onclick: () => {
              editor.value = v.source;
              showError('');
              drawState();
              editor.focus();
            },
          }, 'Load'),
        },
      ],
    }));
  };

  const loadTransform = async () => {
    try {
      const data = await gql(Q.RECIPIENT_TRANSFORM, { id: r.id }, { signal: ctx.signal });
      if (!ctx.alive || !data.node) return;
      drawVersions(data.node);
      baseline = (current && current.source) || TRANSFORM_TEMPLATE;
      if (!typed) editor.value = baseline;
      drawState();
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') mount(versionsEl, errorState(err, loadTransform));
    }
  };

  const loadRequests = async () => {
    try {
      const data = await gql(Q.TRANSFORM_REQUESTS, { serverId: r.server.id, first: 20 }, { signal: ctx.signal });
      const rows = data.requests.edges.map((e) => e.node);
      mount(pick, rows.length
        ? rows.map((q) => h('option', { value: q.id }, `#${q.id} · ${q.method} ${q.path || '/'}${q.eventType ? ' · ' + q.eventType : ''}`))
        : h('option', { value: '' }, 'No stored request yet'));
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') mount(pick, h('option', { value: '' }, 'Requests unavailable: give an ID'));
    }
  };

  // busy runs fn with btn showing progress; a second press meanwhile does nothing.
  const busy = async (btn, fn) => {
    if (btn.disabled) return;
    btn.disabled = true;
    btn.classList.add('busy');
    try { await fn(); } finally { btn.disabled = false; btn.classList.remove('busy'); }
  };

  tryBtn.addEventListener('click', () => busy(tryBtn, async () => {
    const requestId = pickOther.value.trim().replace(/^#/, '') || pick.value;
    if (!requestId) { showResult('error', icon('alert'), h('span', 'No request to try it on: send one to the server\u2019s inbound URL, or give a request ID.')); return; }
    if (!/^\d+$/.test(requestId)) { showResult('error', icon('alert'), h('span', 'A request ID is a number.')); return; }
    showError('');
    let res;
    try {
      res = (await gql(Q.TRY_TRANSFORM, { source: editor.value, requestId })).tryTransform;
    } catch (err) {
      if (!ctx.alive || err.name === 'AbortError') return;
      if (err.code === 'INVALID_INPUT') { showError(err.message); showResult('none'); return; }
      showResult('error', icon('alert'), h('span', err.code === 'NOT_FOUND' ? `No request #${requestId} to try it on.` : err.message));
      return;
    }
    if (!ctx.alive) return;
    showResult(...transformResult(res, requestId));
  }));

  if (saveBtn) {
    saveBtn.addEventListener('click', () => busy(saveBtn, async () => {
      showError('');
      saveError.replaceChildren();
      const source = editor.value.trim() ? editor.value : '';
      let node;
      try {
        node = (await gql(Q.SET_RECIPIENT_TRANSFORM, { recipientId: r.id, source })).setRecipientTransform;
      } catch (err) {
        if (!ctx.alive || err.name === 'AbortError') return;
        if (err.code === 'INVALID_INPUT') showError(err.message);
        else saveError.replaceChildren(errorAlert(err));
        return;
      }
      if (!ctx.alive) return;
      drawVersions(node);
      baseline = editor.value;
      drawState();
      const n = node.transformVersions.length ? node.transformVersions[0].number : 0;
      toast(node.transform
        ? `Transformation version ${node.transform.number} of ${r.name} saved: attempts from now on run it.`
        : `Transformation of ${r.name} removed (version ${n}): requests are sent as received.`);
    }));
  }
  editor.addEventListener('input', () => {
    typed = true;
    if (error.textContent) showError('');
    drawState();
  });

  loadTransform();
  loadRequests();
  return section('Transformation', { id: 'transform', sub: 'A JavaScript function every attempt runs first' },
    field,
    h('div.transform-actions',
      h('label.inline-label', { for: pickId }, 'Try it on'), pick, pickOther, tryBtn,
      h('div.spacer'), state, saveBtn),
    saveError,
    result,
    h('h3.subhead', 'Versions'),
    versionsEl);
}

// firstLine is a source's first line that says something, for the versions list.
function firstLine(source) {
  const line = source.split('\n').map((l) => l.trim()).find(Boolean) || '';
  return line.length > 60 ? line.slice(0, 59) + '\u2026' : line;
}

// transformResult is what tryTransform made of a request, as showResult's arguments.
function transformResult(res, requestId) {
  const on = h('a', { href: href('/requests/' + requestId) }, `#${requestId}`);
  if (res.error) {
    return ['error', icon('alert'), h('div.transform-result-body',
      h('strong', `Failed on request `, on, `: ${TRANSFORM_REASONS[res.errorReason] || res.errorReason || 'it failed'}.`),
      h('div.mono', { dataset: { role: 'transform-failure' } }, res.error),
      h('div.muted.sm', 'An attempt would fail with kind Transformation failed, and be retried on the recipient\u2019s schedule.'))];
  }
  if (res.cancelled) {
    return ['cancelled', icon('x'), h('div.transform-result-body',
      h('strong', 'Cancelled: '), 'the function returned null for request ', on, '. Its delivery would end canceled, with nothing sent.')];
  }
  let body = res.body || '';
  try { body = JSON.stringify(JSON.parse(body), null, 2); } catch { /* sent as it is */ }
  const headers = res.headers || [];
  return ['ok', icon('check'), h('div.transform-result-body',
    h('div', 'Request ', on, ' would be sent as:'),
    h('div.request-title', { dataset: { role: 'transform-request-line' } }, h('span.http-method', res.method),
      h('span.mono', res.path || '/', res.query ? h('span.muted', '?' + res.query) : null)),
    headers.length
      ? h('div.table-wrap', h('table.table.kv', { dataset: { role: 'transform-headers' } },
        h('tbody', headers.map((x) => h('tr', h('th.mono', x.name), h('td.mono.break', x.value))))))
      : h('p.muted', 'No headers.'),
    body ? h('pre.code-block', { dataset: { role: 'transform-body' } }, body) : h('p.muted', { dataset: { role: 'transform-body' } }, 'Empty body.'))];
}

const ACTIONS = {
  pause: {
    label: 'Pause', icon: 'pause', query: Q.PAUSE_RECIPIENT, key: 'pauseRecipient', tone: 'primary',
    text: 'Deliveries to it wait, pending, without spending attempts, until you resume it. Other recipients are not affected.',
    done: (r) => `${r.name} paused.`,
  },
  resume: {
    label: 'Resume', icon: 'play', query: Q.RESUME_RECIPIENT, key: 'resumeRecipient', tone: 'primary',
    text: 'Its waiting deliveries go out as they come due.', done: (r) => `${r.name} resumed: its waiting deliveries go out.`,
  },
  enable: {
    label: 'Enable', icon: 'power', query: Q.ENABLE_RECIPIENT, key: 'enableRecipient', tone: 'primary',
    text: 'It becomes active again and its failure count starts over; its waiting deliveries go out as they come due.',
    done: (r) => `${r.name} enabled.`,
  },
};

// stateActions are the buttons that move a recipient between states, each behind a confirmation.
export function stateActions(r, reload, { compact = false } = {}) {
  const which = r.state === 'ACTIVE' ? ['pause'] : r.state === 'PAUSED' ? ['resume'] : ['enable'];
  return which.map((k) => {
    const a = ACTIONS[k];
    return h('button.btn.btn-secondary', { type: 'button', class: compact ? 'btn-sm' : '', dataset: { role: k }, onclick: async () => {
      const result = await confirmAction({
        title: `${a.label} ${r.name}`,
        body: [h('p', a.text), costLine(0)],
        confirmLabel: a.label,
        action: () => gql(a.query, { id: r.id }),
      });
      if (!result) return;
      toast(a.done(r));
      reload();
    } }, icon(a.icon), a.label);
  });
}

function deleteFlow(r) {
  return confirmDelete({
    title: `Delete ${r.name}?`,
    consequences: [
      'Nothing more is sent to it; its pending deliveries are canceled.',
      'Its attempts stay in the history of the requests they belong to.',
      'Requests arriving from now on are not delivered to it.',
    ],
    confirmLabel: 'Delete recipient',
    action: () => gql(Q.DELETE_RECIPIENT, { id: r.id }),
    done: `Recipient ${r.name} deleted.`,
    then: () => navigate(href(`/servers/${r.server.id}/recipients`)),
  });
}
