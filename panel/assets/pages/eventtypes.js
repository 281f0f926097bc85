// Event types: the names a tenant gives to the kinds of requests it receives, each with a description and,
// optionally, the JSON Schema its bodies follow; creating, editing and deleting them. Servers read a request's
// type and check it against the schema (their settings); recipients subscribe to types (theirs).

import * as Q from '../queries.js';
import { gql } from '../gql.js';
import { h, mount, icon, timeEl, plural, loading, emptyState, toast } from '../ui.js';
import { canManage } from '../session.js';
import { checks } from '../limits.js';
import { formDialog } from '../form.js';
import { setTitle, pageHeader, costLine } from '../page.js';
import { dataTable, connectionList } from '../table.js';
import { confirmDelete } from './shared.js';

const SCHEMA_PLACEHOLDER = '{\n  "type": "object",\n  "required": ["type", "amount"],\n  "properties": {"amount": {"type": "number", "minimum": 0}}\n}';

export function viewEventTypes(ctx, main) {
  setTitle('Event types');
  const body = h('div', loading('Loading event types…'));
  const add = canManage()
    ? h('button.btn.btn-primary', { type: 'button', dataset: { role: 'new-event-type' }, onclick: () => open(null) }, icon('plus'), 'New event type')
    : null;
  mount(main, pageHeader({
    title: 'Event types',
    subtitle: 'Name the kinds of requests your servers receive, and say what their bodies look like: a server reads each request\u2019s type and may check its body against the type\u2019s schema; a recipient may take only some types.',
    actions: add,
  }), body);

  const open = async (et) => {
    if (await eventTypeDialog(et)) list.load();
  };
  const list = connectionList({
    ctx,
    el: body,
    noun: ['event type', 'event types'],
    fetchPage: (after) => gql(Q.EVENT_TYPES, { first: 50, after }, { signal: ctx.signal }).then((d) => d.eventTypes),
    empty: () => mount(body, emptyState('book', 'No event types yet',
      'Name one for each kind of request you receive, such as order.paid, with the JSON Schema its bodies follow. Then tell each server where a request\u2019s type is: a header, or a field of its JSON body.',
      add ? h('button.btn.btn-primary', { type: 'button', dataset: { role: 'empty-new-event-type' }, onclick: () => open(null) }, icon('plus'), 'Create an event type') : null)),
    table: {
      className: 'event-types',
      rowProps: (et) => ({ dataset: { eventTypeId: et.id, eventTypeName: et.name } }),
      columns: [
        { label: 'Name', cell: (et) => [h('div.cell-title.mono', et.name), et.description ? h('div.cell-sub', et.description) : null] },
        { label: 'Schema', cell: (et) => schemaCell(et) },
        { label: 'Updated', className: 'nowrap', cell: (et) => timeEl(et.updatedAt) },
        canManage() ? {
          label: 'Actions', right: true,
          cell: (et) => h('div.row-actions',
            h('button.btn.btn-secondary.btn-sm', { type: 'button', dataset: { role: 'edit-event-type' }, onclick: () => open(et) }, icon('edit'), 'Edit'),
            h('button.btn.btn-danger-ghost.btn-sm', { type: 'button', dataset: { role: 'delete-event-type' }, onclick: () => deleteFlow(et, list.load) }, icon('trash'), 'Delete')),
        } : null,
      ].filter(Boolean),
    },
  });
  list.show();
}

// schemaCell says whether a type has a schema, which unfolds in place.
function schemaCell(et) {
  if (!et.schema) return h('span.muted', { dataset: { role: 'schema' } }, 'None: any body');
  return h('details.schema-details', { dataset: { role: 'schema' } },
    h('summary', `JSON Schema · ${plural(et.schema.length, 'character')}`),
    h('pre.code-block.schema-text', pretty(et.schema)));
}

// pretty indents JSON for reading; other text is left as it is.
function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

// eventTypeDialog creates an event type (et null) or edits one's description and schema (a name is for good);
// it resolves with the result or null.
async function eventTypeDialog(et) {
  const fields = [];
  if (!et) {
    fields.push({
      name: 'name', label: 'Name', required: true, mono: true, check: checks.eventTypeName(), attrs: { placeholder: 'order.paid' },
      hint: 'Letters, digits and . _ - : / — as a request carries it in the header or body field its server reads.',
    });
  }
  fields.push(
    { name: 'description', label: 'Description', type: 'textarea', mono: false, value: et ? et.description : '', check: checks.eventTypeDescription(), attrs: { rows: 2 } },
    {
      name: 'schema', label: 'JSON Schema', type: 'textarea', raw: true, value: et && et.schema ? pretty(et.schema) : '', check: checks.eventTypeSchema(),
      optionalNote: 'any body if empty', attrs: { rows: 10, placeholder: SCHEMA_PLACEHOLDER },
      hint: 'Draft 2020-12. It may refer to its own parts ($defs, "$ref": "#/…"), never to a URL. A server set to check bodies refuses (or marks) one that does not follow it.',
    },
  );
  const result = await formDialog({
    title: et ? `Edit ${et.name}` : 'New event type',
    intro: et ? h('p', 'A new schema applies to requests received from now on, within seconds.') : null,
    role: 'event-type-form',
    fields,
    cost: () => costLine(0),
    submitLabel: et ? 'Save event type' : 'Create event type',
    onSubmit: (v) => {
      const input = { description: v.description };
      if (v.schema.trim()) input.schema = v.schema;
      if (!et) return gql(Q.CREATE_EVENT_TYPE, { input: { name: v.name, ...input } });
      if (!v.schema.trim()) input.clearSchema = true;
      return gql(Q.UPDATE_EVENT_TYPE, { id: et.id, input });
    },
  });
  if (result) toast(et ? `Event type ${result.updateEventType.name} saved.` : `Event type ${result.createEventType.name} created.`);
  return result;
}

function deleteFlow(et, reload) {
  return confirmDelete({
    title: `Delete ${et.name}?`,
    consequences: [
      'Bodies of this type are no longer checked against its schema.',
      'Requests keep their type name, and recipients their subscriptions: a type created again under the same name takes them back.',
    ],
    confirmLabel: 'Delete event type',
    action: () => gql(Q.DELETE_EVENT_TYPE, { id: et.id }),
    done: `Event type ${et.name} deleted.`,
    then: reload,
  });
}
