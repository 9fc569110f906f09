// One stream: its generations as a timeline, the supersede chain, and the actions.

import { purge, terminate } from './actions.js';
import { api } from './api.js';
import { h, link, pageHeader, route, table } from './dom.js';
import { ago, bytes, mono, num, short, stateBadge, time } from './format.js';
import { legend, timeline } from './timeline.js';

export async function streamView([tenant, streamId], _query, { rerender }) {
  const stream = await api(`streams/${encodeURIComponent(streamId)}`, { params: { tenant } });
  const gens = stream.generations;
  const current = gens.find((g) => !g.superseded) || null;
  const retained = gens.reduce((n, g) => n + g.retained_events, 0);
  const retainedBytes = gens.reduce((n, g) => n + g.retained_bytes, 0);
  const open = (g) => {
    window.location.hash = route('generations', g.generation);
  };

  const actions = [];
  if (current && !current.terminal && !current.expired) {
    actions.push(
      h('button', { class: 'button', type: 'button', id: 'terminate-current', onclick: async () => (await terminate(current)) && rerender() }, `Terminate #${current.epoch}`),
    );
  }
  actions.push(
    h('button', { class: 'button danger', type: 'button', id: 'purge-stream', disabled: retained === 0, onclick: async () => (await purge(stream.stream_id, stream.tenant, retained)) && rerender() }, 'Purge events…'),
  );

  return h(
    'section',
    { id: 'view-stream' },
    h('nav', { class: 'crumbs' }, link('#/streams', 'Streams'), ' / ', stream.tenant, ' / '),
    pageHeader(mono(stream.stream_id, 'title-id'), null, ...actions),
    h(
      'div',
      { class: 'summary' },
      tile('Tenant', stream.tenant),
      tile('Generations', `${num(gens.length)} kept`, gens.length ? `epochs ${gens[0].epoch}–${gens.at(-1).epoch}` : null),
      tile('Current', current ? h('span', {}, `#${current.epoch} `, stateBadge(current)) : '—'),
      tile('Retained', `${num(retained)} events`, bytes(retainedBytes)),
      tile('Created', ago(stream.created_at), time(stream.created_at)),
      tile('Updated', ago(stream.updated_at), time(stream.updated_at)),
    ),
    h(
      'div',
      { class: 'card' },
      h('div', { class: 'card-title' }, h('h2', {}, 'Timeline'), h('span', { class: 'muted' }, 'Hover a generation for its producer and reason; click to open its events.')),
      gens.length ? timeline(gens, { onOpen: open }) : h('p', { class: 'empty' }, 'This stream has no generation left.'),
      legend(),
    ),
    h('h2', {}, 'Generations'),
    table(
      [
        { title: 'Epoch', class: 'num', cell: (g) => `#${g.epoch}` },
        { title: 'Token', cell: (g) => link(route('generations', g.generation), mono(short(g.generation))) },
        { title: 'State', cell: (g) => stateBadge(g) },
        { title: 'Reason', cell: (g) => g.reason },
        { title: 'Producer', cell: (g) => g.producer ?? h('span', { class: 'muted' }, '—') },
        { title: 'Head–tail', class: 'num', cell: (g) => (g.tail_seq ? `${num(g.head_seq)}–${num(g.tail_seq)}` : 'empty') },
        { title: 'Retained', class: 'num', cell: (g) => `${num(g.retained_events)} · ${bytes(g.retained_bytes)}` },
        { title: 'Created', cell: (g) => h('span', { title: g.created_at }, time(g.created_at)) },
        { title: '', cell: (g) => (g.tail_seq ? link(route('explain', { id: `${g.generation}:${g.tail_seq}`, stream: stream.stream_id, tenant: stream.tenant }), 'explain tail') : '') },
      ],
      gens,
    ),
  );
}

export function tile(label, value, sub) {
  return h('div', { class: 'tile' }, h('div', { class: 'tile-label' }, label), h('div', { class: 'tile-value' }, value), sub ? h('div', { class: 'tile-sub' }, sub) : null);
}
