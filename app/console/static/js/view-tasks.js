// Durable MCP tasks: every tenant's, filtered by status; one task with its attempts (one
// generation of `task:<id>` each) and the first retained events of its current attempt.

import { api } from './api.js';
import { facts, h, link, pageHeader, route, table } from './dom.js';
import { mono, num, short, stateBadge, time } from './format.js';
import { field, select } from './view-streams.js';

const STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'];

function statusBadge(status) {
  return h('span', { class: ['badge', `task-${status}`] }, status);
}

export async function tasksView(_args, query) {
  const status = query.get('status') || '';
  const tenant = query.get('tenant') || '';
  const form = h(
    'form',
    { class: 'toolbar', id: 'task-filters' },
    field('Status', select('status', [['', 'any'], ...STATUSES], status)),
    field('Tenant', h('input', { name: 'tenant', value: tenant, placeholder: 'any', spellcheck: 'false', autocomplete: 'off' })),
    h('button', { class: 'button primary', type: 'submit' }, 'Filter'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    for (const k of Object.keys(data)) data[k] = String(data[k]).trim();
    window.location.hash = route('tasks', data);
  });
  const { tasks } = await api('tasks', { params: { status, tenant, limit: 200 } });
  return h(
    'section',
    { id: 'view-tasks' },
    pageHeader('Tasks', 'Durable MCP tasks that have not expired, newest first (the 200 newest that match).'),
    form,
    table(TASK_COLUMNS, tasks, { empty: 'No task matches these filters.' }),
  );
}

const TASK_COLUMNS = [
  { title: 'Task', cell: (t) => link(route('tasks', t.task_id), mono(short(t.task_id))) },
  { title: 'Tenant', cell: (t) => t.tenant },
  { title: 'Status', cell: (t) => statusBadge(t.status) },
  { title: 'Attempt', cell: (t) => num(t.attempt) },
  { title: 'Principal', cell: (t) => t.principal ?? h('span', { class: 'muted' }, '—') },
  { title: 'Created (UTC)', cell: (t) => time(t.created_at) },
  { title: 'Updated (UTC)', cell: (t) => time(t.last_updated_at) },
  { title: 'Message', cell: (t) => t.status_message ?? '' },
];

export async function taskView([taskId]) {
  const { task, attempts, events } = await api(`tasks/${encodeURIComponent(taskId)}`);
  const outcome = task.error ?? task.result ?? task.input_requests;
  return h(
    'section',
    { id: 'view-task' },
    h('nav', { class: 'crumbs' }, link('#/tasks', 'Tasks'), ' / ', task.tenant, ' / '),
    pageHeader(mono(task.task_id, 'title-id'), null),
    facts([
      ['Status', statusBadge(task.status)],
      ['Message', task.status_message],
      ['Attempt', num(task.attempt)],
      ['Principal', task.principal],
      ['Created (UTC)', time(task.created_at)],
      ['Updated (UTC)', time(task.last_updated_at)],
      ['Worker lease until', task.lease_expires_at ? time(task.lease_expires_at) : null],
      ['Expires (UTC)', time(task.expires_at)],
      outcome ? ['Outcome', h('pre', { class: 'data', id: 'task-outcome' }, JSON.stringify(outcome, null, 2))] : null,
    ]),
    h('h2', {}, 'Attempts'),
    table(ATTEMPT_COLUMNS, attempts, { empty: 'No attempt is kept.' }),
    h('h2', {}, `Events of attempt ${task.attempt}`),
    table(EVENT_COLUMNS, events, { empty: 'No event is retained.' }),
  );
}

const ATTEMPT_COLUMNS = [
  { title: 'Attempt', cell: (g) => num(g.epoch) },
  { title: 'Generation', cell: (g) => link(route('generations', g.generation), mono(short(g.generation))) },
  { title: 'State', cell: (g) => stateBadge(g) },
  { title: 'Producer', cell: (g) => g.producer ?? '' },
  { title: 'Events', cell: (g) => num(g.tail_seq) },
  { title: 'Opened (UTC)', cell: (g) => time(g.created_at) },
];

const EVENT_COLUMNS = [
  { title: 'Seq', cell: (e) => num(e.seq) },
  { title: 'Event', cell: (e) => (e.event ? mono(e.event) : '') },
  { title: 'Data', cell: (e) => h('span', { class: 'data' }, e.data.length > 200 ? `${e.data.slice(0, 199)}…` : e.data) },
];
