// Tables of records: columns described once, rows as links for the keyboard, a pager for Relay connections.

import { errorState, h, icon, mount, plural, toast } from './ui.js';

// dataTable renders rows with columns [{ label, cell(row) → node, className, right }]. rowProps(row) gives a
// row's attributes (dataset for tests and styling); link(row) makes the whole row open that hash link while
// its first cell holds a real link for the keyboard.
export function dataTable({ columns, rows, rowProps, link, className = '' }) {
  return h('div.table-wrap', h('table.table', { class: className + (link ? ' clickable' : '') },
    h('thead', h('tr', columns.map((c) => h('th', { class: [c.right ? 'right' : '', c.className || ''].join(' ').trim() || null }, c.label)))),
    h('tbody', rows.map((row) => {
      const tr = h('tr', rowProps ? rowProps(row) : {}, columns.map((c) =>
        h('td', { class: [c.right ? 'right' : '', c.className || ''].join(' ').trim() || null }, c.cell(row))));
      if (link) {
        tr.addEventListener('click', (e) => {
          if (e.target.closest('a, button, input, select, label') || window.getSelection().toString()) return;
          location.hash = link(row);
        });
      }
      return tr;
    }))));
}

// connectionList appends pages of a Relay connection: fetchPage(after) resolves with the connection, draw()
// renders everything loaded so far (or, given table, the dataTable of the rows without them, that table in a
// card above the pager in el), and empty(), when given, renders instead while nothing is. It returns
// { load, show, rows, total, pager() }; show() is load() that puts a failure, with a retry, into el.
export function connectionList({ ctx, el, fetchPage, draw, table, empty, noun = ['item', 'items'] }) {
  const list = { rows: [], total: 0, pageInfo: null };
  const drawTable = () => mount(el, h('div.card.table-card', dataTable({ ...table, rows: list.rows })), list.pager());
  const render = () => (empty && !list.rows.length ? empty() : (draw || drawTable)());
  list.show = () => list.load().catch((err) => { if (ctx.alive && err.name !== 'AbortError') mount(el, errorState(err, list.show)); });
  list.load = async () => {
    const conn = await fetchPage(null);
    if (!ctx.alive) return false;
    list.rows = conn.edges.map((e) => e.node);
    list.total = conn.totalCount;
    list.pageInfo = conn.pageInfo;
    render();
    return true;
  };
  const more = async (e) => {
    const btn = e.currentTarget;
    btn.disabled = true;
    btn.classList.add('busy');
    try {
      const conn = await fetchPage(list.pageInfo.endCursor);
      if (!ctx.alive) return;
      list.rows = list.rows.concat(conn.edges.map((x) => x.node));
      list.pageInfo = conn.pageInfo;
      list.total = conn.totalCount;
      render();
    } catch (err) {
      if (!ctx.alive) return;
      btn.disabled = false;
      btn.classList.remove('busy');
      toast(err.message, 'danger');
    }
  };
  list.pager = () => h('div.pager',
    h('span.muted', `${plural(list.rows.length, noun[0], noun[1])} of ${list.total}`),
    h('div.spacer'),
    list.pageInfo && list.pageInfo.hasNextPage
      ? h('button.btn.btn-secondary.btn-sm', { type: 'button', onclick: more, dataset: { role: 'more' } }, 'Load more', icon('chevron')) : null);
  return list;
}
