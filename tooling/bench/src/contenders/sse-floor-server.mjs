// @ts-check
// The SSE floor: the least a server can do to stream the SSE scenario's runs, with no library.
// node:http only. It reads the request, sends the same events our server sends (start, the model
// request, one `thought` per streamed thought, finish, complete), each as its JSON on one `data:`
// line, from the same in-process model (prepared chunks read with `for await`). What a burst
// gathers goes out in one write of up to 16 KiB, and a full socket is waited out (backpressure).
// No sessions, no timers, no checks. Prints `LISTENING <url>`; on SIGTERM reports like
// `sse-server.mjs`.
import http from 'node:http';
import { once } from 'node:events';
import { sseTurn } from '../mock/sse-turn.mjs';
import { report, snapshot } from './contender.mjs';

const thoughts = Number(process.env.BENCH_SSE_THOUGHTS || 2000);
const model = process.env.MODEL || 'gemini-2.5-flash';

const turn = sseTurn(thoughts, model);
async function* streamGenerateContent() {
  yield* turn;
}

/** Largest burst written at once. */
const BATCH_CHARS = 16 * 1024;

/**
 * @param {import('node:http').IncomingMessage} request
 * @param {import('node:http').ServerResponse} response
 */
async function serveRun(request, response) {
  let body = '';
  for await (const bytes of request) body += bytes;
  const start = JSON.parse(body).start;
  const objective = { parts: [{ text: start.segments.map((/** @type {any} */ segment) => segment.text).join('') }], role: 'user' };
  const requestBody = { contents: [objective], generationConfig: { temperature: 1, topP: 1, thinkingConfig: { includeThoughts: true, thinkingBudget: -1 } } };
  response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  let pending = '';
  const send = async (/** @type {object} */ event) => {
    pending += `data: ${JSON.stringify(event)}\n\n`;
    if (pending.length < BATCH_CHARS) return;
    const full = !response.write(pending);
    pending = '';
    if (full) await once(response, 'drain');
  };
  await send({ start: { objective } });
  await send({ sendRequest: { model, body: requestBody } });
  let answer = '';
  for await (const next of streamGenerateContent()) {
    for (const part of next.candidates[0].content.parts) {
      if (part.thought) await send({ thought: { text: part.text } });
      else answer += part.text;
    }
  }
  await send({ finish: {} });
  await send({ complete: { result: { success: true, outcomes: { role: 'model', parts: [{ text: answer }] } } } });
  response.end(pending);
}

let runs = 0;
/** Runs that warm the server up before the `warm` reading (BENCH_SSE_WARM_RUNS). */
const warmRuns = Number(process.env.BENCH_SSE_WARM_RUNS || 0);
/** @type {import('./contender.mjs').Snapshot | undefined} */
let first;
/** @type {import('./contender.mjs').Snapshot | undefined} */
let warm;
const server = http.createServer((request, response) => {
  runs += 1;
  if (runs === 2) first = snapshot();
  if (warmRuns > 0 && runs === warmRuns + 1) warm = snapshot();
  serveRun(request, response).catch((error) => response.destroy(error));
});
server.listen(0, '127.0.0.1', () => {
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  process.stdout.write(`LISTENING http://127.0.0.1:${address.port}\n`);
});

process.once('SIGTERM', () => {
  const last = snapshot();
  report({ runs, first: first ?? last, last, ...(warm ? { warm: { runs: warmRuns, at: warm } } : {}) });
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
