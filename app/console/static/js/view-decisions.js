// The decision log: filters, a chart of verdicts by reason over time, and the entries.

import { api } from './api.js';
import { h, link, notice, pageHeader, replace, route, table } from './dom.js';
import { REASONS, duration, mono, num, short, time, verdictBadge } from './format.js';
import { bucketize, reasonLegend, verdictChart } from './charts.js';
import { field, select } from './view-streams.js';

export async function decisionsView(_args, query) {
  const filters = {
    stream_id: query.get('stream_id') || '',
    tenant: query.get('tenant') || '',
    verdict: query.get('verdict') || '',
    reason: query.get('reason') || '',
  };
  const limit = Number(query.get('limit')) || 500;
  const form = h(
    'form',
    { class: 'toolbar', id: 'decision-filters' },
    field('Stream', h('input', { name: 'stream_id', value: filters.stream_id, placeholder: 'any', spellcheck: 'false', autocomplete: 'off' })),
    field('Tenant', h('input', { name: 'tenant', value: filters.tenant, placeholder: 'any', spellcheck: 'false', autocomplete: 'off' })),
    field('Verdict', select('verdict', [['', 'any'], 'resume', 'reset', 'invalid'], filters.verdict)),
    field('Reason', select('reason', [['', 'any'], ...REASONS.map((r) => r[1])], filters.reason)),
    field('Newest', select('limit', [[100, '100'], [500, '500'], [1000, '1,000']], limit)),
    h('button', { class: 'button primary', type: 'submit' }, 'Filter'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    for (const k of Object.keys(data)) data[k] = String(data[k]).trim();
    window.location.hash = route('decisions', data);
  });
  const { decisions } = await api('decisions', { params: { ...filters, limit } });
  const header = pageHeader('Decisions', 'The recent resume decisions from the audit log (bounded by EVENTLOG_DECISION_LOG_MAX_ROWS and _MAX_AGE_SECONDS), newest first.');
  if (!decisions.length) {
    return h('section', { id: 'view-decisions' }, header, form, h('p', { class: 'empty' }, 'No decision matches these filters.'));
  }
  const { from, to, step } = bucketize(decisions);
  const full = decisions.length === limit;
  const reasons = new Set(decisions.map((d) => d.reason));
  const counts = { resume: 0, reset: 0, invalid: 0 };
  decisions.forEach((d) => (counts[d.verdict] = (counts[d.verdict] || 0) + 1));
  return h(
    'section',
    { id: 'view-decisions' },
    header,
    form,
    h(
      'div',
      { class: 'card' },
      h(
        'div',
        { class: 'card-title' },
        h('h2', {}, 'Verdicts by reason over time'),
        h('span', { class: 'totals' }, ...['resume', 'reset', 'invalid'].map((v) => h('span', {}, verdictBadge(v), ` ${num(counts[v])}`))),
      ),
      h(
        'p',
        { class: 'muted', id: 'chart-window' },
        `The ${num(decisions.length)} ${full ? 'newest ' : ''}decision${decisions.length === 1 ? '' : 's'} matching these filters, from ${time(new Date(from).toISOString())} to ${time(new Date(to).toISOString())} UTC (${duration(to - from)}), in buckets of ${duration(step)}.`,
      ),
      full ? notice('info', `Older decisions exist beyond this window: raise “Newest” (up to 1,000) or narrow the filters.`) : null,
      verdictChart(decisions),
      reasonLegend(reasons),
    ),
    entries(decisions),
  );
}

const SHOWN = 50;

// The chart uses every entry fetched; the table shows them 50 at a time.
function entries(decisions) {
  const holder = h('div', { id: 'decision-entries' });
  const show = (count) => {
    const more = decisions.length - count;
    replace(
      holder,
      table(COLUMNS, decisions.slice(0, count)),
      more > 0
        ? h('div', { class: 'pager' }, h('span', { class: 'muted' }, `${num(count)} of ${num(decisions.length)} shown`), h('button', { class: 'button', type: 'button', onclick: () => show(count + SHOWN) }, `Show ${num(Math.min(SHOWN, more))} more`))
        : null,
    );
  };
  show(SHOWN);
  return holder;
}

const COLUMNS = [
  { title: 'Decided (UTC)', cell: (d) => time(d.decided_at) },
  { title: 'Tenant', cell: (d) => d.tenant },
  { title: 'Stream', cell: (d) => (d.stream_id ? link(route('streams', d.tenant, d.stream_id), mono(d.stream_id)) : h('span', { class: 'muted' }, '(by id)')) },
  { title: 'Last-Event-ID', cell: (d) => mono(d.last_event_id.length > 40 ? `${d.last_event_id.slice(0, 39)}…` : d.last_event_id) },
  { title: 'Verdict', cell: (d) => verdictBadge(d.verdict) },
  { title: 'Reason', cell: (d) => mono(d.reason) },
  { title: 'Delivered', cell: (d) => (d.generation ? h('span', {}, `${num(d.events)} of `, link(route('generations', d.generation), mono(short(d.generation)))) : h('span', { class: 'muted' }, 'nothing')) },
  { title: '', cell: (d) => link(route('explain', { id: d.last_event_id, stream: d.stream_id, tenant: d.tenant }), 'explain now') },
];
