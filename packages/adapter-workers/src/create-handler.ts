import { AgentError, type AgentPorts, type BackendClient, type DriveOperationsClient, type InteractionStore, type RunOptions } from '@org/core';
import { AGENT_RUN_PATHS, createAgentHandler, errorResponse, runErrorResponse, SESSIONS_PATH, withCors, type AgentRequestContext, type CorsOptions } from '@org/core/http';
import { agentHandlerOptionsFor } from './agent-handler-options.js';
import type { InteractionStoreObject } from './durable-object-interaction-store.js';
import type { SessionObject } from './session-object.js';

/**
 * The bindings and secrets the default ports read. All optional: pass `createBackend` /
 * `createStore` / `createPorts` to get them from elsewhere.
 */
export interface AgentWorkerEnv {
  /** Gemini API key (`npx wrangler secret put GEMINI_API_KEY`; `.dev.vars` locally). */
  GEMINI_API_KEY?: string;
  /** Overrides the Gemini API base URL, e.g. a gateway or a local simulated model. */
  GEMINI_BASE_URL?: string;
  /** Durable Object namespace of {@link InteractionStoreObject}: the default store, with atomic claims. */
  INTERACTIONS?: DurableObjectNamespace<InteractionStoreObject>;
  /** A KV namespace, used when `INTERACTIONS` is not bound (eventually consistent; see the README). */
  INTERACTIONS_KV?: KVNamespace;
  /**
   * Durable Object namespace of {@link SessionObject}. When bound, sessions and `streamRunAgent`
   * runs are served by one object per session, and a run goes on after the request that started it.
   */
  SESSIONS?: DurableObjectNamespace<SessionObject>;
  /** One origin serving the Drive and Sheets APIs (`/drive/v3`, `/upload/drive/v3`, `/v4`): a gateway, or a fake in tests. Default: Google's. */
  GOOGLE_API_BASE_URL?: string;
  /** The Drive v3 API alone (wins over `GOOGLE_API_BASE_URL`). */
  DRIVE_BASE_URL?: string;
  /** The Drive v3 upload API alone. */
  DRIVE_UPLOAD_BASE_URL?: string;
  /** The Sheets v4 API alone. */
  SHEETS_BASE_URL?: string;
}

/** What the port factories learn about one request: core's context plus the Worker's own. */
export interface WorkerRequestContext extends AgentRequestContext {
  /** The invocation's context; the handler already routes store writes through `waitUntil`. */
  executionContext: ExecutionContext;
}

/** Options of {@link createHandler}. */
export interface WorkerHandlerOptions<Env> {
  /**
   * Builds all ports for one request. When given, `createBackend` and `createStore` are not used.
   * The returned store's writes are still routed through `ctx.waitUntil`.
   */
  createPorts?(env: Env, context: WorkerRequestContext): AgentPorts | Promise<AgentPorts>;
  /** Builds the model backend for one request. Default: Gemini with `env.GEMINI_API_KEY` and the global `fetch`. */
  createBackend?(env: Env, context: WorkerRequestContext): BackendClient | Promise<BackendClient>;
  /** Builds the interaction store. Default: the `INTERACTIONS` Durable Object binding, else the `INTERACTIONS_KV` namespace. */
  createStore?(env: Env, context: WorkerRequestContext): InteractionStore | Promise<InteractionStore>;
  /**
   * Builds the Google Drive client (memory, the chat log, the google-drive functions) when the
   * ports have none. Default: one bound to the caller's token when there is one, over the global
   * `fetch`, at the base URLs of `env` (`GOOGLE_API_BASE_URL`, ...). Return `undefined` for none.
   */
  createDrive?(env: Env, context: WorkerRequestContext): DriveOperationsClient | undefined | Promise<DriveOperationsClient | undefined>;
  /** Run options for one request (model, mode, extra function groups, ...). */
  runOptions?(env: Env, context: WorkerRequestContext): Omit<RunOptions, 'signal' | 'owner'> | undefined;
  /** Refuse bodies larger than this with 413. Default 32 MiB. */
  maxBodyBytes?: number;
  /**
   * Most bytes of request bodies one isolate (or session object) reads at once; past it a request
   * gets 429 `RATE_LIMITED`. Default 64 MiB: a Worker isolate and a Durable Object have 128 MB of
   * memory, so the 256 MiB that `createAgentHandler` allows a Node server would not fit.
   */
  maxBodyBytesInFlight?: number;
  /** Send an SSE keep-alive comment after this much silence. Default 15 s. */
  keepAliveMs?: number;
  /** Which other origins a browser page may call from (as `createAgentHandler`'s `cors`). Default: same origin only. */
  cors?: CorsOptions;
  /** Who owns a run started with this token. Default: a SHA-256 digest of the token. */
  resolveOwner?(accessToken: string | undefined, env: Env): string | undefined | Promise<string | undefined>;
  /** Answers requests to paths other than the agent endpoints. Default: a 404 JSON error. */
  fallback?(request: Request, env: Env, executionContext: ExecutionContext): Response | Promise<Response>;
  /**
   * The namespace of the {@link SessionObject}s that serve sessions and runs. Default:
   * `env.SESSIONS`. When there is one, this Worker only routes each agent request to its object
   * (which builds the ports, runs the segment and streams the events); the objects take their
   * options from `createSessionObject`, so give both the same options. Without one, runs are
   * served in the Worker itself and end with their request.
   */
  sessionNamespace?(env: Env): DurableObjectNamespace<SessionObject> | undefined;
}

