import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineFunction, toFunctionDeclaration } from '../functions/index.js';
import {
  createAnthropicBackendClient,
  createGeminiBackendClient,
  createOpenAiCompatibleBackendClient,
  createOpenAiResponsesBackendClient,
} from '../http/index.js';
import type { BackendClient } from '../ports/index.js';
import { run } from '../run/index.js';
import { createMemoryInteractionStore, createScriptedBackendClient, textChunk } from '../testing/index.js';
import { fieldsJson, fixedFrom, fixedJson, isFixed } from './fixed-json.js';
import type { GenerateContentRequest } from './gemini.js';

const stream = readFileSync(new URL('../../../../fixtures/gemini/stream-text-gemini-2.0-flash-basic.sse', import.meta.url), 'utf8');

describe('fixed JSON', () => {
  it('writes an object with fixed fields exactly as JSON.stringify does', () => {
    const tools = fixedFrom([fixedJson({ functionDeclarations: [{ name: 'f', description: 'Quotes "this"\nand that.', parameters: { type: 'object' } }] })]);
    const body = {
      contents: [{ role: 'user', parts: [{ text: 'ü and \u2028' }] }],
      generationConfig: fixedJson({ temperature: 1, thinkingConfig: { includeThoughts: true, thinkingBudget: -1 } }),
      tools,
      skipped: undefined,
      'odd "key"': [1, null, 'x'],
    };
    expect(fieldsJson(body)).toBe(JSON.stringify(body));
    expect(fieldsJson({})).toBe('{}');
  });

  it('keeps a frozen copy, and leaves the value it was given as it was', () => {
    const original = { name: 'f', schema: { type: 'object', required: ['a'] } };
    const fixed = fixedJson(original);
    expect(fixed).toEqual(original);
    expect(fixed).not.toBe(original);
    expect(Object.isFrozen(fixed.schema.required)).toBe(true);
    expect(() => fixed.schema.required.push('b')).toThrow(TypeError);
    expect(Object.isFrozen(original) || Object.isFrozen(original.schema)).toBe(false);
    original.schema.required.push('b');
    expect(fieldsJson({ fixed })).toBe('{"fixed":{"name":"f","schema":{"type":"object","required":["a"]}}}');
  });

  it('refuses to fix a container with a member that could still change', () => {
    expect(() => fixedFrom([{ mutable: true }])).toThrow(/neither fixed nor a primitive/);
    expect(isFixed(fixedFrom(['a', 1, null]))).toBe(true);
    expect(isFixed({})).toBe(false);
  });

  it('gives declarations that are frozen copies, leaving the schema defaults handlers get unfrozen', () => {
    const tags = ['a'];
    const definition = defineFunction({
      name: 'tag',
      description: 'Tags a thing.',
      parameters: z.object({ tags: z.array(z.string()).default(tags) }),
      handler: async ({ tags: given }) => ({ count: given.length }),
    });
    const declaration = toFunctionDeclaration(definition);
    expect(Object.isFrozen(declaration.parametersJsonSchema)).toBe(true);
    expect(Object.isFrozen(tags)).toBe(false);
    expect(toFunctionDeclaration(definition)).toBe(declaration);
  });

  it('sends every request of a run with the default groups as the JSON of the body the run announced', async () => {
    const bodies: string[] = [];
    const server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        bodies.push(body);
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.end(stream);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1beta`;
      const backend = createGeminiBackendClient({ apiKey: 'k', fetch, baseUrl, prefixCache: false });
      const announced: GenerateContentRequest[] = [];
      for (const mode of ['chat', 'objective'] as const) {
        for await (const event of run({ segments: [{ type: 'text', text: 'Say hello.' }] }, { backend, store: createMemoryInteractionStore() }, { mode, model: 'gemini-2.5-flash', maxTurns: 2 })) {
          if (event.type === 'sendRequest') announced.push(event.body as GenerateContentRequest);
        }
      }
      expect(announced.length).toBeGreaterThanOrEqual(2);
      expect(bodies).toEqual(announced.map((body) => JSON.stringify(body)));
      const first = JSON.parse(bodies[0] as string) as GenerateContentRequest;
      expect(first.tools?.[0]?.functionDeclarations?.length).toBeGreaterThan(5);
      expect(first.systemInstruction?.parts[0]?.text?.length).toBeGreaterThan(100);
      expect(announced.some((body) => body.toolConfig?.functionCallingConfig?.mode === 'ANY')).toBe(true);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('lets other providers write the same request for the fixed body of a run as for a plain copy of it', async () => {
    const capture = createScriptedBackendClient([[textChunk('Hello.')]]);
    for await (const _event of run({ segments: [{ type: 'text', text: 'Say hello.' }] }, { backend: capture, store: createMemoryInteractionStore() }, { mode: 'objective', model: 'gemini-2.5-flash', maxTurns: 1 })) {
      // Only the request matters.
    }
    const fixed = capture.requests[0]?.body as GenerateContentRequest;
    expect(isFixed(fixed.tools)).toBe(true);
    const sent: string[] = [];
    // Each provider's stream ends at once: an error status after the request was captured.
    const fetch = (async (_url: string, init: RequestInit) => {
      sent.push(init.body as string);
      return new Response('{"error":{"message":"stop here"}}', { status: 400, headers: { 'content-type': 'application/json' } });
    }) as typeof globalThis.fetch;
    const clients: BackendClient[] = [
      createOpenAiCompatibleBackendClient({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9/v1', fetch }),
      createAnthropicBackendClient({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', fetch, serverTools: [{ type: 'code_execution_20250522', name: 'code_execution' }] }),
      createOpenAiResponsesBackendClient({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9/v1', fetch, hostedTools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }),
    ];
    for (const client of clients) {
      for (const body of [fixed, structuredClone(fixed)]) {
        await expect(async () => {
          for await (const _chunk of client.streamGenerateContent('some-model', body)) {
            // Never reached.
          }
        }).rejects.toThrow();
      }
    }
    expect(sent).toHaveLength(6);
    for (let index = 0; index < 6; index += 2) {
      expect(sent[index]).toBe(sent[index + 1]);
      expect((JSON.parse(sent[index] as string) as { tools: unknown[] }).tools.length).toBeGreaterThan(5);
    }
  });
});
