import { messageOf } from '../errors/message-of.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { AgentEvent } from '../protocol/events.js';
import type { Segment, StartRequest } from '../protocol/requests.js';
import { fromWireEvent } from '../protocol/wire.js';
import { parseSseStream } from '../sse/index.js';
import { createAgentRun, type AgentRun, type AgentRunOptions, type RunSegmentOpener, type RunSegmentRequest } from './agent-run.js';
import { AgentClientError } from './errors.js';

/** Options of {@link createAgentClient}. */
export interface AgentClientOptions {
  /** Where the agent server lives, e.g. `http://localhost:8080` or `location.origin`. */
  baseUrl: string;
  /** The fetch to use. Default: the global `fetch`. */
  fetch?: (input: string, init: RequestInit) => Promise<Response>;
  /** The user's OAuth token, asked for before every request (sent as a bearer and in the body). */
  getAccessToken?: () => string | undefined | Promise<string | undefined>;
  /** The endpoint path. Default `/v1beta1/streamRunAgent`. */
  path?: string;
}

/** What starts a run: an objective as plain text, a list of segments, or a full start request. */
export type RunInput = string | Segment[] | StartRequest;

/** Starts and resumes runs; the same shape for a remote server and an in-page run. */
export interface AgentClient {
  /** Starts a run. */
  startRun(input: RunInput, options?: AgentRunOptions): AgentRun;
  /** Continues a run saved under `interactionId` (a suspend or a pause), e.g. after a reload. */
  resumeRun(interactionId: string, response: ResumeResponse, options?: AgentRunOptions): AgentRun;
}

/**
 * A client of the agent protocol over any `fetch`. Each suspend closes the server's stream; the
 * run handle answers it and POSTs the resume, so the app sees one event sequence per run.
 *
 * @example
 * ```ts
 * const client = createAgentClient({ baseUrl: 'http://localhost:8080' });
 * const run = client.startRun('Ask for my name, then greet me', {
 *   onSuspend: (event) => (event.type === 'waitForInput' ? { input: { parts: [{ text: 'Ada' }] } } : {}),
 * });
 * for await (const event of run.events) console.log(event.type);
 * console.log((await run.result).outcomes);
 * ```
 */
export function createAgentClient(options: AgentClientOptions): AgentClient {
  if (typeof options.baseUrl !== 'string' || options.baseUrl.length === 0) {
    throw new TypeError('createAgentClient: baseUrl is required, e.g. "http://localhost:8080"');
  }
  const fetchFn = options.fetch ?? ((input: string, init: RequestInit) => globalThis.fetch(input, init));
  const url = `${options.baseUrl.replace(/\/+$/, '')}${options.path ?? '/v1beta1/streamRunAgent'}?alt=sse`;

  const open: RunSegmentOpener = async function* (request, signal) {
    const token = await options.getAccessToken?.();
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream' };
    const body: RunSegmentRequest & { accessToken?: string } = { ...request };
    if (token) {
      headers.authorization = `Bearer ${token}`;
      body.accessToken = token;
    }
    let response: Response;
    try {
      response = await fetchFn(url, { method: 'POST', headers, body: JSON.stringify(body), signal });
    } catch (error) {
      throw new AgentClientError('network', `Could not reach ${url}: ${messageOf(error)}`, { cause: error });
    }
    if (!response.ok) throw await httpError(response);
    if (!response.body) throw new AgentClientError('protocol', `${url} answered ${response.status} without a body`);
    try {
      for await (const message of parseSseStream(response.body)) {
        if (message.data.length === 0 || message.data === '[DONE]') continue;
        yield parseEvent(message.data);
      }
    } catch (error) {
      if (error instanceof AgentClientError) throw error;
      throw new AgentClientError('network', `The event stream from ${url} broke: ${messageOf(error)}`, { cause: error });
    }
  };

  return {
    startRun: (input, runOptions) => createAgentRun(open, { start: toStartRequest(input) }, runOptions),
    resumeRun: (interactionId, response, runOptions) =>
      createAgentRun(open, { resume: { interactionId, response } }, runOptions),
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

function parseEvent(data: string): AgentEvent {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    throw new AgentClientError('protocol', `The server sent an event that is not JSON: ${data.slice(0, 120)}`);
  }
  try {
    return fromWireEvent(value);
  } catch (error) {
    throw new AgentClientError('protocol', `The server sent an invalid event: ${messageOf(error)}`, { cause: error });
  }
}

async function httpError(response: Response): Promise<AgentClientError> {
  const text = await response.text().catch(() => '');
  let message = text.trim() || response.statusText;
  let code: string | undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; code?: unknown } | string };
    if (typeof parsed.error === 'string') message = parsed.error;
    else if (parsed.error && typeof parsed.error.message === 'string') {
      message = parsed.error.message;
      if (typeof parsed.error.code === 'string') code = parsed.error.code;
    }
  } catch {
    // Not JSON: keep the text.
  }
  const options = code === undefined ? { status: response.status } : { status: response.status, code };
  return new AgentClientError('http', `${response.status}: ${message}`, options);
}