/**
 * A Cloudflare Worker that serves the agent protocol: `POST /v1beta1/streamRunAgent` (and
 * `/api/agent/run`) with a start or resume body, answered with the run's events as SSE streamed
 * through the Response body, and the sessions endpoints `/v1beta1/sessions/*`. With a `SESSIONS`
 * binding each request is routed to a {@link SessionObject}, which runs the segment and keeps the
 * session; without one, runs are served here, with ports built per request from `env` and the
 * caller's token, and end with their request. A request with a token gets a Google Drive client
 * bound to it, so runs can use memory.
 *
 * @example
 * ```ts
 * import { createHandler, InteractionStoreObject, SessionObject } from '@org/adapter-workers';
 *
 * export { InteractionStoreObject, SessionObject };
 * export default createHandler<Env>();
 * ```
 */
export function createHandler<Env = AgentWorkerEnv>(options: WorkerHandlerOptions<Env> = {}): ExportedHandler<Env> {
  return {
    async fetch(request, env, executionContext) {
      const url = new URL(request.url);
      const agentPath = AGENT_RUN_PATHS.includes(url.pathname) || url.pathname.startsWith(SESSIONS_PATH);
      if (options.fallback && !agentPath) {
        return options.fallback(request as unknown as Request, env, executionContext);
      }
      const namespace = options.sessionNamespace ? options.sessionNamespace(env) : (env as AgentWorkerEnv | undefined)?.SESSIONS;
      // A preflight needs no object, and a path naming no session gets its 404 from the handler below.
      const target = namespace && agentPath && request.method !== 'OPTIONS' ? objectFor(namespace, url) : undefined;
      if (namespace && target) {
        try {
          return await namespace.get(target).fetch(request as unknown as Request);
        } catch (error) {
          // The object could not be reached (a deploy reset it, it is overloaded, ...): answer as
          // the core handler answers a request it could not serve.
          return AGENT_RUN_PATHS.includes(url.pathname) ? runErrorResponse(request as unknown as Request, error) : errorResponse(error);
        }
      }
      if (!namespace && url.pathname.startsWith(SESSIONS_PATH) && request.method !== 'OPTIONS') {
        // Without session objects a session would live in this request's memory only: its id
        // could never be read, resumed or cancelled by the next request, so none is handed out.
        const refuse = async () => errorResponse(new AgentError('NOT_IMPLEMENTED', SESSIONS_NOT_SERVED));
        return options.cors ? withCors(refuse, options.cors)(request as unknown as Request) : refuse();
      }
      const handler = createAgentHandler(
        agentHandlerOptionsFor(env, options, executionContext, (ports) => ({ ...ports, store: keepWritesAlive(ports.store, executionContext) })),
      );
      try {
        return await handler(request as unknown as Request);
      } catch (error) {
        return errorResponse(error);
      }
    },
  };
}

/**
 * Routes every store write through `ctx.waitUntil`, so a suspended run's state, a checkpoint or
 * the release of a claim is written in full even when the client disconnects meanwhile (the
 * runtime would otherwise cancel outstanding work once the response is gone). The store's size
 * limit passes through, so the runtime still refuses oversized states before writing.
 */
function keepWritesAlive(store: InteractionStore, executionContext: ExecutionContext): InteractionStore {
  const keep = <T>(promise: Promise<T>): Promise<T> => {
    executionContext.waitUntil(promise.then(noop, noop));
    return promise;
  };
  return {
    ...(store.maxStateBytes === undefined ? {} : { maxStateBytes: store.maxStateBytes }),
    get: (id) => store.get(id),
    set: (id, write, expected) => keep(store.set(id, write, expected)),
    delete: (id, expected) => keep(store.delete(id, expected)),
  };
}

function noop(): void {}

const SESSIONS_NOT_SERVED = 'This Worker serves no sessions: it has no SessionObject namespace bound; use POST /v1beta1/streamRunAgent';

const SESSION_ROUTE = /^([A-Za-z0-9._-]{1,128})(?::(?:resume|cancel)|\/status)?$/;

/**
 * The object an agent request goes to: a session's requests to the session's own object; a new
 * session or a `streamRunAgent` request to a fresh object, which runs the segment (its session's
 * log, bus and readers live in the session's object, whose id the run only learns once it starts).
 */
function objectFor(namespace: DurableObjectNamespace<SessionObject>, url: URL): DurableObjectId | undefined {
  if (AGENT_RUN_PATHS.includes(url.pathname)) return namespace.newUniqueId();
  const rest = url.pathname.slice(SESSIONS_PATH.length);
  if (rest === 'new') return namespace.newUniqueId();
  const sessionId = SESSION_ROUTE.exec(rest)?.[1];
  return sessionId === undefined ? undefined : namespace.idFromName(sessionId);
}
