// The timeline picture of a stream: one bar per generation, on one axis of seq numbers.
//
//   evicted part (hatched)  retained part (solid)  ▌terminal mark
//   ╰──── reason ────╮ the supersede chain: each superseded bar wraps to its successor
//
// Event k occupies [k-1, k] on the axis, so a bar from seq 1 to its tail spans [0, tail].

import { h, s } from './dom.js';
import { ago, bytes, num, short, state, time } from './format.js';
import { hideTooltip, hoverCard } from './ui.js';

const W = 1200;
const LABEL = 250;
const X0 = LABEL + 16;
const X1 = W - 190;
const ROW = 56;
const BAR = 16;
const TOP = 34;

export const STATE_FILL = { live: '#1c7ed6', terminal: '#5f3dc4', superseded: '#868e96', abandoned: '#e8590c', expired: 'none' };

export function timeline(generations, { onOpen, shown = null }) {
  const maxTail = Math.max(1, ...generations.map((g) => g.tail_seq));
  const x = (seq) => X0 + ((X1 - X0) * seq) / maxTail;
  const height = TOP + generations.length * ROW + 8;
  const rowOf = new Map(generations.map((g, i) => [g.generation, i]));
  const midY = (i) => TOP + i * ROW + ROW / 2;

  const svg = s('svg', {
    class: 'timeline',
    id: 'timeline',
    viewBox: `0 0 ${W} ${height}`,
    role: 'img',
    'aria-label': `Timeline of ${generations.length} generations`,
  });
  svg.append(defs(), axis(maxTail, x, height));

  generations.forEach((g, i) => svg.append(row(g, i, midY(i), x, generations, onOpen)));
  // The chain over the rows (it runs in the gaps between bars), deaf to the pointer.
  generations.forEach((g, i) => {
    const j = g.supersedes === null ? undefined : rowOf.get(g.supersedes);
    if (j !== undefined) svg.append(chainLink(generations[j], g, x(generations[j].tail_seq), midY(j), midY(i)));
  });
  if (shown) {
    // The events on the page below: seqs shown[0]..shown[1], i.e. [first-1, last] on the axis.
    const [first, last] = shown;
    svg.append(
      s('rect', { class: 'shown-window', x: x(first - 1) - 1, y: midY(0) - BAR / 2 - 5, width: Math.max(4, x(last) - x(first - 1) + 2), height: BAR + 10, rx: 3 }),
    );
  }
  return svg;
}

function defs() {
  return s(
    'defs',
    {},
    s(
      'pattern',
      { id: 'evicted-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
      s('rect', { width: 6, height: 6, fill: '#f1f3f5' }),
      s('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#adb5bd', 'stroke-width': 2.5 }),
    ),
    s('marker', { id: 'chain-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      s('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#495057' })),
  );
}

function axis(maxTail, x, height) {
  const group = s('g', { class: 'axis' });
  for (const tick of ticks(maxTail)) {
    group.append(
      s('line', { x1: x(tick), x2: x(tick), y1: TOP - 6, y2: height - 6, class: 'grid-line' }),
      s('text', { x: x(tick), y: TOP - 12, 'text-anchor': 'middle' }, num(tick)),
    );
  }
  group.append(s('text', { x: X0 - 8, y: TOP - 12, 'text-anchor': 'end', class: 'axis-title' }, 'seq'));
  return group;
}

/** About six round ticks from 0 to max. */
export function ticks(max, count = 6) {
  const raw = max / count;
  const magnitude = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((m) => m >= raw) || magnitude * 10;
  const out = [];
  for (let t = 0; t <= max + 1e-9; t += step) out.push(Math.round(t));
  return out;
}

function row(g, i, y, x, all, onOpen) {
  const name = state(g);
  const top = y - BAR / 2;
  const group = s('g', {
    class: ['generation-row', `state-${name}`],
    tabindex: 0,
    role: 'link',
    'data-generation': g.generation,
    'aria-label': `Generation ${g.epoch}, ${name}, seq 1 to ${g.tail_seq}`,
  });
  group.append(s('rect', { class: 'row-hit', x: 0, y: y - ROW / 2, width: W, height: ROW }));

  // Label: epoch, token, reason and producer.
  group.append(
    s('text', { x: 8, y: y - 3, class: 'row-epoch' }, `#${g.epoch}`),
    s('text', { x: 46, y: y - 3, class: 'row-token' }, short(g.generation)),
    s('text', { x: 8, y: y + 13, class: 'row-sub' }, clip(`${g.reason}${g.producer ? ' · ' + g.producer : ''}`, 38)),
  );

  if (g.tail_seq === 0) {
    group.append(
      s('circle', { cx: x(0), cy: y, r: 4, class: 'empty-mark' }),
      s('text', { x: x(0) + 10, y: y + 4, class: 'row-note' }, 'no events'),
    );
  } else if (g.expired) {
    group.append(s('rect', { x: x(0), y: top, width: Math.max(3, x(g.tail_seq) - x(0)), height: BAR, class: 'bar-expired', rx: 2 }));
  } else {
    const head = Math.min(g.head_seq - 1, g.tail_seq); // events 1..head-1 were evicted
    if (head > 0) {
      group.append(s('rect', { x: x(0), y: top, width: Math.max(2, x(head) - x(0)), height: BAR, class: 'bar-evicted' }));
    }
    if (g.tail_seq > head) {
      group.append(s('rect', { x: x(head), y: top, width: Math.max(3, x(g.tail_seq) - x(head)), height: BAR, fill: STATE_FILL[name], class: 'bar-retained' }));
    }
    if (hasHole(g)) {
      group.append(s('text', { x: x(g.tail_seq) + 6, y: y - 11, class: 'hole-mark' }, '⚠ hole'));
    }
  }
  if (g.terminal && g.terminal_seq !== null) {
    const tx = x(g.terminal_seq);
    group.append(
      s('rect', { x: tx - 2, y: top - 6, width: 4, height: BAR + 12, class: 'terminal-mark' }),
      s('path', { d: `M${tx + 2},${top - 6} l9,3.5 l-9,3.5 z`, class: 'terminal-flag' }),
    );
  }
  group.append(annotation(g, name, y));
  hoverCard(group, () => card(g, all));
  const open = () => {
    hideTooltip();
    onOpen(g);
  };
  group.addEventListener('click', open);
  group.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') open();
  });
  return group;
}

