import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
  type ChatInit,
  type ChatState,
  type ChatStatus,
  type UIMessageChunk,
} from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentError } from '../errors/index.js';
import { defineFunction } from '../functions/index.js';
import { createGeminiBackendClient } from '../http/index.js';
import type { AgentPorts, BackendClient, InteractionStore, SessionLog } from '../ports/index.js';
import { createMemorySessionLog, createMemoryEventBus } from '../sessions/memory-session-log.js';
import { parseSseStream } from '../sse/index.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  createSimulatedGemini,
  functionCallChunk,
  textChunk,
  thoughtChunk,
} from '../testing/index.js';
import type { AgentUIMessage } from './agent-ui-message.js';
import { createUiMessageStreamHandler, type UiMessageStreamHandlerOptions } from './ui-message-stream-handler.js';

const OBJECTIVE = 'Ask for my name, then let me pick a time of day, and greet me.';
const API = 'http://chat.test/api/chat';

/** `useChat`'s state, kept in plain arrays: the AI SDK's own chat logic drives the conversation. */
class TestChat extends AbstractChat<AgentUIMessage> {
  constructor(init: Omit<ChatInit<AgentUIMessage>, 'messages'> & { messages?: AgentUIMessage[] }) {
    const state = new ArrayChatState(init.messages ?? []);
    super({ ...init, state });
  }
}

class ArrayChatState implements ChatState<AgentUIMessage> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: AgentUIMessage[];
  constructor(messages: AgentUIMessage[]) {
    this.messages = messages;
  }
  pushMessage = (message: AgentUIMessage): void => {
    this.messages = [...this.messages, message];
  };
  popMessage = (): void => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: AgentUIMessage): void => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

interface Setup {
  handler: (request: Request) => Promise<Response>;
  store: InteractionStore;
  /** Every request the chat sent, with the raw UI message stream it got back. */
  exchanges: Array<{ body: Record<string, unknown>; status: number; stream: string }>;
  transport: (token?: string) => DefaultChatTransport<AgentUIMessage>;
}

function simulatedBackend(): { backend: BackendClient; gemini: ReturnType<typeof createSimulatedGemini> } {
  const gemini = createSimulatedGemini();
  const backend = createGeminiBackendClient({ apiKey: 'simulated', fetch: (input, init) => gemini.fetch(new Request(input, init)) });
  return { backend, gemini };
}

function setup(overrides: Partial<UiMessageStreamHandlerOptions> & { backend?: BackendClient; store?: InteractionStore } = {}): Setup {
  const store = overrides.store ?? createMemoryInteractionStore();
  const backend = overrides.backend ?? simulatedBackend().backend;
  const handler = createUiMessageStreamHandler({ createPorts: (): AgentPorts => ({ backend, store }), ...overrides });
  const exchanges: Setup['exchanges'] = [];
  const transport = (token?: string) =>
    new DefaultChatTransport<AgentUIMessage>({
      api: API,
      ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
      fetch: async (input, init) => {
        const request = new Request(input as string, init as RequestInit);
        const body = JSON.parse(await request.clone().text()) as Record<string, unknown>;
        const response = await handler(request);
        const stream = await response.clone().text();
        exchanges.push({ body, status: response.status, stream });
        return response;
      },
    });
  return { handler, store, exchanges, transport };
}

/** A store that takes a moment for each call, as a remote one does, and the memory behind it. */
function slowStore(): { store: InteractionStore; memory: InteractionStore } {
  const memory = createMemoryInteractionStore();
  const pause = () => new Promise((resolve) => setTimeout(resolve, 10));
  const store: InteractionStore = {
    ...memory,
    get: async (id) => (await pause(), memory.get(id)),
    set: async (id, record, expected) => (await pause(), memory.set(id, record, expected)),
  };
  return { store, memory };
}

/** Resolves once the chat finished a response (and any request it sent on its own after it). */
function settled(chat: TestChat): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (chat.status === 'ready') resolve();
      else if (chat.status === 'error') reject(chat.error ?? new Error('chat error'));
      else setTimeout(check, 5);
    };
    setTimeout(check, 5);
  });
}

function lastAssistant(chat: TestChat): AgentUIMessage {
  const message = chat.messages.at(-1);
  if (message?.role !== 'assistant') throw new Error(`expected an assistant message last, got ${message?.role}`);
  return message;
}

function toolPart(message: AgentUIMessage, name: string) {
  const part = message.parts.find((candidate) => candidate.type === `tool-${name}`);
  if (!part || !('toolCallId' in part)) throw new Error(`no ${name} part`);
  return part;
}

function textOf(message: AgentUIMessage): string {
  return message.parts.map((part) => (part.type === 'text' ? part.text : '')).join('');
}

