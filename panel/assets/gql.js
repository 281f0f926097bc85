// The panel's only ways to the server: GraphQL over POST /graphql, and the graphql-transport-ws protocol on the
// same path for subscriptions. Both send the token from local storage.

const TOKEN_KEY = 'adal.token';

export const auth = {
  get token() {
    try { return localStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
  },
  set(token) { localStorage.setItem(TOKEN_KEY, token); },
  clear() { try { localStorage.removeItem(TOKEN_KEY); } catch { /* storage unavailable */ } },
};

// GraphQLError is what every failed call rejects with: the server's message and extensions.code, or a
// transport problem (code NETWORK / HTTP_<status>).
export class GraphQLError extends Error {
  constructor(message, { code = '', path = null, status = 0, errors = [] } = {}) {
    super(message || 'Unknown error');
    this.name = 'GraphQLError';
    this.code = code;
    this.path = path;
    this.status = status;
    this.errors = errors;
  }
}

// What each error code is called, and what to do about it: the server's message says what went wrong, the
// advice what next.
const CODES = {
  INSUFFICIENT_CREDITS: ['Out of credits', 'The balance is empty. An operator can grant credits, or an owner can switch to a plan with more.'],
  UNAUTHENTICATED: ['Not signed in', 'Sign in again: your token expired or was revoked. An operator can print a sign-in link with `server signin-link`.'],
  FORBIDDEN: ['Not allowed', 'Your role cannot do this. Ask the tenant\u2019s owner or an operator.'],
  NOT_FOUND: ['Not found', 'It may have been deleted, expired, or belong to another tenant. Reload the page to see what is there now.'],
  INVALID_INPUT: ['Invalid input', 'Correct the value and try again.'],
  CONFLICT: ['Conflict', 'It changed in the meantime. Reload the page and try again.'],
  UNAVAILABLE: ['Server busy', 'The server is busy. Try again in a moment.'],
  RESPONSE_TOO_LARGE: ['Too much at once', 'The answer would be too large. Ask for fewer items at once.'],
  TOO_MANY_SUBSCRIPTIONS: ['Too many live views', 'Too many live views are open. Close some tabs and reload.'],
  INTERNAL: ['Server error', 'The server failed. Try again; if it keeps failing, its log says why.'],
  NETWORK: ['Server unreachable', 'Check that the Adal server is running and reachable, then try again.'],
  GRAPHQL_VALIDATION_FAILED: ['Unsupported query'],
  GRAPHQL_PARSE_FAILED: ['Unsupported query'],
};

// describe is err's entry in CODES: for an HTTP_<status> code, or an unknown one, the fallback given.
function describe(err, fallback) {
  if (err && CODES[err.code]) return CODES[err.code];
  if (err && err.code && err.code.startsWith('HTTP_')) return ['Unexpected server response', 'Something between the browser and Adal answered instead of it. Check the address and any proxy.'];
  return fallback;
}

// errorTitle is a short human heading for an error, from its code.
export const errorTitle = (err) => describe(err, ['Something went wrong'])[0];

// errorAdvice is one sentence on what to do about err.
export const errorAdvice = (err) => describe(err, [])[1] || 'Try again; if it keeps failing, reload the page.';

let unauthenticated = () => {};
// onUnauthenticated registers what happens when the server rejects the token (expired, revoked, wrong secret).
export function onUnauthenticated(fn) { unauthenticated = fn; }

function errorFromPayload(errors, status = 0) {
  const first = errors[0] || {};
  return new GraphQLError(first.message, {
    code: (first.extensions && first.extensions.code) || '',
    path: first.path || null,
    status,
    errors,
  });
}

// gql runs one query or mutation and resolves with its data; any error rejects with a GraphQLError.
export async function gql(query, variables = {}, { signal, token = auth.token } = {}) {
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/graphql-response+json, application/json',
  };
  if (token) headers.Authorization = 'Bearer ' + token;
  let resp;
  try {
    resp = await fetch('/graphql', {
      method: 'POST', headers, body: JSON.stringify({ query, variables }), signal, credentials: 'omit',
    });
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new GraphQLError('Cannot reach the Adal server. Check that it is running and try again.', { code: 'NETWORK' });
  }
  let body;
  try {
    body = await resp.json();
  } catch {
    throw new GraphQLError(`The server answered ${resp.status} ${resp.statusText} instead of a GraphQL response.`,
      { code: 'HTTP_' + resp.status, status: resp.status });
  }
  if (body && Array.isArray(body.errors) && body.errors.length) {
    const err = errorFromPayload(body.errors, resp.status);
    // Only the stored token ends the session; a candidate being tried on the sign-in page just fails.
    if (err.code === 'UNAUTHENTICATED' && token && token === auth.token) unauthenticated(err);
    throw err;
  }
  if (!body || !body.data) {
    throw new GraphQLError('The server sent an empty response.', { code: 'HTTP_' + resp.status, status: resp.status });
  }
  return body.data;
}

// LiveClient is a minimal graphql-transport-ws client: one shared socket, opened on the first subscription and
// closed shortly after the last one ends, reconnecting with backoff and resubscribing while any are active.
export class LiveClient {
  constructor(url, getToken) {
    this.url = url;
    this.getToken = getToken;
    this.ws = null;
    this.acked = false;
    this.subs = new Map();
    this.nextId = 1;
    this.retries = 0;
    this.status = 'idle';
    this.timers = { close: 0, reconnect: 0, ack: 0 };
  }

