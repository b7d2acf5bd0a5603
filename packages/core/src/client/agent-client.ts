import type { AgentEvent } from '../protocol/events.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { Segment, StartRequest } from '../protocol/requests.js';
import { createAgentRun, driveRun, type AgentRun, type AgentRunOptions, type RunSegmentOpener } from './agent-run.js';
import { AgentClientError } from './errors.js';
import { createServerConnection, describeUrl, type ClientLimits, type ServerConnection } from './server-connection.js';
import { createSessionTransport, DEFAULT_IDLE_TIMEOUT_MS, type ReconnectOptions } from './session-transport.js';

/** Options of {@link createAgentClient}. */
export interface AgentClientOptions {
  /** Where the agent server lives, e.g. `http://localhost:8080` or `location.origin`. */
  baseUrl: string;
  /** The fetch to use. Default: the global `fetch`. */
  fetch?: (input: string, init: RequestInit) => Promise<Response>;
  /** The user's OAuth token, asked for before every request (sent as a bearer and in the body). */
  getAccessToken?: () => string | undefined | Promise<string | undefined>;
  /**
   * How runs travel. `legacy` (the default): one `POST /v1beta1/streamRunAgent` per segment, the
   * run streamed on that request. `sessions`: the run lives in a server session
   * (`/v1beta1/sessions/*`) that outlasts the connection; a dropped stream is reconnected after
   * the last event, `attachRun()` follows a session again after a reload, `abort()` cancels it.
   */
  protocol?: 'legacy' | 'sessions';
  /** The legacy endpoint path. Default `/v1beta1/streamRunAgent`. */
  path?: string;
  /**
   * How a sessions run reconnects to a dropped stream: attempts in a row, the backoff between
   * them, and how long a silent stream is waited on (a silent legacy stream fails the run).
   */
  reconnect?: ReconnectOptions;
  /** Bounds on what the server may send, e.g. `{ maxEventBytes: 16 * 1024 * 1024 }` (the default). */
  limits?: ClientLimits;
}

/** What starts a run: an objective as plain text, a list of segments, or a full start request. */
export type RunInput = string | Segment[] | StartRequest;

/** Starts and resumes runs; the same shape for a remote server and an in-page run. */
export interface AgentClient {
  /** Starts a run. */
  startRun(input: RunInput, options?: AgentRunOptions): AgentRun;
  /**
   * Continues a run saved under `interactionId` (a suspend or a pause), e.g. after a reload. With
   * the `sessions` protocol the id is the session's (`run.sessionId`): the answer goes to
   * `sessions/{id}:resume` and the run follows the session's new events.
   */
  resumeRun(interactionId: string, response: ResumeResponse, options?: AgentRunOptions): AgentRun;
}

/** Options of {@link RemoteAgentClient.attachRun}. */
export interface AttachRunOptions extends AgentRunOptions {
  /** Deliver the session's events after this index (`run.lastEventIndex` of the earlier handle). Default -1: every event. */
  after?: number;
}

/** A client of an agent server. */
export interface RemoteAgentClient extends AgentClient {
  /**
   * Follows a session that already exists (protocol `sessions`), e.g. after a page reload: its
   * events after `after`, live while it runs. A session waiting for an answer shows its suspend
   * event even at or before `after`, so the app can answer it with `respond()` or `onSuspend`.
   */
  attachRun(sessionId: string, options?: AttachRunOptions): AgentRun;
}

/**
 * A client of the agent protocol over any `fetch`. Each suspend closes the server's stream; the
 * run handle answers it and continues, so the app sees one event sequence per run.
 *
 * @example
 * ```ts
 * const client = createAgentClient({ baseUrl: 'http://localhost:8080', protocol: 'sessions' });
 * const run = client.startRun('Ask for my name, then greet me', {
 *   onSuspend: (event) => (event.type === 'waitForInput' ? { input: { parts: [{ text: 'Ada' }] } } : {}),
 * });
 * for await (const event of run.events) console.log(event.type);
 * console.log((await run.result).outcomes);
 * ```
 */
