// @ts-check
// The SSE path under load: runs whose model streams many thoughts, served by adapter-node's
// serve(), each thought one SSE event. BENCH_VARIANT=agent-handler (default) serves them with
// createAgentHandler; BENCH_VARIANT=event-stream with run() and createSseEventStream, the writer
// the handler's SSE path uses, without the session layer between them. The model is in the process (prepared chunks, nothing parsed),
// so the figure is the cost of events: the loop, wire encoding, SSE framing and node:http.
// Env: BENCH_SSE_THOUGHTS thoughts per run. Prints `LISTENING <url>`; on SIGTERM reports `first`
// (when the second run arrives) and `last`.
import { serve } from '@org/adapter-node';
import { createSseEventStream, encodeSseEvent, run, toWireEventJson } from '@org/core';
import { createAgentHandler } from '@org/core/http';
import { createMemoryInteractionStore } from '@org/core/testing';
import { sseTurn } from '../mock/sse-turn.mjs';
import { report, snapshot } from './contender.mjs';

const thoughts = Number(process.env.BENCH_SSE_THOUGHTS || 2000);
const variant = process.env.BENCH_VARIANT || 'agent-handler';
const model = process.env.MODEL || 'gemini-2.5-flash';

const turn = sseTurn(thoughts, model);
const unsupported = () => Promise.reject(new Error('the SSE bench backend only answers model requests'));
/** @type {import('@org/core').BackendClient} */
const backend = {
  async *streamGenerateContent() {
    yield* turn;
  },
  executeStep: unsupported,
  uploadGeminiFile: unsupported,
  uploadBlobFile: unsupported,
};
const store = createMemoryInteractionStore();
/** @type {import('@org/core').RunOptions} */
const options = { mode: 'chat', model, maxTurns: 2, defaultFunctionGroups: false };

/** @type {(request: Request) => Promise<Response>} */
const handler =
  variant === 'event-stream'
    ? async (request) => {
        const body = JSON.parse(await request.text());
        const controller = new AbortController();
        request.signal.addEventListener('abort', () => controller.abort(), { once: true });
        const events = run(body.start, { backend, store }, { ...options, signal: controller.signal });
        const stream = createSseEventStream(events, { encode: (event) => encodeSseEvent(toWireEventJson(event)), onCancel: () => controller.abort() });
        return new Response(stream, { headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } });
      }
    : createAgentHandler({ createPorts: () => ({ backend, store }), runOptions: () => options });

let runs = 0;
/** Runs that warm the server up before the `warm` reading (BENCH_SSE_WARM_RUNS). */
const warmRuns = Number(process.env.BENCH_SSE_WARM_RUNS || 0);
/** @type {import('./contender.mjs').Snapshot | undefined} */
let first;
/** @type {import('./contender.mjs').Snapshot | undefined} */
let warm;
const server = await serve({
  handler: (request) => {
    runs += 1;
    if (runs === 2) first = snapshot();
    if (warmRuns > 0 && runs === warmRuns + 1) warm = snapshot();
    return handler(request);
  },
});
process.stdout.write(`LISTENING ${server.url}\n`);

process.once('SIGTERM', () => {
  const last = snapshot();
  report({ runs, first: first ?? last, last, ...(warm ? { warm: { runs: warmRuns, at: warm } } : {}) });
  void server.close().then(() => process.exit(0));
});
