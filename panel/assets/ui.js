// DOM helpers, formatting and the shared building blocks of every screen. All text reaches the page through
// textContent (never innerHTML): request headers and bodies come from strangers on the internet.

import { errorAdvice, errorTitle } from './gql.js';

// h builds an element: h('a.link', { href, onclick }, 'text', child, [more], null).
export function h(spec, props, ...children) {
  if (props == null || typeof props !== 'object' || props instanceof Node || Array.isArray(props)) {
    if (props != null) children.unshift(props);
    props = {};
  }
  const [tag, ...classes] = spec.split('.');
  const el = document.createElement(tag || 'div');
  if (classes.length) el.className = classes.join(' ');
  for (const [k, v] of Object.entries(props)) {
    if (v == null || v === false) continue;
    if (k === 'class') el.className = [el.className, v].filter(Boolean).join(' ');
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false || c === true) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// svg icons, drawn with strokes; built with createElementNS so they need no innerHTML.
const ICONS = {
  copy: ['M9 9h10v10H9z', 'M5 15V5h10'],
  check: ['M5 12l5 5L20 7'],
  arrowRight: ['M5 12h14', 'M13 6l6 6-6 6'],
  arrowLeft: ['M19 12H5', 'M11 6l-6 6 6 6'],
  retry: ['M4 12a8 8 0 0 1 14-5.3L20 9', 'M20 4v5h-5', 'M20 12a8 8 0 0 1-14 5.3L4 15', 'M4 20v-5h5'],
  replay: ['M3 12a9 9 0 1 0 3-6.7', 'M3 4v5h5', 'M10 9l5 3-5 3z'],
  x: ['M6 6l12 12', 'M18 6L6 18'],
  server: ['M4 5h16v6H4z', 'M4 13h16v6H4z', 'M8 8h.01', 'M8 16h.01'],
  inbox: ['M3 13l3-8h12l3 8', 'M3 13v6h18v-6', 'M3 13h5l1 3h6l1-3h5'],
  alert: ['M12 3l10 18H2z', 'M12 10v4', 'M12 17h.01'],
  coins: ['M12 4c4.4 0 8 1.3 8 3s-3.6 3-8 3-8-1.3-8-3 3.6-3 8-3z', 'M4 7v5c0 1.7 3.6 3 8 3s8-1.3 8-3V7', 'M4 12v5c0 1.7 3.6 3 8 3s8-1.3 8-3v-5'],
  terminal: ['M4 5h16v14H4z', 'M8 10l3 2-3 2', 'M13 15h3'],
  globe: ['M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18z', 'M3 12h18', 'M12 3c2.5 2.5 3.5 5.5 3.5 9s-1 6.5-3.5 9c-2.5-2.5-3.5-5.5-3.5-9s1-6.5 3.5-9z'],
  logout: ['M15 4h4v16h-4', 'M10 8l-4 4 4 4', 'M6 12h11'],
  key: ['M14 10a4 4 0 1 0-3.5 4', 'M13 13l7 7', 'M17 17l2-2'],
  chevron: ['M9 6l6 6-6 6'],
  plus: ['M12 5v14', 'M5 12h14'],
  pause: ['M8 5v14', 'M16 5v14'],
  play: ['M7 5l12 7-12 7z'],
  trash: ['M4 7h16', 'M9 7V4h6v3', 'M6 7l1 13h10l1-13'],
  edit: ['M4 20h4L19 9l-4-4L4 16z', 'M13 7l4 4'],
  users: ['M9 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8z', 'M2 21c0-4 3-6 7-6s7 2 7 6', 'M16 3.5a4 4 0 0 1 0 7', 'M18 15c2.5.5 4 2.5 4 6'],
  send: ['M4 12l16-8-6 16-3-7z', 'M11 13l9-9'],
  chart: ['M4 20V10', 'M10 20V4', 'M16 20v-7', 'M22 20H2'],
  layers: ['M12 3l9 5-9 5-9-5z', 'M3 13l9 5 9-5'],
  book: ['M5 4h11a3 3 0 0 1 3 3v13H8a3 3 0 0 1-3-3z', 'M5 17a3 3 0 0 1 3-3h11'],
  rotate: ['M20 12a8 8 0 1 1-2.3-5.7', 'M20 4v5h-5'],
  power: ['M12 3v9', 'M6.3 6.3a8 8 0 1 0 11.4 0'],
  settings: ['M12 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6z', 'M19.4 15a1.7 1.7 0 0 0 .3 1.8l.1.1a2 2 0 1 1-2.8 2.8l-.1-.1a1.7 1.7 0 0 0-2.9 1.2V21a2 2 0 1 1-4 0v-.1A1.7 1.7 0 0 0 7 19.4l-.1.1a2 2 0 1 1-2.8-2.8l.1-.1A1.7 1.7 0 0 0 3 13.7H3a2 2 0 1 1 0-4h.1A1.7 1.7 0 0 0 4.6 7l-.1-.1a2 2 0 1 1 2.8-2.8l.1.1a1.7 1.7 0 0 0 2.9-1.2V3a2 2 0 1 1 4 0v.1a1.7 1.7 0 0 0 2.9 1.2l.1-.1a2 2 0 1 1 2.8 2.8l-.1.1a1.7 1.7 0 0 0 1.2 2.9h.1a2 2 0 1 1 0 4h-.1a1.7 1.7 0 0 0-1.5 1z'],
};

export function icon(name, cls = '') {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', ('icon ' + cls).trim());
  for (const d of ICONS[name] || []) {
    const p = document.createElementNS(ns, 'path');
    p.setAttribute('d', d);
    svg.append(p);
  }
  return svg;
}

// ---- formatting -------------------------------------------------------------------------------------------

const numberFmt = new Intl.NumberFormat();
export const fmtNumber = (n) => (n == null ? '—' : numberFmt.format(n));

const dateTimeFmt = new Intl.DateTimeFormat(undefined, {
  month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
});
const fullFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'long' });
const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : dateTimeFmt.format(d);
}