function annotation(g, name, y) {
  const label = s('text', { x: X1 + 22, y: y - 3, class: ['row-state', `state-${name}`] }, name);
  const kept = g.tail_seq === 0 ? 'empty' : g.expired ? `${num(g.tail_seq)} purged` : `${num(g.retained_events)} of ${num(g.tail_seq)} kept`;
  return s('g', {}, label, s('text', { x: X1 + 22, y: y + 13, class: 'row-sub' }, kept));
}

function chainLink(from, to, xEnd, y1, y2) {
  // From the end of the superseded bar, down into the gap, back to the start of the new one.
  const gap = y1 + ROW / 2;
  const xStart = X0 - 8;
  const r = 6;
  const d = [
    `M${xEnd + 4},${y1 + BAR / 2 - 2}`,
    `V${gap - r}`,
    `Q${xEnd + 4},${gap} ${xEnd - r + 4},${gap}`,
    `H${xStart + r}`,
    `Q${xStart},${gap} ${xStart},${gap + r}`,
    `V${y2}`,
    `H${X0 - 2}`,
  ].join(' ');
  const labelX = Math.max(X0 + 40, Math.min(xEnd - 40, (xEnd + X0) / 2));
  return s(
    'g',
    { class: 'chain' },
    s('path', { d, class: 'chain-line', 'marker-end': 'url(#chain-arrow)' }),
    s('rect', { x: labelX - 48, y: gap - 8, width: 96, height: 16, rx: 8, class: 'chain-label-bg' }),
    s('text', { x: labelX, y: gap + 4, 'text-anchor': 'middle', class: 'chain-label' }, `${to.reason} → #${to.epoch}`),
  );
}

/** Retained events fewer than the head..tail range: a hole (resume answers eviction_hole). */
function hasHole(g) {
  return !g.expired && g.tail_seq >= g.head_seq && g.retained_events < g.tail_seq - g.head_seq + 1;
}

function card(g, all) {
  const successor = all.find((o) => o.supersedes === g.generation);
  const predecessorKnown = g.supersedes === null || all.some((o) => o.generation === g.supersedes);
  return [
    `Generation #${g.epoch} · ${state(g)}`,
    [
      ['token', g.generation],
      ['reason', g.reason],
      ['producer', g.producer ?? '—'],
      ['events', g.tail_seq === 0 ? 'none yet' : `seq 1–${num(g.tail_seq)}`],
      !g.expired && g.head_seq > 1 ? ['evicted', `seq 1–${num(g.head_seq - 1)} (max_events ${num(g.max_events)})`] : null,
      ['retained', g.expired ? 'none (tombstone)' : `${num(g.retained_events)} events, ${bytes(g.retained_bytes)}`],
      hasHole(g) ? ['hole', 'retained events are not contiguous'] : null,
      g.terminal ? ['terminal', `at seq ${num(g.terminal_seq)}, ${time(g.terminal_at)}`] : null,
      g.abandoned ? ['abandoned', `${time(g.abandoned_at)} (writer’s lease ran out)`] : null,
      g.superseded ? ['superseded', `${time(g.superseded_at)}${successor ? ` by #${successor.epoch} (${successor.reason})` : ''}`] : null,
      g.expired ? ['expired', time(g.expired_at)] : ['expires', `${time(g.expires_at)} (${ago(g.expires_at)})`],
      g.supersedes ? ['supersedes', predecessorKnown ? short(g.supersedes) : `${short(g.supersedes)} (deleted)`] : null,
      ['created', time(g.created_at)],
      ['last append', `${time(g.last_append_at)} (${ago(g.last_append_at)})`],
    ],
  ];
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** The legend, as HTML with small SVG swatches. */
export function legend() {
  const swatch = (...shapes) => s('svg', { width: 28, height: 14, viewBox: '0 0 28 14', 'aria-hidden': 'true' }, ...shapes);
  const item = (picture, text) => h('span', { class: 'legend-item' }, picture, text);
  return h(
    'div',
    { class: 'legend' },
    item(swatch(s('rect', { x: 1, y: 2, width: 26, height: 10, fill: STATE_FILL.live })), 'retained, live'),
    item(swatch(s('rect', { x: 1, y: 2, width: 26, height: 10, fill: STATE_FILL.terminal })), 'retained, terminal'),
    item(swatch(s('rect', { x: 1, y: 2, width: 26, height: 10, fill: STATE_FILL.superseded })), 'retained, superseded'),
    item(swatch(defs(), s('rect', { x: 1, y: 2, width: 26, height: 10, class: 'bar-evicted' })), 'evicted'),
    item(swatch(s('rect', { x: 1, y: 2, width: 26, height: 10, class: 'bar-expired', rx: 2 })), 'expired (tombstone)'),
    item(swatch(s('rect', { x: 12, y: 0, width: 4, height: 14, class: 'terminal-mark' }), s('path', { d: 'M16,0 l8,3.5 l-8,3.5 z', class: 'terminal-flag' })), 'terminal event'),
    item(swatch(s('path', { d: 'M2,3 V7 H24', class: 'chain-line', fill: 'none' })), 'superseded by (chain)'),
  );
}
