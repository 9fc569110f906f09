// Stats: what the log holds, and verdicts by reason over the audit log's window.

import { api } from './api.js';
import { h, pageHeader } from './dom.js';
import { STATE_HELP, bytes, num, reasonColor } from './format.js';
import { barList } from './charts.js';
import { STATE_FILL } from './timeline.js';
import { tile } from './view-stream.js';

export async function statsView() {
  const st = await api('stats');
  const g = st.generations;
  const totalGens = g.live + g.terminal + g.superseded + (g.abandoned || 0) + g.expired;
  const decisions = st.verdicts.reduce((n, v) => n + v.count, 0);
  const byVerdict = (name) => st.verdicts.filter((v) => v.verdict === name).reduce((n, v) => n + v.count, 0);
  const share = (n, of) => (of ? `${((100 * n) / of).toFixed(n / of < 0.1 ? 1 : 0)}%` : '');
  const states = ['live', 'terminal', 'superseded', 'abandoned', 'expired'];
  return h(
    'section',
    { id: 'view-stats' },
    pageHeader('Stats', 'Counts across every tenant.'),
    h(
      'div',
      { class: 'summary' },
      tile('Streams', num(st.streams)),
      tile('Generations', num(totalGens), `${num(g.live)} live`),
      tile('Retained events', num(st.retained_events)),
      tile('Retained bytes', bytes(st.retained_bytes), `${num(st.retained_bytes)} B of event data`),
      tile('Decisions logged', num(decisions), decisions ? `${share(byVerdict('invalid'), decisions)} invalid` : null),
    ),
    h(
      'div',
      { class: 'stats-grid' },
      h(
        'div',
        { class: 'card' },
        h('h2', {}, 'Generations by state'),
        h('div', { class: 'stacked', role: 'img', 'aria-label': 'generations by state' },
          states.map((name) => (g[name] ? h('span', { class: ['stacked-part', `state-${name}`], style: { flexGrow: String(g[name]) }, title: `${name}: ${num(g[name])}` }) : null))),
        barList(
          states.map((name) => ({ label: name, value: g[name], color: name === 'expired' ? '#ced4da' : STATE_FILL[name], note: share(g[name], totalGens) })),
          { id: 'generation-states' },
        ),
        h('p', { class: 'muted small' }, 'Each generation counts once: expired, else terminal, else superseded, else abandoned, else live. Expired: ', STATE_HELP.expired, '.'),
      ),
      h(
        'div',
        { class: 'card' },
        h('h2', {}, 'Verdicts by reason'),
        st.verdicts.length
          ? barList(
              [...st.verdicts].sort((a, b) => b.count - a.count).map((v) => ({ label: `${v.verdict} · ${v.reason}`, value: v.count, color: reasonColor(v.reason), note: share(v.count, decisions) })),
              { id: 'verdict-bars' },
            )
          : h('p', { class: 'empty' }, 'No decision recorded yet.'),
        h('p', { class: 'muted small' }, 'Over the decision audit log’s window (its newest EVENTLOG_DECISION_LOG_MAX_ROWS entries, at most EVENTLOG_DECISION_LOG_MAX_AGE_SECONDS old). The per-process counters are on /metrics.'),
      ),
    ),
  );
}
