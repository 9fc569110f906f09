// The console's entry point: sign-in, navigation between views, and rendering.

import { ApiError, api, forgetKey, hasKey, onUnauthorized, setKey } from './api.js';
import { h, replace } from './dom.js';
import { hideTooltip } from './ui.js';
import { decisionsView } from './view-decisions.js';
import { explainView } from './view-explain.js';
import { generationView } from './view-generation.js';
import { statsView } from './view-stats.js';
import { streamView } from './view-stream.js';
import { streamsView } from './view-streams.js';
import { taskView, tasksView } from './view-tasks.js';

const ROUTES = [
  [/^streams$/, 'streams', streamsView],
  [/^streams\/([^/]+)\/([^/]+)$/, 'streams', streamView],
  [/^generations\/([^/]+)$/, 'streams', generationView],
  [/^explain$/, 'explain', explainView],
  [/^decisions$/, 'decisions', decisionsView],
  [/^tasks$/, 'tasks', tasksView],
  [/^tasks\/([^/]+)$/, 'tasks', taskView],
  [/^stats$/, 'stats', statsView],
];

const main = document.getElementById('main');
let signedIn = false;
let openMode = false;
let rendering = 0;

/** Where we are: '#/streams/acme/s1?x=1' → {path: 'streams/acme/s1', query}. */
function location_() {
  const raw = window.location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = raw.split('?');
  return { path: path || 'streams', query: new URLSearchParams(query) };
}

async function render() {
  hideTooltip();
  if (!signedIn) return;
  const ticket = ++rendering;
  const { path, query } = location_();
  const found = ROUTES.map(([pattern, nav, view]) => [path.match(pattern), nav, view]).find(([m]) => m);
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', Boolean(found) && a.dataset.view === found[1]);
  }
  if (!found) {
    replace(main, h('p', { class: 'empty' }, 'No such view. ', h('a', { href: '#/streams' }, 'Back to the streams.')));
    return;
  }
  const [match, , view] = found;
  main.setAttribute('aria-busy', 'true');
  let content;
  try {
    const args = match.slice(1).map(decodeURIComponent); // throws on a malformed escape
    content = await view(args, query, { rerender: render });
  } catch (error) {
    content = failure(error);
  }
  if (ticket !== rendering) return; // a newer navigation won
  replace(main, content);
  main.removeAttribute('aria-busy');
}

function failure(error) {
  if (!(error instanceof ApiError)) {
    console.error(error);
    return h('div', { class: 'notice error', role: 'alert' }, `The console failed: ${error.message}`);
  }
  return h(
    'div',
    { class: 'notice error', role: 'alert' },
    h('strong', {}, error.status ? `${error.status} ${error.code}` : 'Unreachable'),
    ': ',
    error.message,
  );
}

function explainAuthError(error) {
  if (error.status === 401) return 'The service refused this key (401 unauthorized). Check it and try again.';
  if (error.status === 403) return 'This key is valid but has no admin scope (403 forbidden): use an admin key.';
  if (error.status === 0) return 'The service did not answer. Is it running?';
  return `The service answered ${error.status} ${error.code}: ${error.message}`;
}

function showSession() {
  const session = document.getElementById('session');
  document.getElementById('nav').hidden = !signedIn;
  if (!signedIn) return replace(session);
  if (openMode) {
    return replace(
      session,
      h('span', { class: 'badge open-mode', title: 'No keys are configured: the service serves loopback only, without keys.' }, 'open mode'),
    );
  }
  return replace(
    session,
    h('span', { class: 'signed-in' }, 'admin key'),
    h('button', { class: 'button small', type: 'button', id: 'sign-out', onclick: signOut }, 'Sign out'),
  );
}

function signOut() {
  forgetKey();
  signedIn = false;
  showSession();
  showLogin(null);
}

function showLogin(message) {
  signedIn = false;
  showSession();
  const input = h('input', {
    id: 'admin-key',
    type: 'password',
    name: 'key',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    placeholder: 'an admin key from EVENTLOG_KEYS',
  });
  const remember = h('input', { id: 'remember', type: 'checkbox', checked: true });
  const status = h('div', { id: 'login-status' }, message ? h('div', { class: 'notice error', role: 'alert' }, message) : null);
  const form = h(
    'form',
    { class: 'card login', id: 'login' },
    h('h1', {}, 'Sign in'),
    h('p', { class: 'muted' }, 'The console reads and acts through the admin API. Its data calls carry this key as a bearer header; no cookie is set.'),
    h('label', { for: 'admin-key' }, 'Admin key'),
    input,
    h('label', { class: 'check' }, remember, ' Keep it for this tab (sessionStorage; gone when the tab closes)'),
    h('button', { class: 'button primary', type: 'submit' }, 'Sign in'),
    status,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    replace(status, h('p', { class: 'muted' }, 'Checking…'));
    try {
      await api('streams', { params: { limit: 1 }, keyOverride: key });
    } catch (error) {
      replace(status, h('div', { class: 'notice error', role: 'alert' }, explainAuthError(error)));
      return;
    }
    setKey(key, remember.checked);
    signedIn = true;
    openMode = false;
    showSession();
    render();
  });
  replace(main, form);
  input.focus();
}

async function start() {
  // A 401 while signed in: the key was removed from the service's configuration.
  onUnauthorized((error) => {
    if (signedIn) {
      forgetKey();
      showLogin(explainAuthError(error));
    }
  });
  try {
    await api('streams', { params: { limit: 1 } });
    signedIn = true;
    openMode = !hasKey();
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      const hadKey = hasKey();
      forgetKey();
      return showLogin(hadKey || error.status === 403 ? explainAuthError(error) : null);
    }
    replace(main, failure(error));
    return;
  }
  showSession();
  render();
}

window.addEventListener('hashchange', render);
start();