export function fmtRelative(iso, now = Date.now()) {
  if (!iso) return '—';
  const diff = (new Date(iso).getTime() - now) / 1000;
  const abs = Math.abs(diff);
  if (abs < 5) return 'just now';
  if (abs < 60) return rtf.format(Math.round(diff), 'second');
  if (abs < 3600) return rtf.format(Math.round(diff / 60), 'minute');
  if (abs < 86400) return rtf.format(Math.round(diff / 3600), 'hour');
  return rtf.format(Math.round(diff / 86400), 'day');
}

// timeEl shows a time; mode 'relative' keeps itself current (see tickTimes), the exact time is its tooltip.
export function timeEl(iso, mode = 'absolute') {
  if (!iso) return h('span.muted', '—');
  const d = new Date(iso);
  const el = h('time', { datetime: iso, title: Number.isNaN(d.getTime()) ? iso : fullFmt.format(d) });
  if (mode === 'relative') {
    el.dataset.relative = '1';
    el.textContent = fmtRelative(iso);
  } else {
    el.textContent = fmtTime(iso);
  }
  return el;
}

export function tickTimes(root = document) {
  const now = Date.now();
  for (const el of root.querySelectorAll('time[data-relative]')) el.textContent = fmtRelative(el.getAttribute('datetime'), now);
}

