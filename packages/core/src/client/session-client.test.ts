import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import { createAgentHandler } from '../http/agent-handler.js';
import type { BackendClient } from '../ports/index.js';
import type { AgentEvent } from '../protocol/events.js';
import { fromWireEvent } from '../protocol/wire.js';
import { parseSseStream } from '../sse/index.js';
import {
  createMemoryEventBus,
  createMemoryInteractionStore,
  createMemorySessionLog,
  createScriptedBackendClient,
  functionCallChunk,
  thoughtChunk,
  type ScriptedRequest,
} from '../testing/index.js';
import { AgentClientError, createAgentClient, type AgentRun, type ResumeResponse } from './index.js';

interface Seen {
  method: string;
  url: string;
  body: unknown;
  auth: string | undefined;
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Listens on a loopback port; the handler gets the request's body as text. */
async function listen(handler: (incoming: IncomingMessage, outgoing: ServerResponse, body: string) => Promise<void>): Promise<string> {
  const server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      handler(incoming, outgoing, Buffer.concat(chunks).toString('utf8')).catch(() => outgoing.destroy());
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Serves a Web handler like the Node adapter does: streamed bodies, a client that leaves aborts the request. */
async function serve(handler: (request: Request) => Promise<Response>): Promise<{ baseUrl: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const baseUrl = await listen(async (incoming, outgoing, text) => {
    seen.push({ method: incoming.method ?? '', url: incoming.url ?? '', body: text ? JSON.parse(text) : undefined, auth: incoming.headers.authorization });
    const left = new AbortController();
    outgoing.on('close', () => left.abort());
    const response = await handler(
      new Request(`http://127.0.0.1${incoming.url}`, {
        method: incoming.method,
        headers: incoming.headers as Record<string, string>,
        signal: left.signal,
        ...(incoming.method === 'POST' && text ? { body: text } : {}),
      }),
    );
    outgoing.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) outgoing.write(chunk);
    outgoing.end();
  });
  return { baseUrl, seen };
}

/**
 * A proxy in front of `target`. `onStream(count, url)` decides for each session stream: `pass`,
 * `cut` (forward until event 1 is half sent, then drop the connection), `refuse` (drop at once),
 * or `ignore-after` (forward without the `after` cursor, so the server replays everything).
 */
async function proxy(target: string, onStream: (count: number) => 'pass' | 'cut' | 'refuse' | 'ignore-after'): Promise<{ baseUrl: string; streams: string[] }> {
  const streams: string[] = [];
  const baseUrl = await listen(async (incoming, outgoing, text) => {
    let url = incoming.url ?? '/';
    const isStream = incoming.method === 'GET' && url.includes('alt=sse');
    const action = isStream ? onStream(streams.push(url)) : 'pass';
    if (action === 'refuse') {
      outgoing.destroy();
      return;
    }
    if (action === 'ignore-after') url = url.replace(/&after=\d+/, '');
    const headers = { ...(incoming.headers as Record<string, string>) };
    delete headers.host;
    delete headers['content-length'];
    const response = await fetch(`${target}${url}`, { method: incoming.method ?? 'GET', headers, ...(text ? { body: text } : {}) });
    outgoing.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) {
      outgoing.end();
      return;
    }
    let sent = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      if (action === 'cut') {
        const piece = Buffer.from(chunk).toString('utf8');
        const at = (sent + piece).indexOf('\nid: 1\n');
        if (at >= 0) {
          // Half of event 1 goes out, then the connection drops.
          outgoing.write((sent + piece).slice(sent.length, at + 20));
          await new Promise((resolve) => outgoing.write('', resolve));
          outgoing.destroy();
          await response.body.cancel().catch(() => undefined);
          return;
        }
        sent += piece;
      }
      outgoing.write(chunk);
    }
    outgoing.end();
  });
  return { baseUrl, streams };
}

