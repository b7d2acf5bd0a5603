// @ts-check
// A mock Gemini API on loopback, run as its own process so its CPU never counts against a
// contender. It streams the scenario of `scenario.mjs` as server-sent events and counts what the
// clients send back.
//
//   POST [/turns/{T}]/{v1beta|v1|v1alpha}/models/{model}:streamGenerateContent?alt=sse
//        SSE, one `data: <json>\r\n\r\n` event per write, one event-loop turn between writes.
//        The optional /turns/{T} prefix sets the run's length (default 5).
//   POST [/turns/{T}]/{v1beta|v1|v1alpha}/cachedContents, PATCH .../cachedContents/{id}
//        a prefix cache like Gemini's: a model request may name one as `cachedContent` instead of
//        sending its systemInstruction, tools and toolConfig (an unknown name gets a 403).
//   GET  /stats   counters since the last reset
//   POST /reset   zero the counters
//
// The answer depends only on how many model turns the request's `contents` already hold. Every
// request's replayed get_weather calls are checked against the signatures issued for them.
//
// Env: PORT (0: any free port), CHUNK_CHARS (200). Prints `LISTENING <url>` once it listens.
import http from 'node:http';
import { MAX_TURNS, STANDARD_TURNS, checkHistory, turnChunks } from './scenario.mjs';

const CHUNK_CHARS = Number(process.env.CHUNK_CHARS || 200);
const MAX_BODY_BYTES = 64 * 1024 * 1024;
const ROUTE = /^(?:\/turns\/(\d{1,5}))?\/(?:v1|v1beta|v1alpha)\/models\/([^/:]{1,200}):streamGenerateContent$/;
const CACHE_ROUTE = /^(?:\/turns\/\d{1,5})?\/(?:v1|v1beta|v1alpha)\/cachedContents(?:\/([A-Za-z0-9_-]{1,200}))?$/;
/** The cached prefixes created so far (they outlive a reset, as Gemini's do). */
const cachedContents = new Map();

function freshStats() {
  return {
    requests: 0,
    requestBytes: 0,
    responseBytes: 0,
    signatures: { checked: 0, missing: 0, mismatched: 0, firstViolation: /** @type {string | null} */ (null) },
    extraTurns: 0,
    cachedRequests: 0,
    cacheCalls: 0,
    cacheBytes: 0,
    callResponseMismatches: 0,
    badRequests: 0,
    cpuStart: process.cpuUsage(),
  };
}
let stats = freshStats();

/** @type {Map<string, string[]>} */
const encoded = new Map();
/**
 * The SSE events of one turn, encoded once and reused.
 * @param {string} model
 * @param {number} turn
 * @param {number} turns
 */
function eventsFor(model, turn, turns) {
  const key = `${model}\n${turns}\n${turn}`;
  let events = encoded.get(key);
  if (!events) {
    events = turnChunks({ turn, turns, model, chunkChars: CHUNK_CHARS }).map((chunk) => `data: ${JSON.stringify(chunk)}\r\n\r\n`);
    encoded.set(key, events);
  }
  return events;
}

/**
 * @param {http.ServerResponse} response
 * @param {number} status
 * @param {unknown} body
 */
function json(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  response.end(JSON.stringify(body));
}

/**
 * @param {http.ServerResponse} response
 * @param {string[]} events
 */
async function stream(response, events) {
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  for (let index = 0; index < events.length; index += 1) {
    if (index > 0) await new Promise((resolve) => setImmediate(resolve));
    const event = /** @type {string} */ (events[index]);
    response.write(event);
    stats.responseBytes += Buffer.byteLength(event);
  }
  response.end();
}

/**
 * @param {http.IncomingMessage} request
 * @param {http.ServerResponse} response
 * @param {string} model
 * @param {number} turns
 */
