import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { BackendClient, GenerateContentResponse } from '@org/core';
import { readModelBackendConfig } from './model-backend-env.js';
import { chooseModelProvider, createModelBackend, describeModelBackend, type ModelBackendConfig } from './model-backend.js';

const fixture = (name: string) => readFileSync(new URL(`../../../fixtures/${name}`, import.meta.url), 'utf8');
const typedSse = (text: string) =>
  text
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => `event: ${(JSON.parse(line) as { type: string }).type}\ndata: ${line}\n\n`)
    .join('');

interface Seen {
  url: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A loopback provider that answers every request with `stream`. */
async function provider(stream: string): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      seen.push({ url: request.url ?? '', headers: request.headers, body: JSON.parse(body) as Record<string, unknown> });
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(stream);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

async function text(backend: BackendClient, model = 'gemini-3-flash-preview'): Promise<string> {
  let answer = '';
  for await (const chunk of backend.streamGenerateContent(model, { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }) as AsyncIterable<GenerateContentResponse>) {
    for (const part of chunk.candidates?.[0]?.content?.parts ?? []) if (typeof part.text === 'string' && part.thought !== true) answer += part.text;
  }
  return answer;
}

describe('chooseModelProvider', () => {
  it('picks by explicit choice, then model name, then an OpenAI-compatible URL, with Gemini as the default', () => {
    const cases: Array<[ModelBackendConfig, string]> = [
      [{}, 'gemini'],
      [{ openaiApiKey: 'k', anthropicApiKey: 'k' }, 'gemini'],
      [{ model: 'claude-sonnet-4-5' }, 'anthropic'],
      [{ model: 'gpt-5-mini' }, 'openai'],
      [{ model: 'o4-mini' }, 'openai'],
      [{ model: 'gemini-3-pro-preview', openaiBaseUrl: 'http://localhost:11434/v1' }, 'gemini'],
      [{ model: 'qwen3', openaiBaseUrl: 'http://localhost:11434/v1' }, 'openai-compatible'],
      [{ model: 'gpt-oss:20b', openaiBaseUrl: 'http://localhost:11434/v1' }, 'openai-compatible'],
      [{ provider: 'openai', model: 'my-finetune' }, 'openai'],
    ];
    expect(cases.map(([config]) => chooseModelProvider(config))).toEqual(cases.map(([, expected]) => expected));
  });
});

describe('createModelBackend', () => {
  it('talks to OpenAI Responses with the key and the configured model, not the Gemini default', async () => {
    const mock = await provider(typedSse(fixture('openai/responses-text-plain.jsonl')));
    const config = { model: 'gpt-4.1-nano', openaiApiKey: 'sk-dev-0123456789' };
    const backendFor = createModelBackend(config, ((url: string, init: RequestInit) => fetch(url.replace('https://api.openai.com', mock.url), init)) as typeof fetch);
    expect(await text(backendFor('user-token'))).toMatch(/\S/);
    expect(mock.seen[0]).toMatchObject({ url: '/v1/responses', headers: { authorization: 'Bearer sk-dev-0123456789' }, body: { model: 'gpt-4.1-nano' } });
  });

  it('talks to Anthropic with its default model when only the provider is chosen', async () => {
    const mock = await provider(typedSse(fixture('anthropic/messages-text-plain.jsonl')));
    const backendFor = createModelBackend({ provider: 'anthropic', anthropicApiKey: 'sk-ant-dev-0123' }, ((url: string, init: RequestInit) =>
      fetch(url.replace('https://api.anthropic.com', mock.url), init)) as typeof fetch);
    expect(await text(backendFor())).toMatch(/\S/);
    expect(mock.seen[0]).toMatchObject({ url: '/v1/messages', headers: { 'x-api-key': 'sk-ant-dev-0123' }, body: { model: 'claude-sonnet-4-5' } });
  });

  it('talks to an OpenAI-compatible server at OPENAI_BASE_URL, with no key needed', async () => {
    const mock = await provider(fixture('openai-compat/openai-chat-text-usage.sse'));
    const backendFor = createModelBackend(readModelBackendConfig({ OPENAI_BASE_URL: `${mock.url}/v1/`, MODEL: 'qwen3' }), fetch);
    expect(await text(backendFor())).toMatch(/\S/);
    expect(mock.seen[0]).toMatchObject({ url: '/v1/chat/completions', body: { model: 'qwen3', stream: true } });
    expect(mock.seen[0]?.headers.authorization).toBeUndefined();
  });

  it('keeps Gemini (simulated when there is no key) as the default, and hands media steps to the caller upstream', async () => {
    const mock = await provider('data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP"}]}\n\n');
    const tokens: Array<string | undefined> = [];
    const upstream = (accessToken: string | undefined): BackendClient => {
      tokens.push(accessToken);
      return {
        streamGenerateContent: () => (async function* () {})(),
        executeStep: async () => ({ executionOutputs: {} }),
        uploadGeminiFile: async () => ({ fileUrl: 'files/x', mimeType: 'text/plain' }),
        uploadBlobFile: async () => '/board/blobs/x',
      };
    };
    const backendFor = createModelBackend({ geminiBaseUrl: `${mock.url}/v1beta`, upstream }, fetch);
    const backend = backendFor('user-token');
    expect(await text(backend)).toBe('hello');
    expect(mock.seen[0]?.headers['x-goog-api-key']).toBe('simulated');
    expect(await backend.uploadBlobFile('drive-id')).toBe('/board/blobs/x');
    expect(tokens).toEqual(['user-token']);
  });

  it('names the missing setting without echoing any secret', () => {
    expect(() => createModelBackend({ model: 'claude-opus-4-1', openaiApiKey: 'sk-secret-openai' }, fetch)).toThrow(
      expect.objectContaining({ code: 'BAD_REQUEST', message: 'ANTHROPIC_API_KEY is not set, but the model claude-opus-4-1 is an Anthropic model' }),
    );
    expect(() => createModelBackend({ openaiBaseUrl: 'http://localhost:11434/v1' }, fetch)).toThrow(expect.objectContaining({ message: expect.stringMatching(/^MODEL is not set/) }));
  });
});

describe('readModelBackendConfig', () => {
  it('reads the variables, treating empty ones as unset', () => {
    expect(
      readModelBackendConfig({ MODEL_PROVIDER: 'Anthropic', GEMINI_MODEL: 'claude-haiku-4-5', ANTHROPIC_API_KEY: 'k', OPENAI_API_KEY: '', OPENAI_BASE_URL: ' ' }),
    ).toEqual({ provider: 'anthropic', model: 'claude-haiku-4-5', anthropicApiKey: 'k' });
  });

  it('refuses an unusable URL or provider by name, without repeating a URL that may hold credentials', () => {
    let message = '';
    try {
      readModelBackendConfig({ OPENAI_BASE_URL: 'localhost:11434?key=s3cret' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toBe('OPENAI_BASE_URL must be an http(s) URL such as http://localhost:11434/v1');
    expect(() => readModelBackendConfig({ MODEL_PROVIDER: 'mistral' })).toThrow(/^MODEL_PROVIDER must be one of gemini, openai, anthropic, openai-compatible/);
  });

  it('describes the backend for the banner without keys or URL credentials', () => {
    const line = describeModelBackend(readModelBackendConfig({ OPENAI_BASE_URL: 'http://user:pw@localhost:11434/v1', MODEL: 'qwen3', OPENAI_API_KEY: 'sk-banner-secret' }));
    expect(line).toBe('Model:     OpenAI-compatible server at http://localhost:11434/v1 (qwen3)');
    // Gateways that take the key in the query string: the banner keeps the name, not the value.
    const gateway = describeModelBackend(readModelBackendConfig({ OPENAI_BASE_URL: 'https://gateway.example.test/v1?api_key=sk-query-secret&region=eu', MODEL: 'qwen3' }));
    expect(gateway).toBe('Model:     OpenAI-compatible server at https://gateway.example.test/v1?api_key=redacted&region=eu (qwen3)');
    expect(describeModelBackend({})).toBe('Model:     SIMULATED Gemini (no model key set)');
    expect(describeModelBackend({ model: 'gpt-5', openaiApiKey: 'sk-banner-secret' })).not.toContain('sk-banner');
  });
});