/** A model that asks for a name, then for a choice, then greets. */
function greeter(request: ScriptedRequest) {
  const responses = request.body.contents.flatMap((content) => content.parts.flatMap((part) => (part.functionResponse ? [part.functionResponse] : [])));
  const input = responses.find((response) => response.name === 'chat_request_user_input')?.response;
  const choice = responses.find((response) => response.name === 'chat_present_choices')?.response;
  if (!input) {
    return [thoughtChunk('Asking for a name'), thoughtChunk('politely'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' }, { thoughtSignature: 's1' })];
  }
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

async function greeterServer(chunkDelayMs = 0) {
  const backend = createScriptedBackendClient(greeter, { chunkDelayMs });
  const store = createMemoryInteractionStore();
  return serve(
    createAgentHandler({ createPorts: () => ({ backend, store }), sessions: { log: createMemorySessionLog(), bus: createMemoryEventBus() } }),
  );
}

const answers = (name: string) => ({
  onSuspend: (event: AgentEvent): ResumeResponse =>
    event.type === 'waitForInput' ? { input: { role: 'user', parts: [{ text: name }] } } : { selected: { ids: ['coffee'] } },
});

/** Every event of a session, as the server logged it, read with a plain stream request. */
async function sessionLog(baseUrl: string, sessionId: string): Promise<AgentEvent[]> {
  const response = await fetch(`${baseUrl}/v1beta1/sessions/${sessionId}?alt=sse`);
  const events: AgentEvent[] = [];
  for await (const message of parseSseStream(response.body as ReadableStream<Uint8Array>)) {
    if (message.event === 'event') events.push(fromWireEvent(JSON.parse(message.data)));
  }
  return events;
}

async function statusOf(baseUrl: string, sessionId: string): Promise<{ status: string; eventCount: number }> {
  return (await (await fetch(`${baseUrl}/v1beta1/sessions/${sessionId}/status`)).json()) as { status: string; eventCount: number };
}

async function collect(run: AgentRun): Promise<AgentEvent[]> {
  const events: AgentEvent[] = [];
  for await (const event of run.events) events.push(event);
  return events;
}

describe('createAgentClient({ protocol: "sessions" })', () => {
  it('runs a session across two suspends: new, stream, :resume, stream after the cursor, one event sequence', async () => {
    const { baseUrl, seen } = await greeterServer();
    const client = createAgentClient({ baseUrl, protocol: 'sessions', getAccessToken: () => 'token-1' });
    const run = client.startRun('Greet me', answers('Ada'));
    const events: AgentEvent[] = [];
    const cursors: Array<number | undefined> = [];
    for await (const event of run.events) {
      events.push(event);
      // What the app has received so far, to follow the session again from here (while the
      // client reads ahead, as the app takes its time over each event).
      cursors.push(run.lastEventIndex);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const requests = seen.slice();

    expect(JSON.stringify((await run.result).outcomes)).toContain('Hello Ada');
    const sessionId = run.sessionId as string;
    expect(sessionId).toEqual(expect.any(String));
    expect(events).toEqual(await sessionLog(baseUrl, sessionId));
    expect(events.filter((event) => event.type === 'waitForInput' || event.type === 'waitForChoice').map((event) => event.type)).toEqual(['waitForInput', 'waitForChoice']);
    expect(cursors).toEqual(events.map((_, index) => index));
    expect(await statusOf(baseUrl, sessionId)).toMatchObject({ status: 'completed', eventCount: events.length });

    const input = events.findIndex((event) => event.type === 'waitForInput');
    const choice = events.findIndex((event) => event.type === 'waitForChoice');
    const base = `/v1beta1/sessions/${sessionId}`;
    expect(requests.map((request) => `${request.method} ${request.url}`)).toEqual([
      'POST /v1beta1/sessions/new',
      `GET ${base}?alt=sse`,
      `POST ${base}:resume`,
      `GET ${base}?alt=sse&after=${input}`,
      `POST ${base}:resume`,
      `GET ${base}?alt=sse&after=${choice}`,
    ]);
    // The start body is flat; the answer is the body; the token travels both ways.
    expect(requests[0]?.body).toEqual({ segments: [{ type: 'text', text: 'Greet me' }], accessToken: 'token-1' });
    expect(requests[2]?.body).toEqual({ input: { role: 'user', parts: [{ text: 'Ada' }] }, accessToken: 'token-1' });
    expect(requests.map((request) => request.auth)).toEqual(Array(6).fill('Bearer token-1'));
  });

  it('reconnects a stream the connection dropped mid-event after its cursor, and shows every event exactly once, in order', async () => {
    const server = await greeterServer(5);
    // The first stream is cut halfway through event 1; the next one ignores the cursor and replays from 0.
    const { baseUrl, streams } = await proxy(server.baseUrl, (count) => (count === 1 ? 'cut' : count === 2 ? 'ignore-after' : 'pass'));
    const run = createAgentClient({ baseUrl, protocol: 'sessions', reconnect: { initialDelayMs: 1, maxDelayMs: 5 } }).startRun('Greet me', answers('Lin'));
    const events = await collect(run);

    expect(JSON.stringify((await run.result).outcomes)).toContain('Hello Lin');
    const log = await sessionLog(server.baseUrl, run.sessionId as string);
    expect(events).toEqual(log);
    expect(events.length).toBeGreaterThan(6);
    // The reconnect asked for the events after event 0, the last one that arrived whole.
    expect(streams[1]).toMatch(/\?alt=sse&after=0$/);
    expect(streams).toHaveLength(4);
  });

  it('gives up after the bound of failed reconnects with a network error', async () => {
    const server = await greeterServer(5);
    const { baseUrl, streams } = await proxy(server.baseUrl, (count) => (count === 1 ? 'cut' : 'refuse'));
    const run = createAgentClient({ baseUrl, protocol: 'sessions', reconnect: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 2 } }).startRun('Greet me');
    const events: AgentEvent[] = [];
    const thrown = await (async () => {
      for await (const event of run.events) events.push(event);
    })().catch((error: unknown) => error);

    expect(thrown).toBeInstanceOf(AgentClientError);
    const error = (await run.result.catch((caught: unknown) => caught)) as AgentClientError;
    expect(error).toBe(thrown);
    expect(error.kind).toBe('network');
    expect(error.message).toMatch(/reconnected 3 times, giving up/);
    // The events before the drop arrived; one stream and three reconnects.
    expect(events).toHaveLength(1);
    expect(streams).toHaveLength(4);
  });

  it('cancels the session on the server when the run is aborted', async () => {
    const backend = createScriptedBackendClient(() => [thoughtChunk('a'), thoughtChunk('b'), thoughtChunk('c'), thoughtChunk('d'), thoughtChunk('e')], { chunkDelayMs: 30 });
    const { baseUrl } = await serve(createAgentHandler({ createPorts: () => ({ backend, store: createMemoryInteractionStore() }) }));
    let cancelled!: (response: Response) => void;
    const cancelAnswer = new Promise<Response>((resolve) => {
      cancelled = resolve;
    });
    const client = createAgentClient({
      baseUrl,
      protocol: 'sessions',
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        if (input.endsWith(':cancel')) cancelled(response);
        return response;
      },
    });
    const run = client.startRun('Think hard');
    for await (const event of run.events) {
      if (event.type === 'thought') run.abort();
    }
    await expect(run.result).rejects.toMatchObject({ kind: 'aborted', message: 'Run was stopped' });
    const answer = await cancelAnswer;
    expect(await answer.json()).toEqual({ sessionId: run.sessionId, status: 'cancelled' });
    expect((await statusOf(baseUrl, run.sessionId as string)).status).toBe('cancelled');
  });

  it('attaches a second client to a waiting session, shows it the question, and carries the run to its end', async () => {
    const { baseUrl } = await greeterServer();
    const first = createAgentClient({ baseUrl, protocol: 'sessions', getAccessToken: () => 'token-a' }).startRun('Greet me');
    const before: AgentEvent[] = [];
    for await (const event of first.events) {
      before.push(event);
      if (event.type === 'waitForInput') break; // The page goes away without answering.
    }
    const sessionId = first.sessionId as string;
    const after = first.lastEventIndex as number;
    expect(after).toBe(before.length - 1);

    // Someone else's token may read the session but not answer it.
    const stranger = createAgentClient({ baseUrl, protocol: 'sessions', getAccessToken: () => 'token-b' }).attachRun(sessionId, { after, ...answers('Eve') });
    await expect(stranger.result).rejects.toMatchObject({ kind: 'http', status: 403, code: 'FORBIDDEN' });

    const again = createAgentClient({ baseUrl, protocol: 'sessions', getAccessToken: () => 'token-a' }).attachRun(sessionId, { after, ...answers('Ada') });
    expect(again.sessionId).toBe(sessionId);
    const rest = await collect(again);
    expect(rest[0]).toEqual(before.at(-1));
    expect(JSON.stringify((await again.result).outcomes)).toContain('Hello Ada');
    expect([...before, ...rest.slice(1)]).toEqual(await sessionLog(baseUrl, sessionId));

    // A finished session replays whole, and its result is the run's.
    const replay = createAgentClient({ baseUrl, protocol: 'sessions' }).attachRun(sessionId);
    expect(await collect(replay)).toEqual(await sessionLog(baseUrl, sessionId));
    expect(await replay.result).toEqual(await again.result);
    // Attached after its end, it still settles with the result.
    const late = createAgentClient({ baseUrl, protocol: 'sessions' }).attachRun(sessionId, { after: rest.length + before.length + 5 });
    expect((await collect(late)).map((event) => event.type)).toEqual(['complete']);
    expect(await late.result).toEqual(await again.result);
  });

  it('maps refusals to http errors with the server code: unknown session, finished session', async () => {
    const { baseUrl } = await greeterServer();
    const client = createAgentClient({ baseUrl, protocol: 'sessions' });
    await expect(client.attachRun('no-such-session').result).rejects.toMatchObject({ kind: 'http', status: 404, code: 'NOT_FOUND' });
    await expect(client.resumeRun('no-such-session', {}).result).rejects.toMatchObject({ kind: 'http', status: 404, code: 'NOT_FOUND' });

    const done = client.startRun('Greet me', answers('Ada'));
    await done.result;
    const late = client.resumeRun(done.sessionId as string, { input: { parts: [{ text: 'again' }] } });
    const error = (await late.result.catch((caught: unknown) => caught)) as AgentClientError;
    expect(error).toMatchObject({ kind: 'http', status: 409, code: 'CONFLICT' });
    expect(error.message).toContain('Session not in suspended status (current: completed)');
  });

  it('rejects a paused session with the error code, and resumeRun() with the session id carries it on', async () => {
    let failures = 3;
    const backend = createScriptedBackendClient((request) => {
      if (request.body.contents.some((content) => content.role === 'model') && failures-- > 0) {
        throw new AgentError('RATE_LIMITED', 'Resource exhausted, try later');
      }
      return greeter(request);
    });
    const store = createMemoryInteractionStore();
    const { baseUrl } = await serve(
      createAgentHandler({
        createPorts: () => ({ backend, store }),
        runOptions: () => ({ modelPolicy: { baseDelayMs: 1 } }),
      }),
    );
    const client = createAgentClient({ baseUrl, protocol: 'sessions' });
    const first = client.startRun('Greet me', answers('Lin'));
    const before = await collect(first);
    const paused = (await first.result.catch((error: unknown) => error)) as AgentClientError;
    expect(paused).toMatchObject({ kind: 'paused', code: 'RATE_LIMITED' });
    expect((await statusOf(baseUrl, first.sessionId as string)).status).toBe('paused');

    const again = client.resumeRun(first.sessionId as string, {}, answers('Lin'));
    const rest = await collect(again);
    expect(JSON.stringify((await again.result).outcomes)).toContain('Hello Lin');
    // Only the new events: the resumed handle starts after the session's last event.
    const log = await sessionLog(baseUrl, first.sessionId as string);
    expect(rest).toEqual(log.slice(log.length - rest.length));
    expect(log).toEqual([...before, ...rest]);
    expect(first.lastEventIndex).toBe(before.length - 1);
  });

  it('reads the code of an error event the server sends without an index, after numbered ones', async () => {
    const log = createMemorySessionLog();
    let broken = false;
    const failing = { ...log, get: (id: string) => (broken ? Promise.reject(new AgentError('STORE_ERROR', 'The session log is unreachable')) : log.get(id)) };
    // The turn after the answer streams its first chunk, then waits until the test ends.
    let release!: () => void;
    const seenThought = new Promise<void>((resolve) => {
      release = resolve;
    });
    const scripted = createScriptedBackendClient((request) =>
      request.body.contents.length > 1
        ? [thoughtChunk('Greeting'), functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Hello' })]
        : [thoughtChunk('Asking'), functionCallChunk('chat_request_user_input', { user_message: 'Name?' })],
    );
    const backend: BackendClient = {
      ...scripted,
      async *streamGenerateContent(model, body, signal) {
        const answered = body.contents.length > 1;
        for await (const chunk of scripted.streamGenerateContent(model, body, signal)) {
          yield chunk;
          if (answered) await seenThought;
        }
      },
    };
    const store = createMemoryInteractionStore();
    const { baseUrl, seen } = await serve(
      // A reader that hears nothing for a moment looks the session up in the log, and fails.
      createAgentHandler({ createPorts: () => ({ backend, store }), sessions: { log: failing, bus: createMemoryEventBus(), livenessMs: 20 } }),
    );
    const run = createAgentClient({ baseUrl, protocol: 'sessions' }).startRun('Greet me', answers('Ada'));
    const types: string[] = [];
    for await (const event of run.events) {
      types.push(event.type);
      if (types.includes('waitForInput') && event.type === 'thought') {
        // From here on the server cannot read its log: the stream ends with an error event that has no index.
        broken = true;
      }
    }
    release();
    expect(types.slice(types.indexOf('waitForInput') + 1)).toEqual(['sendRequest', 'thought', 'error']);
    await expect(run.result).rejects.toMatchObject({ kind: 'run', code: 'STORE_ERROR', message: 'The session log is unreachable' });
    // It came on the stream after the answer, with no reconnect and no status check.
    expect(seen.map((request) => request.method + ' ' + request.url.replace(/[0-9a-f-]{36}/, 'S'))).toEqual([
      'POST /v1beta1/sessions/new',
      'GET /v1beta1/sessions/S?alt=sse',
      'POST /v1beta1/sessions/S:resume',
      `GET /v1beta1/sessions/S?alt=sse&after=${types.indexOf('waitForInput')}`,
    ]);
  });

  it('explains a misuse: attachRun on the legacy protocol, a bad cursor', () => {
    expect(() => createAgentClient({ baseUrl: 'http://x' }).attachRun('s')).toThrow(/protocol: "sessions"/);
    expect(() => createAgentClient({ baseUrl: 'http://x', protocol: 'sessions' }).attachRun('s', { after: -2 })).toThrow(/after must be an event index/);
    expect(() => createAgentClient({ baseUrl: 'http://x', protocol: 'rest' as 'legacy' })).toThrow(/protocol must be/);
  });
});
