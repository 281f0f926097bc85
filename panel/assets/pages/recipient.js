// One recipient: its health and why, pausing, resuming and enabling it, its settings with the schedule's due
// times, deleting it; for a CLI recipient, the adal command to run and whether a CLI is attached, live. Also
// the page that adds a recipient to a server.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, icon, badge, timeEl, plural, loading, emptyState, errorState, toast, confirmAction } from '../ui.js';
import { href, navigate } from '../router.js';
import { canManage } from '../session.js';
import { limits, checks, dueTimes, scheduleOf } from '../limits.js';
import { createForm } from '../form.js';
import { setTitle, pageHeader, liveIndicator, poller, orNotFound, costLine, snippet, facts, section } from '../page.js';
import { SCHEDULES, STATE_TEXT } from './shared.js';

// recipientFields are a recipient's settings; r holds the current ones when editing (its method is fixed).
function recipientFields(L, r) {
  const create = !r.id;
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
      ],
    });
  }
  fields.push(
    { name: 'name', label: 'Name', required: true, value: r.name || '', check: checks.name(L), hint: 'For people, e.g. "billing-api" or "alice-laptop".' },
    {
      name: 'url', label: 'URL', type: 'url', mono: true, value: r.url || '', check: checks.recipientUrl(L), optionalNote: false,
      show: (v) => (v.method || r.method) === 'DIRECT_HTTP',
      hint: 'The path and query received after the inbound URL are appended to it.', attrs: { placeholder: 'https://api.example.com/webhooks' },
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
  );
  return fields;
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

function recipientInput(v, create) {
  const input = {
    name: v.name, maxAttempts: v.maxAttempts, retrySchedule: v.retrySchedule, timeoutSeconds: v.timeoutSeconds,
    sendIdempotencyKey: v.sendIdempotencyKey,
  };
  if (create) input.method = v.method;
  if ((v.method || 'DIRECT_HTTP') === 'DIRECT_HTTP' && v.url !== undefined) input.url = v.url;
  return input;
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
    fields: recipientFields(L, {}),
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
  let last = '';
  let formShown = false;
  const status = h('div');
  const cli = h('div');
  let cliEl = null;

  const load = async (quiet) => {
    let data;
    try {
      data = await gql(Q.RECIPIENT, { id }, { signal: ctx.signal }).catch(orNotFound);
    } catch (err) {
      if (ctx.alive && !quiet && err.name !== 'AbortError') mount(root, errorState(err, () => load(false)));
      return;
    }
    if (!ctx.alive) return;
    const r = data && data.node && data.node.method ? data.node : null;
    if (!r) {
      mount(root, emptyState('alert', 'Recipient not found', 'It may belong to another tenant.', h('a.btn.btn-secondary', { href: '#/servers' }, 'All servers')));
      return;
    }
    const snap = JSON.stringify(r);
    if (snap === last) return;
    last = snap;
    setTitle(r.name);
    if (!formShown) {
      formShown = true;
      await page(r);
    }
    mount(status, healthCard(r, () => load(true)));
    if (r.method === 'CLI') {
      if (!cliEl) mount(cli, (cliEl = cliCard(r)));
      cliEl.update(r);
    }
  };

  const page = async (r) => {
    const head = pageHeader({
      crumbs: [{ label: 'Servers', href: '#/servers' }, { label: r.server.name, href: href(`/servers/${r.server.id}/recipients`) }, { label: r.name }],
      title: r.name,
      subtitle: h('div.title-badges', r.method === 'CLI' ? h('span.method', icon('terminal'), 'adal CLI') : h('span.method', icon('globe'), 'Direct HTTP'), indicator),
    });
    const parts = [head, status, cli];
    if (r.deletedAt) {
      parts.push(h('div.alert.alert-warning', icon('trash'), h('div.alert-body', h('strong.alert-title', 'Deleted'),
        h('span.alert-message', 'This recipient was deleted ', timeEl(r.deletedAt), '; its deliveries stay in the requests\u2019 history.'))));
    } else if (canManage()) {
      const L = await limits();
      const form = createForm({
        role: 'recipient-settings',
        fields: recipientFields(L, r),
        cost: () => costLine(0),
        submitLabel: 'Save changes',
        onSubmit: (v) => gql(Q.UPDATE_RECIPIENT, { id: r.id, input: recipientInput({ ...v, method: r.method }, false) }),
        onDone: () => { toast(`Settings of ${r.name} saved. Deliveries created from now on use them.`); last = ''; load(true); },
      });
      parts.push(section('Settings', { id: 'settings', sub: 'New deliveries use them; those already created keep theirs.' }, form.el));
      parts.push(section('Delete this recipient', { id: 'danger' },
        h('p', 'Its pending deliveries are canceled and nothing more is sent to it. Its history stays with the requests.'),
        h('button.btn.btn-danger-ghost', { type: 'button', dataset: { role: 'delete-recipient' }, onclick: () => deleteFlow(r) }, icon('trash'), 'Delete recipient')));
    } else {
      parts.push(section('Settings', { id: 'settings' }, facts([
        ['Schedule', `${SCHEDULES[r.retrySchedule]} · up to ${plural(r.maxAttempts, 'attempt')}`],
        ['Timeout', `${r.timeoutSeconds} s`],
        ['Idempotency header', r.sendIdempotencyKey ? 'Sent' : 'Not sent'],
        r.method === 'DIRECT_HTTP' ? ['URL', h('span.mono.break', r.url)] : null,
      ])));
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
      ['Retries', `${SCHEDULES[r.retrySchedule] || r.retrySchedule} · up to ${plural(r.maxAttempts, 'attempt')} · ${r.timeoutSeconds} s timeout`],
    ]));
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

async function deleteFlow(r) {
  const result = await confirmAction({
    title: `Delete ${r.name}?`,
    body: [
      h('ul.consequences',
        h('li', 'Nothing more is sent to it; its pending deliveries are canceled.'),
        h('li', 'Its attempts stay in the history of the requests they belong to.'),
        h('li', 'Requests arriving from now on are not delivered to it.')),
      costLine(0),
    ],
    confirmLabel: 'Delete recipient',
    tone: 'danger',
    action: () => gql(Q.DELETE_RECIPIENT, { id: r.id }),
  });
  if (!result) return;
  toast(`Recipient ${r.name} deleted.`);
  navigate(href(`/servers/${r.server.id}/recipients`));
}
