// Forms built from field descriptions: labelled inputs, validation before sending (the API's own limits and
// messages, see limits.js), the server's refusals shown under the field they name, the cost before sending
// and the result after.
//
// A field: { name, label, type: text|number|url|textarea|select|radio|checkbox|password, value, hint,
//   required, options: [{ value, label, hint }], check(value, values) → message or '', show(values) → bool,
//   attrs: {…input attributes}, mono, wide, raw (keep surrounding spaces), placeholder(values),
//   heading: { title, text } }. hint may also be a function of the values: for a field whose meaning follows
//   another's (a recipient's URL, its method's). heading opens a group of fields above this one, shown with it;
//   its text may be a function of the values too.
// name is the API's field name: a server message that starts with it ("retentionDays must be …") is shown
// under that field.

import { h, icon, errorAlert, modal } from './ui.js';

let nextId = 1;

function readValue(f, input) {
  switch (f.type) {
    case 'checkbox':
      return input.checked;
    case 'number': {
      const s = input.value.trim();
      if (s === '') return null;
      const n = Number(s);
      return Number.isFinite(n) ? n : NaN;
    }
    case 'radio': {
      const on = input.querySelector('input:checked');
      return on ? on.value : '';
    }
    default:
      return f.raw ? input.value : input.value.trim();
  }
}

function buildInput(f, id, describedBy, onChange) {
  const common = { id, name: f.name, 'aria-describedby': describedBy, ...(f.attrs || {}) };
  let input;
  switch (f.type) {
    case 'textarea':
      input = h('textarea.input', { rows: 5, spellcheck: 'false', ...common, class: f.mono === false ? 'plain' : '' });
      input.value = f.value ?? '';
      break;
    case 'select':
      input = h('select.input.plain', common, (f.options || []).map((o) => h('option', { value: o.value }, o.label)));
      if (f.value != null) input.value = String(f.value);
      break;
    case 'radio':
      input = h('div.radio-cards', { id, role: 'radiogroup', 'aria-describedby': describedBy, 'aria-labelledby': id + '-label' },
        (f.options || []).map((o, i) => h('label.radio-card', {},
          h('input', { type: 'radio', name: f.name, value: o.value, checked: String(f.value) === String(o.value) || (f.value == null && i === 0) }),
          h('span.radio-text', h('strong', o.label), o.hint ? h('span.muted', o.hint) : null))));
      break;
    case 'checkbox':
      input = h('input.check', { type: 'checkbox', ...common, checked: !!f.value });
      break;
    default:
      input = h('input.input', {
        type: f.type === 'number' ? 'text' : (f.type || 'text'),
        inputmode: f.type === 'number' ? 'numeric' : null,
        autocomplete: 'off', spellcheck: 'false', ...common, class: f.mono ? '' : 'plain',
      });
      input.value = f.value ?? '';
  }
  input.addEventListener(f.type === 'checkbox' || f.type === 'select' || f.type === 'radio' ? 'change' : 'input', onChange);
  return input;
}

