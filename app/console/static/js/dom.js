// Building the page. Every string goes in as a text node or an attribute value: nothing in
// the console parses a string as HTML (the page's Trusted Types policy forbids it anyway).

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An HTML element: h('a', {href: '#/x', class: 'link'}, 'text', child, ...). */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  setAttributes(element, attrs);
  append(element, children);
  return element;
}

/** An SVG element, the same way. */
export function s(tag, attrs = {}, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  setAttributes(element, attrs);
  append(element, children);
  return element;
}

/** Append children: nodes as they are, anything else as text; null/false/undefined skipped. */
export function append(element, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** Replace an element's content. */
export function replace(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}

function setAttributes(element, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on')) {
      if (typeof value !== 'function') throw new TypeError(`${name} must be a function`);
      element.addEventListener(name.slice(2), value);
    } else if (name === 'class') {
      element.setAttribute('class', [value].flat().filter(Boolean).join(' '));
    } else if (name === 'style') {
      Object.assign(element.style, value); // CSSOM, which the style-src policy allows
    } else if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
}

/** A link to a console route: the parts are encoded, so an id can never break out. */
export function route(...parts) {
  const last = parts.at(-1);
  const query = last && typeof last === 'object' ? parts.pop() : null;
  let hash = '#/' + parts.map((p) => encodeURIComponent(String(p))).join('/');
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== null && v !== undefined && v !== '') params.set(k, String(v));
    }
    const text = params.toString();
    if (text) hash += '?' + text;
  }
  return hash;
}

export function link(href, ...children) {
  return h('a', { href }, ...children);
}

/** A heading row: title, an optional subtitle and actions on the right. */
export function pageHeader(title, subtitle, ...actions) {
  return h(
    'div',
    { class: 'page-header' },
    h('div', {}, h('h1', {}, title), subtitle ? h('p', { class: 'subtitle' }, subtitle) : null),
    h('div', { class: 'page-actions' }, ...actions),
  );
}

/** A definition grid of facts: [[label, value], ...]; values may be nodes. */
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.filter(Boolean).map(([label, value]) => [h('dt', {}, label), h('dd', {}, value ?? '—')]),
  );
}

export function notice(kind, ...children) {
  return h('div', { class: ['notice', kind], role: kind === 'error' ? 'alert' : 'status' }, ...children);
}

/** A table: columns [{title, cell: row => node|string, class}], rows. */
export function table(columns, rows, { empty = 'Nothing here.', rowClass } = {}) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h(
    'table',
    { class: 'grid' },
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.class }, c.title)))),
    h(
      'tbody',
      {},
      rows.map((row) =>
        h('tr', { class: rowClass ? rowClass(row) : null }, columns.map((c) => h('td', { class: c.class }, c.cell(row)))),
      ),
    ),
  );
}
