// The two actions an operator can take, each behind a confirmation.

import { api } from './api.js';
import { h } from './dom.js';
import { num, short } from './format.js';
import { confirmAction, toast } from './ui.js';

/** Force a generation terminal at its tail. Resolves to the updated generation or null. */
export async function terminate(g) {
  const yes = await confirmAction({
    title: `Terminate generation #${g.epoch}?`,
    body: [
      h('p', {}, 'Generation ', h('code', {}, g.generation), ` of stream `, h('code', {}, g.stream_id), ` becomes terminal at its tail (seq ${num(g.tail_seq)}).`),
      h('p', {}, 'Its writer’s further appends are refused (409 terminal), and resumes into it are answered reset/terminal under the default policy. This cannot be undone.'),
    ],
    confirm: 'Terminate',
  });
  if (!yes) return null;
  const done = await api(`generations/${encodeURIComponent(g.generation)}/terminate`, { method: 'POST' });
  toast('ok', `Generation ${short(g.generation)} is terminal at seq ${num(done.terminal_seq)}.`);
  return done;
}

/** Purge a stream's events (its tokens stay as tombstones). Resolves to the answer or null. */
export async function purge(streamId, tenant, retained) {
  const yes = await confirmAction({
    title: 'Purge this stream?',
    body: [
      h('p', {}, 'Every retained event of ', h('code', {}, streamId), ` (tenant `, h('code', {}, tenant), `) is deleted: ${num(retained)} events now.`),
      h('p', {}, 'Its generation tokens stay as tombstones, so clients holding them are told reset/expired, never invalid. The events cannot be brought back.'),
    ],
    confirm: 'Purge events',
    typed: streamId,
  });
  if (!yes) return null;
  const done = await api(`streams/${encodeURIComponent(streamId)}`, { method: 'DELETE', params: { tenant } });
  toast('ok', `Purged ${num(done.purged_events)} events; ${num(done.tombstoned)} generations are tombstones.`);
  return done;
}
