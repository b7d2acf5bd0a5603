import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { getEventListeners } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AgentClientError, createAgentClient, type AgentClientOptions } from './index.js';
import { read } from '../../test/client-runs.js';

// A sessions server written by hand, frame by frame, to play the edges of the sessions protocol
// (repeated or missing ids, bare envelopes, streams that stay open or are cut) that the core handler
// never produces.

const TOKEN = 'ya29.secret-token';

interface Exchange {
  method: string;
  url: string;
  /** 1 for the first request to this path and query-less route, 2 for the next… */
  count: number;
  body: string;
}

type Route = (exchange: Exchange, outgoing: ServerResponse) => void | Promise<void>;

const servers: Server[] = [];
afterEach(async () => {
  // A test that failed halfway leaves no spy on the timers of the next.
  vi.restoreAllMocks();
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/**
 * A loopback server: `sessions/new` answers `{sessionId: 's1'}` (after the refusals in `newRefusals`,
 * one per request); everything else goes to `route`.
 */
async function sessionServer(
  route: Route,
  newRefusals: Array<{ status: number; headers?: Record<string, string> }> = [],
): Promise<{ baseUrl: string; requests: string[] }> {
  const requests: string[] = [];
  const counts = new Map<string, number>();
  const server = createServer((incoming: IncomingMessage, outgoing: ServerResponse) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const url = incoming.url ?? '/';
      const method = incoming.method ?? 'GET';
      requests.push(`${method} ${url}`);
      if (url === '/v1beta1/sessions/new') {
        const refusal = newRefusals.shift();
        if (refusal) json(outgoing, refusal.status, { error: 'Too many sessions' }, refusal.headers);
        else json(outgoing, 200, { sessionId: 's1' });
        return;
      }
      const key = `${method} ${url.split(/[?&]after=/)[0]}`;
      const count = (counts.get(key) ?? 0) + 1;
      counts.set(key, count);
      Promise.resolve(route({ method, url, count, body: Buffer.concat(chunks).toString('utf8') }, outgoing)).catch(() => outgoing.destroy());
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

function json(outgoing: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  outgoing.writeHead(status, { 'content-type': 'application/json', ...headers });
  outgoing.end(JSON.stringify(body));
}

/** Opens an event stream, writes `text`, and a moment later drops the connection. */
async function writeThenDrop(outgoing: ServerResponse, text: string): Promise<void> {
  openStream(outgoing);
  outgoing.write(text);
  await new Promise((resolve) => setTimeout(resolve, 20));
  outgoing.destroy();
}

/** Opens an event stream with its `start` envelope. */
function openStream(outgoing: ServerResponse): void {
  outgoing.writeHead(200, { 'content-type': 'text/event-stream' });
  outgoing.write('event: start\ndata: {"sessionId":"s1"}\n\n');
}

const thought = (index: number): object => ({ thought: { text: `t${index}` } });
const complete = { complete: { result: { success: true, outcomes: { parts: [{ text: 'ok' }] } } } };
const question = { waitForInput: { requestId: 'r1', prompt: { parts: [{ text: 'Name?' }] }, inputType: 'text', interactionId: 'i1' } };
const frame = (index: number, data: object = thought(index)): string => `event: event\nid: ${index}\ndata: ${JSON.stringify(data)}\n\n`;
const DONE = 'event: done\ndata: {}\n\n';
const afterOf = (url: string): number => Number(new URL(url, 'http://x').searchParams.get('after') ?? -1);

const fast = { reconnect: { initialDelayMs: 1, maxDelayMs: 5 } } satisfies Partial<AgentClientOptions>;

function client(baseUrl: string, options: Partial<AgentClientOptions> = {}) {
  return createAgentClient({ baseUrl, protocol: 'sessions', getAccessToken: () => TOKEN, ...fast, ...options });
}

/** Watches the timers the client sets: `pending()` lists where each one not yet run or cleared was set. */
function watchClientTimers(): { pending(): string[]; stop(): void } {
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  const pending = new Map<unknown, string>();
  vi.spyOn(globalThis, 'setTimeout').mockImplementation(((handler: () => void, ms?: number) => {
    const stack = new Error().stack ?? '';
    const id = realSet(() => {
      pending.delete(id);
      handler();
    }, ms);
    // Set by the client's own code (not by undici, not by this file).
    if (/\/src\/client\/[a-z-]+\.ts:/.test(stack)) pending.set(id, stack);
    return id;
  }) as typeof setTimeout);
  vi.spyOn(globalThis, 'clearTimeout').mockImplementation((id) => {
    pending.delete(id);
    realClear(id);
  });
  return { pending: () => [...pending.values()], stop: () => vi.restoreAllMocks() };
}

describe('sessions client at the edges of the stream protocol', () => {
  it('delivers an event once when the server repeats its id back to back', async () => {
    const { baseUrl } = await sessionServer((exchange, outgoing) => {
      openStream(outgoing);
      for (const index of [0, 1, 1, 2, 2, 2, 3]) outgoing.write(frame(index));
      outgoing.end(frame(4, complete) + DONE);
    });
    const run = client(baseUrl).startRun('go');
    expect(await read(run)).toEqual({ seen: ['t0', 't1', 't2', 't3', 'complete'], error: undefined });
    expect(run.lastEventIndex).toBe(4);
  });

  it('reconnects after the cursor when the stream ends cleanly in the middle of an event', async () => {
    const { baseUrl, requests } = await sessionServer((exchange, outgoing) => {
      openStream(outgoing);
      if (exchange.count === 1) {
        for (let index = 0; index <= 4; index += 1) outgoing.write(frame(index));
        outgoing.end('event: event\nid: 5\ndata: {"thought":{"te');
        return;
      }
      for (let index = afterOf(exchange.url) + 1; index <= 6; index += 1) outgoing.write(frame(index));
      outgoing.end(frame(7, complete) + DONE);
    });
    const run = client(baseUrl).startRun('go');
    expect(await read(run)).toEqual({ seen: ['t0', 't1', 't2', 't3', 't4', 't5', 't6', 'complete'], error: undefined });
    expect(requests.filter((request) => request.includes('alt=sse'))).toEqual(['GET /v1beta1/sessions/s1?alt=sse', 'GET /v1beta1/sessions/s1?alt=sse&after=4']);
  });

  it('does not repeat the last event when the stream ends with done but no result, and fails with a protocol error', async () => {
    const { baseUrl } = await sessionServer((exchange, outgoing) => {
      if (exchange.url.endsWith('/status')) return json(outgoing, 200, { sessionId: 's1', status: 'completed', eventCount: 4 });
      openStream(outgoing);
      for (let index = afterOf(exchange.url) + 1; index <= 3; index += 1) outgoing.write(frame(index));
      outgoing.end(DONE);
    });
    const { seen, error } = await read(client(baseUrl).startRun('go'));
    expect(seen).toEqual(['t0', 't1', 't2', 't3']);
    expect(error).toMatchObject({ kind: 'protocol', message: 'Session s1 is completed, but its events do not say why' });
  });

  it('skips envelopes without an event name ({} and {sessionId}) and does not count them', async () => {
    const { baseUrl } = await sessionServer((exchange, outgoing) => {
      openStream(outgoing);
      outgoing.write('data: {}\n\n');
      outgoing.write(`data: ${JSON.stringify(thought(0))}\n\n`);
      outgoing.write('data: {"sessionId":"s1"}\n\n');
      outgoing.write(`data: ${JSON.stringify(thought(1))}\n\n`);
      outgoing.end(`data: ${JSON.stringify(complete)}\n\n${DONE}`);
    });
    const run = client(baseUrl).startRun('go');
    expect(await read(run)).toEqual({ seen: ['t0', 't1', 'complete'], error: undefined });
    expect(run.lastEventIndex).toBe(2);
  });

  it('counts events without ids and reconnects after the last one, so nothing is replayed', async () => {
    const { baseUrl, requests } = await sessionServer(async (exchange, outgoing) => {
      openStream(outgoing);
      const events = [thought(0), thought(1), complete];
      const after = afterOf(exchange.url);
      if (exchange.count === 1) {
        outgoing.write(`data: ${JSON.stringify(events[0])}\n\ndata: ${JSON.stringify(events[1])}\n\n`);
        await new Promise((resolve) => setTimeout(resolve, 20));
        outgoing.destroy();
        return;
      }
      for (const event of events.slice(after + 1)) outgoing.write(`data: ${JSON.stringify(event)}\n\n`);
      outgoing.end(DONE);
    });
    const run = client(baseUrl).startRun('go');
    expect(await read(run)).toEqual({ seen: ['t0', 't1', 'complete'], error: undefined });
    expect(requests.filter((request) => request.includes('alt=sse')).at(-1)).toBe('GET /v1beta1/sessions/s1?alt=sse&after=1');
  });

  /** A session waiting at event 2 whose stream, like the reference server's, stays open while it waits. */
  async function waitingSession() {
    const state = { status: 'suspended', eventCount: 3 };
    const answers: string[] = [];
    const server = await sessionServer((exchange, outgoing) => {
      if (exchange.url.endsWith('/status')) return json(outgoing, 200, { sessionId: 's1', ...state });
      if (exchange.url.endsWith(':resume')) {
        answers.push(exchange.body);
        state.status = 'running';
        return json(outgoing, 200, { ok: true });
      }
      openStream(outgoing);
      const after = afterOf(exchange.url);
      for (let index = after + 1; index <= 2; index += 1) outgoing.write(frame(index, index === 2 ? question : thought(index)));
      if (state.status === 'suspended') return; // Open and idle until the next segment.
      outgoing.end(frame(3) + frame(4, complete) + DONE);
    });
    return { ...server, answers };
  }

  it('hands over the question of a waiting session whose stream stays open, and answers it once', async () => {
    const { baseUrl, answers } = await waitingSession();
    const onSuspend = () => ({ input: { parts: [{ text: 'Ada' }] } });
    const run = client(baseUrl).attachRun('s1', { after: 1, onSuspend });
    expect(await read(run)).toEqual({ seen: ['waitForInput', 't3', 'complete'], error: undefined });
    expect(answers).toHaveLength(1);
  });

  it('shows the question again to a run attached at it, while the stream stays open', async () => {
    const { baseUrl, answers, requests } = await waitingSession();
    const run = client(baseUrl).attachRun('s1', { after: 2, onSuspend: () => ({ input: { parts: [{ text: 'Ada' }] } }) });
    expect(await read(run)).toEqual({ seen: ['waitForInput', 't3', 'complete'], error: undefined });
    expect(answers).toHaveLength(1);
    expect(requests).toContain('GET /v1beta1/sessions/s1?alt=sse&after=1');
  });

  it('does not answer a replayed question the session went on from, even when the stream pauses after it', async () => {
    let asked = 0;
    const { baseUrl, requests } = await sessionServer(async (exchange, outgoing) => {
      if (exchange.url.endsWith('/status')) return json(outgoing, 200, { sessionId: 's1', status: 'running', eventCount: 2 });
      openStream(outgoing);
      outgoing.write(frame(0, question) + frame(1));
      await new Promise((resolve) => setTimeout(resolve, 300));
      outgoing.end(frame(2, complete) + DONE);
    });
    const run = client(baseUrl).attachRun('s1', {
      onSuspend: () => {
        asked += 1;
        return {};
      },
    });
    expect(await read(run)).toEqual({ seen: ['waitForInput', 't1', 'complete'], error: undefined });
    expect(asked).toBe(0);
    expect(requests.some((request) => request.endsWith(':resume'))).toBe(false);
  });

  it('gives up on a server that keeps answering 503 with a network error carrying the status', async () => {
    const { baseUrl, requests } = await sessionServer(async (exchange, outgoing) => {
      if (exchange.count === 1) return writeThenDrop(outgoing, frame(0));
      json(outgoing, 503, { error: 'down' });
    });
    const { seen, error } = await read(client(baseUrl, { reconnect: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 2 } }).startRun('go'));
    expect(seen).toEqual(['t0']);
    expect(error).toMatchObject({ kind: 'network', status: 503, message: '503: down (reconnected 2 times, giving up)' });
    expect(requests.filter((request) => request.includes('alt=sse'))).toHaveLength(3);
  });

  it("waits out a 429's Retry-After before reconnecting", async () => {
    const times: number[] = [];
    const { baseUrl } = await sessionServer(async (exchange, outgoing) => {
      times.push(Date.now());
      if (exchange.count === 1) return writeThenDrop(outgoing, frame(0));
      if (exchange.count === 2) return json(outgoing, 429, { error: 'slow down' }, { 'retry-after': '1' });
      openStream(outgoing);
      outgoing.end(frame(1, complete) + DONE);
    });
    expect(await read(client(baseUrl).startRun('go'))).toEqual({ seen: ['t0', 'complete'], error: undefined });
    expect((times[2] as number) - (times[1] as number)).toBeGreaterThanOrEqual(950);
  });

  it('gives a spec-format refusal without a code the code of its status', async () => {
    const { baseUrl } = await sessionServer((exchange, outgoing) => json(outgoing, 404, { error: 'Session not found' }));
    const error = await client(baseUrl).attachRun('gone').result.catch((caught: unknown) => caught);
    expect(error).toMatchObject({ kind: 'http', status: 404, code: 'NOT_FOUND', message: '404: Session not found' });
  });

  it('keeps its token out of the messages it builds from what the server sent', async () => {
    const { baseUrl } = await sessionServer((exchange, outgoing) => {
      if (exchange.url.endsWith(':resume')) {
        const sent = (JSON.parse(exchange.body) as { accessToken: string }).accessToken;
        return json(outgoing, 401, { error: `bad token ${sent}, header Bearer ${sent}` });
      }
      openStream(outgoing);
      outgoing.end(frame(0, question) + DONE);
    });
    const error = (await client(baseUrl)
      .startRun('go', { onSuspend: () => ({ input: { parts: [{ text: 'Ada' }] } }) })
      .result.catch((caught: unknown) => caught)) as AgentClientError;
    expect(error).toMatchObject({ kind: 'http', status: 401, code: 'UNAUTHENTICATED' });
    expect(error.message).toBe('401: bad token [redacted], header [redacted]');
  });

  it('fails an event or a line over limits.maxEventBytes with a protocol error, without reconnecting', async () => {
    for (const body of [frame(0, { thought: { text: 'x'.repeat(5000) } }), 'y'.repeat(5000)]) {
      const { baseUrl, requests } = await sessionServer((exchange, outgoing) => {
        openStream(outgoing);
        outgoing.end(body);
      });
      const { seen, error } = await read(client(baseUrl, { limits: { maxEventBytes: 4096 } }).startRun('go'));
      expect(seen).toEqual([]);
      expect(error).toMatchObject({ kind: 'protocol', code: 'PAYLOAD_TOO_LARGE', message: 'The server sent an event larger than 4096 bytes (limits.maxEventBytes)' });
      expect(requests.filter((request) => request.includes('alt=sse'))).toHaveLength(1);
    }
  });

  it('counts the UTF-8 bytes of an event against the limit, not its characters', async () => {
    const { baseUrl } = await sessionServer((exchange, outgoing) => {
      openStream(outgoing);
      outgoing.end(frame(0, { thought: { text: '€'.repeat(2000) } }));
    });
    const { error } = await read(client(baseUrl, { limits: { maxEventBytes: 4096 } }).startRun('go'));
    expect(error).toMatchObject({ kind: 'protocol', code: 'PAYLOAD_TOO_LARGE' });
  });

  it('reconnects a stream that stays silent past the idle timeout, and keeps one that sends keep-alives', async () => {
    const { baseUrl, requests } = await sessionServer(async (exchange, outgoing) => {
      if (exchange.count === 1) {
        outgoing.writeHead(200, { 'content-type': 'text/event-stream' });
        outgoing.flushHeaders();
        return; // Never a byte.
      }
      openStream(outgoing);
      outgoing.write(frame(0));
      for (let beat = 0; beat < 4; beat += 1) {
        await new Promise((resolve) => setTimeout(resolve, 60));
        outgoing.write(': keep-alive\n\n');
      }
      outgoing.end(frame(1, complete) + DONE);
    });
    const run = client(baseUrl, { reconnect: { initialDelayMs: 1, maxDelayMs: 5, idleTimeoutMs: 150 } }).startRun('go');
    expect(await read(run)).toEqual({ seen: ['t0', 'complete'], error: undefined });
    expect(requests.filter((request) => request.includes('alt=sse'))).toEqual(['GET /v1beta1/sessions/s1?alt=sse', 'GET /v1beta1/sessions/s1?alt=sse']);
  });

  it('passes over an event of a type it does not know, counting it, and reconnects after it', async () => {
    const { baseUrl, requests } = await sessionServer(async (exchange, outgoing) => {
      if (exchange.count === 1) return writeThenDrop(outgoing, frame(0) + frame(1, { hologram: { frames: 3 } }));
      openStream(outgoing);
      for (let index = afterOf(exchange.url) + 1; index <= 2; index += 1) outgoing.write(frame(index, index === 1 ? { hologram: { frames: 3 } } : thought(index)));
      outgoing.end(frame(3, complete) + DONE);
    });
    const run = client(baseUrl).startRun('go');
    expect(await read(run)).toEqual({ seen: ['t0', 't2', 'complete'], error: undefined });
    expect(requests.filter((request) => request.includes('alt=sse'))).toEqual(['GET /v1beta1/sessions/s1?alt=sse', 'GET /v1beta1/sessions/s1?alt=sse&after=1']);
    expect(run.lastEventIndex).toBe(3);
  });

  it('fails at once, without reconnecting, when the stream request is answered with a page instead of events', async () => {
    const { baseUrl, requests } = await sessionServer((exchange, outgoing) => {
      outgoing.writeHead(200, { 'content-type': 'text/html' });
      outgoing.end('<html><head><title>Wi-Fi login</title></head><body>Accept the terms</body></html>');
    });
    const { seen, error } = await read(client(baseUrl).startRun('go'));
    expect(seen).toEqual([]);
    expect(error).toMatchObject({ kind: 'protocol', message: `${baseUrl}/v1beta1/sessions/s1 answered 200 with text/html, not an event stream: Wi-Fi login` });
    expect(requests.filter((request) => request.includes('alt=sse'))).toHaveLength(1);
  });

  it("asks sessions/new again after a 429, waiting out its Retry-After, and makes one session", async () => {
    const times: number[] = [];
    const { baseUrl, requests } = await sessionServer(
      (exchange, outgoing) => {
        openStream(outgoing);
        outgoing.end(frame(0, complete) + DONE);
      },
      [{ status: 429, headers: { 'retry-after': '1' } }],
    );
    const run = client(baseUrl, {
      fetch: (input, init) => {
        if (input.endsWith('/new')) times.push(Date.now());
        return fetch(input, init);
      },
    }).startRun('go');
    expect(await read(run)).toEqual({ seen: ['complete'], error: undefined });
    expect(requests.filter((request) => request.endsWith('/new'))).toHaveLength(2);
    expect((times[1] as number) - (times[0] as number)).toBeGreaterThanOrEqual(950);
  });

  it('gives up on a sessions/new that keeps being refused with the http error, after maxAttempts', async () => {
    const { baseUrl, requests } = await sessionServer(() => undefined, [{ status: 503 }, { status: 503 }, { status: 503 }]);
    const error = await client(baseUrl, { reconnect: { maxAttempts: 1, initialDelayMs: 1 } })
      .startRun('go')
      .result.catch((caught: unknown) => caught);
    expect(error).toMatchObject({ kind: 'http', status: 503, message: '503: Too many sessions' });
    expect(requests).toEqual(['POST /v1beta1/sessions/new', 'POST /v1beta1/sessions/new']);
  });

  it('reconnects to a server that never answers the stream request, after the idle timeout', async () => {
    const { baseUrl, requests } = await sessionServer((exchange, outgoing) => {
      if (exchange.count === 1) return; // No status line, the connection left open.
      openStream(outgoing);
      outgoing.end(frame(0) + frame(1, complete) + DONE);
    });
    const run = client(baseUrl, { reconnect: { initialDelayMs: 1, maxDelayMs: 5, idleTimeoutMs: 150 } }).startRun('go');
    expect(await read(run)).toEqual({ seen: ['t0', 'complete'], error: undefined });
    expect(requests.filter((request) => request.includes('alt=sse'))).toHaveLength(2);
  });

  it('gives up on a status or an answer the server never sends, after the idle timeout: the answer is sent again, a status fails the run', async () => {
    const { baseUrl, requests } = await sessionServer((exchange, outgoing) => {
      if (exchange.url.endsWith('/status')) return json(outgoing, 200, { sessionId: 's1', status: 'suspended', eventCount: 1 });
      if (exchange.url.endsWith(':resume')) {
        if (exchange.count === 1) return; // No answer, the connection left open.
        return json(outgoing, 200, { ok: true });
      }
      openStream(outgoing);
      outgoing.end(frame(1, complete) + DONE);
    });
    const options = { reconnect: { initialDelayMs: 1, maxDelayMs: 5, idleTimeoutMs: 150 } };
    const answered = client(baseUrl, options).resumeRun('s1', { input: { parts: [{ text: 'Ada' }] } });
    expect(await read(answered)).toEqual({ seen: ['complete'], error: undefined });
    expect(requests.filter((request) => request.endsWith(':resume'))).toHaveLength(2);

    const silent = await sessionServer(() => undefined);
    const stuck = client(silent.baseUrl, options).resumeRun('s1', { input: { parts: [{ text: 'Ada' }] } });
    await expect(stuck.result).rejects.toMatchObject({ kind: 'network', code: 'TIMEOUT' });
  });

  it('stops at abort while it waits to reconnect: no request after it, no timer left', async () => {
    let refused!: () => void;
    const waiting = new Promise<void>((resolve) => (refused = resolve));
    const { baseUrl, requests } = await sessionServer(async (exchange, outgoing) => {
      if (exchange.count === 1) return writeThenDrop(outgoing, frame(0));
      json(outgoing, 503, { error: 'restarting' }, { 'retry-after': '30' });
      refused();
    });
    const timers = watchClientTimers();
    const run = client(baseUrl, { reconnect: { initialDelayMs: 1, maxDelayMs: 5, idleTimeoutMs: 10_000 } }).startRun('go');
    const reading = read(run);
    await waiting;
    await new Promise((resolve) => setTimeout(resolve, 50));
    run.abort();
    expect(await reading).toEqual({ seen: ['t0'], error: undefined });
    await expect(run.result).rejects.toMatchObject({ kind: 'aborted', code: 'ABORTED', message: 'Run was stopped' });
    const sent = requests.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(requests.slice(sent)).toEqual(['POST /v1beta1/sessions/s1:cancel']);
    expect(timers.pending()).toEqual([]);
    timers.stop();
  });

  it('stops at abort while a stream is open and quiet, on either protocol: the connection closed, no timer left', async () => {
    let closed = 0;
    const { baseUrl } = await sessionServer((exchange, outgoing) => {
      if (exchange.url.endsWith(':cancel')) return json(outgoing, 200, { sessionId: 's1', status: 'cancelled' });
      outgoing.on('close', () => (closed += 1));
      openStream(outgoing);
      outgoing.write(frame(0));
    });
    for (const protocol of ['sessions', 'legacy'] as const) {
      const timers = watchClientTimers();
      const run = client(baseUrl, { protocol, path: '/v1beta1/sessions/s1', reconnect: { idleTimeoutMs: 10_000 } }).startRun('go');
      for await (const event of run.events) {
        if (event.type === 'thought') setTimeout(() => run.abort(), 50);
      }
      await expect(run.result).rejects.toMatchObject({ kind: 'aborted', code: 'ABORTED' });
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(timers.pending()).toEqual([]);
      timers.stop();
    }
    expect(closed).toBe(2);
  });

  it("reconnects after the stream's retry: time, shorter or longer than its own backoff, up to maxDelayMs", async () => {
    /** The waits the client sleeps before reconnecting, in milliseconds. */
    const watchWaits = (): { waits: number[]; first: Promise<number>; stop(): void } => {
      const realSet = globalThis.setTimeout;
      const waits: number[] = [];
      let first!: (ms: number) => void;
      const firstWait = new Promise<number>((resolve) => (first = resolve));
      vi.spyOn(globalThis, 'setTimeout').mockImplementation(((handler: () => void, ms?: number) => {
        if (/at sleep \(.*session-transport\.ts:/.test(new Error().stack ?? '')) {
          waits.push(ms ?? 0);
          first(ms ?? 0);
        }
        return realSet(handler, ms);
      }) as typeof setTimeout);
      return { waits, first: firstWait, stop: () => vi.restoreAllMocks() };
    };
    /** A first stream that sets `retry:` on its start envelope, sends an event and drops; `refusals` 503s; then the end. */
    const retryingServer = (retry: string, refusals: number) =>
      sessionServer(async (exchange, outgoing) => {
        if (exchange.count === 1) {
          outgoing.writeHead(200, { 'content-type': 'text/event-stream' });
          outgoing.write(`event: start\nretry: ${retry}\ndata: {"sessionId":"s1"}\n\n${frame(0)}`);
          await new Promise((resolve) => setTimeout(resolve, 20));
          outgoing.destroy();
          return;
        }
        if (exchange.count <= 1 + refusals) return json(outgoing, 503, { error: 'restarting' });
        openStream(outgoing);
        outgoing.end(frame(1, complete) + DONE);
      });

    // Shorter: the client's own backoff would wait half a minute or more.
    const short = await retryingServer('5', 0);
    let watch = watchWaits();
    const quick = client(short.baseUrl, { reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } }).startRun('go');
    const firstWait = await watch.first;
    if (firstWait !== 5) quick.abort();
    expect(firstWait).toBe(5);
    expect(await read(quick)).toEqual({ seen: ['t0', 'complete'], error: undefined });
    watch.stop();
    expect(watch.waits).toEqual([5]);

    // Longer, up to the client's cap, kept for the reconnect after the one that failed.
    const long = await retryingServer('3600000', 1);
    watch = watchWaits();
    const slow = await read(client(long.baseUrl, { reconnect: { initialDelayMs: 1, maxDelayMs: 40 } }).startRun('go'));
    watch.stop();
    expect(slow).toEqual({ seen: ['t0', 'complete'], error: undefined });
    expect(watch.waits).toEqual([40, 40]);
  });

  it('gives up on a :cancel the server never answers, after the idle timeout: its connection closed, no timer left', async () => {
    let cancelLeft!: () => void;
    const cancelClosed = new Promise<void>((resolve) => (cancelLeft = resolve));
    const { baseUrl, requests } = await sessionServer((exchange, outgoing) => {
      // No status line, the connection left open: the client has to let go.
      if (exchange.url.endsWith(':cancel')) return void outgoing.on('close', () => cancelLeft());
      openStream(outgoing);
      outgoing.write(frame(0));
    });
    const timers = watchClientTimers();
    const run = client(baseUrl, { reconnect: { idleTimeoutMs: 150 } }).startRun('go');
    for await (const event of run.events) {
      if (event.type === 'thought') run.abort();
    }
    await expect(run.result).rejects.toMatchObject({ kind: 'aborted', code: 'ABORTED' });
    await cancelClosed;
    expect(requests).toContain('POST /v1beta1/sessions/s1:cancel');
    expect(timers.pending()).toEqual([]);
    timers.stop();
  });

  it('cancels the session that sessions/new makes after the run was aborted while waiting for it', async () => {
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const cancels: string[] = [];
    const { baseUrl, requests } = await sessionServer((exchange, outgoing) => {
      if (exchange.url.endsWith(':cancel')) {
        cancels.push(exchange.url);
        return json(outgoing, 200, { sessionId: 's1', status: 'cancelled' });
      }
      openStream(outgoing);
    });
    const run = client(baseUrl, {
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        if (input.endsWith('/new')) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          answer();
        }
        return response;
      },
    }).startRun('go');
    run.abort();
    await expect(run.result).rejects.toMatchObject({ kind: 'aborted', code: 'ABORTED' });
    await answered;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(cancels).toEqual(['/v1beta1/sessions/s1:cancel']);
    expect(requests.some((request) => request.includes('alt=sse'))).toBe(false);
  });

  it('leaves no listener on a signal that runs which ended shared', async () => {
    const { baseUrl } = await sessionServer((exchange, outgoing) => {
      openStream(outgoing);
      outgoing.end(frame(0, complete) + DONE);
    });
    const page = new AbortController();
    for (let index = 0; index < 12; index += 1) await client(baseUrl).startRun('go', { signal: page.signal }).result;
    await client(baseUrl, { protocol: 'legacy', path: '/v1beta1/sessions/s1' }).startRun('go', { signal: page.signal }).result.catch(() => undefined);
    expect(getEventListeners(page.signal, 'abort')).toHaveLength(0);
  });
});