function chunksOf(stream: string): Array<Record<string, unknown>> {
  return stream
    .split('\n\n')
    .map((block) => block.replace(/^data: /, ''))
    .filter((data) => data.startsWith('{'))
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}

async function answerName(chat: TestChat, name: string): Promise<void> {
  const ask = toolPart(lastAssistant(chat), 'chat_request_user_input');
  await chat.addToolOutput({ tool: 'chat_request_user_input', toolCallId: ask.toolCallId, output: { input: { role: 'user', parts: [{ text: name }] } } });
  await settled(chat);
}

async function pickChoice(chat: TestChat, id: string): Promise<void> {
  const choose = toolPart(lastAssistant(chat), 'chat_present_choices');
  await chat.addToolOutput({ tool: 'chat_present_choices', toolCallId: choose.toolCallId, output: { selected: { ids: [id] } } });
  await settled(chat);
}

describe('createUiMessageStreamHandler with the AI SDK chat and DefaultChatTransport', () => {
  it('runs the conversation: reasoning and tools stream in, the name and the choice are answered as tool outputs, the greeting and the plan file arrive', async () => {
    const { backend, gemini } = simulatedBackend();
    const { transport, exchanges } = setup({ backend });
    const chat = new TestChat({ id: 'chat-1', transport: transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });

    await chat.sendMessage({ text: OBJECTIVE });
    await settled(chat);
    let message = lastAssistant(chat);
    expect(message.parts.some((part) => part.type === 'reasoning' && part.text.includes('Planning'))).toBe(true);
    expect(toolPart(message, 'system_write_file')).toMatchObject({ state: 'output-available', output: { file_path: '/mnt/plan.md' } });
    const ask = toolPart(message, 'chat_request_user_input');
    expect(ask).toMatchObject({ state: 'input-available', input: { user_message: 'What is your name?' } });
    expect(message.parts).toContainEqual(expect.objectContaining({ type: 'data-suspend', id: ask.toolCallId }));
    expect(message.parts.some((part) => part.type === 'data-usage')).toBe(true);
    expect(exchanges[0]?.stream).toMatch(/"finishReason":"tool-calls"/);

    await answerName(chat, 'Ada');
    message = lastAssistant(chat);
    expect(chat.messages).toHaveLength(2); // the answer continued the same assistant message
    expect(toolPart(message, 'chat_present_choices')).toMatchObject({ state: 'input-available', input: { choices: expect.arrayContaining([{ id: 'noon', label: 'Noon' }]) } });

    await pickChoice(chat, 'noon');
    message = lastAssistant(chat);
    expect(textOf(message)).toContain('Hello, Ada!');
    expect(textOf(message)).toContain('You chose noon.');
    const fileIndex = message.parts.findIndex((part) => part.type === 'data-file' && part.data.path === '/mnt/plan.md');
    const file = message.parts[fileIndex + 1];
    expect(file).toMatchObject({ type: 'file', mediaType: 'text/markdown' });
    const url = (file as { url: string }).url;
    expect(new TextDecoder().decode(Uint8Array.from(atob(url.split(',')[1] ?? ''), (character) => character.charCodeAt(0)))).toContain('# Plan');

    // Three requests: the message, then each answer, sent by the chat itself; a finished run is not sent again.
    expect(exchanges.map((exchange) => exchange.status)).toEqual([200, 200, 200]);
    expect(lastAssistantMessageIsCompleteWithToolCalls({ messages: chat.messages })).toBe(false);
    // The answers reached the model exactly; every replayed call kept its signature (the simulated Gemini refuses otherwise).
    const lastRequest = gemini.requests.at(-1)?.body.contents ?? [];
    expect(JSON.stringify(lastRequest)).toContain('"user_input":"Ada"');
    expect(JSON.stringify(lastRequest)).toContain('"selected":["noon"]');
    // Provider data never reaches the page.
    for (const exchange of exchanges) expect(exchange.stream).not.toMatch(/thoughtSignature|providerMetadata|c2ltOnNpZ25lZDo/);
    expect(JSON.stringify(chat.messages)).not.toMatch(/thoughtSignature|providerMetadata/);
  });

  it('restores the conversation of a chat after a reload, and the restored page answers the waiting question', async () => {
    const { transport, handler } = setup();
    const first = new TestChat({ id: 'chat-reload', transport: transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await first.sendMessage({ text: OBJECTIVE });
    await settled(first);
    await answerName(first, 'Grace');

    const restored = await handler(new Request(`${API}/chat-reload`, { headers: { authorization: 'Bearer token-a' } }));
    expect(restored.status).toBe(200);
    const { messages } = (await restored.json()) as { messages: AgentUIMessage[] };
    expect(messages.map((message) => message.role)).toEqual(['user', 'assistant']);
    expect(messages[0]?.parts).toEqual([{ type: 'text', text: OBJECTIVE }]);
    const assistant = messages[1] as AgentUIMessage;
    expect(toolPart(assistant, 'chat_request_user_input')).toMatchObject({ state: 'output-available', output: { input: { parts: [{ text: 'Grace' }] } } });
    expect(toolPart(assistant, 'chat_present_choices')).toMatchObject({ state: 'input-available' });
    expect(lastAssistantMessageIsCompleteWithToolCalls({ messages })).toBe(false);

    const second = new TestChat({ id: 'chat-reload', messages, transport: transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await pickChoice(second, 'sunset');
    expect(textOf(lastAssistant(second))).toContain('Hello, Grace! You chose sunset.');

    // Someone else cannot read it.
    const stranger = await handler(new Request(`${API}/chat-reload`, { headers: { authorization: 'Bearer token-b' } }));
    expect(stranger.status).toBe(403);
  });

  it('restores the whole conversation from a log that answers each read with a few events', async () => {
    const memory = createMemorySessionLog();
    // A log may keep its replies small (a reply-size bound): two events a read at most.
    const log: SessionLog = { ...memory, read: (id, after, limit) => memory.read(id, after, Math.min(limit, 2)) };
    const { transport, handler } = setup({ sessions: { log, bus: createMemoryEventBus() } });
    const chat = new TestChat({ id: 'chat-small-reads', transport: transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: OBJECTIVE });
    await settled(chat);
    await answerName(chat, 'Grace');

    const restored = await handler(new Request(`${API}/chat-small-reads`, { headers: { authorization: 'Bearer token-a' } }));
    const { messages } = (await restored.json()) as { messages: AgentUIMessage[] };
    const assistant = messages[1] as AgentUIMessage;
    expect(toolPart(assistant, 'chat_request_user_input')).toMatchObject({ state: 'output-available', output: { input: { parts: [{ text: 'Grace' }] } } });
    expect(toolPart(assistant, 'chat_present_choices')).toMatchObject({ state: 'input-available' });
  });

  it('refuses an answer from another user with FORBIDDEN and leaves the run to its owner', async () => {
    const { transport, exchanges } = setup();
    const owner = new TestChat({ id: 'chat-owned', transport: transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await owner.sendMessage({ text: OBJECTIVE });
    await settled(owner);

    const thief = new TestChat({ id: 'chat-owned', messages: owner.messages, transport: transport('token-b'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    const ask = toolPart(lastAssistant(thief), 'chat_request_user_input');
    await thief.addToolOutput({ tool: 'chat_request_user_input', toolCallId: ask.toolCallId, output: { input: { parts: [{ text: 'Mallory' }] } } });
    await expect(settled(thief)).rejects.toThrow(/FORBIDDEN/);
    expect(exchanges.at(-1)?.status).toBe(403);

    await answerName(owner, 'Ada');
    expect(toolPart(lastAssistant(owner), 'chat_present_choices')).toMatchObject({ state: 'input-available' });
  });

  it('continues a chat on another instance that shares the store and the session log', async () => {
    const store = createMemoryInteractionStore();
    const sessions = { log: createMemorySessionLog(), bus: createMemoryEventBus() };
    const one = setup({ store, sessions });
    const two = setup({ store, sessions });
    const chat = new TestChat({ id: 'chat-shared', transport: one.transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: OBJECTIVE });
    await settled(chat);

    const elsewhere = new TestChat({ id: 'chat-shared', messages: chat.messages, transport: two.transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await answerName(elsewhere, 'Ada');
    await pickChoice(elsewhere, 'noon');
    expect(textOf(lastAssistant(elsewhere))).toContain('Hello, Ada! You chose noon.');
    expect(two.exchanges).toHaveLength(2);
  });

  it('refuses an answer that is not one of the choices, naming the field, and keeps the question open', async () => {
    const { transport, exchanges } = setup();
    const chat = new TestChat({ id: 'chat-bad', transport: transport(), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: OBJECTIVE });
    await settled(chat);
    await answerName(chat, 'Ada');
    const choose = toolPart(lastAssistant(chat), 'chat_present_choices');
    await chat.addToolOutput({ tool: 'chat_present_choices', toolCallId: choose.toolCallId, output: { selected: { ids: ['midnight'] } } });
    await expect(settled(chat)).rejects.toThrow(/BAD_REQUEST/);
    const refusal = exchanges.at(-1);
    expect(refusal?.status).toBe(400);
    expect(refusal?.stream).toMatch(/messages\[1\]\.parts\[\d+\]\.output\.selected\.ids\[0\]: \\"midnight\\" is not one of the choices \(sunrise, noon, sunset\)/);

    // The same question, answered properly, goes on.
    const retry = new TestChat({ id: 'chat-bad', messages: chat.messages.map((message) => structuredClone(message)), transport: transport(), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await pickChoice(retry, 'noon');
    expect(textOf(lastAssistant(retry))).toContain('You chose noon.');
  });

  it('asks for consent as a tool approval and runs the call once the user approves', async () => {
    const backend = createScriptedBackendClient((request) => {
      if ((request.body.tools ?? []).some((tool) => 'urlContext' in tool)) return [textChunk('The page says hello.')];
      const last = request.body.contents.at(-1)?.parts[0]?.functionResponse;
      if (last?.name === 'generate_text') return [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Read: ${String(last.response.text ?? last.response.error)}` })];
      return [thoughtChunk('I should read the page'), functionCallChunk('generate_text', { prompt: 'Summarise https://example.com', url_context: true, output_format: 'text' })];
    });
    const { transport } = setup({ backend });
    const predicate = (options: { messages: AgentUIMessage[] }) =>
      lastAssistantMessageIsCompleteWithToolCalls(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options);
    const chat = new TestChat({ id: 'chat-consent', transport: transport(), sendAutomaticallyWhen: predicate });
    await chat.sendMessage({ text: 'Summarise https://example.com' });
    await settled(chat);
    const generate = toolPart(lastAssistant(chat), 'generate_text');
    expect(generate).toMatchObject({ state: 'approval-requested' });
    const suspend = lastAssistant(chat).parts.find((part) => part.type === 'data-suspend');
    expect(suspend).toMatchObject({ data: { event: { type: 'queryConsent', consentType: 'GET_ANY_WEBPAGE' } } });

    await chat.addToolApprovalResponse({ id: (generate as { approval: { id: string } }).approval.id, approved: true });
    await settled(chat);
    const message = lastAssistant(chat);
    expect(toolPart(message, 'generate_text')).toMatchObject({ state: 'output-available', output: { text: 'The page says hello.' } });
    expect(textOf(message)).toContain('Read: The page says hello.');
  });

  it('sends a run that fails as an error chunk carrying its code, and starts a new run on the next message with what was said', async () => {
    let failing = true;
    const seen: string[] = [];
    const backend = createScriptedBackendClient((request) => {
      seen.push(JSON.stringify(request.body.contents[0]));
      if (failing) throw new AgentError('MODEL_ERROR', 'The model refused the request');
      return [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Second try worked.' })];
    });
    const { transport, exchanges } = setup({ backend });
    const chat = new TestChat({ id: 'chat-error', transport: transport(), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: 'Say something' });
    await expect(settled(chat)).rejects.toThrow(/The model refused the request/);
    const chunks = chunksOf(exchanges[0]?.stream ?? '');
    expect(chunks).toContainEqual({ type: 'data-error', data: expect.objectContaining({ code: 'MODEL_ERROR' }) });
    expect(chunks.at(-1)).toEqual({ type: 'error', errorText: expect.stringContaining('The model refused the request') });

    failing = false;
    await chat.sendMessage({ text: 'Try again' });
    await settled(chat);
    expect(textOf(lastAssistant(chat))).toContain('Second try worked.');
    expect(seen.at(-1)).toContain('Earlier in this conversation');
    expect(seen.at(-1)).toContain('User: Say something');
  });

  it('answers bad requests with coded JSON errors naming the field', async () => {
    const { handler } = setup();
    const post = (body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
      handler(new Request(API, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) }));

    const badId = await post({ id: '../etc', messages: [{ id: 'm', role: 'user', parts: [{ type: 'text', text: 'Hi' }] }] });
    expect(badId.status).toBe(400);
    expect(await badId.json()).toMatchObject({ error: { code: 'BAD_REQUEST', message: expect.stringMatching(/^id: expected 1 to 128 letters/) } });

    const remote = await post({ id: 'c1', messages: [{ id: 'm', role: 'user', parts: [{ type: 'file', mediaType: 'image/png', url: 'http://169.254.169.254/x.png' }] }] });
    expect(await remote.json()).toMatchObject({ error: { code: 'BAD_REQUEST', message: expect.stringMatching(/^messages\[0\]\.parts\[0\]\.url: expected a base64 data: URL/) } });

    const noRun = await post({ id: 'c2', messages: [{ id: 'm', role: 'assistant', parts: [] }] });
    expect(noRun.status).toBe(404);
    expect(await noRun.json()).toMatchObject({ error: { code: 'INTERACTION_NOT_FOUND' } });

    const text = await post('hello', { 'content-type': 'text/plain' });
    expect(text.status).toBe(415);

    const tooMany = createUiMessageStreamHandler({ createPorts: () => ({ backend: simulatedBackend().backend, store: createMemoryInteractionStore() }), maxMessages: 2 });
    const many = await tooMany(new Request(API, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: 'c3', messages: Array.from({ length: 3 }, (_, index) => ({ id: `m${index}`, role: 'user', parts: [] })) }) }));
    expect(await many.json()).toMatchObject({ error: { code: 'BAD_REQUEST', message: expect.stringMatching(/^messages: /) } });

    const elsewhere = await handler(new Request('http://chat.test/api/other', { method: 'POST' }));
    expect(elsewhere.status).toBe(404);
  });

  it('answers a chat id that is not valid percent-encoding with 404, as any other unknown id', async () => {
    const { handler } = setup();
    for (const id of ['%', '%E0%A4%A', 'a%2Fb', '%00']) {
      for (const suffix of ['', '/stream']) {
        const response = await handler(new Request(`${API}/${id}${suffix}`));
        expect(response.status, id + suffix).toBe(404);
        expect(await response.json(), id + suffix).toMatchObject({ error: { code: 'NOT_FOUND' } });
      }
    }
  });

  it('keeps server paths and credentials out of the errors of a failing session log, on the stream and as JSON', async () => {
    const leak = "EACCES: open '/srv/secret/sessions/1.jsonl' (redis://admin:hunter2@10.0.0.5:6379)";
    const memory = createMemorySessionLog();
    const failing = { read: false, get: false };
    const log: SessionLog = {
      ...memory,
      read: (id, after, limit) => (failing.read ? Promise.reject(new Error(leak)) : memory.read(id, after, limit)),
      get: (id) => (failing.get ? Promise.reject(new Error(leak)) : memory.get(id)),
    };
    const { transport, exchanges } = setup({ sessions: { log, bus: createMemoryEventBus() } });
    const chat = new TestChat({ id: 'chat-log', transport: transport(), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: OBJECTIVE });
    await settled(chat);

    // Answering reads the run's status from the log: it fails as a JSON error.
    failing.get = true;
    await expect(answerName(chat, 'Ada')).rejects.toThrow(/INTERNAL/);
    failing.get = false;
    // A new message streams from the log: its reading fails mid-stream.
    failing.read = true;
    await chat.sendMessage({ text: 'Hello again' });
    await expect(settled(chat)).rejects.toThrow();
    const [answer, stream] = exchanges.slice(-2);
    expect(answer?.status).toBe(500);
    expect(chunksOf(stream?.stream ?? '')).toContainEqual({ type: 'data-error', data: expect.objectContaining({ code: 'INTERNAL' }) });
    for (const exchange of [answer, stream]) {
      expect(exchange?.stream).not.toMatch(/\/srv\/secret|hunter2/);
      expect(exchange?.stream).toContain('[redacted]');
    }
  });

  it('keeps, of two answers sent at once, the one the run took', async () => {
    const { backend, gemini } = simulatedBackend();
    // Both answers find the run waiting.
    const { store } = slowStore();
    const { handler, transport } = setup({ backend, store });
    const chat = new TestChat({ id: 'chat-twice', transport: transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: OBJECTIVE });
    await settled(chat);
    const ask = toolPart(lastAssistant(chat), 'chat_request_user_input');
    const answering = (name: string) => {
      const messages = structuredClone(chat.messages);
      const waiting = toolPart(messages.at(-1) as AgentUIMessage, 'chat_request_user_input');
      Object.assign(waiting, { state: 'output-available', output: { input: { role: 'user', parts: [{ text: name }] } } });
      return handler(
        new Request(API, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: 'Bearer token-a' },
          body: JSON.stringify({ id: 'chat-twice', trigger: 'submit-message', messages }),
        }),
      );
    };
    const answers = await Promise.all([answering('Ada'), answering('Mallory')]);
    await Promise.all(answers.map((response) => response.text()));
    expect(answers.map((response) => response.status).sort()).toEqual([200, 409]);
    const taken = answers[0]?.status === 200 ? 'Ada' : 'Mallory';
    expect(JSON.stringify(gemini.requests.at(-1)?.body.contents)).toContain(`"user_input":"${taken}"`);

    const restored = await handler(new Request(`${API}/chat-twice`, { headers: { authorization: 'Bearer token-a' } }));
    const { messages } = (await restored.json()) as { messages: AgentUIMessage[] };
    const answered = toolPart(messages.at(-1) as AgentUIMessage, 'chat_request_user_input');
    expect(answered.toolCallId).toBe(ask.toolCallId);
    expect(answered).toMatchObject({ state: 'output-available', output: { input: { parts: [{ text: taken }] } } });
  });

  it('of two new messages sent at once, keeps the run of the one the chat kept last, and stops the other', async () => {
    const { store, memory } = slowStore();
    const log = createMemorySessionLog();
    const { handler } = setup({ store, sessions: { log, bus: createMemoryEventBus() } });
    const send = (id: string) =>
      handler(
        new Request(API, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: 'Bearer token-a' },
          body: JSON.stringify({ id: 'chat-race', trigger: 'submit-message', messages: [{ id, role: 'user', parts: [{ type: 'text', text: OBJECTIVE }] }] }),
        }),
      );
    const answers = await Promise.all([send('m-1'), send('m-2')]);
    await Promise.all(answers.map((response) => response.text()));
    const restored = await handler(new Request(`${API}/chat-race`, { headers: { authorization: 'Bearer token-a' } }));
    const { messages } = (await restored.json()) as { messages: AgentUIMessage[] };
    const kept = messages.at(-1)?.id as string;
    const record = JSON.parse((await memory.get('ui-chat.chat-race'))?.state as string) as { runs: Array<{ sessionId: string }> };
    const runs = record.runs.map((run) => run.sessionId);
    expect(runs).toHaveLength(2);
    expect(kept).toBe(runs[1]);
    expect((await log.get(runs[0] as string))?.status).toBe('cancelled');
    expect((await log.get(runs[1] as string))?.status).toBe('suspended');
  });

  it('streams the UI message stream protocol: its header, a start with the message id, [DONE] at the end', async () => {
    const { handler } = setup();
    const response = await handler(
      new Request(API, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'c-raw', trigger: 'submit-message', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: OBJECTIVE }] }] }),
      }),
    );
    expect(response.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const data: string[] = [];
    for await (const event of parseSseStream(response.body as ReadableStream<Uint8Array>)) data.push(event.data);
    expect(JSON.parse(data[0] as string)).toMatchObject({ type: 'start', messageId: expect.any(String) });
    expect(data.at(-1)).toBe('[DONE]');
    const types = data.slice(0, -1).map((item) => (JSON.parse(item) as { type: string }).type);
    expect(types).toEqual(expect.arrayContaining(['start-step', 'reasoning-start', 'reasoning-delta', 'reasoning-end', 'tool-input-available', 'tool-output-available', 'data-usage', 'finish-step', 'data-suspend', 'finish']));
  });
});

/** Functions a test model calls: one that answers, one that ends the run. */
function testFunctions(fatalMessage: string, fatalCode?: string) {
  const group = {
    name: 'test',
    functions: [
      defineFunction({ name: 'look_up', description: 'Looks something up', parameters: z.object({}), handler: async () => ({ found: true }) }),
      defineFunction({
        name: 'charge_card',
        description: 'Fails for good',
        parameters: z.object({}),
        handler: async () => (fatalCode === undefined ? { $error: fatalMessage } : { $error: fatalMessage, code: fatalCode }),
      }),
    ],
  };
  return { group };
}

function toolStates(message: AgentUIMessage): Record<string, string> {
  const states: Record<string, string> = {};
  for (const part of message.parts) if (part.type.startsWith('tool-') && 'state' in part && typeof part.state === 'string') states[part.type] = part.state;
  return states;
}

describe('createUiMessageStreamHandler when a run fails or is stopped', () => {
  it('ends every tool part of a run a function ended as an error, says the run cannot go on, and refuses to continue it', async () => {
    const { group } = testFunctions('The card was declined');
    const backend = createScriptedBackendClient(() => [thoughtChunk('Paying'), functionCallChunk('look_up', {}), functionCallChunk('charge_card', {})]);
    const { transport, handler } = setup({ backend, runOptions: () => ({ functionGroups: [group] }) });
    const chat = new TestChat({ id: 'chat-fatal', transport: transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: 'Pay the bill' });
    await expect(settled(chat)).rejects.toThrow('The card was declined');

    const message = lastAssistant(chat);
    // Not "running" forever: both calls of the failed turn say they did not finish.
    expect(toolStates(message)).toEqual({ 'tool-look_up': 'output-error', 'tool-charge_card': 'output-error' });
    expect(toolPart(message, 'charge_card')).toMatchObject({ errorText: 'The run stopped before this call finished' });
    expect(message.parts).toContainEqual({ type: 'data-error', data: { code: 'INTERNAL', message: 'The card was declined', resumable: false } });

    // As it says: sending the conversation again does not continue the run.
    const again = await handler(
      new Request(API, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer token-a' },
        body: JSON.stringify({ id: 'chat-fatal', trigger: 'submit-message', messages: chat.messages }),
      }),
    );
    expect(again.status).toBe(409);

    // The restored conversation shows the same.
    const restored = await handler(new Request(`${API}/chat-fatal`, { headers: { authorization: 'Bearer token-a' } }));
    const { messages } = (await restored.json()) as { messages: AgentUIMessage[] };
    expect(toolStates(messages.at(-1) as AgentUIMessage)).toEqual({ 'tool-look_up': 'output-error', 'tool-charge_card': 'output-error' });
    expect((messages.at(-1) as AgentUIMessage).parts).toContainEqual(expect.objectContaining({ type: 'data-error', data: expect.objectContaining({ resumable: false }) }));
  });

  it('ends an approved call as an error when the run fails while it runs, rather than leaving it approved', async () => {
    const backend = createScriptedBackendClient((request) => {
      if ((request.body.tools ?? []).some((tool) => 'urlContext' in tool)) {
        throw new AgentError('RATE_LIMITED', '{"code":"RESOURCE_EXHAUSTED","error_reason":"FREE_QUOTA_EXHAUSTED"}');
      }
      return [functionCallChunk('generate_text', { prompt: 'Summarise https://example.com', url_context: true, output_format: 'text' })];
    });
    const { transport } = setup({ backend });
    const predicate = (options: { messages: AgentUIMessage[] }) =>
      lastAssistantMessageIsCompleteWithToolCalls(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options);
    const chat = new TestChat({ id: 'chat-consent-fails', transport: transport(), sendAutomaticallyWhen: predicate });
    await chat.sendMessage({ text: 'Summarise https://example.com' });
    await settled(chat);
    const generate = toolPart(lastAssistant(chat), 'generate_text');
    expect(generate).toMatchObject({ state: 'approval-requested' });

    await chat.addToolApprovalResponse({ id: (generate as { approval: { id: string } }).approval.id, approved: true });
    await expect(settled(chat)).rejects.toThrow(/RESOURCE_EXHAUSTED/);
    expect(toolPart(lastAssistant(chat), 'generate_text')).toMatchObject({ state: 'output-error', errorText: 'The run stopped before this call finished' });
    expect(lastAssistant(chat).parts).toContainEqual({ type: 'data-error', data: expect.objectContaining({ code: 'RATE_LIMITED', resumable: false }) });
  });

  it('ends the message as a failure when the session log fails mid-answer: the thought and the running call are ended', async () => {
    let release: () => void = () => undefined;
    const waiting = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = {
      name: 'test',
      functions: [defineFunction({ name: 'look_up', description: 'Looks something up', parameters: z.object({}), handler: async () => (await waiting, { found: true }) })],
    };
    const backend = createScriptedBackendClient([
      [thoughtChunk('Looking'), functionCallChunk('look_up', {})],
      [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Found.' })],
    ]);
    const store = createMemoryInteractionStore();
    const memory = createMemorySessionLog();
    const bus = createMemoryEventBus();
    // The run goes on one instance; another follows it, reading the shared log, which then fails.
    const running = setup({ backend, store, sessions: { log: memory, bus }, runOptions: () => ({ functionGroups: [slow] }) });
    const failing = { read: false };
    const log: SessionLog = { ...memory, read: (id, after, limit) => (failing.read ? Promise.reject(new Error('ECONNRESET redis://admin:hunter2@10.0.0.5')) : memory.read(id, after, limit)) };
    const following = setup({ backend, store, sessions: { log, bus }, runOptions: () => ({ functionGroups: [slow] }) });
    const started = await running.handler(
      new Request(API, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'chat-log-breaks', trigger: 'submit-message', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Look it up' }] }] }),
      }),
    );
    const answered = started.text();
    const followed = await following.handler(new Request(`${API}/chat-log-breaks/stream`));
    expect(followed.status).toBe(200);
    const [forChat, forTest] = (followed.body as ReadableStream<Uint8Array>).tee();
    const chunks = parseJsonEventStream({ stream: forChat, schema: uiMessageChunkSchema() }).pipeThrough(
      new TransformStream<{ success: boolean; value?: unknown }, UIMessageChunk>({
        transform: (chunk, controller) => {
          if (chunk.success) controller.enqueue(chunk.value as UIMessageChunk);
        },
      }),
    );
    const errors: string[] = [];
    const messages = readUIMessageStream<AgentUIMessage>({ stream: chunks as never, onError: (error) => errors.push(String(error)) });
    const reader = forTest.getReader();
    let seen = '';
    while (!seen.includes('"tool-input-available"')) seen += new TextDecoder().decode((await reader.read()).value);
    failing.read = true;
    release();
    while (!(await reader.read()).done);
    await answered;

    let message: AgentUIMessage | undefined;
    for await (const update of messages) message = update;
    expect(errors).toEqual([expect.stringContaining('[redacted]')]);
    expect(message?.parts).toContainEqual(expect.objectContaining({ type: 'reasoning', text: 'Looking', state: 'done' }));
    expect(toolStates(message as AgentUIMessage)).toEqual({ 'tool-look_up': 'output-error' });
    expect(message?.parts).toContainEqual({ type: 'data-error', data: { code: 'INTERNAL', message: expect.stringContaining('[redacted]'), resumable: false } });
    expect(JSON.stringify(message)).not.toContain('hunter2');
  });

  it('restores a run its client stopped mid-answer with the call it had announced ended, not running', async () => {
    const scripted = createScriptedBackendClient([]);
    // The model announces a call, then is still answering when the client stops the run.
    const backend: BackendClient = {
      ...scripted,
      async *streamGenerateContent(_model, _body, signal) {
        yield thoughtChunk('Looking');
        yield functionCallChunk('look_up', {});
        await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
        throw new AgentError('ABORTED', 'Model request cancelled');
      },
    };
    const log = createMemorySessionLog();
    const { handler } = setup({ backend, sessions: { log, bus: createMemoryEventBus() }, runOptions: () => ({ functionGroups: [testFunctions('unused').group] }) });
    const client = new AbortController();
    const response = await handler(
      new Request(API, {
        method: 'POST',
        signal: client.signal,
        headers: { 'content-type': 'application/json', authorization: 'Bearer token-a' },
        body: JSON.stringify({ id: 'chat-stop', trigger: 'submit-message', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Look it up' }] }] }),
      }),
    );
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let seen = '';
    while (!seen.includes('"tool-input-available"')) seen += new TextDecoder().decode((await reader.read()).value);
    const sessionId = (/"messageId":"([^"]+)"/.exec(seen) as RegExpExecArray)[1] as string;
    client.abort();
    await reader.cancel();
    while ((await log.get(sessionId))?.status === 'running') await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await log.get(sessionId))?.status).toBe('paused');

    const restored = await handler(new Request(`${API}/chat-stop`, { headers: { authorization: 'Bearer token-a' } }));
    const assistant = ((await restored.json()) as { messages: AgentUIMessage[] }).messages.at(-1) as AgentUIMessage;
    expect(assistant.id).toBe(sessionId);
    expect(toolPart(assistant, 'look_up')).toMatchObject({ state: 'output-error', errorText: 'The run stopped before this call finished' });
  });

  it('says a paused run can go on, and sending the conversation again continues the same assistant message', async () => {
    let requests = 0;
    const backend = createScriptedBackendClient(() => {
      requests += 1;
      if (requests === 1) return [functionCallChunk('look_up', {})];
      if (requests === 2) throw new AgentError('MODEL_UNAVAILABLE', 'The model is overloaded', { details: { attempts: 3 } });
      return [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Paid.' })];
    });
    const { transport } = setup({ backend, runOptions: () => ({ functionGroups: [testFunctions('unused').group] }) });
    const chat = new TestChat({ id: 'chat-pause', transport: transport('token-a'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: 'Pay the bill' });
    await expect(settled(chat)).rejects.toThrow('The model is overloaded');
    const paused = lastAssistant(chat);
    expect(paused.parts).toContainEqual({ type: 'data-error', data: expect.objectContaining({ code: 'MODEL_UNAVAILABLE', resumable: true }) });

    await chat.sendMessage();
    await settled(chat);
    expect(chat.messages).toHaveLength(2);
    expect(lastAssistant(chat).id).toBe(paused.id);
    expect(toolStates(lastAssistant(chat))).toMatchObject({ 'tool-look_up': 'output-available' });
    expect(textOf(lastAssistant(chat))).toBe('Paid.');
  });

  it('keeps server paths and credentials out of the failure a run reports to the page', async () => {
    const leak = "EACCES: open '/srv/secret/cards.db' (redis://admin:hunter2@10.0.0.5:6379)";
    const backend = createScriptedBackendClient(() => [functionCallChunk('charge_card', {})]);
    const { transport, exchanges } = setup({ backend, runOptions: () => ({ functionGroups: [testFunctions(leak).group] }) });
    const chat = new TestChat({ id: 'chat-leak', transport: transport(), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: 'Pay the bill' });
    await expect(settled(chat)).rejects.toThrow(/EACCES/);
    expect(exchanges[0]?.stream).not.toMatch(/\/srv\/secret|hunter2/);
    expect(chat.error?.message).toContain('[redacted]');
    expect(JSON.stringify(chat.messages)).not.toMatch(/\/srv\/secret|hunter2/);

    // A coded failure keeps its words (a path of the run's own files included), but never a credential.
    const coded = createScriptedBackendClient(() => [functionCallChunk('charge_card', {})]);
    const second = setup({ backend: coded, runOptions: () => ({ functionGroups: [testFunctions('Quota of key=AIzaSyA1234567890abcdefghijk used up; see /mnt/plan.md', 'RATE_LIMITED').group] }) });
    const other = new TestChat({ id: 'chat-coded', transport: second.transport(), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await other.sendMessage({ text: 'Pay the bill' });
    await expect(settled(other)).rejects.toThrow('Quota of key=[redacted] used up; see /mnt/plan.md');
  });
});
