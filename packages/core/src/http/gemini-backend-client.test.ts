import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { createGeminiBackendClient } from './gemini-backend-client.js';

const fixtures = new URL('../../../../fixtures/gemini/', import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, fixtures), 'utf8');

type Route = (request: IncomingMessage, response: ServerResponse, body: string) => void;
let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

async function gemini(route: Route): Promise<{ baseUrl: string; seen: Array<{ url: string; key: string; body: string }> }> {
  const seen: Array<{ url: string; key: string; body: string }> = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      seen.push({ url: request.url ?? '', key: String(request.headers['x-goog-api-key']), body });
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

  it('says which setting is missing for media calls', async () => {
    const client = createGeminiBackendClient({ apiKey: 'k', fetch });
    await expect(client.uploadBlobFile('x')).rejects.toThrow(/options\.upstream/);
  });
});
