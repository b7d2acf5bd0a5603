import { AgentError, type AgentPorts, type BackendClient, type DriveOperationsClient, type InteractionStore, type RunOptions } from '@org/core';
import {
  AGENT_RUN_PATHS,
  createAgentHandler,
  createGeminiBackendClient,
  createHttpDriveOperationsClient,
  errorResponse,
  readDriveBaseUrls,
  type AgentRequestContext,
  type CorsOptions,
} from '@org/core/http';
import { createDurableObjectInteractionStore, type InteractionStoreObject } from './durable-object-interaction-store.js';
import { createKvInteractionStore } from './kv-interaction-store.js';

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
  /** Send an SSE keep-alive comment after this much silence. Default 15 s. */
  keepAliveMs?: number;
  /** Which other origins a browser page may call from (as `createAgentHandler`'s `cors`). Default: same origin only. */
  cors?: CorsOptions;
  /** Who owns a run started with this token. Default: a SHA-256 digest of the token. */
  resolveOwner?(accessToken: string | undefined, env: Env): string | undefined | Promise<string | undefined>;
  /** Answers requests to paths other than the agent endpoints. Default: a 404 JSON error. */
  fallback?(request: Request, env: Env, executionContext: ExecutionContext): Response | Promise<Response>;
}

/**
 * A Cloudflare Worker that serves the agent protocol: `POST /v1beta1/streamRunAgent` (and
 * `/api/agent/run`) with a start or resume body, answered with the run's events as SSE streamed
 * through the Response body. Ports are built per request from `env` and the caller's token (a
 * request with a token gets a Google Drive client bound to it, so runs can use memory).
 *
 * @example
 * ```ts
 * import { createHandler, InteractionStoreObject } from '@org/adapter-workers';
 *
 * export { InteractionStoreObject };
 * export default createHandler<Env>();
 * ```
 */
export function createHandler<Env = AgentWorkerEnv>(options: WorkerHandlerOptions<Env> = {}): ExportedHandler<Env> {
  return {
    async fetch(request, env, executionContext) {
      if (options.fallback && !AGENT_RUN_PATHS.includes(new URL(request.url).pathname)) {
        return options.fallback(request as unknown as Request, env, executionContext);
      }
      const withWorker = (context: AgentRequestContext): WorkerRequestContext => ({ ...context, executionContext });
      const handler = createAgentHandler({
        createPorts: async (context) => {
          const workerContext = withWorker(context);
          const ports = options.createPorts
            ? await options.createPorts(env, workerContext)
            : await createDefaultPorts(env, workerContext, options);
          const drive = ports.drive ?? (options.createDrive ? await options.createDrive(env, workerContext) : createDefaultDrive(env, workerContext));
          return { ...ports, store: keepWritesAlive(ports.store, executionContext), ...(drive ? { drive } : {}) };
        },
        ...(options.runOptions ? { runOptions: (context: AgentRequestContext) => options.runOptions?.(env, withWorker(context)) } : {}),
        ...(options.resolveOwner ? { resolveOwner: (accessToken: string | undefined) => options.resolveOwner?.(accessToken, env) } : {}),
        ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
        ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
        ...(options.cors ? { cors: options.cors } : {}),
      });
      try {
        return await handler(request as unknown as Request);
      } catch (error) {
        return errorResponse(error);
      }
    },
  };
}

async function createDefaultPorts<Env>(
  env: Env,
  context: WorkerRequestContext,
  options: WorkerHandlerOptions<Env>,
): Promise<AgentPorts> {
  const bindings = (env ?? {}) as AgentWorkerEnv;
  const backend = options.createBackend ? await options.createBackend(env, context) : createDefaultBackend(bindings);
  const store = options.createStore ? await options.createStore(env, context) : createDefaultStore(bindings);
  return { backend, store };
}

function createDefaultBackend(env: AgentWorkerEnv): BackendClient {
  const apiKey = env.GEMINI_API_KEY;
  if (!apiKey) {
    throw new AgentError(
      'INTERNAL',
      'GEMINI_API_KEY is not set for this Worker: run `npx wrangler secret put GEMINI_API_KEY` (locally, put it in .dev.vars), or pass createBackend',
    );
  }
  // The global fetch must be called unbound from an object; wrap it instead of passing it along.
  const workerFetch: typeof fetch = (input, init) => fetch(input, init);
  return createGeminiBackendClient({
    apiKey,
    fetch: workerFetch,
    ...(env.GEMINI_BASE_URL ? { baseUrl: env.GEMINI_BASE_URL } : {}),
  });
}

function createDefaultDrive<Env>(env: Env, context: WorkerRequestContext): DriveOperationsClient | undefined {
  const token = context.accessToken;
  if (!token) return undefined;
  const baseUrls = readDriveBaseUrls((env ?? {}) as Record<string, unknown>);
  const workerFetch: typeof fetch = (input, init) => fetch(input, init);
  return createHttpDriveOperationsClient({ fetch: workerFetch, getAccessToken: () => token, ...(baseUrls ? { baseUrls } : {}) });
}

function createDefaultStore(env: AgentWorkerEnv): InteractionStore {
  if (env.INTERACTIONS) return createDurableObjectInteractionStore(env.INTERACTIONS);
  if (env.INTERACTIONS_KV) return createKvInteractionStore(env.INTERACTIONS_KV);
  throw new AgentError(
    'INTERNAL',
    'No interaction store is bound: add a Durable Object binding INTERACTIONS (class InteractionStoreObject) or a KV namespace INTERACTIONS_KV to wrangler.jsonc, or pass createStore',
  );
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
