import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { LLMContent } from '../protocol/content.js';
import type { GenerateContentRequest, GenerateContentResponse } from '../protocol/gemini.js';
import { createGeminiBackendClient } from './gemini-backend-client.js';
import { createPrefixCache } from './prefix-cache.js';

const stream = readFileSync(new URL('../../../../fixtures/gemini/stream-text-gemini-2.0-flash-basic.sse', import.meta.url), 'utf8');

interface Seen {
  method: string;
  url: string;
  body: string;
}

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/**
 * A Gemini API on loopback that streams a recorded answer and keeps `cachedContents` the way the
 * API does: created by POST, extended by PATCH, named in a request's `cachedContent`. A request
 * naming a cache it does not hold gets Gemini's 403.
 */
async function gemini(options: { refuseCreate?: boolean } = {}) {
  const seen: Seen[] = [];
  const caches = new Map<string, object>();
  const route = (request: IncomingMessage, response: ServerResponse, body: string): void => {
    const json = (status: number, value: unknown): void => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(value));
    };
    const url = request.url ?? '';
    if (request.method === 'POST' && url === '/v1beta/cachedContents') {
      if (options.refuseCreate) return json(400, { error: { code: 400, message: 'Cached content is too small.', status: 'INVALID_ARGUMENT' } });
      const name = `cachedContents/c${caches.size + 1}`;
      caches.set(name, JSON.parse(body) as object);
      return json(200, { name, model: 'models/gemini-2.5-flash', expireTime: new Date(Date.now() + 1_800_000).toISOString() });
    }
    if (request.method === 'PATCH' && url.startsWith('/v1beta/cachedContents/')) {
      return json(200, { name: url.slice('/v1beta/'.length).split('?')[0], expireTime: new Date(Date.now() + 1_800_000).toISOString() });
    }
    const sent = JSON.parse(body) as GenerateContentRequest;
    if (sent.cachedContent !== undefined && !caches.has(sent.cachedContent)) {
      return json(403, { error: { code: 403, message: 'CachedContent not found (or permission denied)', status: 'PERMISSION_DENIED' } });
    }
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.end(stream);
  };
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      seen.push({ method: request.method ?? '', url: request.url ?? '', body });
      route(request, response, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1beta`, seen, caches };
}

async function drain(iterable: AsyncIterable<GenerateContentResponse>): Promise<number> {
  let chunks = 0;
  for await (const _chunk of iterable) chunks += 1;
  return chunks;
}

const declarations = (names: string[]) => [
  { functionDeclarations: names.map((name) => ({ name, description: `Does ${name}. ${'Explains at length. '.repeat(40)}`, parameters: { type: 'object' } })) },
];

function body(turn: number, names = ['a', 'b', 'c']): GenerateContentRequest {
  const contents: LLMContent[] = [];
  for (let index = 0; index <= turn; index += 1) contents.push({ role: 'user', parts: [{ text: `message ${index}` }] });
  return {
    contents,
    systemInstruction: { parts: [{ text: 'You are a careful agent.' }], role: 'user' },
    tools: declarations(names),
    toolConfig: { functionCallingConfig: { mode: 'ANY' } },
    generationConfig: { temperature: 1 },
  };
}

const streamed = (seen: Seen[]) => seen.filter((entry) => entry.url.includes(':streamGenerateContent')).map((entry) => JSON.parse(entry.body) as GenerateContentRequest);

describe('prefix caching', () => {
  it('caches the instruction and declarations once and sends only their name, with the same contents and settings', async () => {
    const { baseUrl, seen, caches } = await gemini();
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache: createPrefixCache({ minPrefixBytes: 0 }) });
    for (let turn = 0; turn < 3; turn += 1) expect(await drain(client.streamGenerateContent('gemini-2.5-flash', body(turn)))).toBeGreaterThan(0);
    expect(seen.filter((entry) => entry.url === '/v1beta/cachedContents')).toHaveLength(1);
    expect(caches.get('cachedContents/c1')).toEqual({
      model: 'models/gemini-2.5-flash',
      systemInstruction: body(0).systemInstruction,
      tools: body(0).tools,
      toolConfig: body(0).toolConfig,
      contents: [],
      ttl: '1800s',
    });
    const requests = streamed(seen);
    expect(requests).toHaveLength(3);
    requests.forEach((request, turn) => expect(request).toEqual({ contents: body(turn).contents, generationConfig: { temperature: 1 }, cachedContent: 'cachedContents/c1' }));
    const whole = JSON.stringify(body(2)).length;
    expect(seen.at(-1)?.body.length).toBeLessThan(whole / 4);
  });

  it('never uses a cached prefix for requests whose tools differ from it', async () => {
    const { baseUrl, seen, caches } = await gemini();
    const prefixCache = createPrefixCache({ minPrefixBytes: 0 });
    const first = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache });
    const second = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache });
    await drain(first.streamGenerateContent('gemini-2.5-flash', body(0, ['a', 'b'])));
    await drain(second.streamGenerateContent('gemini-2.5-flash', body(0, ['a', 'b'])));
    await drain(second.streamGenerateContent('gemini-2.5-flash', body(0, ['a', 'b', 'generate_html'])));
    // Two clients with one table share the first prefix; the third request declares another set.
    expect(streamed(seen).map((request) => request.cachedContent)).toEqual(['cachedContents/c1', 'cachedContents/c1', 'cachedContents/c2']);
    expect((caches.get('cachedContents/c2') as GenerateContentRequest).tools).toEqual(declarations(['a', 'b', 'generate_html']));
    // Another key is another project: it never sees the first key's caches.
    const stranger = createGeminiBackendClient({ apiKey: 'other', fetch, baseUrl, prefixCache });
    await drain(stranger.streamGenerateContent('gemini-2.5-flash', body(0, ['a', 'b'])));
    expect(streamed(seen).at(-1)?.cachedContent).toBe('cachedContents/c3');
  });

  it('looks up the prefix again when the same tools array was changed between requests', async () => {
    const { baseUrl, seen, caches } = await gemini();
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache: createPrefixCache({ minPrefixBytes: 0 }) });
    const request = body(0, ['a', 'b']);
    await drain(client.streamGenerateContent('gemini-2.5-flash', request));
    request.tools?.[0]?.functionDeclarations?.push({ name: 'c', description: 'Does c.' });
    await drain(client.streamGenerateContent('gemini-2.5-flash', request));
    expect(streamed(seen).map((sent) => sent.cachedContent)).toEqual(['cachedContents/c1', 'cachedContents/c2']);
    expect((caches.get('cachedContents/c2') as GenerateContentRequest).tools?.[0]?.functionDeclarations?.map((declaration) => declaration.name)).toEqual(['a', 'b', 'c']);
  });

  it('sends requests whole when the prefix cannot be cached, and does not ask again at once', async () => {
    const { baseUrl, seen } = await gemini({ refuseCreate: true });
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache: createPrefixCache({ minPrefixBytes: 0 }) });
    await drain(client.streamGenerateContent('gemini-2.5-flash', body(0)));
    await drain(client.streamGenerateContent('gemini-2.5-flash', body(1)));
    expect(seen.filter((entry) => entry.url === '/v1beta/cachedContents')).toHaveLength(1);
    expect(streamed(seen)).toEqual([body(0), body(1)]);
  });

  it('sends a request again whole when its cached prefix is gone, and the next ones too', async () => {
    const { baseUrl, seen, caches } = await gemini();
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache: createPrefixCache({ minPrefixBytes: 0 }) });
    await drain(client.streamGenerateContent('gemini-2.5-flash', body(0)));
    caches.clear();
    expect(await drain(client.streamGenerateContent('gemini-2.5-flash', body(1)))).toBeGreaterThan(0);
    await drain(client.streamGenerateContent('gemini-2.5-flash', body(2)));
    expect(streamed(seen).map((request) => request.cachedContent ?? 'whole')).toEqual(['cachedContents/c1', 'cachedContents/c1', 'whole', 'whole']);
    expect(streamed(seen).at(-1)).toEqual(body(2));
  });

  it('extends a prefix in use after two thirds of its life and creates it again once it expired', async () => {
    const { baseUrl, seen } = await gemini();
    let now = Date.now();
    const prefixCache = createPrefixCache({ minPrefixBytes: 0, now: () => now });
    const client = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache });
    const created = () => seen.filter((entry) => entry.method === 'POST' && entry.url === '/v1beta/cachedContents').length;
    const extended = () => seen.filter((entry) => entry.method === 'PATCH');
    await drain(client.streamGenerateContent('gemini-2.5-flash', body(0)));
    now += 1_000_000;
    await drain(client.streamGenerateContent('gemini-2.5-flash', body(1)));
    expect(extended()).toHaveLength(0);
    now += 300_000;
    await drain(client.streamGenerateContent('gemini-2.5-flash', body(2)));
    await expect.poll(() => extended().length).toBe(1);
    expect(extended()[0]).toMatchObject({ url: '/v1beta/cachedContents/c1?updateMask=ttl', body: '{"ttl":"1800s"}' });
    expect(created()).toBe(1);
    // The fake's expiry times are real-clock ones; far past them the prefix is created anew.
    now += 10 * 3_600_000;
    await drain(client.streamGenerateContent('gemini-2.5-flash', body(3)));
    expect(created()).toBe(2);
    expect(streamed(seen).at(-1)?.cachedContent).toBe('cachedContents/c2');
  });

  it('is off by default for any endpoint but the Gemini API, and for small prefixes', async () => {
    const { baseUrl, seen } = await gemini();
    const local = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl });
    await drain(local.streamGenerateContent('gemini-2.5-flash', body(0, Array.from({ length: 40 }, (_, index) => `f${index}`))));
    const small = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache: createPrefixCache() });
    await drain(small.streamGenerateContent('gemini-2.5-flash', body(0, ['a'])));
    expect(seen.map((entry) => entry.url).filter((url) => url.includes('cachedContents'))).toEqual([]);
    expect(streamed(seen).every((request) => request.cachedContent === undefined)).toBe(true);
  });
});
