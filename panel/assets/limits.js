// The bounds forms check before sending, read once from the API's limits query, and the checks themselves.
// Each check refuses exactly what the API refuses, with the API's own message, so a form says the same
// thing whether it or the server caught the mistake.

import * as Q from './queries.js';
import { gql } from './gql.js';
import { plural } from './ui.js';

let cached = null;

// limits resolves with the Limits object; it is read once per sign-in.
export function limits() {
  if (!cached) cached = gql(Q.LIMITS).then((d) => d.limits).catch((err) => { cached = null; throw err; });
  return cached;
}

export function forgetLimits() { cached = null; }

const utf8 = new TextEncoder();
// byteLength is what the server's len() counts.
const byteLength = (s) => utf8.encode(s).length;

// printable is verification's rule for names and keys: ASCII from space to tilde.
export const printable = (s) => /^[\x20-\x7e]*$/.test(s);

// parseRule reads a routing filter's text: { rule } or { error } in package filter's words.
export function parseRule(text) {
  let rule;
  try { rule = JSON.parse(text); } catch (err) { return { error: `not valid JSON: ${err.message}` }; }
  if (rule === null || typeof rule !== 'object' || Array.isArray(rule)) return { error: 'a rule is a JSON object' };
  return { rule };
}

// methodList reads "post, put" as ["POST", "PUT"]: upper case, each once, in order.
export function methodList(text) {
  const out = [];
  for (const m of String(text || '').split(/[\s,]+/)) {
    const u = m.toUpperCase();
    if (u && !out.includes(u)) out.push(u);
  }
  return out;
}

// typeList reads a recipient's event types: comma- or line-separated, each once, in order.
export function typeList(text) {
  const out = [];
  for (const t of String(text || '').split(/[\s,]+/)) if (t && !out.includes(t)) out.push(t);
  return out;
}

// goQuote is Go's %q of a string or a rune, as the API's messages quote them.
const goQuote = (s) => JSON.stringify(s);
const goRune = (r) => `'${r === "'" ? "\\'" : r}'`;

// The rules of package eventtype, in its words: an event type's name, a subscription pattern, and where a
// server reads a request's type.
const TYPE_MAX = 255;
const SOURCE_MAX = 255;
const PATH_SEGMENTS_MAX = 16;
const isNameChar = (r) => /^[A-Za-z0-9._\-:\/]$/.test(r);

function typeNameError(name) {
  if (!name) return 'event type name is empty';
  if (byteLength(name) > TYPE_MAX) return `event type name is longer than ${TYPE_MAX} characters`;
  const bad = [...name].find((r) => !isNameChar(r));
  return bad ? `event type name ${goQuote(name)} has ${goRune(bad)}: use letters, digits and . _ - : / (as in order.paid)` : '';
}

function typePatternError(p) {
  if (p === '*') return '';
  if (!p.endsWith('*')) return typeNameError(p);
  const prefix = p.slice(0, -1);
  if (!prefix || !'.:/'.includes(prefix.slice(-1))) {
    return `event type pattern ${goQuote(p)} puts * inside a name: use it alone, or after . : or / (as in order.*)`;
  }
  const err = typeNameError(prefix);
  return err ? `event type pattern ${goQuote(p)}: ${err}` : '';
}

// scheduleOf returns a schedule's bounds and due times.
export const scheduleOf = (L, name) => L.retrySchedules.find((s) => s.schedule === name) || L.retrySchedules[0];

// BROKER_SCHEMES are the URL schemes of each broker method, plain then TLS (package destination's Schemes).
export const BROKER_SCHEMES = {
  RABBITMQ: ['amqp', 'amqps'], NATS: ['nats', 'tls'], REDIS_STREAM: ['redis', 'rediss'], MQTT: ['mqtt', 'mqtts'],
};

// The API's bounds of a broker recipient's settings, which the limits query does not carry.
const BROKER_URL_MAX = 2048;
const BROKER_NAME_MAX = 255;
const MAX_LEN_MAX = 100000000;
const CA_CERTIFICATE_MAX = 64 << 10;

// isTLS says whether a broker URL asks for TLS; null when it names no scheme of the method.
export function isTLS(method, url) {
  const s = BROKER_SCHEMES[method];
  const scheme = String(url || '').split('://')[0].toLowerCase();
  return s && s.includes(scheme) && String(url).includes('://') ? scheme === s[1] : null;
}

// brokerUrl is destination's rule for a broker's URL, in its words. What the browser cannot parse is left to
// the API, whose parser words it otherwise; so are the path's rules (a virtual host, a database number).
function brokerUrl(method, v, required) {
  const [plain, tls] = BROKER_SCHEMES[method];
  const want = `${plain}://host:port or ${tls}://host:port`;
  if (!v) return required ? `url is required for ${method} recipients: ${want}, with user and password if the broker asks` : '';
  if (v.length > BROKER_URL_MAX) return `url must be at most ${BROKER_URL_MAX} characters`;
  let u;
  try { u = new URL(v); } catch { return ''; }
  const scheme = u.protocol.replace(/:$/, '');
  if (scheme !== plain && scheme !== tls) return `url scheme "${scheme}" is not one of ${method}: ${want}`;
  if (!u.hostname) return `url names no host: ${want}`;
  if (u.search || u.hash) return 'url must have no query or fragment: settings are fields of their own';
  return '';
}

