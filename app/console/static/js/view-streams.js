// Streams: search by prefix and tenant, page with the API's cursor.

import { api } from './api.js';
import { h, link, pageHeader, route, table } from './dom.js';
import { ago, bytes, mono, num, short, stateBadge } from './format.js';

// Cursors of the pages before this one, per search, so "Previous" can go back.
const trail = new Map();

export async function streamsView(_args, query) {
  const prefix = query.get('prefix') || '';
  const tenant = query.get('tenant') || '';
  const limit = Number(query.get('limit')) || 50;
  const cursor = query.get('cursor') || '';
  const search = JSON.stringify([prefix, tenant, limit]);
  const page = await api('streams', { params: { prefix, tenant, limit, cursor } });
  let visited = trail.get(search) || [''];
  let here = visited.indexOf(cursor);
  if (here < 0) [visited, here] = [[cursor], 0]; // opened by URL: only "First" leads back
  trail.set(search, visited);
  const previous = here > 0 ? visited[here - 1] : undefined;

  const form = h(
    'form',
    { class: 'toolbar', id: 'stream-search' },
    field('Stream id prefix', h('input', { name: 'prefix', value: prefix, placeholder: 'e.g. mcp.7f3a', spellcheck: 'false', autocomplete: 'off' })),
    field('Tenant', h('input', { name: 'tenant', value: tenant, placeholder: 'any', spellcheck: 'false', autocomplete: 'off' })),
    field('Per page', select('limit', [25, 50, 100, 250], limit)),
    h('button', { class: 'button primary', type: 'submit' }, 'Search'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    window.location.hash = route('streams', { prefix: data.get('prefix').trim(), tenant: data.get('tenant').trim(), limit: data.get('limit') });
  });

  const goto = (c) => route('streams', { prefix, tenant, limit: limit === 50 ? null : limit, cursor: c });
  const next = page.next_cursor
    ? h('a', {
        class: 'button',
        id: 'next-page',
        href: goto(page.next_cursor),
        onclick: () => trail.set(search, [...visited.slice(0, here + 1), page.next_cursor]),
      }, 'Next page →')
    : null;
  const pager = h(
    'div',
    { class: 'pager' },
    cursor ? h('a', { class: 'button', href: goto('') }, '⇤ First') : null,
    previous !== undefined ? h('a', { class: 'button', href: goto(previous || '') }, '← Previous') : null,
    h('span', { class: 'muted' }, page.streams.length ? `${page.streams.length} stream${page.streams.length === 1 ? '' : 's'} on this page` : ''),
    next,
  );

  return h(
    'section',
    { id: 'view-streams' },
    pageHeader('Streams', 'Every tenant’s streams, ordered by id then tenant, with their current generation.'),
    form,
    table(
      [
        { title: 'Stream', cell: (s) => link(route('streams', s.tenant, s.stream_id), mono(s.stream_id)) },
        { title: 'Tenant', cell: (s) => s.tenant },
        { title: 'Generations', class: 'num', cell: (s) => num(s.generations) },
        { title: 'Current', cell: (s) => current(s.current) },
        { title: 'State', cell: (s) => (s.current ? stateBadge(s.current) : '—') },
        { title: 'Retained', class: 'num', cell: (s) => (s.current ? retained(s.current) : '—') },
        { title: 'Seq range', class: 'num', cell: (s) => (s.current ? range(s.current) : '—') },
        { title: 'Updated', cell: (s) => h('span', { title: s.updated_at }, ago(s.updated_at)) },
      ],
      page.streams,
      { empty: prefix || tenant ? 'No stream matches this search.' : 'No streams yet.' },
    ),
    pager,
  );
}

function current(g) {
  if (!g) return h('span', { class: 'muted' }, 'none (all deleted)');
  return h('span', {}, h('span', { class: 'epoch' }, `#${g.epoch}`), ' ', link(route('generations', g.generation), mono(short(g.generation))));
}

function retained(g) {
  return h('span', {}, num(g.retained_events), h('span', { class: 'muted' }, ` · ${bytes(g.retained_bytes)}`));
}

function range(g) {
  if (g.tail_seq === 0) return h('span', { class: 'muted' }, 'empty');
  if (g.expired) return h('span', { class: 'muted' }, `1–${num(g.tail_seq)} purged`);
  return `${num(g.head_seq)}–${num(g.tail_seq)}`;
}

export function field(label, control) {
  return h('label', { class: 'field' }, h('span', {}, label), control);
}

export function select(name, options, chosen) {
  return h(
    'select',
    { name },
    options.map((o) => {
      const [value, text] = Array.isArray(o) ? o : [o, o];
      return h('option', { value, selected: String(value) === String(chosen) }, text);
    }),
  );
}
