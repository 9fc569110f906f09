// One generation: its facts, and its events page by page (data shown as text, never HTML).

import { terminate } from './actions.js';
import { ApiError, api } from './api.js';
import { h, link, notice, pageHeader, route, table } from './dom.js';
import { ago, bytes, mono, num, state, stateBadge, time } from './format.js';
import { legend, timeline } from './timeline.js';
import { tile } from './view-stream.js';

const PAGE = 25;

export async function generationView([token], query, { rerender }) {
  const g = await api(`generations/${encodeURIComponent(token)}`);
  const start = Math.max(0, g.head_seq - 1);
  const after = query.has('after') ? Number(query.get('after')) : start;
  const goto = (a) => route('generations', token, { after: a });

  const actions = [
    g.tail_seq
      ? h('a', { class: 'button', href: route('explain', { id: `${g.generation}:${g.tail_seq}`, stream: g.stream_id, tenant: g.tenant }) }, 'Explain the tail id')
      : null,
    state(g) === 'live' // superseded ones are fenced already; nothing to stop
      ? h('button', { class: 'button danger', type: 'button', id: 'terminate', onclick: async () => (await terminate(g)) && rerender() }, 'Terminate…')
      : null,
  ];

  return h(
    'section',
    { id: 'view-generation' },
    h('nav', { class: 'crumbs' }, link('#/streams', 'Streams'), ' / ', link(route('streams', g.tenant, g.stream_id), mono(g.stream_id)), ` / #${g.epoch}`),
    pageHeader(h('span', {}, `Generation #${g.epoch} `, stateBadge(g)), h('span', {}, 'token ', mono(g.generation, 'selectable')), ...actions),
    h(
      'div',
      { class: 'summary' },
      tile('Seq range', g.tail_seq ? `1–${num(g.tail_seq)}` : 'no events', g.head_seq > 1 && !g.expired ? `head ${num(g.head_seq)} (older evicted)` : `head ${num(g.head_seq)}`),
      tile('Retained', `${num(g.retained_events)} events`, `${bytes(g.retained_bytes)} · max ${num(g.max_events)}`),
      tile('Reason', g.reason, g.producer ? `producer ${g.producer}` : 'no producer given'),
      tile('Terminal', g.terminal ? `at seq ${num(g.terminal_seq)}` : 'no', g.terminal_at ? time(g.terminal_at) : null),
      tile('Abandoned', g.abandoned ? 'yes' : 'no', g.abandoned_at ? time(g.abandoned_at) : `lease ${num(g.lease_seconds)} s`),
      tile(g.expired ? 'Expired' : 'Expires', g.expired ? ago(g.expired_at) : ago(g.expires_at), time(g.expired ? g.expired_at : g.expires_at)),
      tile('Supersedes', g.supersedes ? mono(g.supersedes.slice(0, 8) + '…') : '—', g.superseded ? `superseded ${ago(g.superseded_at)}` : 'not superseded'),
    ),
    ...(await events(g, after, start, goto)),
  );
}

async function events(g, after, start, goto) {
  const title = h('div', { class: 'card-title' }, h('h2', {}, 'Events'));
  const picture = (shown) =>
    h(
      'div',
      { class: 'card' },
      h('div', { class: 'card-title' }, h('h2', {}, 'Seq range'), h('span', { class: 'muted' }, shown ? `The outlined part is the page below (seq ${num(shown[0])}–${num(shown[1])}).` : '')),
      timeline([g], { onOpen: () => {}, shown }),
      legend(),
    );
  if (g.expired) {
    return [picture(null), h('div', { class: 'card' }, title, notice('info', 'This generation is a tombstone: its events were purged. Resumes of its ids are answered reset/expired.'))];
  }
  if (g.tail_seq === 0) return [picture(null), h('div', { class: 'card' }, title, h('p', { class: 'empty' }, 'No events yet.'))];
  let page;
  try {
    page = await api(`generations/${encodeURIComponent(g.generation)}/events`, { params: { after, limit: PAGE } });
  } catch (error) {
    if (error instanceof ApiError && (error.status === 410 || error.status === 409)) {
      return [picture(null), h(
        'div',
        { class: 'card' },
        title,
        notice('error', `${error.status} ${error.code}: ${error.message} `),
        h('a', { class: 'button', href: goto(start) }, 'Go to the oldest retained event'),
      )];
    }
    throw error;
  }
  const first = page.events[0]?.seq;
  const last = page.events.at(-1)?.seq;
  const form = h('form', { class: 'inline-form' }, h('label', {}, 'After seq ', h('input', { name: 'after', type: 'number', min: 0, max: g.tail_seq, value: after, class: 'narrow' })), h('button', { class: 'button small', type: 'submit' }, 'Go'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    window.location.hash = goto(Number(new FormData(form).get('after')) || 0);
  });
  const pager = h(
    'div',
    { class: 'pager' },
    after > start ? h('a', { class: 'button', href: goto(start) }, '⇤ Oldest') : null,
    after > start ? h('a', { class: 'button', href: goto(Math.max(start, after - PAGE)) }, '← Previous') : null,
    h('span', { class: 'muted' }, first ? `seq ${num(first)}–${num(last)} of ${num(g.head_seq)}–${num(g.tail_seq)}` : 'no events after this seq'),
    page.next_after !== null ? h('a', { class: 'button', id: 'next-events', href: goto(page.next_after) }, 'Next →') : null,
    page.next_after !== null ? h('a', { class: 'button', href: goto(Math.max(start, g.tail_seq - PAGE)) }, 'Newest ⇥') : null,
  );
  return [picture(first ? [first, last] : null), h(
    'div',
    { class: 'card' },
    h('div', { class: 'card-title' }, h('h2', {}, 'Events'), form),
    table(
      [
        { title: 'SSE id', class: 'id-col', cell: (e) => h('span', { class: 'event-id' }, mono(e.id, 'selectable'), ' ', link(route('explain', { id: e.id, stream: g.stream_id, tenant: g.tenant }), 'explain')) },
        { title: 'Seq', class: 'num', cell: (e) => num(e.seq) },
        { title: 'Type', cell: (e) => (e.event === null ? h('span', { class: 'muted' }, 'message') : mono(e.event)) },
        { title: 'Data', class: 'data-col', cell: (e) => [h('pre', { class: 'event-data' }, e.data), e.terminal ? h('span', { class: 'badge state-terminal' }, 'terminal event') : null] },
      ],
      page.events,
      { empty: 'No events after this seq.' },
    ),
    pager,
  )];
}