export function createAgentClient(options: AgentClientOptions): RemoteAgentClient {
  if (typeof options.baseUrl !== 'string' || options.baseUrl.length === 0) {
    throw new TypeError('createAgentClient: baseUrl is required, e.g. "http://localhost:8080"');
  }
  const protocol = options.protocol ?? 'legacy';
  if (protocol !== 'legacy' && protocol !== 'sessions') {
    throw new TypeError(`createAgentClient: protocol must be "legacy" or "sessions", got ${JSON.stringify(protocol)}`);
  }
  const connection = createServerConnection(options);
  if (protocol === 'sessions') {
    return {
      startRun: (input, runOptions) => driveRun(createSessionTransport(connection, { start: toStartRequest(input) }, options.reconnect), runOptions),
      resumeRun: (sessionId, response, runOptions) =>
        driveRun(createSessionTransport(connection, { resume: { sessionId, response } }, options.reconnect), runOptions),
      attachRun: (sessionId, attachOptions = {}) => {
        const { after = -1, ...runOptions } = attachOptions;
        if (typeof sessionId !== 'string' || sessionId.length === 0) throw new TypeError('attachRun: sessionId is required');
        if (!Number.isSafeInteger(after) || after < -1) throw new TypeError(`attachRun: after must be an event index (-1 or more), got ${String(after)}`);
        return driveRun(createSessionTransport(connection, { attach: { sessionId, after } }, options.reconnect), runOptions);
      },
    };
  }
  const open = createLegacyOpener(connection, options.baseUrl, options.path ?? '/v1beta1/streamRunAgent', options.reconnect?.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
  return {
    startRun: (input, runOptions) => createAgentRun(open, { start: toStartRequest(input) }, runOptions),
    resumeRun: (interactionId, response, runOptions) => createAgentRun(open, { resume: { interactionId, response } }, runOptions),
    attachRun: () => {
      throw new TypeError('attachRun: sessions live on the sessions protocol; create the client with protocol: "sessions"');
    },
  };
}

/**
 * One `POST` per segment; the answer is the segment's events. A stream that stays silent for
 * `idleTimeoutMs` (the server sends a keep-alive comment every 15 s) is broken: the run fails
 * instead of waiting forever.
 */
function createLegacyOpener(connection: ServerConnection, baseUrl: string, path: string, idleTimeoutMs: number): RunSegmentOpener {
  const idle = idleTimeoutMs > 0 ? { idleTimeoutMs } : {};
  return async function* (request, signal) {
    // The segment's own signal, so that a request given up on (silent, or left) is let go of.
    const segment = new AbortController();
    const stop = (): void => segment.abort();
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
    try {
      const response = await connection.send('POST', `${path}?alt=sse`, { body: request, signal: segment.signal, stream: true, ...(idleTimeoutMs > 0 ? { timeoutMs: idleTimeoutMs } : {}) });
      for await (const message of connection.messages(response, idle)) {
        if (message.data.length === 0 || message.data === '[DONE]') continue;
        let event: AgentEvent | undefined;
        try {
          event = connection.parse(message.data);
        } catch (error) {
          // Half an event at the end is a stream that was cut, not a server that sent garbage.
          if (message.unterminated) {
            throw new AgentClientError('network', `The event stream from ${describeUrl(response.url || baseUrl.replace(/\/+$/, '') + path)} ended in the middle of an event`, { cause: error });
          }
          throw error;
        }
        // A newer server's event of a type this client does not know: passed over.
        if (event !== undefined) yield event;
      }
    } finally {
      signal.removeEventListener('abort', stop);
      segment.abort();
    }
  };
}

/** Normalises what `startRun` accepts to a start request. */
export function toStartRequest(input: RunInput): StartRequest {
  if (typeof input === 'string') {
    if (input.trim().length === 0) throw new TypeError('startRun: the objective is empty');
    return { segments: [{ type: 'text', text: input }] };
  }
  if (Array.isArray(input)) return { segments: input };
  if (!input || !Array.isArray(input.segments)) {
    throw new TypeError('startRun: expected an objective string, a segment array, or { segments: [...] }');
  }
  return input;
}