export function fmtDuration(ms) {
  if (ms == null) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60000);
  return `${m} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function fmtBytes(n) {
  if (n == null) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export const plural = (n, one, many = one + 's') => `${fmtNumber(n)} ${n === 1 ? one : many}`;

export function titleCase(enumValue) {
  if (!enumValue) return '';
  const s = enumValue.toLowerCase().replace(/_/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// ---- status ------------------------------------------------------------------------------------------------

const TONES = {
  DELIVERED: 'success', SUCCEEDED: 'success', ACTIVE: 'success',
  FAILED: 'danger', DISABLED: 'danger',
  PENDING: 'warning', PARTIAL: 'warning', PAUSED: 'warning',
  IN_PROGRESS: 'info',
  CANCELED: 'neutral', FROZEN: 'frozen',
};

export const toneOf = (status) => TONES[status] || 'neutral';

export function badge(status, label = titleCase(status)) {
  return h('span.badge', { class: 'tone-' + toneOf(status), dataset: { status } }, h('span.badge-dot'), label);
}

export function dot(status, title) {
  return h('span.status-dot', { class: 'tone-' + toneOf(status), title });
}

// ---- building blocks ---------------------------------------------------------------------------------------

export function copyButton(text, label = 'Copy') {
  const btn = h('button.btn.btn-ghost.btn-sm.copy-btn', { type: 'button', title: 'Copy to clipboard' }, icon('copy'), h('span', label));
  btn.addEventListener('click', async () => {
    const ok = await copyText(text);
    btn.replaceChildren(icon(ok ? 'check' : 'x'), h('span', ok ? 'Copied' : 'Press Ctrl+C'));
    btn.classList.toggle('copied', ok);
    setTimeout(() => {
      btn.replaceChildren(icon('copy'), h('span', label));
      btn.classList.remove('copied');
    }, 1600);
  });
  return btn;
}

async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch { /* fall through to the selection trick */ }
  const ta = h('textarea.offscreen', { readonly: true });
  ta.value = text;
  document.body.append(ta);
  ta.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  ta.remove();
  return ok;
}

export function loading(text = 'Loading…') {
  return h('div.state.state-loading', { role: 'status', 'aria-live': 'polite' }, h('span.spinner'), h('span', text));
}

export function emptyState(iconName, title, text, ...extra) {
  return h('div.state.state-empty', h('div.state-icon', icon(iconName)), h('h3', title), text ? h('p', text) : null, ...extra);
}

export function errorDetail(err) {
  const code = err && err.code;
  return [
    h('strong.alert-title', errorTitle(err)),
    h('span.alert-message', (err && err.message) || String(err)),
    h('span.alert-advice', errorAdvice(err)),
    code ? h('code.alert-code', code) : null,
  ];
}

export function errorAlert(err) {
  return h('div.alert.alert-danger', { role: 'alert' }, icon('alert'), h('div.alert-body', errorDetail(err)));
}

export function errorState(err, retry) {
  return h('div.state.state-error', { role: 'alert' },
    h('div.state-icon', icon('alert')),
    h('h3', errorTitle(err)),
    h('p', (err && err.message) || String(err)),
    h('p.alert-advice', errorAdvice(err)),
    err && err.code ? h('code.alert-code', err.code) : null,
    retry ? h('button.btn.btn-secondary', { type: 'button', onclick: retry }, 'Try again') : null);
}

// ---- toasts and dialogs ------------------------------------------------------------------------------------

export function toast(message, tone = 'success', timeout = 5000) {
  let host = document.getElementById('toasts');
  if (!host) {
    host = h('div.toasts', { id: 'toasts', 'aria-live': 'polite' });
    document.body.append(host);
  }
  const el = h('div.toast', { class: 'tone-' + tone, role: 'status' }, h('span.toast-text', message),
    h('button.toast-close', { type: 'button', 'aria-label': 'Dismiss', onclick: () => el.remove() }, icon('x')));
  host.append(el);
  // A few at a time: older ones make way.
  while (host.children.length > 3) host.firstElementChild.remove();
  setTimeout(() => el.classList.add('leaving'), timeout);
  setTimeout(() => el.remove(), timeout + 300);
  return el;
}

// confirmAction opens a modal: title, body nodes, a confirm button. action() runs on confirm; while it runs
// the dialog shows progress, if it throws the error is shown in place (the user may retry or close), if it
// resolves the dialog closes and confirmAction resolves with its result. Closing resolves with null.
export function confirmAction({ title, body, confirmLabel, dismissLabel = 'Cancel', tone = 'primary', action }) {
  return new Promise((resolve) => {
    const errorSlot = h('div.dialog-error');
    const confirmBtn = h('button.btn', { type: 'submit', class: 'btn-' + tone, dataset: { role: 'confirm' } }, confirmLabel);
    const cancelBtn = h('button.btn.btn-secondary', { type: 'button', dataset: { role: 'dismiss' } }, dismissLabel);
    const form = h('form.dialog-card', { method: 'dialog' },
      h('header.dialog-head', h('h2', title)),
      h('div.dialog-body', body, errorSlot),
      h('footer.dialog-foot', cancelBtn, confirmBtn));
    const dlg = h('dialog.dialog', form);
    cancelBtn.addEventListener('click', () => finish(null));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      confirmBtn.disabled = true;
      cancelBtn.disabled = true;
      confirmBtn.classList.add('busy');
      errorSlot.replaceChildren();
      try {
        const result = await action();
        finish(result);
      } catch (err) {
        errorSlot.replaceChildren(errorAlert(err));
        confirmBtn.disabled = false;
        cancelBtn.disabled = false;
        confirmBtn.classList.remove('busy');
      }
    });
    const finish = modal(dlg, resolve, confirmBtn, () => confirmBtn.disabled);
  });
}

// modal opens dlg as a modal dialog and focuses focusEl. The finish(value) it returns ends it once: it closes
// and removes dlg and resolves with value. Escape finishes with null unless busy() holds.
export function modal(dlg, resolve, focusEl, busy = () => false) {
  let done = false;
  const finish = (value) => {
    if (done) return;
    done = true;
    dlg.close();
    dlg.remove();
    resolve(value);
  };
  dlg.addEventListener('cancel', (e) => { e.preventDefault(); if (!busy()) finish(null); });
  document.body.append(dlg);
  dlg.showModal();
  focusEl.focus();
  return finish;
}

// debounce delays fn until calls stop for ms; .cancel() drops a pending call.
export function debounce(fn, ms) {
  let t = 0;
  const d = (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
  d.cancel = () => clearTimeout(t);
  return d;
}
