import { messageOf } from '../errors/message-of.js';
import type { AgentEvent } from '../protocol/events.js';
import { fromWireEvent } from '../protocol/wire.js';
import { parseSseStream, type SseEvent } from '../sse/index.js';
import { AgentClientError } from './errors.js';

/** What the client needs to reach the server. */
export interface ServerConnectionOptions {
  baseUrl: string;
  fetch?: (input: string, init: RequestInit) => Promise<Response>;
  getAccessToken?: () => string | undefined | Promise<string | undefined>;
}

/** One request to the server. */
export interface ServerRequest {
  /** A JSON body; the token is added to it as `accessToken`. */
  body?: object;
  signal?: AbortSignal;
  /** Asks for an event stream. */
  stream?: boolean;
}

/** The server as the client sees it: requests that fail as {@link AgentClientError}s. */
export interface ServerConnection {
  /** Sends a request; unreachable is a `network` error, a non-2xx answer an `http` one with the server's code. */
  send(method: 'GET' | 'POST', path: string, request?: ServerRequest): Promise<Response>;
  /** Reads an answer's JSON body. */
  json(response: Response): Promise<Record<string, unknown>>;
  /** The server-sent events of an answer; a broken stream is a `network` error. Closes the body when left. */
  messages(response: Response): AsyncGenerator<SseEvent>;
}

/** Builds the connection every request of a client goes through: the token travels as a bearer and in the body. */
export function createServerConnection(options: ServerConnectionOptions): ServerConnection {
  const fetchFn = options.fetch ?? ((input: string, init: RequestInit) => globalThis.fetch(input, init));
  const base = options.baseUrl.replace(/\/+$/, '');
  return {
    async send(method, path, request = {}) {
      const url = base + path;
      const token = await options.getAccessToken?.();
      const headers: Record<string, string> = { accept: request.stream ? 'text/event-stream' : 'application/json' };
      const init: RequestInit = { method, headers };
      if (token) headers.authorization = `Bearer ${token}`;
      if (request.body) {
        headers['content-type'] = 'application/json';
        init.body = JSON.stringify(token ? { ...request.body, accessToken: token } : request.body);
      }
      if (request.signal) init.signal = request.signal;
      let response: Response;
      try {
        response = await fetchFn(url, init);
      } catch (error) {
        throw new AgentClientError('network', `Could not reach ${url}: ${messageOf(error)}`, { cause: error });
      }
      if (!response.ok) throw await httpError(response);
      return response;
    },

    async json(response) {
      const value: unknown = await response.json().catch(() => undefined);
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new AgentClientError('protocol', `${response.url || 'The server'} answered ${response.status} without a JSON object`);
      }
      return value as Record<string, unknown>;
    },

    async *messages(response) {
      const body = response.body;
      if (!body) throw new AgentClientError('protocol', `${response.url || 'The server'} answered ${response.status} without a body`);
      try {
        yield* parseSseStream(body);
      } catch (error) {
        if (error instanceof AgentClientError) throw error;
        throw new AgentClientError('network', `The event stream from ${response.url || base} broke: ${messageOf(error)}`, { cause: error });
      } finally {
        // Left early (a suspend, an abort): let go of the connection.
        await body.cancel().catch(() => undefined);
      }
    },
  };
}

/** Parses one event's JSON; anything else is a `protocol` error naming what was wrong. */
export function parseEvent(data: string): AgentEvent {
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