  // subscribe starts an operation. sink.next(data) gets each result, sink.error(err) a terminal error,
  // sink.complete() the server's end, sink.connected() every (re)connection (refetch what may have been
  // missed), sink.status(state) changes of 'connecting' | 'live' | 'reconnecting' | 'offline'.
  // It returns the function that unsubscribes.
  subscribe(query, variables, sink) {
    const id = String(this.nextId++);
    this.subs.set(id, { query, variables, sink });
    clearTimeout(this.timers.close);
    if (!this.ws) this.connect();
    else if (this.acked) {
      this.sendSubscribe(id);
      // On a socket already open no connection_ack comes for it: catch up now, as after a (re)connection,
      // on what changed since the view was read. (A request's subscription also starts with the request's
      // deliveries as they stand, from the server.)
      sink.connected && sink.connected();
    }
    sink.status && sink.status(this.status);
    return () => {
      if (!this.subs.delete(id)) return;
      if (this.acked) this.send({ id, type: 'complete' });
      if (!this.subs.size) this.timers.close = setTimeout(() => this.shutdown(), 3000);
    };
  }

  // shutdown closes the socket and forgets every subscription (sign-out, token change).
  shutdown() {
    clearTimeout(this.timers.reconnect);
    clearTimeout(this.timers.ack);
    const ws = this.ws;
    this.ws = null;
    this.acked = false;
    if (ws) ws.close(1000, 'Normal Closure');
    this.setStatus('idle');
  }

  reset() {
    this.subs.clear();
    this.shutdown();
  }

  connect() {
    clearTimeout(this.timers.reconnect);
    this.setStatus(this.retries ? 'reconnecting' : 'connecting');
    let ws;
    try {
      ws = new WebSocket(this.url, 'graphql-transport-ws');
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    this.acked = false;
    ws.onopen = () => {
      if (ws !== this.ws) return;
      const token = this.getToken();
      ws.send(JSON.stringify({ type: 'connection_init', payload: token ? { Authorization: 'Bearer ' + token } : {} }));
      this.timers.ack = setTimeout(() => ws.close(4408, 'Connection initialisation timeout'), 10000);
    };
    ws.onmessage = (ev) => this.onMessage(ws, ev);
    ws.onclose = (ev) => this.onClose(ws, ev);
    ws.onerror = () => { /* a close event follows */ };
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  sendSubscribe(id) {
    const sub = this.subs.get(id);
    if (sub) this.send({ id, type: 'subscribe', payload: { query: sub.query, variables: sub.variables } });
  }

  onMessage(ws, ev) {
    if (ws !== this.ws) return;
    let msg;
    try { msg = JSON.parse(ev.data); } catch { ws.close(4400, 'Invalid message'); return; }
    const sub = msg.id ? this.subs.get(msg.id) : null;
    switch (msg.type) {
      case 'connection_ack':
        clearTimeout(this.timers.ack);
        this.acked = true;
        this.retries = 0;
        this.setStatus('live');
        for (const [id, s] of this.subs) {
          this.sendSubscribe(id);
          s.sink.connected && s.sink.connected();
        }
        break;
      case 'ping':
        this.send({ type: 'pong', payload: msg.payload });
        break;
      case 'pong':
        break;
      case 'next': {
        if (!sub) break;
        const p = msg.payload || {};
        if (p.errors && p.errors.length && !p.data) {
          this.subs.delete(msg.id);
          this.send({ id: msg.id, type: 'complete' });
          sub.sink.error && sub.sink.error(errorFromPayload(p.errors));
        } else {
          sub.sink.next && sub.sink.next(p.data);
        }
        break;
      }
      case 'error':
        if (!sub) break;
        this.subs.delete(msg.id);
        sub.sink.error && sub.sink.error(errorFromPayload(Array.isArray(msg.payload) ? msg.payload : [msg.payload || {}]));
        break;
      case 'complete':
        if (!sub) break;
        this.subs.delete(msg.id);
        sub.sink.complete && sub.sink.complete();
        break;
      default:
        break;
    }
  }

  onClose(ws, ev) {
    if (ws !== this.ws) return;
    clearTimeout(this.timers.ack);
    this.ws = null;
    this.acked = false;
    if (!this.subs.size) { this.setStatus('idle'); return; }
    if (ev.code === 4401 || ev.code === 4403) {
      // The token was refused: retrying with the same one cannot help.
      const err = new GraphQLError('Live updates were refused: ' + (ev.reason || 'the token was not accepted') + '.',
        { code: ev.code === 4401 ? 'UNAUTHENTICATED' : 'FORBIDDEN' });
      const subs = [...this.subs.values()];
      this.subs.clear();
      this.setStatus('offline');
      for (const s of subs) s.sink.error && s.sink.error(err);
      return;
    }
    this.scheduleReconnect();
  }

  scheduleReconnect() {
    this.setStatus(this.retries >= 3 ? 'offline' : 'reconnecting');
    const delay = Math.min(30000, 500 * 2 ** this.retries) * (0.5 + Math.random() / 2);
    this.retries++;
    this.timers.reconnect = setTimeout(() => {
      if (this.subs.size && !this.ws) this.connect();
    }, delay);
  }

  setStatus(status) {
    if (status === this.status) return;
    this.status = status;
    for (const s of this.subs.values()) s.sink.status && s.sink.status(status);
  }
}

export const live = new LiveClient(
  (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/graphql',
  () => auth.token,
);
