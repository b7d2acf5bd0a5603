import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentHandler } from '../http/agent-handler.js';
import { createUpstreamBackendClient } from '../http/upstream-backend-client.js';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk } from '../testing/index.js';
import { base64ToText } from '../protocol/base64.js';

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function listen(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function bodyOf(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

describe('generate_images through the HTTP server and an upstream executeStep', () => {
  it('completes with the generated image in intermediate', async () => {
    const steps: Array<{ path: string; auth: string | undefined; body: Record<string, any> }> = [];
    const upstream = await listen(async (request, response) => {
      steps.push({ path: request.url ?? '', auth: request.headers.authorization, body: JSON.parse(await bodyOf(request)) });
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ executionOutputs: { generated_image: { chunks: [{ mimetype: 'image/png', data: PNG }] } } }));
    });

    const model = createScriptedBackendClient(
      (request) =>
        request.body.contents.some((content) => content.parts.some((part) => part.functionResponse?.name === 'generate_images'))
          ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Here: <file src="/mnt/sunset.png" />' }, { thoughtSignature: 's2' })]
          : [functionCallChunk('generate_images', { prompt: 'A sunset over the sea', images: [], aspect_ratio: '1:1', file_name: 'sunset' }, { thoughtSignature: 's1' })],
    );
    const store = createMemoryInteractionStore();
    const handler = createAgentHandler({
      createPorts: ({ accessToken }) => {
        const media = createUpstreamBackendClient({ baseUrl: upstream, fetch, accessToken: accessToken ?? '' });
        return { backend: { ...model, streamGenerateContent: model.streamGenerateContent.bind(model), executeStep: media.executeStep }, store };
      },
    });
    const agent = await listen(async (incoming, outgoing) => {
      const text = await bodyOf(incoming);
      const response = await handler(new Request(`http://127.0.0.1${incoming.url}`, { method: 'POST', body: text, headers: { 'content-type': 'application/json' } }));
      outgoing.writeHead(response.status, Object.fromEntries(response.headers));
      outgoing.end(await response.text());
    });

    const response = await fetch(`${agent}/v1beta1/streamRunAgent?alt=sse`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ start: { segments: [{ type: 'text', text: 'Draw a sunset' }] }, accessToken: 'user-token' }),
    });
    const events = (await response.text())
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => JSON.parse(line.slice(6)) as Record<string, any>);

    expect(steps).toHaveLength(1);
    expect(steps[0]?.path).toBe('/v1beta1/executeStep');
    expect(steps[0]?.auth).toBe('Bearer user-token');
    expect(steps[0]?.body.planStep).toEqual({
      stepName: 'AI Image Tool',
      modelApi: 'ai_image_tool',
      inputParameters: ['input_instruction', 'input_image'],
      systemPrompt: '',
      options: { modelName: 'gemini-2.5-flash-image', disablePromptRewrite: true },
      output: 'generated_image',
    });
    expect(base64ToText(steps[0]?.body.execution_inputs.input_instruction.chunks[0].data)).toBe('A sunset over the sea');
    expect(base64ToText(steps[0]?.body.execution_inputs.aspect_ratio_key.chunks[0].data)).toBe('1:1');

    const update = events.find((event) => event.functionCallUpdate?.status === 'Generating Image(s)');
    expect(update).toBeDefined();
    const complete = events.find((event) => event.complete)?.complete;
    expect(complete.result.success).toBe(true);
    expect(complete.result.intermediate).toEqual([{ path: '/mnt/sunset.png', content: { inlineData: { mimeType: 'image/png', data: PNG } } }]);
    expect(complete.result.outcomes.parts).toContainEqual({ inlineData: { mimeType: 'image/png', data: PNG } });
  });
});
