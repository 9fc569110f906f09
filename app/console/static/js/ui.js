// Shared pieces of the page: the hover card and the confirmation dialog.

import { append, h, replace } from './dom.js';

const tooltip = () => document.getElementById('tooltip');

/** Show a card of facts near (x, y) in page coordinates: rows are [label, value]. */
export function showTooltip(x, y, title, rows) {
  const tip = tooltip();
  replace(
    tip,
    h('div', { class: 'tooltip-title' }, title),
    h('dl', {}, rows.filter(Boolean).map(([label, value]) => [h('dt', {}, label), h('dd', {}, value ?? '—')])),
  );
  tip.hidden = false;
  const margin = 14;
  const { innerWidth, innerHeight, scrollX, scrollY } = window;
  const rect = tip.getBoundingClientRect();
  let left = x + margin;
  let top = y + margin;
  if (left - scrollX + rect.width > innerWidth - 8) left = x - rect.width - margin;
  if (top - scrollY + rect.height > innerHeight - 8) top = y - rect.height - margin;
  tip.style.left = `${Math.max(scrollX + 4, left)}px`;
  tip.style.top = `${Math.max(scrollY + 4, top)}px`;
}

export function hideTooltip() {
  tooltip().hidden = true;
}

/** Wire an element to show a card on hover and on keyboard focus. */
export function hoverCard(element, card) {
  const show = (x, y) => {
    const [title, rows] = card();
    showTooltip(x, y, title, rows);
  };
  element.addEventListener('mousemove', (e) => show(e.pageX, e.pageY));
  element.addEventListener('mouseleave', hideTooltip);
  element.addEventListener('focus', () => {
    const r = element.getBoundingClientRect();
    show(r.left + window.scrollX + 40, r.bottom + window.scrollY - 6);
  });
  element.addEventListener('blur', hideTooltip);
}

/**
 * Ask before an action. Resolves true only when the operator confirms; with `typed`, the
 * confirm button stays disabled until that exact text is typed (for what cannot be undone).
 */
export function confirmAction({ title, body, confirm, typed }) {
  const dialog = document.getElementById('confirm');
  const ok = document.getElementById('confirm-ok');
  const cancel = document.getElementById('confirm-cancel');
  const typedLabel = document.getElementById('confirm-typed');
  const input = document.getElementById('confirm-input');
  replace(document.getElementById('confirm-title'), title);
  replace(document.getElementById('confirm-body'), ...[body].flat());
  replace(ok, confirm);
  typedLabel.hidden = !typed;
  input.value = '';
  ok.disabled = Boolean(typed);
  if (typed) replace(document.getElementById('confirm-typed-label'), 'Type ', h('code', {}, typed), ' to confirm');
  input.oninput = () => {
    ok.disabled = input.value !== typed;
  };
  return new Promise((resolve) => {
    const finish = (answer) => {
      cancel.onclick = null;
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    cancel.onclick = () => finish(false);
    dialog.onclose = () => finish(dialog.returnValue === 'confirmed');
    document.getElementById('confirm-form').onsubmit = (e) => {
      e.preventDefault();
      if (!ok.disabled) finish(true);
    };
    dialog.returnValue = '';
    dialog.showModal();
    (typed ? input : cancel).focus();
  });
}

/** A short-lived message in the corner (an action's outcome). */
export function toast(kind, ...text) {
  const note = append(h('div', { class: ['toast', kind], role: 'status' }), text);
  document.body.append(note);
  setTimeout(() => note.remove(), 6000);
}
