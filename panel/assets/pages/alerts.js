// Alerts: the URLs a tenant subscribed to alert events (recipient disabled, frozen or recovered, deliveries
// failed, credits low or exhausted), the low-credit threshold, and the alerts sent, each a request delivered
// like any webhook, with its deliveries' statuses. Alerts cost no credits.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import {
  h, mount, icon, badge, timeEl, plural, fmtNumber, loading, emptyState, errorState, toast,
} from '../ui.js';
import { href } from '../router.js';
import { canManage, setBalance } from '../session.js';
import { limits, checks } from '../limits.js';
import { createForm, formDialog } from '../form.js';
import { setTitle, pageHeader, liveIndicator, poller, costLine, section } from '../page.js';
import { dataTable, connectionList } from '../table.js';
import { confirmDelete } from './shared.js';

// The events, in the API's order, with the payload type a receiver sees.
export const ALERT_EVENTS = [
  { value: 'RECIPIENT_DISABLED', type: 'recipient.disabled', label: 'Recipient disabled', hint: 'Its health rules disabled it after repeated failures.' },
  { value: 'RECIPIENT_FROZEN', type: 'recipient.frozen', label: 'Recipient frozen', hint: 'No more attempts until someone enables it.' },
  { value: 'RECIPIENT_RECOVERED', type: 'recipient.recovered', label: 'Recipient recovered', hint: 'A disabled or frozen recipient is active again.' },
  { value: 'DELIVERY_FAILED', type: 'delivery.failed', label: 'Delivery failed', hint: 'Attempts used up; at most one alert per recipient per hour.' },
  { value: 'CREDITS_LOW', type: 'credits.low', label: 'Credits low', hint: 'The balance fell under the low-credit threshold.' },
  { value: 'CREDITS_EXHAUSTED', type: 'credits.exhausted', label: 'Credits exhausted', hint: 'Intake started refusing requests (402).' },
];
const EVENT_TYPE = Object.fromEntries(ALERT_EVENTS.map((e) => [e.value, e.type]));
const FORMATS = { JSON: 'JSON', SLACK: 'Slack' };

// isSlack says whether the API writes alerts to this URL in Slack's format by default.
const isSlack = (url) => {
  try { return new URL(url).hostname.toLowerCase() === 'hooks.slack.com'; } catch { return false; }
};

const FREE = 'Alerts cost no credits: they are stored and delivered, retried and signed like any webhook, free of charge.';