// createForm returns { el, values(), setError(name, msg), set(name, value), edited(), restore(draft), refresh(),
// focus() }.
// onSubmit(values) runs the mutation; its rejection is shown in the form; onDone(result) runs after it resolves.
export function createForm({ fields, submitLabel, cost, onSubmit, onDone, onCancel, cancelLabel = 'Cancel', tone = 'primary', role, intro }) {
  const state = new Map();
  const errorSlot = h('div.form-error', { role: 'alert' });
  const costSlot = h('div.form-cost');
  const submit = h('button.btn', { type: 'submit', class: 'btn-' + tone, dataset: { role: 'submit' } }, submitLabel);
  const cancel = onCancel ? h('button.btn.btn-secondary', { type: 'button', dataset: { role: 'dismiss' }, onclick: onCancel }, cancelLabel) : null;

  const values = () => {
    const out = {};
    for (const [name, s] of state) out[name] = readValue(s.f, s.input);
    return out;
  };

  const setError = (name, msg) => {
    const s = state.get(name);
    if (!s) return false;
    s.error.textContent = msg || '';
    s.wrap.classList.toggle('invalid', !!msg);
    if (s.f.type !== 'radio') s.input.setAttribute('aria-invalid', msg ? 'true' : 'false');
    return true;
  };

  const check = (s, all) => {
    if (!visible(s, all)) return '';
    const v = all[s.f.name];
    if (s.f.type === 'number' && Number.isNaN(v)) return `${s.f.name} must be a whole number`;
    if (s.f.type === 'number' && v != null && !Number.isInteger(v)) return `${s.f.name} must be a whole number`;
    if (s.f.required && (v == null || v === '')) return `${s.f.name} is required`;
    return s.f.check ? s.f.check(v, all) || '' : '';
  };

  const visible = (s, all) => !s.f.show || s.f.show(all);

  const refresh = () => {
    const all = values();
    for (const s of state.values()) {
      s.wrap.hidden = !visible(s, all);
      if (s.wrap.classList.contains('invalid')) setError(s.f.name, check(s, all));
      if (s.f.preview) s.preview.replaceChildren(s.f.preview(all) || '');
      if (typeof s.f.hint === 'function') s.hint.replaceChildren(s.f.hint(all) || '');
      if (typeof s.f.placeholder === 'function') s.input.placeholder = s.f.placeholder(all) || '';
      if (s.head) {
        s.head.hidden = s.wrap.hidden;
        const text = typeof s.f.heading.text === 'function' ? s.f.heading.text(all) : s.f.heading.text;
        s.head.lastChild.replaceChildren(text || '');
      }
    }
    if (cost) costSlot.replaceChildren(cost(all) || '');
  };

  const touched = new Set(); // the fields the user changed since the form was built
  const fieldEls = fields.map((f) => {
    const id = `f${nextId++}-${f.name}`;
    const hint = h('div.field-hint', { id: id + '-hint' }, typeof f.hint === 'function' ? null : f.hint || null);
    const error = h('div.field-error', { id: id + '-error' });
    const input = buildInput(f, id, `${id}-hint ${id}-error`, () => {
      touched.add(f.name);
      if (f.onChange) f.onChange(values(), api);
      refresh();
    });
    const preview = h('div.field-preview', { 'aria-live': 'polite' });
    const label = h('label.field-label', { for: f.type === 'radio' ? null : id, id: id + '-label' }, f.label,
      !f.required && !['checkbox', 'radio', 'select'].includes(f.type) && f.optionalNote !== false ? h('span.optional', f.optionalNote || 'optional') : null);
    const wrap = f.type === 'checkbox'
      ? h('div.field.field-check', { class: f.wide ? 'wide' : '', dataset: { field: f.name } },
        h('label.check-label', { for: id }, input, h('span', f.label)), hint, error, preview)
      : h('div.field', { class: f.wide || f.type === 'textarea' || f.type === 'radio' ? 'wide' : '', dataset: { field: f.name } },
        label, input, hint, error, preview);
    const head = f.heading
      ? h('div.form-heading', { dataset: { heading: f.name } }, h('h3', f.heading.title), h('div.form-heading-text'))
      : null;
    state.set(f.name, { f, input, wrap, error, preview, hint, head });
    return [head, wrap];
  });

  const el = h('form.form', { novalidate: true, dataset: role ? { role } : {} },
    intro || null,
    h('div.form-grid', fieldEls),
    costSlot,
    errorSlot,
    h('div.form-actions', cancel, submit));

  el.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (submit.disabled) return;
    const all = values();
    let first = null;
    for (const s of state.values()) {
      const msg = check(s, all);
      setError(s.f.name, msg);
      if (msg && !first) first = s;
    }
    errorSlot.replaceChildren();
    if (first) {
      (first.f.type === 'radio' ? first.input.querySelector('input') : first.input).focus();
      return;
    }
    submit.disabled = true;
    submit.classList.add('busy');
    if (cancel) cancel.disabled = true;
    try {
      const result = await onSubmit(all);
      if (onDone) await onDone(result, all);
    } catch (err) {
      if (err && err.name === 'AbortError') return;
      // "filter: $.body…" names its field as "filter …" does, "eventTypes[2]: …" the list's field.
      const word = err && err.code === 'INVALID_INPUT' ? String(err.message).split(/\s/)[0].replace(/:$/, '').replace(/\[\d+\]$/, '') : '';
      if (word && state.has(word) && setError(word, err.message)) state.get(word).input.focus();
      else errorSlot.replaceChildren(errorAlert(err));
    } finally {
      submit.disabled = false;
      submit.classList.remove('busy');
      if (cancel) cancel.disabled = false;
    }
  });

  const api = {
    el,
    values,
    setError,
    set(name, value) {
      const s = state.get(name);
      if (!s) return;
      if (s.f.type === 'checkbox') s.input.checked = !!value;
      else if (s.f.type === 'radio') s.input.querySelectorAll('input').forEach((r) => { r.checked = r.value === String(value); });
      else s.input.value = value ?? '';
      refresh();
    },
    // edited is what the user changed and has not sent, by field: a draft to keep when the page is rebuilt.
    edited() {
      return Object.fromEntries([...touched].map((name) => {
        const { f, input } = state.get(name);
        return [name, f.type === 'checkbox' || f.type === 'radio' ? readValue(f, input) : input.value];
      }));
    },
    // restore puts a draft from edited back, as the user's own changes.
    restore(draft) {
      for (const [name, value] of Object.entries(draft || {})) {
        if (!state.has(name)) continue;
        api.set(name, value);
        touched.add(name);
      }
    },
    // refresh draws again what follows the values or the page (hints, previews, which fields show).
    refresh,
    focus() {
      for (const s of state.values()) {
        if (!s.wrap.hidden) { (s.f.type === 'radio' ? s.input.querySelector('input') : s.input).focus(); return; }
      }
    },
  };
  refresh();
  return api;
}

// formDialog shows a form in a modal and resolves with the mutation's result, or null when closed.
export function formDialog({ title, intro, ...opts }) {
  return new Promise((resolve) => {
    const dlg = h('dialog.dialog.dialog-form');
    const form = createForm({
      ...opts,
      intro: intro ? h('div.dialog-intro', intro) : null,
      onCancel: () => finish(null),
      onDone: async (result, values) => {
        if (opts.onDone) await opts.onDone(result, values);
        finish(result);
      },
    });
    dlg.append(h('div.dialog-card',
      h('header.dialog-head', h('h2', title),
        h('button.dialog-x', { type: 'button', 'aria-label': 'Close', onclick: () => finish(null) }, icon('x'))),
      h('div.dialog-body', form.el)));
    const finish = modal(dlg, resolve, form);
  });
}

// showResult opens a modal that shows something once (an issued token) until the person closes it.
export function showResult({ title, body, closeLabel = 'Done' }) {
  return new Promise((resolve) => {
    const close = h('button.btn.btn-primary', { type: 'button', dataset: { role: 'dismiss' } }, closeLabel);
    const dlg = h('dialog.dialog.dialog-form', h('div.dialog-card',
      h('header.dialog-head', h('h2', title)),
      h('div.dialog-body', body),
      h('footer.dialog-foot', close)));
    const finish = modal(dlg, resolve, close);
    close.addEventListener('click', () => finish());
  });
}
