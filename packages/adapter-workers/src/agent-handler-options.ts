import { AgentError, type AgentPorts, type BackendClient, type DriveOperationsClient, type InteractionStore } from '@org/core';
import {
  createGeminiBackendClient,
  createHttpDriveOperationsClient,
  readDriveBaseUrls,
  type AgentHandlerOptions,
  type AgentRequestContext,
} from '@org/core/http';
import type { AgentWorkerEnv, WorkerHandlerOptions, WorkerRequestContext } from './create-handler.js';
import { createDurableObjectInteractionStore } from './durable-object-interaction-store.js';
import { createKvInteractionStore } from './kv-interaction-store.js';

/** Default of `maxBodyBytesInFlight` on Workers: room within an isolate's 128 MB. */
const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT = 64 * 1024 * 1024;

/**
 * The options of core's agent handler for a Worker's or an object's options: ports built per
 * request from `env` (passed through `wrapPorts`), and the limits, CORS and owners as given.
 */
export function agentHandlerOptionsFor<Env>(
  env: Env,
  options: Omit<WorkerHandlerOptions<Env>, 'fallback' | 'sessionNamespace'>,
  executionContext: ExecutionContext,
  wrapPorts: (ports: AgentPorts) => AgentPorts = (ports) => ports,
): AgentHandlerOptions {
  const withWorker = (context: AgentRequestContext): WorkerRequestContext => ({ ...context, executionContext });
  return {
    createPorts: async (context) => wrapPorts(await createPortsFor(env, withWorker(context), options)),
    ...(options.runOptions ? { runOptions: (context: AgentRequestContext) => options.runOptions?.(env, withWorker(context)) } : {}),
    ...(options.resolveOwner ? { resolveOwner: (accessToken: string | undefined) => options.resolveOwner?.(accessToken, env) } : {}),
    ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
    maxBodyBytesInFlight: options.maxBodyBytesInFlight ?? DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
    ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
    ...(options.cors ? { cors: options.cors } : {}),
  };
}

/**
 * The ports of one request: `createPorts` when given, else the backend and the store from their
 * options or from `env`; then, unless they have one, the Drive client (`createDrive`, else one
 * bound to the caller's token).
 */
export async function createPortsFor<Env>(
  env: Env,
  context: WorkerRequestContext,
  options: Pick<WorkerHandlerOptions<Env>, 'createPorts' | 'createBackend' | 'createStore' | 'createDrive'>,
): Promise<AgentPorts> {
  let ports: AgentPorts;
  if (options.createPorts) {
    ports = await options.createPorts(env, context);
  } else {
    const bindings = (env ?? {}) as AgentWorkerEnv;
    const backend = options.createBackend ? await options.createBackend(env, context) : createDefaultBackend(bindings);
    const store = options.createStore ? await options.createStore(env, context) : createDefaultStore(bindings);
    ports = { backend, store };
  }
  if (ports.drive) return ports;
  const drive = options.createDrive ? await options.createDrive(env, context) : createDefaultDrive(env, context);
  return drive ? { ...ports, drive } : ports;
}

/**
 * The interaction store alone, as the ports of a request nobody made would have it (no caller, no
 * token): from `createPorts` when given, else `createStore`, else `env`.
 */
export async function createStoreFor<Env>(
  env: Env,
  context: WorkerRequestContext,
  options: Pick<WorkerHandlerOptions<Env>, 'createPorts' | 'createStore'>,
): Promise<InteractionStore> {
  if (options.createPorts) return (await options.createPorts(env, context)).store;
  return options.createStore ? options.createStore(env, context) : createDefaultStore((env ?? {}) as AgentWorkerEnv);
}

/** A Drive client bound to the caller's token, at the base URLs `env` names; none without a token. */
function createDefaultDrive<Env>(env: Env, context: WorkerRequestContext): DriveOperationsClient | undefined {
  const token = context.accessToken;
  if (!token) return undefined;
  const baseUrls = readDriveBaseUrls((env ?? {}) as Record<string, unknown>);
  const workerFetch: typeof fetch = (input, init) => fetch(input, init);
  return createHttpDriveOperationsClient({ fetch: workerFetch, getAccessToken: () => token, ...(baseUrls ? { baseUrls } : {}) });
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

function createDefaultStore(env: AgentWorkerEnv): InteractionStore {
  if (env.INTERACTIONS) return createDurableObjectInteractionStore(env.INTERACTIONS);
  if (env.INTERACTIONS_KV) return createKvInteractionStore(env.INTERACTIONS_KV);
  throw new AgentError(
    'INTERNAL',
    'No interaction store is bound: add a Durable Object binding INTERACTIONS (class InteractionStoreObject) or a KV namespace INTERACTIONS_KV to wrangler.jsonc, or pass createStore',
  );
}
