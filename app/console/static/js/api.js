// The admin API, called with the operator's key as a bearer header. The key lives in this
// module and, if the operator asks, in sessionStorage (this tab only): never in a cookie,
// so no request carries it unless this code adds it, and there is nothing for CSRF to use.

const STORAGE_KEY = 'mcp-eventlog.admin-key';
const BASE = new URL('../v1/', document.baseURI);

let key = sessionStorage.getItem(STORAGE_KEY);
const listeners = new Set();

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || `HTTP ${status}`);
    this.status = status;
    this.code = problem?.code || (status ? `http_${status}` : 'unreachable');
    this.problem = problem;
  }
}

export function hasKey() {
  return Boolean(key);
}

export function setKey(value, remember) {
  key = value;
  if (remember) sessionStorage.setItem(STORAGE_KEY, value);
  else sessionStorage.removeItem(STORAGE_KEY);
}

export function forgetKey() {
  key = null;
  sessionStorage.removeItem(STORAGE_KEY);
}

/** Called with the error whenever the service answers 401 (the key is gone or wrong). */
export function onUnauthorized(listener) {
  listeners.add(listener);
}

/** One call: api('streams', {params: {prefix}}), api('explain', {method: 'POST', body}). */
export async function api(path, { method = 'GET', params = {}, body, keyOverride } = {}) {
  const url = new URL(path, BASE);
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== '') url.searchParams.set(name, value);
  }
  const headers = { Accept: 'application/json' };
  const bearer = keyOverride === undefined ? key : keyOverride;
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, { code: 'unreachable', detail: 'The service did not answer.' });
  }
  const type = response.headers.get('content-type') || '';
  const payload = type.includes('json') ? await response.json() : null;
  if (!response.ok) {
    const error = new ApiError(response.status, payload);
    if (response.status === 401 && keyOverride === undefined) listeners.forEach((l) => l(error));
    throw error;
  }
  return payload;
}
