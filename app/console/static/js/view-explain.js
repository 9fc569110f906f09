// Explain: the decision table for one Last-Event-ID, row by row, as a dry run.

import { api } from './api.js';
import { h, link, pageHeader, route } from './dom.js';
import { mono, num, short, stateBadge, verdictBadge } from './format.js';
import { field } from './view-streams.js';

// The contract's table, for the rows a decision did not reach (the API returns the
// rows it checked, up to the one that matched, with its own wording of each condition).
const TABLE = [
  ['1', 'invalid', 'malformed_id', 'the id is not <token>:<seq>'],
  ['2', 'invalid', 'unknown_generation', 'no generation has that token (for this tenant)'],
  ['3', 'invalid', 'cross_stream', 'the token’s stream is not the stream asked about'],
  ['4', 'invalid', 'beyond_tail', 'seq > tail_seq + the writer’s pipeline (> terminal_seq on a terminal one)'],
  ['4a', 'reset', 'lost_tail', 'seq > tail_seq (within the window) of a live generation, still after waiting'],
  ['4b', 'reset', 'abandoned', 'the generation is abandoned (writer’s lease ran out) and still current'],
  ['5', 'reset', 'superseded', 'the generation is not the stream’s current one'],
  ['6', 'reset', 'terminal', 'the generation is terminal (terminal_resume policy)'],
  ['7', 'reset', 'expired', 'the generation’s events were purged (tombstone kept)'],
  ['8', 'reset', 'evicted', 'seq < head_seq - 1 (events after the id were evicted)'],
  ['9', 'reset', 'eviction_hole', 'the retained events in (seq, tail] are not contiguous'],
  ['10', 'resume', 'ok', 'otherwise'],
];

const MEANING = {
  resume: 'Safe to resume: the client gets exactly the events it missed.',
  reset: 'Refuse to splice: the client must discard its partial state and start over.',
  invalid: 'The client is mis-tracking its state, or the id is spoofed: close with an error, never reset silently.',
};

export async function explainView(_args, query) {
  const id = query.get('id') || '';
  const stream = query.get('stream') || '';
  const tenant = query.get('tenant') || '';
  const form = h(
    'form',
    { class: 'toolbar explain-form', id: 'explain-form' },
    field('Last-Event-ID', h('input', { name: 'id', id: 'explain-id', value: id, required: true, placeholder: '<token>:<seq>', spellcheck: 'false', autocomplete: 'off', class: 'wide' })),
    field('Stream (optional)', h('input', { name: 'stream', id: 'explain-stream', value: stream, placeholder: 'as the resume route names it', spellcheck: 'false', autocomplete: 'off' })),
    field('Tenant (optional)', h('input', { name: 'tenant', value: tenant, placeholder: 'look up as this tenant', spellcheck: 'false', autocomplete: 'off' })),
    h('button', { class: 'button primary', type: 'submit' }, 'Explain'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next = route('explain', { id: data.get('id').trim(), stream: data.get('stream').trim(), tenant: data.get('tenant').trim() });
    // The same claim again still asks again: the answer may have changed since.
    if (next === window.location.hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
    else window.location.hash = next;
  });
  const header = pageHeader('Explain a resume', 'Paste a client’s Last-Event-ID: each row of the decision table is checked in order, first match wins. A dry run: nothing is delivered or recorded.');
  if (!id) return h('section', { id: 'view-explain' }, header, form);
  const body = { last_event_id: id };
  if (stream) body.stream_id = stream;
  if (tenant) body.tenant = tenant;
  const answer = await api('explain', { method: 'POST', body });
  return h('section', { id: 'view-explain' }, header, form, result(answer));
}

function result(a) {
  const checked = new Map(a.checks.map((c) => [c.row, c]));
  const rows = TABLE.map(([row, verdict, reason, condition]) => {
    const check = checked.get(row);
    const outcome = !check ? 'not reached' : check.matched ? 'matched' : 'no';
    return h(
      'tr',
      { class: ['check', check ? (check.matched ? `decided verdict-row-${verdict}` : 'passed') : 'unreached'], 'data-row': row },
      h('td', { class: 'num' }, row),
      h('td', {}, check ? check.condition : condition),
      h('td', {}, verdictBadge(verdict)),
      h('td', {}, mono(reason)),
      h('td', { class: 'outcome' }, check?.matched ? '◀ decides' : outcome),
    );
  });
  return h(
    'div',
    { class: 'explain-result', id: 'explain-result' },
    h(
      'div',
      { class: ['verdict-banner', `verdict-${a.verdict}`] },
      h('div', { class: 'verdict-line' }, verdictBadge(a.verdict), ' ', h('strong', { class: 'verdict-reason' }, a.reason)),
      h('div', {}, a.detail),
      h('div', { class: 'muted' }, MEANING[a.verdict]),
    ),
    h(
      'div',
      { class: 'explain-grid' },
      h(
        'div',
        { class: 'card' },
        h('h2', {}, 'The decision table'),
        h('table', { class: 'grid decision-table' }, h('thead', {}, h('tr', {}, ['#', 'condition', 'verdict', 'reason', 'outcome'].map((t) => h('th', {}, t)))), h('tbody', {}, rows)),
      ),
      h('div', { class: 'card' }, h('h2', {}, 'What a resume would deliver'), delivery(a), h('h2', {}, 'The claim'), claim(a)),
    ),
  );
}

function delivery(a) {
  const d = a.would_deliver;
  const discard = a.discard_client_state ? h('p', {}, h('strong', {}, 'discard_client_state: true'), ' — the client drops what it accumulated.') : null;
  if (d) {
    const what = d.events === 0 ? 'no events: the client has missed nothing' : `${num(d.events)} event${d.events === 1 ? '' : 's'}`;
    return h(
      'div',
      { id: 'would-deliver' },
      h('p', { class: 'deliver-line' }, `${a.verdict === 'resume' ? 'Resume with' : 'Start over with'} ${what} of generation `, link(route('generations', d.generation, { after: d.after }), mono(short(d.generation))), ` after seq ${num(d.after)}.`),
      discard,
    );
  }
  const text =
    a.verdict === 'invalid'
      ? 'Nothing. The caller closes the stream with an error event.'
      : 'Nothing. The caller opens a new generation and re-executes the request.';
  return h('div', { id: 'would-deliver' }, h('p', { class: 'deliver-line' }, text), discard);
}

function claim(a) {
  const g = a.generation;
  return h(
    'dl',
    { class: 'facts' },
    h('dt', {}, 'Last-Event-ID'),
    h('dd', {}, mono(a.last_event_id, 'selectable')),
    h('dt', {}, 'parsed'),
    h('dd', {}, a.claim ? h('span', {}, 'token ', mono(short(a.claim.token)), ', seq ', num(a.claim.seq)) : 'not an id'),
    h('dt', {}, 'asked on stream'),
    h('dd', {}, a.stream_id ? mono(a.stream_id) : h('span', { class: 'muted' }, 'none (the id’s own stream)')),
    g ? [
      h('dt', {}, 'generation'),
      h('dd', {}, link(route('generations', g.generation), `#${g.epoch} `), stateBadge(g), ' of ', link(route('streams', g.tenant, g.stream_id), mono(g.stream_id))),
      h('dt', {}, 'head / tail'),
      h('dd', {}, `${num(g.head_seq)} / ${num(g.tail_seq)}${g.terminal ? `, terminal at ${num(g.terminal_seq)}` : ''}`),
    ] : null,
  );
}
