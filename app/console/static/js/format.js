// Numbers, bytes, times and states, the same way on every view.

import { h } from './dom.js';

export const num = (n) => (n ?? 0).toLocaleString('en-US');

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = -1;
  do {
    value /= 1024;
    unit += 1;
  } while (value >= 1024 && unit < units.length - 1);
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

const pad = (n) => String(n).padStart(2, '0');

/** 2026-11-30 12:01:03 (UTC, like the service's logs). */
export function time(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

export function clock(ms) {
  const d = new Date(ms);
  return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

export function ago(iso, now = Date.now()) {
  if (!iso) return '—';
  const seconds = Math.round((now - new Date(iso).getTime()) / 1000);
  const future = seconds < 0;
  const abs = Math.abs(seconds);
  const text =
    abs < 60 ? `${abs} s` : abs < 3600 ? `${Math.round(abs / 60)} min` : abs < 86400 ? `${Math.round(abs / 3600)} h` : `${Math.round(abs / 86400)} d`;
  return future ? `in ${text}` : `${text} ago`;
}

export function duration(ms) {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} days`;
}

/** The first characters of a token: enough to tell generations apart at a glance. */
export const short = (token) => (token && token.length > 10 ? `${token.slice(0, 8)}…` : token || '—');

/** Each generation is in one state, in the order the stats count them. */
export function state(g) {
  if (g.expired) return 'expired';
  if (g.terminal) return 'terminal';
  if (g.superseded) return 'superseded';
  if (g.abandoned) return 'abandoned';
  return 'live';
}

export const STATE_HELP = {
  live: 'the stream’s current generation, still being written',
  terminal: 'finished: its last event is the terminal one',
  superseded: 'a newer generation replaced it; its appends are fenced',
  abandoned: 'its writer’s lease ran out before it finished; its appends are fenced and resumes reset',
  expired: 'a tombstone: its events were purged, its token still answers reset/expired',
};

export function stateBadge(g) {
  const name = typeof g === 'string' ? g : state(g);
  return h('span', { class: ['badge', `state-${name}`], title: STATE_HELP[name] }, name);
}

export function verdictBadge(verdict) {
  return h('span', { class: ['badge', `verdict-${verdict}`] }, verdict);
}

/** Colours per reason, grouped by verdict (greens resume, ambers reset, reds invalid). */
export const REASONS = [
  ['resume', 'ok', '#2f9e44'],
  ['reset', 'superseded', '#f08c00'],
  ['reset', 'terminal', '#ffc078'],
  ['reset', 'expired', '#fcc419'],
  ['reset', 'evicted', '#e8590c'],
  ['reset', 'eviction_hole', '#a63c06'],
  ['reset', 'lost_tail', '#d9480f'],
  ['reset', 'abandoned', '#ff922b'],
  ['invalid', 'malformed_id', '#c92a2a'],
  ['invalid', 'unknown_generation', '#f03e3e'],
  ['invalid', 'cross_stream', '#a61e4d'],
  ['invalid', 'beyond_tail', '#f783ac'],
];

export const reasonColor = (reason) => REASONS.find((r) => r[1] === reason)?.[2] || '#868e96';
export const verdictOf = (reason) => REASONS.find((r) => r[1] === reason)?.[0] || 'invalid';

export function mono(text, cls) {
  return h('code', { class: ['mono', cls] }, text);
}
