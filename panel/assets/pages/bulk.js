// Acting on many deliveries of a server at once, from its requests list: rows are selected (or every request
// the filter matches), the dry run says how many deliveries and what it costs before anything runs, then the
// job's progress shows live (bulkJobUpdated) with a way to stop it; the server's bulk jobs are listed below.

import * as Q from '../queries.js';
import { gql, live } from '../gql.js';
import { h, mount, icon, titleCase, timeEl, plural, fmtNumber, toast, confirmAction } from '../ui.js';
import { refreshViewer } from '../session.js';
import { costLine, section } from '../page.js';
import { dataTable } from '../table.js';

const RETRY_STATUSES = { FAILED: 'Failed', CANCELED: 'Canceled', SUCCEEDED: 'Succeeded', '': 'Failed, canceled or succeeded' };
const JOB_TONES = { RUNNING: 'info', SUCCEEDED: 'success', CANCELED: 'neutral', STOPPED_NO_CREDITS: 'warning', FAILED: 'danger' };
const JOB_LABELS = { STOPPED_NO_CREDITS: 'Stopped: out of credits' };

export function jobBadge(status) {
  return h('span.badge', { class: 'tone-' + (JOB_TONES[status] || 'neutral'), dataset: { status } },
    h('span.badge-dot'), JOB_LABELS[status] || titleCase(status));
}

// latestDeliveries is each recipient's current delivery of a request (a manual retry supersedes the earlier).
function latestDeliveries(r) {
  const latest = new Map();
  for (const d of r.deliveries || []) {
    const prev = latest.get(d.recipient.id);
    if (!prev || Number(d.id) > Number(prev.id)) latest.set(d.recipient.id, d);
  }
  return [...latest.values()];
}

