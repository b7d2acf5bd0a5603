import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseSseStream } from '../sse/index.js';
import { createMemoryInteractionStore } from '../testing/index.js';
import { createAgentHandler } from './agent-handler.js';
import { createGeminiBackendClient } from './gemini-backend-client.js';
import { createUpstreamBackendClient } from './upstream-backend-client.js';

// Secrets that match no generic pattern, so only the clients' knowledge of them can hide them.
const API_KEY = 'k3y-Very-Secret-0451-abcdef';
const GOOGLE_STYLE_KEY = 'AIzaSyD-ech0-Test-Key-0123456789abcdefg';
const TOKEN = 'user-token-Tn8x-secret-77';
const URL_USER = 'gateway-user-91';
const URL_PASSWORD = 'gateway-pass-Zq4';
const ALL_SECRETS = [API_KEY, GOOGLE_STYLE_KEY, TOKEN, URL_USER, URL_PASSWORD];

type EchoMode = 'json-error' | 'text-error' | 'sse-error-chunk' | 'sse-text-chunk' | 'status-text' | 'text-error-cut' | 'sse-text-cut';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function listen(handler: (request: IncomingMessage, response: ServerResponse, body: string) => void): Promise<string> {
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => handler(request, response, body));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A model endpoint that puts everything it received (URL, headers, body) into its answer. */
async function echoingModel(mode: EchoMode): Promise<string> {
  return listen((request, response, body) => {
    const credentials = `${request.headers['x-goog-api-key'] ?? ''} ${request.headers.authorization ?? ''}`;
    const echo = `${credentials} ${request.method} ${request.url} headers=${JSON.stringify(request.headers)} raw=${request.rawHeaders.join(': ')} body=${body.slice(0, 200)}`;
    if (mode === 'status-text') {
      // Nothing in the body: the key is in the reason phrase of the status line.
      response.writeHead(400, `Invalid key ${credentials.trim()}`);
      response.end();
    } else if (mode === 'text-error-cut' || mode === 'sse-text-cut') {
      // The key straddles where an excerpt of the answer would be cut.
      const cut = mode === 'text-error-cut' ? 495 : 115;
      response.writeHead(mode === 'text-error-cut' ? 500 : 200, { 'content-type': mode === 'text-error-cut' ? 'text/plain' : 'text/event-stream' });
      const text = `${'x'.repeat(cut)}${credentials.trim()} and more`;
      response.end(mode === 'text-error-cut' ? text : `data: ${text}\n\n`);
    } else if (mode === 'json-error') {
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { code: 400, message: echo, status: 'INVALID_ARGUMENT', details: [{ echoed: request.headers }] } }));
    } else if (mode === 'text-error') {
      response.writeHead(500, { 'content-type': 'text/plain' });
      response.end(echo);
    } else {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(mode === 'sse-error-chunk' ? `data: ${JSON.stringify({ error: { code: 500, message: echo } })}\n\n` : `data: ${echo.replace(/\n/g, ' ')}\n\n`);
    }
  });
}

/** Runs one objective through the agent handler served on loopback and returns the raw SSE text. */
async function runAgainst(backend: ReturnType<typeof createGeminiBackendClient>): Promise<{ text: string; events: unknown[] }> {
  const store = createMemoryInteractionStore();
  const handler = createAgentHandler({ createPorts: () => ({ backend, store }), runOptions: () => ({ modelPolicy: { baseDelayMs: 1, maxDelayMs: 2 } }) });
  const agent = await listen(async (incoming, outgoing, body) => {
    const response = await handler(
      new Request(`http://127.0.0.1${incoming.url}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }),
    );
    outgoing.writeHead(response.status, Object.fromEntries(response.headers));
    outgoing.end(await response.text());
  });
  const response = await fetch(`${agent}/v1beta1/streamRunAgent?alt=sse`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ start: { segments: [{ type: 'text', text: 'Say hi' }] } }),
  });
  const text = await response.text();
  const events: unknown[] = [];
  for await (const event of parseSseStream(new Response(text).body as ReadableStream<Uint8Array>)) events.push(JSON.parse(event.data));
  return { text, events };
}

function expectNoSecret(text: string): void {
  for (const secret of ALL_SECRETS) {
    expect(text).not.toContain(secret);
    expect(text).not.toContain(encodeURIComponent(secret));
  }
}

describe('a model endpoint that echoes the request back', () => {
  for (const mode of ['json-error', 'text-error', 'sse-error-chunk', 'sse-text-chunk', 'status-text', 'text-error-cut', 'sse-text-cut'] as const) {
    it(`puts no API key or token into any event (${mode})`, async () => {
      const model = await echoingModel(mode);
      for (const auth of [{ apiKey: API_KEY }, { apiKey: GOOGLE_STYLE_KEY }, { accessToken: TOKEN }]) {
        const backend = createGeminiBackendClient({ ...auth, fetch, baseUrl: `${model}/v1beta`, retry: { maxAttempts: 1 } });
        const { text, events } = await runAgainst(backend);
        // The run did reach the model and ended in an error event that says something useful.
        const error = events.find((event) => typeof event === 'object' && event !== null && 'error' in event) as { error: { message: string } };
        if (mode.endsWith('-cut')) {
          // The excerpt ends before the secret would: not even its first characters are shown.
          expect(error?.error.message).toMatch(/x{100}/);
          for (const secret of ALL_SECRETS) expect(text).not.toContain(secret.slice(0, 5));
        } else {
          expect(error?.error.message).toMatch(/\[redacted\]/);
        }
        expectNoSecret(text);
      }
    });
  }

  it('keeps credentials in the base URL out of the error when the model cannot be reached', async () => {
    const model = await echoingModel('json-error');
    const withCredentials = model.replace('http://', `http://${URL_USER}:${URL_PASSWORD}@`);
    const backend = createGeminiBackendClient({ apiKey: API_KEY, fetch, baseUrl: `${withCredentials}/v1beta`, retry: { maxAttempts: 1 } });
    const { text, events } = await runAgainst(backend);
    expect(JSON.stringify(events)).toMatch(/Could not reach Gemini at http:\/\/\[redacted\]@127\.0\.0\.1/);
    expectNoSecret(text);
  });

  it('keeps the bearer token out of upstream step errors, whatever the upstream echoes', async () => {
    const upstream = await listen((request, response, body) => {
      const echo = `auth=${request.headers.authorization} body=${body}`;
      if (request.url === '/v1beta1/executeStep') {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ errorMessage: echo }));
      } else {
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: echo } }));
      }
    });
    const client = createUpstreamBackendClient({ baseUrl: upstream, fetch, accessToken: TOKEN });
    const step = await client.executeStep({ planStep: { stepName: 'x' } } as never).catch((error: Error) => error);
    const upload = await client.uploadBlobFile('drive-file').catch((error: Error) => error);
    for (const failure of [step, upload]) {
      expect(failure).toBeInstanceOf(Error);
      expect((failure as Error).message).toContain('[redacted]');
      expectNoSecret(JSON.stringify({ message: (failure as Error).message, details: (failure as { details?: unknown }).details }));
    }
  });
});