function answer(request, response, model, turns) {
  /** @type {Buffer[]} */
  const buffers = [];
  let size = 0;
  request.on('data', (/** @type {Buffer} */ buffer) => {
    size += buffer.length;
    if (size > MAX_BODY_BYTES) {
      stats.badRequests += 1;
      json(response, 413, { error: { code: 413, message: 'mock: body too large', status: 'INVALID_ARGUMENT' } });
      request.destroy();
      return;
    }
    buffers.push(buffer);
  });
  request.on('end', () => {
    if (size > MAX_BODY_BYTES) return;
    stats.requests += 1;
    stats.requestBytes += size;
    let body;
    try {
      body = JSON.parse(Buffer.concat(buffers).toString('utf8'));
    } catch {
      stats.badRequests += 1;
      json(response, 400, { error: { code: 400, message: 'mock: the body is not JSON', status: 'INVALID_ARGUMENT' } });
      return;
    }
    if (typeof body?.cachedContent === 'string') {
      if (!cachedContents.has(body.cachedContent)) {
        stats.badRequests += 1;
        json(response, 403, { error: { code: 403, message: 'CachedContent not found (or permission denied)', status: 'PERMISSION_DENIED' } });
        return;
      }
      stats.cachedRequests += 1;
    }
    const history = checkHistory(body?.contents, { signatures: true });
    if (!Array.isArray(body?.contents)) stats.badRequests += 1;
    stats.signatures.checked += history.checked;
    stats.signatures.missing += history.missing;
    stats.signatures.mismatched += history.mismatched;
    if (history.firstViolation && stats.signatures.firstViolation === null) stats.signatures.firstViolation = history.firstViolation;
    if (history.calls !== history.responses) stats.callResponseMismatches += 1;
    const turn = history.modelTurns + 1;
    if (turn > turns) stats.extraTurns += 1;
    stream(response, eventsFor(model, Math.min(turn, turns), turns)).catch(() => response.destroy());
  });
}

/**
 * Creates (POST) or extends (PATCH) a cached prefix.
 * @param {http.IncomingMessage} request
 * @param {http.ServerResponse} response
 * @param {string | undefined} id
 */
function cacheCall(request, response, id) {
  let size = 0;
  /** @type {Buffer[]} */
  const buffers = [];
  request.on('data', (/** @type {Buffer} */ buffer) => {
    size += buffer.length;
    if (size <= MAX_BODY_BYTES) buffers.push(buffer);
  });
  request.on('end', () => {
    stats.cacheCalls += 1;
    stats.cacheBytes += size;
    const expireTime = new Date(Date.now() + 1_800_000).toISOString();
    if (request.method === 'POST' && id === undefined) {
      const name = `cachedContents/bench${cachedContents.size + 1}`;
      cachedContents.set(name, Buffer.concat(buffers).toString('utf8'));
      return json(response, 200, { name, expireTime });
    }
    if (request.method === 'PATCH' && id !== undefined && cachedContents.has(`cachedContents/${id}`)) return json(response, 200, { name: `cachedContents/${id}`, expireTime });
    return json(response, 404, { error: { code: 404, message: 'mock: no such cached content', status: 'NOT_FOUND' } });
  });
}

const server = http.createServer((request, response) => {
  const url = new URL(request.url ?? '/', 'http://mock');
  if (request.method === 'GET' && url.pathname === '/stats') {
    const cpu = process.cpuUsage(stats.cpuStart);
    const { cpuStart, ...counters } = stats;
    return json(response, 200, { ...counters, cpuSeconds: (cpu.user + cpu.system) / 1e6 });
  }
  if (request.method === 'POST' && url.pathname === '/reset') {
    request.resume();
    stats = freshStats();
    return json(response, 200, { ok: true });
  }
  const cache = CACHE_ROUTE.exec(url.pathname);
  if (cache) return cacheCall(request, response, cache[1]);
  const match = request.method === 'POST' && url.searchParams.get('alt') === 'sse' ? ROUTE.exec(url.pathname) : null;
  const turns = match ? Number(match[1] ?? STANDARD_TURNS) : 0;
  if (!match || turns < 1 || turns > MAX_TURNS) {
    request.resume();
    return json(response, 404, { error: { code: 404, message: `mock: nothing at ${request.method} ${url.pathname}`, status: 'NOT_FOUND' } });
  }
  answer(request, response, decodeURIComponent(/** @type {string} */ (match[2])), turns);
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  process.stdout.write(`LISTENING http://127.0.0.1:${address.port}\n`);
});
const stop = () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
