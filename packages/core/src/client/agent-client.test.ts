import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import { createAgentHandler } from '../http/agent-handler.js';
import type { AgentEvent } from '../protocol/events.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  thoughtChunk,
  type ScriptedRequest,
} from '../testing/index.js';
import { AgentClientError, createAgentClient, dispatchAgentEvents } from './index.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Serves a Web handler on a loopback port, like the Node adapter does. */
async function serve(handler: (request: Request) => Promise<Response>): Promise<{ baseUrl: string; bodies: unknown[]; auth: Array<string | undefined> }> {
  const bodies: unknown[] = [];
  const auth: Array<string | undefined> = [];
  const server = createServer(async (incoming: IncomingMessage, outgoing: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of incoming) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    if (text) bodies.push(JSON.parse(text));
    auth.push(incoming.headers.authorization);
    const response = await handler(
      new Request(`http://127.0.0.1${incoming.url}`, {
        method: incoming.method,
        headers: incoming.headers as Record<string, string>,
        ...(incoming.method === 'POST' ? { body: text } : {}),
      }),
    );
    outgoing.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) outgoing.write(chunk);
    outgoing.end();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies, auth };
}

/** A model that asks for a name, then for a choice, then greets. */
function greeter(request: ScriptedRequest) {
  const responses = request.body.contents.flatMap((content) => content.parts.flatMap((part) => (part.functionResponse ? [part.functionResponse] : [])));
  const input = responses.find((response) => response.name === 'chat_request_user_input')?.response;
  const choice = responses.find((response) => response.name === 'chat_present_choices')?.response;
  if (!input) return [thoughtChunk('Asking for a name'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' }, { thoughtSignature: 's1' })];
  if (!choice) {
    return [
      functionCallChunk(
        'chat_present_choices',
        { user_message: 'Tea or coffee?', choices: [{ id: 'tea', label: 'Tea' }, { id: 'coffee', label: 'Coffee' }], selection_mode: 'single' },
        { thoughtSignature: 's2' },
      ),
    ];
  }
  const selected = JSON.stringify(choice.selected);
  return [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${String(input.user_input)}, ${selected}` }, { thoughtSignature: 's3' })];
}

async function greeterServer() {
  const backend = createScriptedBackendClient(greeter);
  const store = createMemoryInteractionStore();
  return serve(createAgentHandler({ createPorts: () => ({ backend, store }) }));
}

describe('createAgentClient', () => {
  it('answers each suspend through onSuspend and yields one uninterrupted event sequence', async () => {
    const { baseUrl, bodies, auth } = await greeterServer();
    const client = createAgentClient({ baseUrl, getAccessToken: () => 'token-1' });
    const run = client.startRun('Greet me', {
      onSuspend: (event) => {
        if (event.type === 'waitForInput') return { input: { parts: [{ text: 'Ada' }] } };
        if (event.type === 'waitForChoice') return { selected: { ids: [event.choices[1]?.id ?? ''] } };
        return {};
      },
    });
    const types: string[] = [];
    for await (const event of run.events) types.push(event.type);

    expect(types.filter((type) => type === 'waitForInput' || type === 'waitForChoice')).toEqual(['waitForInput', 'waitForChoice']);
    expect(types.at(0)).toBe('start');
    expect(types.at(-1)).toBe('complete');
    const result = await run.result;
    expect(result.success).toBe(true);
    expect(JSON.stringify(result.outcomes)).toContain('Hello Ada');
    expect(JSON.stringify(result.outcomes)).toContain('coffee');
    // Three requests: the start and two resumes, each carrying the token both ways.
    expect(bodies).toHaveLength(3);
    expect(bodies[0]).toMatchObject({ start: { segments: [{ type: 'text', text: 'Greet me' }] }, accessToken: 'token-1' });
    expect(bodies[1]).toMatchObject({ resume: { response: { input: { parts: [{ text: 'Ada' }] } } } });
    expect(auth).toEqual(['Bearer token-1', 'Bearer token-1', 'Bearer token-1']);
  });

  it('waits at a suspend until respond() is called, exposing the pending event', async () => {
    const { baseUrl } = await greeterServer();
    const run = createAgentClient({ baseUrl }).startRun([{ type: 'text', text: 'Greet me' }]);
    const seen: AgentEvent[] = [];
    await dispatchAgentEvents(run.events, {
      any: (event) => {
        seen.push(event);
      },
      waitForInput: (event) => {
        expect(run.pending).toBe(event);
        expect(run.interactionId).toBe(event.interactionId);
        queueMicrotask(() => run.respond({ input: { parts: [{ text: 'Grace' }] } }));
      },
      waitForChoice: () => {
        queueMicrotask(() => run.respond({ selected: { ids: ['tea'] } }));
      },
    });
    expect(seen.at(-1)?.type).toBe('complete');
    expect(run.pending).toBeUndefined();
    expect(JSON.stringify((await run.result).outcomes)).toContain('Hello Grace');
    expect(() => run.respond({})).toThrow(/not waiting/);
  });

  it('stops on abort() while waiting for the user, rejecting the result', async () => {
    const { baseUrl, bodies } = await greeterServer();
    const run = createAgentClient({ baseUrl }).startRun('Greet me');
    const types: string[] = [];
    for await (const event of run.events) {
      types.push(event.type);
      if (event.type === 'waitForInput') run.abort();
    }
    expect(types.at(-1)).toBe('waitForInput');
    await expect(run.result).rejects.toMatchObject({ kind: 'aborted', message: 'Run was stopped' });
    expect(bodies).toHaveLength(1);
  });

  it('turns an error event into a run error with the server message', async () => {
    const { baseUrl } = await greeterServer();
    const run = createAgentClient({ baseUrl }).resumeRun('no-such-interaction', { input: { parts: [{ text: 'x' }] } });
    const types: string[] = [];
    for await (const event of run.events) types.push(event.type);
    expect(types).toEqual(['error']);
    const error = await run.result.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgentClientError);
    expect(error).toMatchObject({ kind: 'run' });
    expect((error as Error).message).toContain('no-such-interaction');
  });

  it('reports a non-2xx answer as an http error carrying the server message and status', async () => {
    const { baseUrl } = await greeterServer();
    const run = createAgentClient({ baseUrl, path: '/v1beta1/nowhere' }).startRun('Hi');
    await expect(run.result).rejects.toMatchObject({ kind: 'http', status: 404, code: 'NOT_FOUND' });
    await expect(run.result).rejects.toThrow('404: No agent endpoint at /v1beta1/nowhere');
    await expect(async () => {
      for await (const _event of run.events) void _event;
    }).rejects.toThrow(AgentClientError);
  });

  it('reports an unreachable server as a network error', async () => {
    const { baseUrl } = await serve(async () => new Response('unused'));
    await new Promise((resolve) => servers.pop()?.close(resolve));
    const run = createAgentClient({ baseUrl }).startRun('Hi');
    await expect(run.result).rejects.toMatchObject({ kind: 'network' });
    await expect(run.result).rejects.toThrow(`Could not reach ${baseUrl}`);
  });

  it('rejects a paused run with its interactionId, and resumeRun() carries on from the saved turn', async () => {
    // The loop retries a transient failure twice; the third in a row pauses the run.
    let failures = 3;
    const backend = createScriptedBackendClient((request) => {
      if (request.body.contents.some((content) => content.role === 'model') && failures-- > 0) {
        throw new AgentError('RATE_LIMITED', 'Resource exhausted, try later');
      }
      return greeter(request);
    });
    const store = createMemoryInteractionStore();
    const { baseUrl } = await serve(
      createAgentHandler({ createPorts: () => ({ backend, store }), runOptions: () => ({ modelPolicy: { baseDelayMs: 1 } }) }),
    );
    const client = createAgentClient({ baseUrl });
    const answers = {
      onSuspend: (event: AgentEvent) =>
        event.type === 'waitForInput' ? { input: { parts: [{ text: 'Lin' }] } } : { selected: { ids: ['tea'] } },
    };
    const first = client.startRun('Greet me', answers);
    const paused = (await first.result.catch((error: unknown) => error)) as AgentClientError;
    expect(paused.kind).toBe('paused');
    expect(paused.code).toBe('RATE_LIMITED');
    expect(paused.interactionId).toEqual(expect.any(String));
    expect(first.interactionId).toBe(paused.interactionId);

    const again = client.resumeRun(paused.interactionId as string, {}, answers);
    expect(JSON.stringify((await again.result).outcomes)).toContain('Hello Lin');
  });

  it('explains bad arguments', () => {
    expect(() => createAgentClient({ baseUrl: '' })).toThrow(/baseUrl is required/);
    expect(() => createAgentClient({ baseUrl: 'http://x' }).startRun('  ')).toThrow(/objective is empty/);
  });
});