// The checks, by API field. Each takes the limits and returns check(value, values) → message or ''.
export const checks = {
  name: (L) => (v) => {
    if (!v) return 'name must not be empty';
    if (byteLength(v) > L.nameMaxLength) return `name must be at most ${L.nameMaxLength} characters`;
    return '';
  },
  requiredName: () => (v) => (v ? '' : 'name must not be empty'),
  retentionDays: (L) => (v) => (v != null && (v < 1 || v > L.retentionDaysMax) ? `retentionDays must be between 1 and ${L.retentionDaysMax}` : ''),
  atLeastOne: (field) => () => (v) => (v != null && v < 1 ? `${field} must be 1 or more` : ''),
  notNegative: (field) => () => (v) => (v != null && v < 0 ? `${field} must be 0 or more` : ''),
  positive: (field) => () => (v) => (v != null && v <= 0 ? `${field} must be positive` : ''),
  maxAttempts: (L) => (v, all) => {
    const s = scheduleOf(L, all.retrySchedule);
    return v != null && (v < s.minAttempts || v > s.maxAttempts) ? `maxAttempts must be between ${s.minAttempts} and ${s.maxAttempts} for ${s.schedule}` : '';
  },
  timeoutSeconds: (L) => (v) => (v != null && (v < 1 || v > L.timeoutSecondsMax) ? `timeoutSeconds must be between 1 and ${L.timeoutSecondsMax}` : ''),
  maxConcurrency: () => (v) => (v != null && v < 1 ? 'maxConcurrency must be 1 or more' : ''),
  // filter is what package filter refuses before it reads a rule: its size, JSON, and a root that is no object.
  filter: (L) => (v) => {
    if (!v) return '';
    if (byteLength(v) > L.filterMaxBytes) return `filter: $: a rule is at most ${L.filterMaxBytes} bytes`;
    const rule = parseRule(v);
    return rule.error ? `filter: $: ${rule.error}` : '';
  },
  // The answer a server gives for a stored request.
  responseStatus: () => (v) => (v != null && (v < 200 || v > 299) ? 'response.status must be between 200 and 299' : ''),
  responseBody: (L) => (v, all) => {
    if (!v) return '';
    if (byteLength(v) > L.responseBodyMaxBytes) return `response.body must be at most ${L.responseBodyMaxBytes} bytes`;
    const st = all['response.status'];
    return st === 204 || st === 205 ? `response.body must be empty for status ${st}` : '';
  },
  responseContentType: () => (v) => (v && (v.length > 200 || !printable(v) || !/^[\w.+-]+\/[\w.+-]+(\s*;.*)?$/.test(v)) ? 'response.contentType must be a media type such as application/json' : ''),
  allowedMethods: (L) => (v) => {
    const list = methodList(v);
    if (list.length > L.allowedMethodsMax) return `allowedMethods holds at most ${L.allowedMethodsMax} methods`;
    const bad = list.find((m) => !/^[A-Z-]{1,20}$/.test(m));
    return bad ? `allowedMethods: "${bad}" is not an HTTP method` : '';
  },
  // recipientUrl is routing's rule for a direct recipient's URL, and destination's for a broker's. method is
  // the recipient's when it is edited (the form then has no method field): a broker's URL left empty keeps
  // the stored one, whose password the form never sees.
  recipientUrl: (L, method) => (v, all) => {
    const m = all.method || method || 'DIRECT_HTTP';
    if (BROKER_SCHEMES[m]) return brokerUrl(m, v, !method);
    if (m !== 'DIRECT_HTTP') return '';
    if (!v) return 'url is required for DIRECT_HTTP recipients';
    let u;
    try { u = new URL(v); } catch { u = null; }
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:') || !u.host || u.username || u.password || u.hash) {
      return 'url must be an absolute http(s) URL without credentials or fragment';
    }
    if (v.length > L.urlMaxLength) return `url must be at most ${L.urlMaxLength} characters`;
    return '';
  },
  // The settings of a broker recipient beside its URL, as package destination checks them.
  brokerName: (field, required) => () => (v) => {
    if (!v) return required ? `${field} is required` : '';
    if (byteLength(v) > BROKER_NAME_MAX) return `${field} must be at most ${BROKER_NAME_MAX} bytes`;
    return /[\0\r\n]/.test(v) ? `${field} must be UTF-8 text on one line` : '';
  },
  // routingKey carries RabbitMQ's need of an exchange, a routing key or both, as the API words it.
  routingKey: () => (v, all) => {
    if (!v && !all.exchange) return 'RABBITMQ needs an exchange, a routingKey, or both (the default exchange routes by routingKey to the queue of that name)';
    return checks.brokerName('routingKey', false)()(v);
  },
  // maxLen 0 is the API's default, as is no value.
  maxLen: () => (v) => (v != null && (v < 0 || v > MAX_LEN_MAX) ? `maxLen must be between 1 and ${MAX_LEN_MAX}` : ''),
  caCertificate: () => (v) => {
    if (!v) return '';
    if (byteLength(v) > CA_CERTIFICATE_MAX) return `caCertificate must be at most ${CA_CERTIFICATE_MAX} bytes`;
    return v.includes('-----BEGIN ') ? '' : 'caCertificate holds no PEM certificate';
  },
  // An event type: its name, description and schema (JSON: whether it compiles is the API's to say).
  eventTypeName: () => (v) => {
    const err = typeNameError(v);
    return err ? `name: ${err}` : '';
  },
  eventTypeDescription: () => (v) => (v && byteLength(v) > 1000 ? 'description must be at most 1000 characters' : ''),
  eventTypeSchema: () => (v) => {
    if (!v) return '';
    try { JSON.parse(v); } catch (err) { return `schema: schema is not JSON: ${err.message}`; }
    return '';
  },
  // eventTypes is a recipient's subscription list, each pattern as routing checks it.
  eventTypes: () => (v) => {
    const list = typeList(v);
    if (list.length > 100) return 'eventTypes: at most 100';
    for (const [i, p] of list.entries()) {
      const err = typePatternError(p);
      if (err) return `eventTypes[${i}]: ${err}`;
    }
    return '';
  },
  // Where a server reads a request's type: a header's name or a dotted path into a JSON body.
  eventTypeHeader: () => (v) => {
    if (!v) return 'set a header or a JSON path to read the event type from';
    if (byteLength(v) > SOURCE_MAX) return `header name is longer than ${SOURCE_MAX} characters`;
    const bad = [...v].find((r) => !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]$/.test(r));
    return bad ? `header name ${goQuote(v)} has ${goRune(bad)}: use letters, digits and - (as in X-Event-Type)` : '';
  },
  eventTypePath: () => (v) => {
    if (!v) return 'set a header or a JSON path to read the event type from';
    if (byteLength(v) > SOURCE_MAX) return `JSON path is longer than ${SOURCE_MAX} characters`;
    const p = v.startsWith('$.') ? v.slice(2) : v;
    if (!p || p === '$') return `JSON path ${goQuote(v)} names no field: write it as "type" or "data.object.type"`;
    const segs = p.split('.');
    if (segs.length > PATH_SEGMENTS_MAX) return `JSON path ${goQuote(v)} is deeper than ${PATH_SEGMENTS_MAX} fields`;
    if (segs.some((x) => !x)) return `JSON path ${goQuote(v)} has an empty field: separate fields with a single dot`;
    const bad = [...segs.join('')].find((r) => !/^[A-Za-z0-9_\-@$:]$/.test(r));
    return bad ? `JSON path ${goQuote(v)} has ${goRune(bad)}: use letters, digits, _ - @ $ : between dots, and indexes as "items.0.kind"` : '';
  },
  // outboundUrl is outbound's rule for a job's target.
  outboundUrl: () => (v) => {
    if (!v) return 'url is required';
    let u;
    try { u = new URL(v); } catch { return 'url is not a valid URL'; }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'url must be an absolute http or https URL';
    if (!u.hostname) return 'url must name a host';
    return '';
  },
  outboundBody: (L) => (v) => (v && byteLength(v) > L.outboundBodyMaxBytes ? `body is larger than ${L.outboundBodyMaxBytes} bytes` : ''),
};

// duration says a number of seconds the way a person reads a schedule: "4 min", "1 h 24 min", "2 d 3 h".
export function duration(seconds) {
  const s = Math.round(seconds);
  if (s < 60) return `${+seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return m % 60 ? `${hrs} h ${m % 60} min` : `${hrs} h`;
  const d = Math.floor(hrs / 24);
  return hrs % 24 ? `${d} d ${hrs % 24} h` : `${d} d`;
}

// dueTimes lists when each attempt is due under a schedule: "1st at once · 2nd after 4 min · …".
export function dueTimes(L, schedule, attempts) {
  const s = scheduleOf(L, schedule);
  const n = Math.max(1, Math.min(attempts || s.maxAttempts, s.maxAttempts));
  const due = s.dueSeconds.slice(0, n);
  return {
    items: due.map((sec, i) => ({ n: i + 1, seconds: sec, label: i === 0 ? 'at once' : `+${duration(sec)}` })),
    total: due[due.length - 1],
    summary: `${plural(n, 'attempt')} over ${duration(due[due.length - 1])}`,
  };
}