// bulkController holds a requests list's selection and bulk actions across its live re-renders.
// scope: { search, since, until, eventType } of the list (the address); reloadList() refreshes the list.
export function bulkController(ctx, { server, scope, reloadList }) {
  const sel = { ids: new Set(), all: false, rows: [], hasMore: false };
  const jobs = new Map(); // id → job (this server's)
  const subs = new Map(); // id → unsubscribe
  let current = null; // the job (or local run) started from this page, shown as the progress card

  const bar = h('div.bulk-bar', { dataset: { role: 'selection-bar' }, hidden: true, role: 'region', 'aria-label': 'Selected requests' });
  const progressSlot = h('div.bulk-progress-slot');
  const jobsSlot = h('div');
  const headCheck = h('input.check', { type: 'checkbox', 'aria-label': 'Select every request on this page', dataset: { role: 'select-page' } });
  headCheck.addEventListener('change', () => {
    sel.all = false;
    for (const r of sel.rows) { if (headCheck.checked) sel.ids.add(r.id); else sel.ids.delete(r.id); }
    syncChecks();
  });

  const statusSelect = h('select.input.plain.input-sm', { id: 'bulk-status', dataset: { role: 'bulk-status' } },
    Object.entries(RETRY_STATUSES).map(([v, label]) => h('option', { value: v }, label)));
  const recipientSelect = h('select.input.plain.input-sm', { id: 'bulk-recipient', dataset: { role: 'bulk-recipient' } },
    h('option', { value: '' }, 'All recipients'),
    server.recipients.map((r) => h('option', { value: r.id }, r.name)));

  const checks = () => [...document.querySelectorAll('input[data-role="select-row"]')];
  function syncChecks() {
    for (const c of checks()) c.checked = sel.all || sel.ids.has(c.value);
    const n = sel.ids.size;
    headCheck.checked = sel.all || (sel.rows.length > 0 && sel.rows.every((r) => sel.ids.has(r.id)));
    headCheck.indeterminate = !headCheck.checked && n > 0;
    drawBar();
  }

  function drawBar() {
    const n = sel.ids.size;
    bar.hidden = !sel.all && n === 0;
    if (bar.hidden) { bar.replaceChildren(); return; }
    const pageAll = sel.rows.length > 0 && sel.rows.every((r) => sel.ids.has(r.id));
    mount(bar,
      h('div.bulk-bar-text',
        h('strong', { dataset: { role: 'selection-count' } },
          sel.all ? 'Every request matching the filter is selected' : `${plural(n, 'request')} selected`),
        sel.all
          ? h('button.btn.btn-ghost.btn-sm', { type: 'button', dataset: { role: 'clear-selection' }, onclick: clear }, 'Clear selection')
          // A bulk filter cannot name an event type: with one, only the requests shown can be selected.
          : pageAll && !scope.eventType
            ? h('button.btn.btn-ghost.btn-sm', { type: 'button', dataset: { role: 'select-all-matching' }, onclick: () => { sel.all = true; syncChecks(); } },
              sel.hasMore ? `Select all requests matching the filter, not only these ${sel.rows.length}` : 'Select all requests matching the filter')
            : null),
      h('div.bulk-bar-controls',
        h('label.inline-label', { for: 'bulk-status' }, 'Retry deliveries that are'), statusSelect,
        h('label.inline-label', { for: 'bulk-recipient' }, 'to'), recipientSelect,
        h('button.btn.btn-primary.btn-sm', { type: 'button', dataset: { role: 'bulk-retry' }, onclick: (e) => start('RETRY', e.currentTarget) },
          icon('retry'), 'Retry…'),
        h('button.btn.btn-danger-ghost.btn-sm', { type: 'button', dataset: { role: 'bulk-cancel' }, onclick: (e) => start('CANCEL', e.currentTarget) },
          icon('x'), 'Cancel pending…')));
  }

  function clear() {
    sel.ids.clear();
    sel.all = false;
    syncChecks();
  }

  // column is the leading checkbox column of the requests table.
  const column = {
    label: headCheck,
    className: 'select-cell',
    cell: (r) => h('input.check', {
      type: 'checkbox', value: r.id, checked: sel.all || sel.ids.has(r.id),
      'aria-label': `Select request #${r.id}`, dataset: { role: 'select-row' },
      onchange: (e) => {
        if (sel.all) { sel.all = false; for (const x of sel.rows) sel.ids.add(x.id); }
        if (e.currentTarget.checked) sel.ids.add(r.id); else sel.ids.delete(r.id);
        syncChecks();
      },
    }),
  };

  // setRows is called with the rows the list shows; a selection keeps only rows still shown.
  function setRows(rows, hasMore) {
    sel.rows = rows;
    sel.hasMore = hasMore;
    const shown = new Set(rows.map((r) => r.id));
    for (const id of [...sel.ids]) if (!shown.has(id)) sel.ids.delete(id);
    queueMicrotask(syncChecks);
  }

  // filter is the bulk filter of "every request matching the list's filter".
  function filter(kind) {
    const f = { serverId: server.id };
    if (scope.search) f.search = scope.search;
    if (scope.receivedAtGTE) f.receivedAfter = scope.receivedAtGTE;
    if (scope.receivedAtLTE) f.receivedBefore = new Date(Date.parse(scope.receivedAtLTE) + 1).toISOString();
    if (recipientSelect.value) f.recipientId = recipientSelect.value;
    if (kind === 'RETRY' && statusSelect.value) f.status = statusSelect.value;
    return f;
  }

  function scopeText(kind) {
    const parts = [];
    if (scope.search) parts.push(h('span', 'containing ', h('strong', `“${scope.search}”`)));
    if (scope.receivedAtGTE || scope.receivedAtLTE) {
      parts.push(h('span', 'received ', scope.receivedAtGTE ? ['from ', timeEl(scope.receivedAtGTE)] : null,
        scope.receivedAtLTE ? [' until ', timeEl(scope.receivedAtLTE)] : null));
    }
    const rec = recipientSelect.value ? server.recipients.find((r) => r.id === recipientSelect.value) : null;
    const which = kind === 'RETRY' ? RETRY_STATUSES[statusSelect.value].toLowerCase() : 'pending';
    return [
      h('p', 'Every ', h('strong', which), ' delivery ', rec ? ['to ', h('strong', rec.name), ' '] : 'to any recipient ',
        'of the requests of ', h('strong', server.name), parts.length ? [' ', parts.map((p, i) => [i ? ' and ' : '', p])] : ' (all of them, not only this page)', '.'),
      scope.status ? h('p.muted', `The list's status filter (${titleCase(scope.status).toLowerCase()}) is not part of a bulk job: deliveries are chosen by their own status.`) : null,
    ];
  }

  // selectedDeliveries are the current deliveries of the selected rows an action applies to.
  function selectedDeliveries(kind) {
    const want = kind === 'CANCEL' ? ['PENDING'] : (statusSelect.value ? [statusSelect.value] : ['FAILED', 'CANCELED', 'SUCCEEDED']);
    const out = [];
    for (const r of sel.rows) {
      if (!sel.ids.has(r.id)) continue;
      for (const d of latestDeliveries(r)) {
        if (want.includes(d.status) && (!recipientSelect.value || d.recipient.id === recipientSelect.value)) out.push({ ...d, requestId: r.id });
      }
    }
    return out;
  }

  async function start(kind, btn) {
    if (sel.all) return startJob(kind, btn);
    return startLocal(kind);
  }

  // startJob: the dry run, then a bulk job on the filter.
  async function startJob(kind, btn) {
    const f = filter(kind);
    btn.disabled = true;
    btn.classList.add('busy');
    let plan;
    try {
      const data = await gql(kind === 'RETRY' ? Q.PLAN_BULK_RETRY : Q.PLAN_BULK_CANCEL, { filter: f }, { signal: ctx.signal });
      plan = kind === 'RETRY' ? data.planBulkRetry : data.planBulkCancel;
    } catch (err) {
      if (ctx.alive && err.name !== 'AbortError') toast(`Could not count the deliveries: ${err.message}`, 'danger');
      return;
    } finally {
      btn.disabled = false;
      btn.classList.remove('busy');
    }
    if (!ctx.alive) return;
    const verb = kind === 'RETRY' ? 'retried' : 'canceled';
    const body = [
      ...scopeText(kind),
      h('p.bulk-plan', { dataset: { role: 'dry-run' } }, 'Dry run: ',
        h('strong', { dataset: { role: 'plan-count' } }, plural(plan.count, 'delivery', 'deliveries')), ` would be ${verb} now.`),
      plan.count > plan.maxCount
        ? h('div.cost-warning', `That is more than ${fmtNumber(plan.maxCount)}, the most one job takes: narrow the filter (a shorter received time range).`)
        : null,
      kind === 'RETRY' ? retryCost(plan) : [h('p.muted', 'Each stops as Cancel does: no further attempts; an attempt already in flight is not recalled. You can retry them later (1 credit each).'), costLine(0)],
    ];
    if (plan.count === 0) {
      await confirmAction({ title: kind === 'RETRY' ? 'Nothing to retry' : 'Nothing to cancel', body, confirmLabel: 'Close', dismissLabel: 'Back', action: async () => null });
      return;
    }
    const job = await confirmAction({
      title: kind === 'RETRY' ? `Retry ${plural(plan.count, 'delivery', 'deliveries')}` : `Cancel ${plural(plan.count, 'pending delivery', 'pending deliveries')}`,
      body,
      confirmLabel: kind === 'RETRY' ? `Start retry · ${plural(plan.credits, 'credit')}` : 'Start cancel',
      dismissLabel: 'Back',
      tone: kind === 'RETRY' ? 'primary' : 'danger',
      action: async () => {
        const data = await gql(kind === 'RETRY' ? Q.BULK_RETRY : Q.BULK_CANCEL, { filter: f });
        return kind === 'RETRY' ? data.bulkRetry : data.bulkCancel;
      },
    });
    if (!job || !ctx.alive) return;
    clear();
    current = job;
    update(job);
    toast(`Bulk ${kind === 'RETRY' ? 'retry' : 'cancel'} #${job.id} started on ${plural(job.total, 'delivery', 'deliveries')}.`);
    progressSlot.scrollIntoView({ block: 'nearest' });
  }

  function retryCost(plan) {
    const after = plan.balance - plan.credits;
    return h('div.cost', { dataset: { role: 'cost' } }, icon('coins'),
      h('span', 'Costs ', h('strong', plural(plan.credits, 'credit')), ' (1 per retry), debited as the job goes.'),
      h('span.cost-balance', 'Balance ', h('strong', fmtNumber(plan.balance)), ' → ', h('strong', fmtNumber(Math.max(after, 0)))),
      after < 0 ? h('div.cost-warning', `The balance covers ${plural(plan.balance, 'retry', 'retries')}: the job stops when credits run out.`) : null);
  }

  // startLocal acts on the selected rows' deliveries one by one, as the delivery page's buttons do.
  async function startLocal(kind) {
    const ds = selectedDeliveries(kind);
    const verb = kind === 'RETRY' ? 'retried' : 'canceled';
    const body = [
      h('p', 'The current deliveries of the ', h('strong', plural(sel.ids.size, 'selected request')), kind === 'RETRY'
        ? [' that are ', h('strong', RETRY_STATUSES[statusSelect.value].toLowerCase())] : [' that are ', h('strong', 'pending')],
      recipientSelect.value ? [', to ', h('strong', server.recipients.find((r) => r.id === recipientSelect.value).name)] : null, '.'),
      h('p.bulk-plan', { dataset: { role: 'dry-run' } }, 'Dry run: ',
        h('strong', { dataset: { role: 'plan-count' } }, plural(ds.length, 'delivery', 'deliveries')), ` would be ${verb}.`),
      kind === 'RETRY' ? costLine(ds.length, `Retrying ${ds.length === 1 ? 'it' : 'them'}`) : costLine(0),
    ];
    if (!ds.length) {
      await confirmAction({ title: kind === 'RETRY' ? 'Nothing to retry' : 'Nothing to cancel', body, confirmLabel: 'Close', dismissLabel: 'Back', action: async () => null });
      return;
    }
    const ok = await confirmAction({
      title: kind === 'RETRY' ? `Retry ${plural(ds.length, 'delivery', 'deliveries')}` : `Cancel ${plural(ds.length, 'pending delivery', 'pending deliveries')}`,
      body,
      confirmLabel: kind === 'RETRY' ? `Retry · ${plural(ds.length, 'credit')}` : 'Cancel deliveries',
      dismissLabel: 'Back',
      tone: kind === 'RETRY' ? 'primary' : 'danger',
      action: async () => true,
    });
    if (!ok || !ctx.alive) return;
    clear();
    const run = { id: null, local: true, kind, status: 'RUNNING', total: ds.length, done: 0, failed: 0, creditsSpent: 0, errorMessage: '', stop: false };
    current = run;
    drawProgress();
    for (const d of ds) {
      if (run.stop || !ctx.alive) break;
      try {
        await gql(kind === 'RETRY' ? Q.RETRY_DELIVERY : Q.CANCEL_DELIVERY, { id: d.id });
        if (kind === 'RETRY') run.creditsSpent++;
      } catch (err) {
        run.failed++;
        run.errorMessage = err.message;
        if (err.code === 'INSUFFICIENT_CREDITS') { run.status = 'STOPPED_NO_CREDITS'; run.done++; break; }
      }
      run.done++;
      drawProgress();
    }
    if (run.status === 'RUNNING') run.status = run.stop ? 'CANCELED' : 'SUCCEEDED';
    if (!ctx.alive) return;
    drawProgress();
    refreshViewer().catch(() => {});
    reloadList();
  }

  // ---- progress and the jobs list ----------------------------------------------------------------------

  function update(j) {
    const prev = jobs.get(j.id) || {};
    // A read and an event may cross: a job only moves forward, so an older state never replaces a newer one.
    if (prev.id && (prev.status !== 'RUNNING' ? j.status === 'RUNNING' : j.status === 'RUNNING' && j.done < prev.done)) return;
    const job = { ...prev, ...j };
    const wasRunning = prev.status === 'RUNNING';
    // The same job again (a repeated event, a catch-up read): keep the DOM, and the focus on its buttons.
    if (prev.id && JSON.stringify(job) === JSON.stringify(prev)) return;
    jobs.set(j.id, job);
    if (current && current.id === j.id) current = job;
    if (job.status === 'RUNNING') follow(job);
    else {
      const un = subs.get(job.id);
      if (un) { subs.delete(job.id); un(); }
      if (wasRunning) { reloadList(); refreshViewer().catch(() => {}); }
    }
    drawProgress();
    drawJobs();
  }

  function follow(job) {
    if (subs.has(job.id)) return;
    const un = live.subscribe(Q.BULK_JOB_UPDATED, { id: job.id }, {
      next: (d) => { if (ctx.alive && d && d.bulkJobUpdated) update(d.bulkJobUpdated); },
      connected: () => refreshJob(job.id),
      error: () => { subs.set(job.id, null); }, // the poller below follows it instead
      complete: () => { subs.delete(job.id); refreshJob(job.id); },
    });
    subs.set(job.id, un);
  }

  async function refreshJob(id) {
    try {
      const data = await gql(Q.BULK_JOB, { id }, { signal: ctx.signal });
      if (ctx.alive && data.bulkJob) update(data.bulkJob);
    } catch { /* the next event or poll tries again */ }
  }

  // Jobs whose subscription failed are read again every few seconds.
  ctx.every(3000, () => {
    for (const [id, un] of subs) if (un === null) refreshJob(id);
  });
  ctx.onCleanup(() => {
    for (const un of subs.values()) if (un) un();
    subs.clear();
  });

  function progressCard(j) {
    const pct = j.total ? Math.round((100 * j.done) / j.total) : (j.status === 'RUNNING' ? 0 : 100);
    const what = j.kind === 'RETRY' ? 'retry' : 'cancel';
    return h('article.card.bulk-progress', { dataset: { role: 'bulk-progress', jobId: j.id || 'local', status: j.status }, 'aria-live': 'polite' },
      h('header.bulk-progress-head',
        h('h3', j.local ? `Bulk ${what} of the selected requests` : `Bulk ${what} #${j.id}`),
        jobBadge(j.status),
        h('div.spacer'),
        j.status === 'RUNNING'
          ? h('button.btn.btn-danger-ghost.btn-sm', { type: 'button', dataset: { role: 'cancel-job' }, onclick: () => cancelJob(j) }, icon('x'), 'Cancel job')
          : h('button.btn.btn-ghost.btn-sm', { type: 'button', dataset: { role: 'dismiss-progress' }, 'aria-label': 'Hide progress', onclick: () => { current = null; drawProgress(); } }, icon('x'))),
      h('progress.bulk-bar-meter', { max: 100, value: pct, 'aria-label': `Bulk ${what} progress` }),
      h('dl.bulk-figures',
        h('div', h('dt', 'Done'), h('dd', { dataset: { role: 'bulk-done' } }, `${fmtNumber(j.done)} / ${fmtNumber(j.total)}`)),
        h('div', h('dt', 'Failed'), h('dd', { dataset: { role: 'bulk-failed' } }, fmtNumber(j.failed))),
        h('div', h('dt', 'Credits spent'), h('dd', { dataset: { role: 'bulk-credits' } }, fmtNumber(j.creditsSpent)))),
      j.errorMessage ? h('div.note.tone-warning', j.errorMessage) : null,
      j.status === 'RUNNING' && j.kind === 'RETRY'
        ? h('p.muted.sm', 'Retries go out at the recipients\u2019 pace; each new delivery shows in the list as it is made.') : null);
  }

  function drawProgress() {
    mount(progressSlot, current ? progressCard(current) : null);
  }

  async function cancelJob(j) {
    if (j.local) { j.stop = true; return; }
    const result = await confirmAction({
      title: `Stop bulk ${j.kind === 'RETRY' ? 'retry' : 'cancel'} #${j.id}?`,
      body: [h('p', `It stops after the batch under way. What it did stays done: ${plural(j.done, 'delivery', 'deliveries')} so far.`), costLine(0)],
      confirmLabel: 'Cancel job',
      dismissLabel: 'Keep running',
      tone: 'danger',
      action: () => gql(Q.CANCEL_BULK_JOB, { id: j.id }),
    });
    if (!result || !ctx.alive) return;
    toast(`Bulk job #${j.id} canceled.`);
    update(result.cancelBulkJob);
  }

  function scopeSummary(j) {
    const f = j.filter;
    const parts = [];
    parts.push(j.kind === 'CANCEL' ? 'pending' : f.status ? titleCase(f.status).toLowerCase() : 'failed, canceled or succeeded');
    if (f.recipientId) {
      const rec = server.recipients.find((r) => r.id === f.recipientId);
      parts.push(`to ${rec ? rec.name : '#' + f.recipientId}`);
    }
    if (f.search) parts.push(`containing “${f.search}”`);
    if (f.receivedAfter || f.receivedBefore) parts.push('in a time range');
    return parts.join(' · ');
  }

  function drawJobs() {
    const list = [...jobs.values()].sort((a, b) => Number(b.id) - Number(a.id)).slice(0, 10);
    if (!list.length) { mount(jobsSlot); return; }
    mount(jobsSlot, section('Bulk jobs', { id: 'bulk-jobs', sub: 'This server\u2019s latest, live' },
      dataTable({
        className: 'bulk-jobs',
        rows: list,
        rowProps: (j) => ({ dataset: { jobId: j.id, status: j.status } }),
        columns: [
          { label: 'Started', className: 'nowrap', cell: (j) => [timeEl(j.createdAt, 'relative'), h('div.cell-sub', j.createdBy)] },
          { label: 'Action', cell: (j) => h('strong', j.kind === 'RETRY' ? 'Retry' : 'Cancel') },
          { label: 'Deliveries', cell: (j) => h('span.muted.sm', j.filter ? scopeSummary(j) : '') },
          { label: 'Progress', className: 'nowrap', cell: (j) => [h('span', { dataset: { role: 'job-done' } }, `${fmtNumber(j.done)} / ${fmtNumber(j.total)}`), j.failed ? h('div.cell-sub', `${fmtNumber(j.failed)} failed`) : null] },
          { label: 'Credits', right: true, cell: (j) => fmtNumber(j.creditsSpent) },
          { label: 'Status', cell: (j) => [jobBadge(j.status), j.errorMessage ? h('div.cell-sub', j.errorMessage) : null] },
          { label: 'Actions', right: true, cell: (j) => (j.status === 'RUNNING'
            ? h('button.btn.btn-danger-ghost.btn-sm', { type: 'button', dataset: { role: 'cancel-job' }, onclick: () => cancelJob(j) }, 'Cancel job') : null) },
        ],
      })));
  }

  async function loadJobs() {
    try {
      const data = await gql(Q.BULK_JOBS, { first: 50 }, { signal: ctx.signal });
      if (!ctx.alive) return;
      for (const e of data.bulkJobs.edges) {
        const j = e.node;
        if (j.filter && j.filter.serverId === server.id) update(j);
      }
    } catch { /* the list is an extra: the requests stay usable without it */ }
  }
  loadJobs();

  return { bar, progressSlot, jobsSlot, column, setRows, clear };
}
