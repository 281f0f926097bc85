// Activity charts: a recipient's attempts (with their success rate) and their durations per hour, a server's
// requests per hour, a tenant's credits per day. The figures come from aggregates the server keeps as the
// work is recorded, every hour or day of the range present; hours and days are UTC. Each chart has its
// figures in a table beside it (the periods with activity, newest first) and its totals as data attributes.

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, loading, errorState, fmtNumber } from '../ui.js';
import { timeChart } from '../chart.js';
import { dataTable } from '../table.js';

// The ranges of the hourly charts, in hours: a day of hours, or the week the server keeps.
const RANGES = [{ hours: 24, label: '24 hours' }, { hours: 168, label: '7 days' }];
// How often a shown chart reads its figures again.
const REFRESH_MS = 15000;

const hourFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZone: 'UTC' });
const dayFmt = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
const hourLabel = (iso) => `${dayFmt.format(new Date(iso))}, ${hourFmt.format(new Date(iso))} UTC`;
const dayLabel = (iso) => dayFmt.format(new Date(iso));

// hourTick labels the axis sparsely: every third hour of a day's range, each midnight of a week's.
function hourTick(iso, i, n) {
  const d = new Date(iso);
  if (n <= 24) return i % 3 === 0 ? hourFmt.format(d) : '';
  return d.getUTCHours() === 0 ? dayFmt.format(d) : '';
}

const pct = (v) => `${Math.round(v * 100)}%`;
const ms = (v) => (v >= 1000 ? `${(v / 1000).toFixed(v >= 10000 ? 0 : 1)} s` : `${Math.round(v)} ms`);
const sum = (rows, key) => rows.reduce((n, r) => n + r[key], 0);

// rangePicker offers the hourly ranges as a pair of toggle buttons; pick(hours) is called on a change.
function rangePicker(current, pick) {
  return h('div.segmented.sm', { role: 'group', 'aria-label': 'Range' }, RANGES.map((r) => h('button.segment', {
    type: 'button', 'aria-pressed': String(r.hours === current), class: r.hours === current ? 'active' : '',
    dataset: { range: String(r.hours) }, onclick: () => { if (r.hours !== current) pick(r.hours); },
  }, r.label)));
}

// figures is the table of a chart: the rows given (newest first), or a line saying there are none.
function figures(summary, rows, columns, none, rowProps) {
  return h('details.chart-figures', h('summary', summary),
    rows.length ? dataTable({ className: 'chart-table', columns, rows, rowProps }) : h('p.muted.sm', none));
}

// liveChart reads figures with fetch(hours) and draws them with draw(rows, hours) into its element, again
// every REFRESH_MS while the page is shown (only when they changed) and at once when the range changes.
function liveChart(ctx, { fetch, draw, hours = RANGES[0].hours }) {
  const el = h('div.activity', loading('Loading the figures…'));
  let last = '';
  const load = async () => {
    try {
      const rows = await fetch(hours);
      if (!ctx.alive || !rows) return;
      const snap = hours + JSON.stringify(rows);
      if (snap === last) return;
      last = snap;
      mount(el, draw(rows, hours, (h2) => { hours = h2; load(); }));
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError' && !last) mount(el, errorState(err, load));
    }
  };
  load();
  ctx.every(REFRESH_MS, load);
  return el;
}

// recipientActivity charts a recipient's attempts per hour with their success rate, and their p50 and p95
// durations.
export function recipientActivity(ctx, recipientId) {
  return liveChart(ctx, {
    fetch: (hours) => gql(Q.RECIPIENT_STATS, { id: recipientId, hours }, { signal: ctx.signal })
      .then((d) => d.node && d.node.hourlyStats),
    draw: (rows, hours, pick) => {
      const attempts = sum(rows, 'attempts');
      const successes = sum(rows, 'successes');
      const range = RANGES.find((r) => r.hours === hours).label;
      const points = rows.map((r, i) => ({ label: hourLabel(r.hour), tick: hourTick(r.hour, i, rows.length), values: r }));
      const counts = timeChart({
        title: `Attempts per hour over the last ${range}: ${fmtNumber(attempts)}, ${attempts ? pct(successes / attempts) : 'none'} succeeded`,
        points,
        bars: [
          { key: 'successes', label: 'Succeeded', className: 'bar-ok' },
          { key: 'failures', label: 'Failed', className: 'bar-failed' },
        ],
        lines: [{ key: 'successRate', label: 'Success rate', className: 'line-rate', right: true, format: pct }],
        right: { max: 1, format: pct },
      });
      const durations = timeChart({
        title: `Attempt duration per hour over the last ${range}: median and 95th percentile`,
        points,
        lines: [
          { key: 'p50Ms', label: 'p50', className: 'line-p50' },
          { key: 'p95Ms', label: 'p95', className: 'line-p95' },
        ],
        format: ms,
        height: 180,
      });
      const active = rows.filter((r) => r.attempts > 0).reverse();
      return h('div.stack-sm',
        h('div.activity-head',
          h('span.activity-total', h('strong', fmtNumber(attempts)), ` attempts, ${fmtNumber(successes)} succeeded`,
            attempts ? ` (${pct(successes / attempts)})` : ''),
          h('div.spacer'), rangePicker(hours, pick)),
        h('div', { dataset: { chart: 'recipient-attempts', attempts: String(attempts), successes: String(successes), failures: String(attempts - successes), hours: String(rows.length) } },
          h('h3.chart-title', 'Attempts and success rate'), counts),
        h('div', { dataset: { chart: 'recipient-durations' } }, h('h3.chart-title', 'Duration (p50 and p95)'), durations),
        figures('Figures by hour', active, [
          { label: 'Hour', className: 'nowrap', cell: (r) => hourLabel(r.hour) },
          { label: 'Attempts', right: true, className: 'mono', cell: (r) => fmtNumber(r.attempts) },
          { label: 'Succeeded', right: true, className: 'mono', cell: (r) => fmtNumber(r.successes) },
          { label: 'Failed', right: true, className: 'mono', cell: (r) => fmtNumber(r.failures) },
          { label: 'Success rate', right: true, className: 'mono', cell: (r) => pct(r.successRate) },
          { label: 'p50', right: true, className: 'mono', cell: (r) => ms(r.p50Ms) },
          { label: 'p95', right: true, className: 'mono', cell: (r) => ms(r.p95Ms) },
        ], `No attempts in the last ${range}.`, (r) => ({
          dataset: { hour: r.hour, attempts: String(r.attempts), successes: String(r.successes), p50: String(r.p50Ms), p95: String(r.p95Ms) },
        })));
    },
  });
}

