import { resume, run, type AgentPorts, type BackendClient, type DriveOperationsClient, type InteractionStore, type RunOptions } from '@org/core';
import {
  createAgentClient,
  createAgentRun,
  type AgentClientOptions,
  toStartRequest,
  type AgentClient,
  type AgentRun,
  type AgentRunOptions,
  type RunInput,
  type RunSegmentOpener,
} from '@org/core/client';
import { createGeminiBackendClient, createHttpDriveOperationsClient, type DriveBaseUrls } from '@org/core/http';
import { createIndexedDbInteractionStore } from './indexed-db-interaction-store.js';

/** Options of {@link createLocalAgentClient}: where the model is and where suspended runs are kept. */
export interface LocalAgentOptions extends Omit<RunOptions, 'signal'> {
  /** The model backend. Default: the Gemini API called from the page with `geminiApiKey`. */
  backend?: BackendClient;
  /** Key for the default backend (ignored when `backend` is given); not needed with a `geminiBaseUrl` that adds it. */
  geminiApiKey?: string;
  /** Base URL for the default backend, e.g. a gateway that adds the key server-side. */
  geminiBaseUrl?: string;
  /** Suspended runs. Default: an IndexedDB store, so a run survives a reload. */
  store?: InteractionStore;
  /** Google Drive for memory, the chat log and the google-drive functions. Default: built from `accessToken` when there is one. */
  drive?: DriveOperationsClient;
  /** The user's Google OAuth token (or a function that returns a fresh one): gives runs a Drive client when `drive` is not given. */
  accessToken?: string | (() => string | Promise<string>);
  /** Where the default Drive client finds the Drive and Sheets APIs (a gateway, a local fake). Default: Google's. */
  driveBaseUrls?: DriveBaseUrls;
  /** The fetch the default backend and Drive client use. Default: the page's `fetch`. */
  fetch?: typeof fetch;
}

/**
 * Runs the agent loop inside the page, behind the same {@link AgentClient} interface as a remote
 * server, so an app switches between local and remote by choosing which client to build.
 *
 * @example
 * ```ts
 * const client = useLocal
 *   ? createLocalAgentClient({ geminiApiKey })
 *   : createAgentClient({ baseUrl: location.origin });
 * const run = client.startRun('Plan a picnic and ask me where');
 * ```
 */
export function createLocalAgentClient(options: LocalAgentOptions = {}): AgentClient {
  const {
    backend: givenBackend,
    geminiApiKey,
    geminiBaseUrl,
    store: givenStore,
    drive: givenDrive,
    accessToken,
    driveBaseUrls,
    fetch: givenFetch,
    ...runOptions
  } = options;
  // Said now, where the app builds its client, rather than as a failed run later.
  if (!givenBackend && !geminiApiKey && !geminiBaseUrl) {
    throw new TypeError('createLocalAgentClient: pass `backend`, or `geminiApiKey` (or `geminiBaseUrl` of a gateway that adds the key) for the default Gemini backend');
  }
  let ports: AgentPorts | undefined;
  const portsOf = (): AgentPorts => {
    if (ports) return ports;
    const backend = givenBackend ?? defaultBackend(geminiApiKey, geminiBaseUrl, givenFetch);
    ports = { backend, store: givenStore ?? createIndexedDbInteractionStore() };
    const drive = givenDrive ?? defaultDrive(accessToken, driveBaseUrls, givenFetch);
    if (drive) ports.drive = drive;
    return ports;
  };
  const open: RunSegmentOpener = (request, signal) =>
    'start' in request
      ? run(request.start, portsOf(), { ...runOptions, signal })
      : resume(request.resume.interactionId, request.resume.response, portsOf(), { ...runOptions, signal });
  return {
    startRun: (input, runHandleOptions) => createAgentRun(open, { start: toStartRequest(input) }, runHandleOptions),
    resumeRun: (interactionId, response, runHandleOptions) =>
      createAgentRun(open, { resume: { interactionId, response } }, runHandleOptions),
  };
}

/**
 * Starts one in-page run: `createLocalAgentClient(options).startRun(input, options)`.
 *
 * @example
 * ```ts
 * const run = createLocalAgentRun('Write a haiku to /mnt/haiku.md', { geminiApiKey });
 * console.log((await run.result).intermediate);
 * ```
 */
export function createLocalAgentRun(input: RunInput, options: LocalAgentOptions & AgentRunOptions = {}): AgentRun {
  const { onSuspend, signal, ...local } = options;
  const handleOptions: AgentRunOptions = {};
  if (onSuspend) handleOptions.onSuspend = onSuspend;
  if (signal) handleOptions.signal = signal;
  return createLocalAgentClient(local).startRun(input, handleOptions);
}

function defaultBackend(apiKey: string | undefined, baseUrl: string | undefined, fetchFn: typeof fetch | undefined): BackendClient {
  // `createLocalAgentClient` made sure of a key or a base URL: a gateway there may add the key itself.
  const options: Parameters<typeof createGeminiBackendClient>[0] = {
    fetch: fetchFn ?? ((input, init) => globalThis.fetch(input, init)),
  };
  if (apiKey) options.apiKey = apiKey;
  if (baseUrl) options.baseUrl = baseUrl;
  return createGeminiBackendClient(options);
}

function defaultDrive(
  accessToken: LocalAgentOptions['accessToken'],
  baseUrls: DriveBaseUrls | undefined,
  fetchFn: typeof fetch | undefined,
): DriveOperationsClient | undefined {
  if (accessToken === undefined || accessToken === '') return undefined;
  return createHttpDriveOperationsClient({
    fetch: fetchFn ?? ((input, init) => globalThis.fetch(input, init)),
    getAccessToken: typeof accessToken === 'function' ? accessToken : () => accessToken,
    ...(baseUrls ? { baseUrls } : {}),
  });
}

/** Options of {@link createBrowserAgentClient}: where the loop runs is one field. */
export type BrowserAgentClientOptions =
  | ({ runIn: 'server' } & AgentClientOptions)
  | ({ runIn: 'page' } & LocalAgentOptions);

/**
 * One client, remote or in-page by `runIn`; the rest of the app does not change.
 *
 * @example
 * ```ts
 * const client = createBrowserAgentClient(
 *   offline ? { runIn: 'page', geminiApiKey } : { runIn: 'server', baseUrl: location.origin },
 * );
 * ```
 */
export function createBrowserAgentClient(options: BrowserAgentClientOptions): AgentClient {
  if (options.runIn === 'page') {
    const { runIn: _runIn, ...local } = options;
    return createLocalAgentClient(local);
  }
  if (options.runIn === 'server') {
    const { runIn: _runIn, ...remote } = options;
    return createAgentClient(remote);
  }
  throw new TypeError(`createBrowserAgentClient: runIn must be "server" or "page", got ${JSON.stringify((options as { runIn?: unknown }).runIn)}`);
}
