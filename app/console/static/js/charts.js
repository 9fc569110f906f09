// Hand-drawn SVG charts: verdicts by reason over time, and horizontal bars.

import { h, s } from './dom.js';
import { REASONS, clock, duration, num, reasonColor, time } from './format.js';
import { hoverCard } from './ui.js';
import { ticks } from './timeline.js';

const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400].map((x) => x * 1000);

/**
 * Bucket decisions (each {decided_at, reason}) by time: the smallest round bucket that
 * gives at most `most` buckets over the span from the oldest to the newest entry.
 */
export function bucketize(decisions, most = 60) {
  const times = decisions.map((d) => new Date(d.decided_at).getTime());
  const from = Math.min(...times);
  const to = Math.max(...times);
  const step = STEPS.find((st) => (to - from) / st < most) || STEPS.at(-1);
  const first = Math.floor(from / step) * step;
  const count = Math.floor((to - first) / step) + 1;
  const buckets = Array.from({ length: count }, (_, i) => ({ start: first + i * step, counts: new Map(), total: 0 }));
  decisions.forEach((d, i) => {
    const b = buckets[Math.floor((times[i] - first) / step)];
    b.counts.set(d.reason, (b.counts.get(d.reason) || 0) + 1);
    b.total += 1;
  });
  return { from, to, step, buckets };
}

/** Stacked columns: one per bucket, one colour per reason (resume at the bottom). */
export function verdictChart(decisions) {
  const { step, buckets } = bucketize(decisions);
  const W = 1200;
  const H = 260;
  const left = 48;
  const right = 12;
  const top = 12;
  const bottom = 34;
  const max = Math.max(1, ...buckets.map((b) => b.total));
  const yTicks = ticks(max, 4);
  const yMax = Math.max(max, yTicks.at(-1));
  const slot = (W - left - right) / buckets.length;
  const barW = Math.max(1, Math.min(slot * 0.8, 40));
  const y = (v) => top + (H - top - bottom) * (1 - v / yMax);
  const svg = s('svg', { class: 'chart', id: 'verdict-chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Verdicts by reason over time' });
  for (const t of yTicks) {
    svg.append(s('line', { x1: left, x2: W - right, y1: y(t), y2: y(t), class: 'grid-line' }), s('text', { x: left - 6, y: y(t) + 4, 'text-anchor': 'end', class: 'tick' }, num(t)));
  }
  const labelEvery = Math.ceil(buckets.length / 8);
  buckets.forEach((b, i) => {
    const x = left + i * slot + (slot - barW) / 2;
    const group = s('g', { class: 'bucket' });
    let acc = 0;
    for (const [, reason] of REASONS) {
      const n = b.counts.get(reason) || 0;
      if (!n) continue;
      group.append(s('rect', { x, y: y(acc + n), width: barW, height: y(acc) - y(acc + n), fill: reasonColor(reason) }));
      acc += n;
    }
    for (const [reason, n] of b.counts) {
      if (!REASONS.some((r) => r[1] === reason)) {
        group.append(s('rect', { x, y: y(acc + n), width: barW, height: y(acc) - y(acc + n), fill: reasonColor(reason) }));
        acc += n;
      }
    }
    group.append(s('rect', { x: left + i * slot, y: top, width: slot, height: H - top - bottom, class: 'bucket-hit' }));
    hoverCard(group, () => [
      `${time(new Date(b.start).toISOString())} + ${duration(step)}`,
      [['decisions', num(b.total)], ...[...b.counts].sort((p, q) => q[1] - p[1]).map(([r, n]) => [r, num(n)])],
    ]);
    svg.append(group);
    if (i % labelEvery === 0) {
      svg.append(s('text', { x: left + i * slot + slot / 2, y: H - bottom + 16, 'text-anchor': 'middle', class: 'tick' }, clock(b.start)));
    }
  });
  svg.append(s('line', { x1: left, x2: W - right, y1: y(0), y2: y(0), class: 'axis-line' }));
  return svg;
}

/** A legend of the reasons that occur, in the table's order, with their verdict. */
export function reasonLegend(reasons) {
  return h(
    'div',
    { class: 'legend' },
    REASONS.filter(([, r]) => reasons.has(r)).map(([verdict, reason, color]) =>
      h('span', { class: 'legend-item' }, s('svg', { width: 12, height: 12, viewBox: '0 0 12 12', 'aria-hidden': 'true' }, s('rect', { width: 12, height: 12, rx: 2, fill: color })), `${reason}`, h('span', { class: 'muted' }, ` ${verdict}`)),
    ),
  );
}

/** Horizontal bars: items [{label, value, color, note}], scaled to the largest. */
export function barList(items, { id } = {}) {
  const max = Math.max(1, ...items.map((i) => i.value));
  return h(
    'div',
    { class: 'bar-list', id },
    items.map((i) =>
      h(
        'div',
        { class: 'bar-item' },
        h('span', { class: 'bar-label' }, i.label),
        h('span', { class: 'bar-track' }, h('span', { class: 'bar-fill', style: { width: `${(100 * i.value) / max}%`, backgroundColor: i.color } })),
        h('span', { class: 'bar-value' }, num(i.value), i.note ? h('span', { class: 'muted' }, ` ${i.note}`) : null),
      ),
    ),
  );
}