// serverActivity charts the requests a server stored per hour.
export function serverActivity(ctx, serverId) {
  return liveChart(ctx, {
    fetch: (hours) => gql(Q.SERVER_STATS, { id: serverId, hours }, { signal: ctx.signal })
      .then((d) => d.server && d.server.requestsPerHour),
    draw: (rows, hours, pick) => {
      const requests = sum(rows, 'requests');
      const replays = sum(rows, 'replays');
      const range = RANGES.find((r) => r.hours === hours).label;
      const chart = timeChart({
        title: `Requests per hour over the last ${range}: ${fmtNumber(requests)}`,
        points: rows.map((r, i) => ({
          label: hourLabel(r.hour), tick: hourTick(r.hour, i, rows.length), values: { ...r, received: r.requests - r.replays },
        })),
        bars: [
          { key: 'received', label: 'Received', className: 'bar-requests' },
          { key: 'replays', label: 'Replays', className: 'bar-replays' },
        ],
      });
      const active = rows.filter((r) => r.requests > 0).reverse();
      return h('div.stack-sm',
        h('div.activity-head',
          h('span.activity-total', h('strong', fmtNumber(requests)), ' requests', replays ? `, ${fmtNumber(replays)} of them replays` : ''),
          h('div.spacer'), rangePicker(hours, pick)),
        h('div', { dataset: { chart: 'server-requests', requests: String(requests), replays: String(replays), hours: String(rows.length) } }, chart),
        figures('Figures by hour', active, [
          { label: 'Hour', className: 'nowrap', cell: (r) => hourLabel(r.hour) },
          { label: 'Requests', right: true, className: 'mono', cell: (r) => fmtNumber(r.requests) },
          { label: 'Replays', right: true, className: 'mono', cell: (r) => fmtNumber(r.replays) },
        ], `No requests in the last ${range}.`, (r) => ({ dataset: { hour: r.hour, requests: String(r.requests) } })));
    },
  });
}

// creditsPerDay charts a tenant's debits per day (creditsPerDay, oldest first), by what they paid for.
export function creditsPerDay(days) {
  const credits = sum(days, 'credits');
  const chart = timeChart({
    title: `Credits spent per day over the last ${days.length} days: ${fmtNumber(credits)}`,
    points: days.map((d) => ({
      label: `${dayLabel(d.day)} (UTC)`, tick: dayLabel(d.day),
      values: { ...d, other: d.credits - d.requests - d.retries - d.replays - d.outbound },
    })),
    bars: [
      { key: 'requests', label: 'Requests', className: 'bar-requests' },
      { key: 'retries', label: 'Manual retries', className: 'bar-retries' },
      { key: 'replays', label: 'Replays', className: 'bar-replays' },
      { key: 'outbound', label: 'Outbound jobs', className: 'bar-outbound' },
      { key: 'other', label: 'Other', className: 'bar-spent' },
    ].filter((s) => s.key !== 'other' || days.some((d) => d.credits - d.requests - d.retries - d.replays - d.outbound)),
    height: 200,
  });
  return h('div.activity', { dataset: { chart: 'credits-per-day', credits: String(credits), days: String(days.length) } },
    chart,
    figures('Figures by day', [...days].reverse(), [
      { label: 'Day (UTC)', className: 'nowrap', cell: (d) => dayLabel(d.day) },
      { label: 'Credits', right: true, className: 'mono', cell: (d) => fmtNumber(d.credits) },
      { label: 'Requests', right: true, className: 'mono', cell: (d) => fmtNumber(d.requests) },
      { label: 'Retries', right: true, className: 'mono', cell: (d) => fmtNumber(d.retries) },
      { label: 'Replays', right: true, className: 'mono', cell: (d) => fmtNumber(d.replays) },
      { label: 'Outbound', right: true, className: 'mono', cell: (d) => fmtNumber(d.outbound) },
    ], '', (d) => ({ dataset: { day: d.day, credits: String(d.credits) } })));
}