export function viewAlerts(ctx, main) {
  setTitle('Alerts');
  const indicator = liveIndicator();
  const subsSlot = h('div', loading('Loading alert subscriptions…'));
  const thresholdSlot = h('div');
  const historySlot = h('div', loading('Loading alerts…'));
  const add = canManage()
    ? h('button.btn.btn-primary', { type: 'button', dataset: { role: 'new-alert-subscription' }, onclick: () => createFlow() }, icon('plus'), 'Add subscription')
    : null;
  mount(main,
    pageHeader({
      title: 'Alerts',
      subtitle: h('span.muted', 'Adal tells a URL of yours — an endpoint, or a Slack incoming webhook — when something needs attention. ',
        h('strong', 'Alerts cost no credits.')),
      actions: add,
    }),
    h('div.stack', subsSlot, thresholdSlot, historySlot));

  let state = null;
  let lastSubs = '';

  async function loadSettings(quiet) {
    try {
      const data = await gql(Q.ALERT_SETTINGS, {}, { signal: ctx.signal });
      if (!ctx.alive) return;
      const snap = JSON.stringify(data);
      if (quiet && snap === lastSubs) return;
      lastSubs = snap;
      state = data;
      if (data.viewer.tenant) setBalance(data.viewer.tenant.creditBalance);
      mount(subsSlot, subscriptionsSection(data.alertSubscriptions));
      if (!quiet) drawThreshold();
    } catch (err) {
      if (!ctx.alive || err.name === 'AbortError' || quiet) return;
      mount(subsSlot, errorState(err, () => loadSettings(false)));
    }
  }

  function subscriptionsSection(subs) {
    if (!subs.length) {
      return section('Subscriptions', { id: 'alert-subscriptions' },
        emptyState('alert', 'No alert subscriptions',
          'Subscribe a URL to the events you care about: a recipient disabled or frozen, deliveries that failed, credits running low. ' + FREE,
          add ? h('button.btn.btn-primary', { type: 'button', dataset: { role: 'empty-new-alert-subscription' }, onclick: () => createFlow() }, icon('plus'), 'Add a subscription') : null));
    }
    return section('Subscriptions', { id: 'alert-subscriptions', sub: `${plural(subs.length, 'URL')} · at most 10` },
      dataTable({
        className: 'alert-subscriptions',
        rows: subs,
        rowProps: (s) => ({ dataset: { subscriptionId: s.id, format: s.format } }),
        columns: [
          { label: 'URL', className: 'path-cell', cell: (s) => [h('div.mono.break', { dataset: { role: 'alert-url' } }, s.url), h('div.cell-sub', 'Since ', timeEl(s.createdAt))] },
          { label: 'Events', cell: (s) => h('div.alert-events', s.events.map((e) => h('span.tag', { dataset: { event: e } }, EVENT_TYPE[e] || e))) },
          { label: 'Format', cell: (s) => h('span', { dataset: { role: 'alert-format' } }, FORMATS[s.format] || s.format) },
          {
            label: 'Delivery',
            cell: (s) => [badge(s.recipient.state), s.recipient.stateReason ? h('div.cell-sub', s.recipient.stateReason) : null,
              h('div.cell-sub', h('a', { href: href('/recipients/' + s.recipient.id) }, 'Health and signing'))],
          },
          canManage() ? {
            label: 'Actions', right: true,
            cell: (s) => h('button.btn.btn-danger-ghost.btn-sm', { type: 'button', dataset: { role: 'delete-alert-subscription' }, onclick: () => deleteFlow(s) }, icon('trash'), 'Delete'),
          } : null,
        ].filter(Boolean),
      }),
      h('p.muted.sm.section-note', FREE));
  }

  async function createFlow() {
    let L;
    try { L = await limits(); } catch (err) { toast(err.message, 'danger'); return; }
    const urlCheck = checks.recipientUrl(L);
    const result = await formDialog({
      title: 'Add an alert subscription',
      intro: h('p.muted', 'Alerts are POSTed to the URL as JSON {type, timestamp, data} — or as Slack\u2019s {text} — with the headers and signature every delivery carries. ', FREE),
      role: 'alert-form',
      fields: [
        {
          name: 'url', label: 'URL', type: 'url', required: true, mono: true, wide: true,
          hint: 'An https:// endpoint of yours, or a Slack incoming webhook (https://hooks.slack.com/…).',
          check: (v) => urlCheck(v, {}),
          preview: (all) => (isSlack(all.url) ? h('span.muted', 'A Slack URL: alerts are written in Slack\u2019s format unless you choose otherwise.') : null),
        },
        ...ALERT_EVENTS.map((e, i) => ({
          name: e.value, label: `${e.label} (${e.type})`, type: 'checkbox', value: false, hint: e.hint,
          check: i === 0 ? (v, all) => (ALERT_EVENTS.some((x) => all[x.value]) ? '' : 'events must name at least one event') : null,
        })),
        {
          name: 'format', label: 'Format', type: 'select', value: '', wide: true,
          options: [
            { value: '', label: 'Automatic: Slack for hooks.slack.com, JSON otherwise' },
            { value: 'JSON', label: 'JSON {type, timestamp, data}' },
            { value: 'SLACK', label: 'Slack {text} (Mattermost and others take it too)' },
          ],
        },
      ],
      cost: () => costLine(0),
      submitLabel: 'Add subscription',
      onSubmit: (v) => gql(Q.CREATE_ALERT_SUBSCRIPTION, {
        input: { url: v.url, events: ALERT_EVENTS.filter((e) => v[e.value]).map((e) => e.value), format: v.format || null },
      }),
    });
    if (!result) return;
    const s = result.createAlertSubscription;
    toast(`Alerts go to ${s.url} (${FORMATS[s.format] || s.format}).`);
    loadSettings(true);
  }

  function deleteFlow(s) {
    return confirmDelete({
      title: 'Delete this alert subscription?',
      intro: h('p', 'Alerts stop going to ', h('strong.mono.break', s.url), '.'),
      consequences: ['Its pending alerts are canceled.', 'Those already sent stay in the history below.'],
      confirmLabel: 'Delete subscription',
      action: () => gql(Q.DELETE_ALERT_SUBSCRIPTION, { id: s.id }),
      done: 'Alert subscription deleted.',
      then: () => loadSettings(true),
    });
  }

  function drawThreshold() {
    const t = state && state.viewer.tenant;
    if (!t) { mount(thresholdSlot); return; }
    const current = t.lowCreditThreshold;
    const text = h('p', { dataset: { role: 'threshold-now' } },
      'Balance ', h('strong', fmtNumber(t.creditBalance)), '. ',
      current != null ? ['A credits.low alert is sent when it falls under ', h('strong', fmtNumber(current)), '.'] : 'No low-credit alert is set.');
    if (!canManage()) {
      mount(thresholdSlot, section('Low-credit alert', { id: 'low-credit' }, text, h('p.muted', 'Only the tenant\u2019s owner changes it.')));
      return;
    }
    const form = createForm({
      role: 'threshold-form',
      fields: [{
        name: 'threshold', label: 'Alert when the balance falls under', type: 'number', value: current ?? '',
        optionalNote: 'empty: no alert',
        hint: 'Credits. Setting it above the balance sends a credits.low alert at once. Subscribe a URL to credits.low to receive it.',
        check: (v) => (v != null && v < 1 ? 'the threshold must be 1 or more; null removes it' : ''),
      }],
      cost: () => costLine(0),
      submitLabel: 'Save threshold',
      onSubmit: (v) => gql(Q.SET_LOW_CREDIT_THRESHOLD, { tenantId: t.id, threshold: v.threshold }),
      onDone: (r) => {
        const x = r.setLowCreditThreshold;
        toast(x.lowCreditThreshold != null ? `Low-credit alert set under ${fmtNumber(x.lowCreditThreshold)} credits.` : 'Low-credit alert removed.');
        state.viewer.tenant = { ...t, ...x };
        drawThreshold();
        alertList.load().catch(() => {});
      },
    });
    mount(thresholdSlot, section('Low-credit alert', { id: 'low-credit' }, text, form.el));
  }

  // ---- history -----------------------------------------------------------------------------------------

  let lastHistory = '';
  const alertList = connectionList({
    ctx,
    noun: ['alert', 'alerts'],
    fetchPage: async (after) => (await gql(Q.ALERTS, { first: 20, after }, { signal: ctx.signal })).alerts,
    draw: () => {
      const snap = JSON.stringify(alertList.rows);
      if (snap === lastHistory && historySlot.querySelector('[data-section="alert-history"]')) return;
      lastHistory = snap;
      mount(historySlot, historySection(alertList.rows, alertList));
    },
  });

  function historySection(rows, list) {
    const head = { id: 'alert-history', sub: 'Newest first, live', actions: indicator };
    if (!rows.length) {
      return section('History', head, emptyState('inbox', 'No alerts yet', 'Alerts raised for this tenant show here with their deliveries, as they happen.'));
    }
    return section('History', head,
      dataTable({
        className: 'alerts',
        rows,
        link: (r) => href('/requests/' + r.id),
        rowProps: (r) => ({ dataset: { alertId: r.id, status: r.status, type: alertType(r) } }),
        columns: [
          { label: 'Raised', className: 'nowrap', cell: (r) => [h('a.row-link', { href: href('/requests/' + r.id) }, timeEl(r.receivedAt, 'relative')), h('div.cell-sub', timeEl(r.receivedAt))] },
          { label: 'Alert', cell: (r) => [h('span.tag', { dataset: { role: 'alert-type' } }, alertType(r) || 'alert'), h('div.cell-sub', { dataset: { role: 'alert-summary' } }, alertSummary(r))] },
          { label: 'Status', cell: (r) => badge(r.status) },
          {
            label: 'Sent to',
            cell: (r) => (r.deliveries.length
              ? h('div.stack-sm', r.deliveries.map((d) => h('div', { dataset: { deliveryId: d.id, status: d.status } }, badge(d.status), ' ',
                h('span.mono.sm', d.recipient.url || d.recipient.name), h('span.muted.sm', ` · ${plural(d.attemptCount, 'attempt')}`))))
              : h('span.muted', 'No subscription wanted it')),
          },
        ],
      }),
      list.pager());
  }

  const refreshHistory = async () => {
    try {
      const conn = (await gql(Q.ALERTS, { first: Math.max(20, alertList.rows.length), after: null }, { signal: ctx.signal })).alerts;
      if (!ctx.alive) return;
      const rows = conn.edges.map((e) => e.node);
      const snap = JSON.stringify(rows);
      if (snap === lastHistory) return;
      lastHistory = snap;
      alertList.rows = rows;
      alertList.total = conn.totalCount;
      alertList.pageInfo = conn.pageInfo;
      mount(historySlot, historySection(alertList.rows, alertList));
    } catch { /* keep what is shown */ }
  };

  loadSettings(false);
  alertList.load().catch((err) => { if (ctx.alive && err.name !== 'AbortError') mount(historySlot, errorState(err, () => alertList.load())); });
  // Alerts and their deliveries come from background work no subscription covers: read them again.
  poller(ctx, {
    refresh: () => Promise.all([refreshHistory(), loadSettings(true)]),
    indicator,
    ms: 3000,
  });
}

// alertType is the dotted type an alert request carries in its Adal-Alert-Type header.
function alertType(r) {
  const hd = (r.headers || []).find((x) => x.name.toLowerCase() === 'adal-alert-type');
  return hd ? hd.value : '';
}

// alertSummary says what an alert is about, from its type (the body is on the alert's own page: the list
// leaves bodies out to stay a cheap query).
function alertSummary(r) {
  const t = alertType(r);
  const e = ALERT_EVENTS.find((x) => x.type === t);
  return e ? `${e.label}: ${e.hint.charAt(0).toLowerCase()}${e.hint.slice(1)}` : '';
}
