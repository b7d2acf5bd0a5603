import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentError } from '../errors/index.js';
import { defineFunction } from '../functions/index.js';
import type { LLMContent } from '../protocol/content.js';
import type { AgentEvent } from '../protocol/events.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { run, type RunOptions } from '../run/index.js';
import { createMemoryInteractionStore } from '../testing/index.js';
import { createGeminiBackendClient, type GeminiBackendClientOptions } from './gemini-backend-client.js';

const fixtures = new URL('../../../../fixtures/gemini/', import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, fixtures), 'utf8');

type Route = (request: IncomingMessage, response: ServerResponse, body: string) => void;
let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

async function gemini(route: Route): Promise<{ baseUrl: string; seen: Array<{ url: string; key: string; body: string; at: number }> }> {
  const seen: Array<{ url: string; key: string; body: string; at: number }> = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      seen.push({ url: request.url ?? '', key: String(request.headers['x-goog-api-key']), body, at: Date.now() });
      route(request, response, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1beta`, seen };
}

const sse = (response: ServerResponse, text: string) => {
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  response.end(text);
};
const jsonError = (response: ServerResponse, status: number, text: string) => {
  response.writeHead(status, { 'content-type': 'text/event-stream' });
  response.end(text);
};

async function collect(iterable: AsyncIterable<GenerateContentResponse>): Promise<GenerateContentResponse[]> {
  const chunks = [];
  for await (const chunk of iterable) chunks.push(chunk);
  return chunks;
}

/** The chunks a stream yielded before it failed, and the failure. */
async function collectUntilError(iterable: AsyncIterable<GenerateContentResponse>): Promise<{ chunks: GenerateContentResponse[]; error: AgentError }> {
  const chunks: GenerateContentResponse[] = [];
  try {
    for await (const chunk of iterable) chunks.push(chunk);
  } catch (error) {
    if (error instanceof AgentError) return { chunks, error };
    throw error;
  }
  throw new Error(`the stream ended without an error after ${chunks.length} chunks`);
}

const KEY = 'AIzaSy-test-secret-key-0123456789';
const textEvent = (text: string, finishReason?: string) =>
  `data: ${JSON.stringify({ candidates: [{ content: { role: 'model', parts: [{ text }] }, ...(finishReason ? { finishReason } : {}), index: 0 }] })}\r\n\r\n`;
const limitedBody = fixture('error-429-resource-exhausted-free-tier-help-quotafailure-retryinfo.json');

/** A chat run against `baseUrl`, with the loop's default policy unless `modelPolicy` says otherwise. */
async function runChat(client: GeminiBackendClientOptions, modelPolicy = {}): Promise<AgentEvent[]> {
  const backend = createGeminiBackendClient(client);
  const events: AgentEvent[] = [];
  const ports = { backend, store: createMemoryInteractionStore() };
  for await (const event of run({ segments: [{ type: 'text', text: 'Hi' }] }, ports, { mode: 'chat', defaultFunctionGroups: false, modelPolicy })) {
    events.push(event);
  }
  return events;
}

describe('createGeminiBackendClient', () => {
  it('streams a recorded response intact, with the key and the model in the request', async () => {
    const text = fixture('stream-text-then-function-call-with-id-gemini-3.1-pro.sse');
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, text));
    const client = createGeminiBackendClient({ apiKey: 'k-1', fetch, baseUrl });
    const chunks = await collect(client.streamGenerateContent('gemini-3.1-pro-preview', { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }));
    const expected = text.split(/\r?\n/).filter((line) => line.startsWith('data:')).map((line) => JSON.parse(line.slice(5)));
    expect(chunks).toEqual(expected);
    expect(seen[0]).toMatchObject({ url: '/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse', key: 'k-1' });
    expect(JSON.parse(seen[0]?.body ?? '{}')).toEqual({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] });
  });

  it('sends no credential to a gateway that adds its own, and refuses to call Google with none', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, textEvent('hi', 'STOP')));
    const client = createGeminiBackendClient({ fetch, baseUrl });
    expect(await collect(client.streamGenerateContent('gemini-2.5-flash', { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }))).toHaveLength(1);
    expect(seen[0]?.key).toBe('undefined');
    expect(() => createGeminiBackendClient({ fetch })).toThrow(expect.objectContaining({ code: 'UNAUTHENTICATED' }));
  });

  it('maps a 400 JSON body served as SSE to MODEL_ERROR with the provider message', async () => {
    const body = fixture('error-400-missing-thought-signature.json');
    const { baseUrl } = await gemini((_request, response) => jsonError(response, 400, body));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
    const message = (JSON.parse(body) as { error: { message: string } }).error.message;
    await expect(collect(client.streamGenerateContent('m', { contents: [] }))).rejects.toMatchObject({ code: 'MODEL_ERROR', message });
  });

  it('retries a 429, honouring RetryInfo up to the cap, then streams', async () => {
    const limited = fixture('error-429-resource-exhausted-free-tier-help-quotafailure-retryinfo.json');
    let calls = 0;
    const { baseUrl, seen } = await gemini((_request, response) => {
      calls += 1;
      if (calls === 1) jsonError(response, 429, limited);
      else sse(response, fixture('stream-text-gemini-2.0-flash-basic.sse'));
    });
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { maxDelayMs: 20 } });
    const chunks = await collect(client.streamGenerateContent('m', { contents: [] }));
    expect(chunks.length).toBeGreaterThan(0);
    expect(seen).toHaveLength(2);
  });

  it('gives up after the last attempt with MODEL_UNAVAILABLE', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => jsonError(response, 503, fixture('error-503-unavailable-model-overloaded.json')));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 5 } });
    await expect(collect(client.streamGenerateContent('m', { contents: [] }))).rejects.toMatchObject({
      code: 'MODEL_UNAVAILABLE',
      message: 'The model is overloaded. Please try again later.',
    });
    expect(seen).toHaveLength(3);
  });

  it('stops waiting to retry as soon as the signal aborts', async () => {
    const { baseUrl } = await gemini((_request, response) => jsonError(response, 503, fixture('error-503-unavailable-model-overloaded.json')));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { baseDelayMs: 10_000, maxDelayMs: 10_000 } });
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 50);
    await expect(collect(client.streamGenerateContent('m', { contents: [] }, controller.signal))).rejects.toMatchObject({ code: 'ABORTED' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('turns an error object in the middle of a stream into an error', async () => {
    const { baseUrl } = await gemini((_request, response) =>
      sse(response, 'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]}}]}\r\n\r\ndata: {"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}\r\n\r\n'),
    );
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
    const seen: GenerateContentResponse[] = [];
    await expect(
      (async () => {
        for await (const chunk of client.streamGenerateContent('m', { contents: [] })) seen.push(chunk);
      })(),
    ).rejects.toMatchObject({ code: 'MODEL_ERROR', message: 'Internal error encountered.' });
    expect(seen).toHaveLength(1);
  });

  it('raises a bare error object sent after some events of a 200 stream as the API error, with the key redacted', async () => {
    const bare = `${JSON.stringify({ error: { code: 503, message: `The model is overloaded (key ${KEY}).`, status: 'UNAVAILABLE' } }, null, 2)}\n`;
    const { baseUrl } = await gemini((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(textEvent('The answer is'));
      // The error arrives a moment later, on its own, as Google writes it.
      setTimeout(() => response.end(bare), 20);
    });
    const client = createGeminiBackendClient({ apiKey: KEY, fetch, baseUrl });
    const { chunks, error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
    expect(chunks).toHaveLength(1);
    expect(error).toMatchObject({ code: 'MODEL_UNAVAILABLE', message: 'The model is overloaded (key [redacted]).', details: { status: 503, providerStatus: 'UNAVAILABLE' } });
    expect(JSON.stringify({ message: error.message, details: error.details })).not.toContain(KEY);
  });

  it('raises a 200 whose whole body is a bare error object as that error, not as an empty answer', async () => {
    const { baseUrl } = await gemini((_request, response) => sse(response, limitedBody.replace('PerMinute', 'PerHour')));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
    const { chunks, error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
    expect(chunks).toEqual([]);
    expect(error).toMatchObject({ code: 'RATE_LIMITED', details: { status: 429, providerStatus: 'RESOURCE_EXHAUSTED' } });
    expect(error.message).toMatch(/^You exceeded your current quota/);
  });

  it('treats a stream that ends without a finishReason as broken off, and the run asks again for the whole answer', async () => {
    let calls = 0;
    const { baseUrl, seen } = await gemini((_request, response) => {
      calls += 1;
      sse(response, calls === 1 ? textEvent('The answer is') : textEvent('The answer is 42.', 'STOP'));
    });
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
    const { chunks, error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
    expect(chunks).toHaveLength(1);
    expect(error).toMatchObject({ code: 'MODEL_UNAVAILABLE', message: expect.stringMatching(/broke off before it finished/) });

    calls = 0;
    const events = await runChat({ apiKey: 'k', fetch, baseUrl }, { baseDelayMs: 1, maxDelayMs: 5 });
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true, outcomes: { parts: [{ text: 'The answer is 42.' }] } } });
    expect(seen).toHaveLength(3);
  });

  it('passes a blocked prompt on as it came, without a finishReason', async () => {
    const text = fixture('stream-prompt-blocked-prohibited-content-gemini-3.7-flash.sse');
    const { baseUrl } = await gemini((_request, response) => sse(response, text));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
    const chunks = await collect(client.streamGenerateContent('m', { contents: [] }));
    expect(chunks).toEqual([expect.objectContaining({ promptFeedback: expect.objectContaining({ blockReason: 'PROHIBITED_CONTENT' }) })]);
    const events = await runChat({ apiKey: 'k', fetch, baseUrl });
    expect(events.find((event) => event.type === 'error')).toMatchObject({ code: 'MODEL_ERROR', message: expect.stringMatching(/PROHIBITED_CONTENT/) });
  });

  it('does not wait out a 58 s RetryInfo past its retry budget: the run pauses RATE_LIMITED after one request', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => jsonError(response, 429, limitedBody));
    const started = Date.now();
    const events = await runChat({ apiKey: 'k', fetch, baseUrl });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(seen).toHaveLength(1);
    // Paused, not failed: the last event names the interaction to resume.
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'RATE_LIMITED', interactionId: expect.any(String) });
  });

  it('stops retrying when the next wait would pass retry.maxTotalDelayMs', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => jsonError(response, 429, limitedBody.replace('"58s"', '"0.05s"')));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { maxAttempts: 10, maxTotalDelayMs: 120 } });
    const { error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
    // Two waits of 50 ms fit in 120 ms; a third would not.
    expect(seen).toHaveLength(3);
    expect(error).toMatchObject({ code: 'RATE_LIMITED', details: { attempts: 3, retryable: false } });
    expect(error.message).toMatch(/retry budget/);
  });

  it('does not retry a daily quota, says so, and the run does not ask again either', async () => {
    const daily = limitedBody.replace('PerMinute', 'PerDay').replace('"58s"', '"0.01s"');
    const { baseUrl, seen } = await gemini((_request, response) => jsonError(response, 429, daily));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
    const { error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
    expect(seen).toHaveLength(1);
    expect(error).toMatchObject({ code: 'RATE_LIMITED', details: { retryable: false } });
    expect(error.message).toMatch(/daily Gemini quota is used up/);

    const events = await runChat({ apiKey: 'k', fetch, baseUrl }, { baseDelayMs: 1, maxDelayMs: 5 });
    expect(seen).toHaveLength(2);
    expect(events.find((event) => event.type === 'error')).toMatchObject({ code: 'RATE_LIMITED', message: expect.stringMatching(/daily Gemini quota/) });
  });

  it('honours a Retry-After header in seconds or as an HTTP date when there is no RetryInfo', async () => {
    const plain = JSON.stringify({ error: { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' } });
    for (const retryAfter of ['1', () => new Date(Date.now() + 2000).toUTCString()]) {
      let calls = 0;
      const { baseUrl, seen } = await gemini((_request, response) => {
        calls += 1;
        if (calls > 1) return sse(response, textEvent('ok', 'STOP'));
        response.writeHead(429, { 'content-type': 'text/event-stream', 'retry-after': typeof retryAfter === 'string' ? retryAfter : retryAfter() });
        response.end(plain);
      });
      const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { baseDelayMs: 1, maxDelayMs: 5000 } });
      await collect(client.streamGenerateContent('m', { contents: [] }));
      expect(seen).toHaveLength(2);
      expect((seen[1]?.at ?? 0) - (seen[0]?.at ?? 0)).toBeGreaterThanOrEqual(900);
      await close?.();
      close = undefined;
    }
  });

  it('abandons an answer past its limits: a line too long, too many bytes, too long a silence', async () => {
    const big = textEvent('x'.repeat(4096), 'STOP');
    const cases: Array<[GeminiBackendClientOptions['limits'], (response: ServerResponse) => void, object]> = [
      [{ maxLineBytes: 1024 }, (response) => sse(response, big), { code: 'MODEL_ERROR', details: { limit: 'maxLineBytes' } }],
      [{ maxResponseBytes: 2048 }, (response) => sse(response, textEvent('y'.repeat(500)).repeat(8) + textEvent('.', 'STOP')), { code: 'MODEL_ERROR', details: { limit: 'maxResponseBytes' } }],
      [{ idleTimeoutMs: 100 }, (response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(textEvent('The answer is'));
      }, { code: 'MODEL_UNAVAILABLE', message: expect.stringMatching(/sent nothing/) }],
    ];
    for (const [limits, answer, expected] of cases) {
      const { baseUrl } = await gemini((_request, response) => answer(response));
      const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, limits });
      const { error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
      expect(error).toMatchObject(expected);
      await close?.();
      close = undefined;
    }
  });

  it('reads only the start of an error body, so one that never ends still fails the request', async () => {
    const { baseUrl } = await gemini((_request, response) => {
      response.writeHead(500, { 'content-type': 'text/event-stream' });
      response.write('z'.repeat(100 * 1024));
    });
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { maxAttempts: 1 } });
    const { error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
    expect(error).toMatchObject({ code: 'MODEL_ERROR', details: { status: 500 } });
    expect(error.message.length).toBeLessThan(600);
  });

  it('accepts a model named with its resource prefix, models/...', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, textEvent('ok', 'STOP')));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
    await collect(client.streamGenerateContent('models/gemini-2.5-flash', { contents: [] }));
    expect(seen[0]?.url).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
  });

  it('says which setting is missing for media calls', async () => {
    const client = createGeminiBackendClient({ apiKey: 'k', fetch });
    await expect(client.uploadBlobFile('x')).rejects.toThrow(/options\.upstream/);
  });
});

/** The chunks of a recorded `.sse` answer. */
const eventsOf = (text: string): GenerateContentResponse[] =>
  text.split(/\r?\n/).filter((line) => line.startsWith('data:')).map((line) => JSON.parse(line.slice(5)) as GenerateContentResponse);
const dataEvent = (value: unknown) => `data: ${JSON.stringify(value)}\r\n\r\n`;
const fulfilEvent = dataEvent({
  candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'system_objective_fulfilled', args: { objective_outcome: 'Done', href: '/' } } }] }, finishReason: 'STOP' }],
});

/** A run against `baseUrl` in objective mode (or `options.mode`). */
async function runObjective(client: GeminiBackendClientOptions, options: RunOptions = {}): Promise<AgentEvent[]> {
  const events: AgentEvent[] = [];
  const ports = { backend: createGeminiBackendClient(client), store: createMemoryInteractionStore() };
  for await (const event of run({ segments: [{ type: 'text', text: 'Go' }] }, ports, options)) events.push(event);
  return events;
}

describe('createGeminiBackendClient reading answers of other shapes', () => {
  it('reads an answer sent as one JSON array (a server that ignored alt=sse) as its chunks, each as it arrives', async () => {
    for (const name of ['stream-nonsse-json-array-thought-summary-gemini-flash-latest.json', 'stream-nonsse-json-array-function-call-gemini-3-flash.json']) {
      const text = fixture(name);
      // The rest of the body is written once the client has read the first chunk (or after a second).
      let release: (by: string) => void = () => undefined;
      const firstRead = new Promise<string>((resolve) => (release = resolve));
      const firstEnd = text.indexOf('\n,') + 1;
      const { baseUrl } = await gemini((_request, response) => {
        response.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
        for (let offset = 0; offset < firstEnd; offset += 7) response.write(text.slice(offset, Math.min(offset + 7, firstEnd)));
        setTimeout(() => release('timer'), 1000);
        void firstRead.then(() => response.end(text.slice(firstEnd)));
      });
      const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
      const chunks: GenerateContentResponse[] = [];
      for await (const chunk of client.streamGenerateContent('m', { contents: [] })) {
        chunks.push(chunk);
        release('read');
      }
      expect(chunks, name).toEqual(JSON.parse(text));
      expect(await firstRead, name).toBe('read');
      await close?.();
      close = undefined;
    }
    const { baseUrl } = await gemini((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
      response.end(fixture('stream-nonsse-json-array-thought-summary-gemini-flash-latest.json'));
    });
    const events = await runChat({ apiKey: 'k', fetch, baseUrl });
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true, outcomes: { parts: [{ text: 'Scoop' }] } } });
  });

  it('raises an error object wrapped in an array, on a data: line or as a whole JSON answer, as the API error', async () => {
    const error = { error: { code: 503, message: 'The model is overloaded. Please try again later.', status: 'UNAVAILABLE' } };
    const answers: Array<(response: ServerResponse) => void> = [
      (response) => sse(response, textEvent('The answer') + dataEvent([error])),
      (response) => {
        response.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
        response.end(`[${JSON.stringify(error, null, 2)}\n]`);
      },
    ];
    for (const answer of answers) {
      const { baseUrl } = await gemini((_request, response) => answer(response));
      // The whole-answer form is the first event, so it is asked again: quickly here.
      const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 5 } });
      const { error: failure } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
      expect(failure).toMatchObject({ code: 'MODEL_UNAVAILABLE', message: 'The model is overloaded. Please try again later.', details: { status: 503, providerStatus: 'UNAVAILABLE' } });
      await close?.();
      close = undefined;
    }
  });

  it('ends the run with a coded error naming what it got when an event is JSON but not an object, without asking again', async () => {
    for (const [data, got] of [['null', 'null'], ['42', 'a number'], ['[1,2]', 'an array']]) {
      const { baseUrl, seen } = await gemini((_request, response) => sse(response, `data: ${data}\r\n\r\n${textEvent('ok', 'STOP')}`));
      const events = await runChat({ apiKey: 'k', fetch, baseUrl }, { baseDelayMs: 1, maxDelayMs: 5 });
      expect(seen, data).toHaveLength(1);
      expect(events.at(-2), data).toEqual({
        type: 'error',
        message: `Agent error: The model sent a malformed answer: response chunk: expected a JSON object, got ${got}`,
        code: 'MODEL_ERROR',
      });
      await close?.();
      close = undefined;
    }
  });

  it('asks again after a data line that is not JSON, quoting the start of it', async () => {
    let calls = 0;
    const { baseUrl, seen } = await gemini((_request, response) => {
      calls += 1;
      sse(response, calls === 1 ? `${textEvent('The answer is')}data: <html><body>502 Bad Gateway</body></html>\r\n\r\n` : textEvent('The answer is 42.', 'STOP'));
    });
    const { error } = await collectUntilError(createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl }).streamGenerateContent('m', { contents: [] }));
    expect(error).toMatchObject({ code: 'MODEL_UNAVAILABLE', message: 'Gemini sent a chunk that is not JSON: <html><body>502 Bad Gateway</body></html>' });
    calls = 0;
    const events = await runChat({ apiKey: 'k', fetch, baseUrl }, { baseDelayMs: 1, maxDelayMs: 5 });
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true, outcomes: { parts: [{ text: 'The answer is 42.' }] } } });
    expect(seen).toHaveLength(3);
  });

  it('treats a stream without any candidate, or an empty body, as an answer that broke off', async () => {
    for (const body of [dataEvent({ usageMetadata: { promptTokenCount: 3, totalTokenCount: 3 } }), '']) {
      const { baseUrl } = await gemini((_request, response) => sse(response, body));
      const { chunks, error } = await collectUntilError(createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl }).streamGenerateContent('m', { contents: [] }));
      expect(chunks).toHaveLength(body === '' ? 0 : 1);
      expect(error).toMatchObject({ code: 'MODEL_UNAVAILABLE', message: expect.stringMatching(/broke off before it finished/) });
      await close?.();
      close = undefined;
    }
  });

  it('waits for candidate 0 to finish: a finishReason on another candidate does not end the answer', async () => {
    const { baseUrl } = await gemini((_request, response) =>
      sse(
        response,
        dataEvent({
          candidates: [
            { index: 0, content: { role: 'model', parts: [{ text: 'The answer is' }] } },
            { index: 1, content: { role: 'model', parts: [{ text: 'Another answer.' }] }, finishReason: 'STOP' },
          ],
        }),
      ),
    );
    const { error } = await collectUntilError(createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl }).streamGenerateContent('m', { contents: [] }));
    expect(error).toMatchObject({ code: 'MODEL_UNAVAILABLE', message: expect.stringMatching(/broke off before it finished/) });
  });

  it('passes a line of several MB, sent in many pieces, through intact: a call whose argument holds 6 MB', async () => {
    const big = 'a'.repeat(6 * 1024 * 1024 - 7) + 'é€😀end';
    const line = dataEvent({ candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'store_text', args: { text: big } } }] }, finishReason: 'STOP' }] });
    let calls = 0;
    const { baseUrl } = await gemini((_request, response) => {
      calls += 1;
      if (calls > 1) return sse(response, fulfilEvent);
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const bytes = new TextEncoder().encode(line);
      // Pieces of 64 KiB, so multi-byte characters are cut too.
      for (let offset = 0; offset < bytes.length; offset += 65_536) response.write(bytes.subarray(offset, offset + 65_536));
      response.end();
    });
    const received: string[] = [];
    const storeText = defineFunction({
      name: 'store_text',
      description: 'Stores a text.',
      parameters: z.object({ text: z.string() }),
      handler: async ({ text }) => {
        received.push(text);
        return { stored: text.length };
      },
    });
    const events = await runObjective({ apiKey: 'k', fetch, baseUrl }, { functionGroups: [{ name: 'tools', functions: [storeText] }] });
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    expect(received).toHaveLength(1);
    expect(received[0] === big).toBe(true);
  });

  it('ends the request of a stream that never ends: bytes without a chunk for idleTimeoutMs are a TIMEOUT', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(textEvent('Thinking'));
      const timer = setInterval(() => response.write(':\r\n\r\n'), 20);
      response.on('close', () => clearInterval(timer));
    });
    const started = Date.now();
    const events = await runChat({ apiKey: 'k', fetch, baseUrl }, { idleTimeoutMs: 300, maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 5 });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(seen).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'TIMEOUT', interactionId: expect.any(String) });
  });

  it('sends every thoughtSignature back byte for byte on the part it came on: an empty last text part, the first text part, a call', async () => {
    const turns = [
      fixture('stream-text-gemini-3-pro-trailing-empty-text-thought-signature.sse'),
      fixture('stream-thought-summaries-then-text-gemini-2.5-pro.sse'),
      fixture('stream-function-call-single-gemini-3-pro-with-thought-signature.sse'),
      fulfilEvent,
    ];
    let calls = 0;
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, turns[calls++] ?? ''));
    const events = await runObjective({ apiKey: 'k', fetch, baseUrl });
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const last = seen[3]?.body ?? '';
    const models = (JSON.parse(last) as { contents: LLMContent[] }).contents.filter((content) => content.role === 'model');
    expect(models).toHaveLength(3);
    turns.slice(0, 3).forEach((text, turn) => {
      const streamed = eventsOf(text).flatMap((chunk) => chunk.candidates?.[0]?.content?.parts ?? []);
      const signed = streamed.filter((part) => typeof part.thoughtSignature === 'string');
      expect(signed.length, `turn ${turn}`).toBeGreaterThan(0);
      const kept = models[turn]?.parts.filter((part) => typeof part.thoughtSignature === 'string') ?? [];
      // The very part: its signature, its text or call, and nothing merged into it.
      expect(kept, `turn ${turn}`).toEqual(signed);
      for (const part of signed) expect(last).toContain(JSON.stringify(part.thoughtSignature));
    });
  });
});

/** An error body as Gemini writes it on one `data:` line of a 200 stream. */
const errorEvent = (body: string) => dataEvent(JSON.parse(body));

describe('createGeminiBackendClient with an error inside a 200 stream', () => {
  it('asks again, within its own retries, when the first event is a transient error, and yields only the answer that followed', async () => {
    const overloaded = fixture('error-503-unavailable-model-overloaded.json');
    const limitedSoon = limitedBody.replace('"58s"', '"0.01s"');
    const answers = [
      errorEvent(overloaded),
      // The bare, pretty-printed object both official SDKs look for, as the whole body.
      fixture('error-503-unavailable-high-demand.json'),
      errorEvent(limitedSoon),
      textEvent('The answer is 42.', 'STOP'),
    ];
    let calls = 0;
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, answers[calls++] ?? ''));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
    const chunks = await collect(client.streamGenerateContent('m', { contents: [] }));
    expect(chunks).toEqual(eventsOf(textEvent('The answer is 42.', 'STOP')));
    expect(seen).toHaveLength(4);
  });

  it('counts those retries in the same budget as HTTP failures: the last attempt gives up with the API error and its attempts', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, errorEvent(fixture('error-503-unavailable-model-overloaded.json'))));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 5 } });
    const { chunks, error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
    expect(chunks).toEqual([]);
    expect(seen).toHaveLength(3);
    expect(error).toMatchObject({
      code: 'MODEL_UNAVAILABLE',
      message: 'The model is overloaded. Please try again later.',
      details: { status: 503, providerStatus: 'UNAVAILABLE', attempts: 3 },
    });
  });

  it('pauses the run after one request when the first event is a 429 asking for 58 s, as an HTTP 429 does', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, errorEvent(limitedBody)));
    const events = await runChat({ apiKey: 'k', fetch, baseUrl });
    expect(seen).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'RATE_LIMITED', message: expect.stringMatching(/retry budget/), interactionId: expect.any(String) });
  });

  it('does not ask again for a first event that is not transient (a 500), as for an HTTP 500', async () => {
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, errorEvent(fixture('error-500-internal.json'))));
    const { error } = await collectUntilError(createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl }).streamGenerateContent('m', { contents: [] }));
    expect(seen).toHaveLength(1);
    expect(error).toMatchObject({ code: 'MODEL_ERROR', details: { status: 500, providerStatus: 'INTERNAL' } });
  });

  it('does not ask again itself once a chunk was yielded: a transient error after text pauses the run without repeating the text', async () => {
    const partial = textEvent('The answer is') + errorEvent(fixture('error-503-unavailable-model-overloaded.json'));
    const { baseUrl, seen } = await gemini((_request, response) => sse(response, partial));
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
    const { chunks, error } = await collectUntilError(client.streamGenerateContent('m', { contents: [] }));
    expect(chunks).toEqual(eventsOf(textEvent('The answer is')));
    expect(seen).toHaveLength(1);
    expect(error).toMatchObject({ code: 'MODEL_UNAVAILABLE', details: { status: 503 } });

    const events = await runChat({ apiKey: 'k', fetch, baseUrl, retry: { baseDelayMs: 1, maxDelayMs: 5 } }, { baseDelayMs: 1, maxDelayMs: 5 });
    // The loop asks for the whole turn again (3 attempts); when it gives up, the run pauses resumably.
    expect(seen).toHaveLength(4);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'MODEL_UNAVAILABLE', interactionId: expect.any(String) });
    expect(events.some((event) => event.type === 'complete')).toBe(false);
  });

  it('classifies a daily-quota 429 after text as the HTTP 429 would be: not worth retrying soon, and saying so', async () => {
    const daily = limitedBody.replace('PerMinute', 'PerDay');
    const { baseUrl } = await gemini((_request, response) => sse(response, textEvent('The answer is') + errorEvent(daily)));
    const { chunks, error } = await collectUntilError(createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl }).streamGenerateContent('m', { contents: [] }));
    expect(chunks).toHaveLength(1);
    expect(error).toMatchObject({ code: 'RATE_LIMITED', details: { status: 429, retryable: false } });
    expect(error.message).toMatch(/daily Gemini quota is used up/);
  });
});

describe('createGeminiBackendClient reading a JSON array labelled as an event stream', () => {
  it('reads it as its chunks, each as it arrives, whatever whitespace comes first', async () => {
    const name = 'stream-nonsse-json-array-function-call-gemini-3-flash.json';
    const text = fixture(name);
    for (const lead of ['', '\r\n  ']) {
      let release: (by: string) => void = () => undefined;
      const firstRead = new Promise<string>((resolve) => (release = resolve));
      const firstEnd = text.indexOf('\n,') + 1;
      const { baseUrl } = await gemini((_request, response) => {
        // What some proxies do: the array of a server that ignored alt=sse, labelled as SSE.
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        // Whitespace alone first, read on its own before the array begins.
        response.write(lead);
        setTimeout(() => {
          for (let offset = 0; offset < firstEnd; offset += 7) response.write(text.slice(offset, Math.min(offset + 7, firstEnd)));
          setTimeout(() => release('timer'), 1000);
          void firstRead.then(() => response.end(text.slice(firstEnd)));
        }, lead ? 20 : 0);
      });
      const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
      const chunks: GenerateContentResponse[] = [];
      for await (const chunk of client.streamGenerateContent('m', { contents: [] })) {
        chunks.push(chunk);
        release('read');
      }
      expect(chunks, JSON.stringify(lead)).toEqual(JSON.parse(text));
      expect(await firstRead, JSON.stringify(lead)).toBe('read');
      await close?.();
      close = undefined;
    }
  });

  it('runs to completion on it, and still reads a real event stream that starts with blank lines as events', async () => {
    for (const body of [fixture('stream-nonsse-json-array-thought-summary-gemini-flash-latest.json'), `\r\n\r\n${textEvent('Scoop', 'STOP')}`]) {
      const { baseUrl } = await gemini((_request, response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(body.slice(0, 2));
        setTimeout(() => response.end(body.slice(2)), 10);
      });
      const events = await runChat({ apiKey: 'k', fetch, baseUrl });
      expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true, outcomes: { parts: [{ text: 'Scoop' }] } } });
      await close?.();
      close = undefined;
    }
  });
});
