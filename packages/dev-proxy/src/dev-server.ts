import { mkdirSync, mkdtempSync, readFileSync, rmdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createFileEventBus, createFileInteractionStore, createFileSessionLog, createNodeFetch, serve, type RunningServer } from '@org/adapter-node';
import { AgentError, type EventBus, type InteractionStore, type SessionLog } from '@org/core';
import { createUiMessageStreamHandler, UI_MESSAGE_STREAM_PATH } from '@org/core/ai-sdk';
import {
  AGENT_RUN_PATHS,
  createAgentHandler,
  createGoogleAccountOwner,
  createUpstreamBackendClient,
  digestOwner,
  errorResponse,
  SESSIONS_PATH,
  withCors,
  type CorsOptions,
} from '@org/core/http';
import { createSimulatedGemini, type SimulatedGemini } from '@org/core/testing';
import { startDriveBackend, type DriveBackend, type DriveBackendConfig } from './drive-backend.js';
import { chooseModelProvider, createModelBackend, describeModelBackend, modelFor, type ModelBackendConfig } from './model-backend.js';
import { PLAYGROUND_HTML } from './playground/page.js';
import { createReverseProxy } from './reverse-proxy.js';

/** Settings of the dev server, usually read from flags and the environment. */
export interface DevServerConfig {
  port: number;
  host?: string;
  /** Real Gemini API key; with neither key nor base URL the simulated Gemini is used. */
  geminiApiKey?: string;
  /** Any Gemini-compatible endpoint; `user:password@` in it is sent as HTTP basic auth. */
  geminiBaseUrl?: string;
  /** Where suspended runs are kept; processes sharing it can resume each other's runs. */
  storeDirectory?: string;
  /** The model runs use; its name picks the provider (`claude-*`, `gpt-*`, `gemini-*`) unless `modelProvider` does. */
  model?: string;
  /** `gemini`, `openai`, `anthropic` or `openai-compatible`. */
  modelProvider?: ModelBackendConfig['provider'];
  openaiApiKey?: string;
  /** An OpenAI-compatible Chat Completions server (Ollama, vLLM, LM Studio). */
  openaiBaseUrl?: string;
  anthropicApiKey?: string;
  /** A Redis shared by every instance: interactions, session logs and the event bus live there. */
  redisUrl?: string;
  /** A PostgreSQL database shared by every instance, for the same (used when no `redisUrl`). */
  databaseUrl?: string;
  /** How long a claim on a saved run lasts without renewal; after it a dead instance's run is picked up. Default 60 s. */
  leaseMs?: number;
  /**
   * How long a reader waits on a running session that has gone quiet before it checks whether the
   * session's instance died, and takes its run over once the lease is gone. Default 15 s.
   */
  takeoverCheckMs?: number;
  /** Every other `/v1beta1/*` path is proxied here, and only here (its path prefix kept). */
  upstreamUrl?: string;
  /** Origins whose pages may call the server from a browser. Default `'*'`, as the reference dev backend. */
  corsOrigins?: '*' | readonly string[];
  /**
   * Host names the server answers to besides `localhost` and IP addresses; a request for another
   * host gets 403. This keeps a page on a domain re-pointed at this machine (DNS rebinding) from
   * calling as its own origin past a CORS list. Default: with a CORS origin list, none; with `'*'`,
   * any host (every page may call then anyway).
   */
  allowedHosts?: readonly string[];
  /** Port of the simulated Gemini (when it runs). Default: a free one. */
  simulatedGeminiPort?: number;
  /** Where runs keep memory (Drive + Sheets); see `startDriveBackend`. */
  drive?: DriveBackendConfig;
  /**
   * Where the server asks Google whose a caller's token is, when runs use Google's own APIs with it
   * (a run then belongs to the Google account, so a refreshed token resumes it). Default Google's.
   */
  tokenInfoUrl?: string;
}

/** A running dev server. */
export interface DevServer {
  url: string;
  port: number;
  mode: 'gemini' | 'custom' | 'simulated' | 'openai' | 'anthropic' | 'openai-compatible';
  /** The simulated Gemini's base URL (`.../v1beta`), when it runs. */
  simulatedGeminiUrl?: string;
  banner: string;
  close(): Promise<void>;
}

/**
 * Starts the dev server: one Web handler served by adapter-node's `serve()`, composed of the agent
 * endpoint, the playground, and a reverse proxy that reaches only `UPSTREAM_URL`. With no model
 * key a simulated Gemini runs on loopback.
 *
 * @example
 * ```ts
 * const server = await startDevServer({ port: 8080 });
 * console.log(server.banner);
 * ```
 */
export async function startDevServer(config: DevServerConfig): Promise<DevServer> {
  const host = config.host ?? '127.0.0.1';
  const gemini = geminiEndpoint(config.geminiBaseUrl);
  // Checked before anything listens, so a bad URL stops the start with its message.
  const pooledFetch = createNodeFetch();
  const proxy = config.upstreamUrl ? createReverseProxy({ upstreamUrl: config.upstreamUrl, fetch: pooledFetch }) : undefined;
  const script = playgroundScript();
  let simulated: RunningServer | undefined;
  const modelConfig: ModelBackendConfig = {};
  if (config.modelProvider) modelConfig.provider = config.modelProvider;
  if (config.model) modelConfig.model = config.model;
  if (config.geminiApiKey) modelConfig.geminiApiKey = config.geminiApiKey;
  if (config.openaiApiKey) modelConfig.openaiApiKey = config.openaiApiKey;
  if (config.openaiBaseUrl) modelConfig.openaiBaseUrl = config.openaiBaseUrl;
  if (config.anthropicApiKey) modelConfig.anthropicApiKey = config.anthropicApiKey;
  if (gemini) {
    modelConfig.geminiBaseUrl = gemini.baseUrl;
    if (gemini.headers) modelConfig.geminiHeaders = gemini.headers;
  }
  const provider = chooseModelProvider(modelConfig);
  let mode: DevServer['mode'];
  if (provider !== 'gemini') mode = provider;
  else if (gemini) mode = 'custom';
  else if (config.geminiApiKey) mode = 'gemini';
  else {
    mode = 'simulated';
    // A long-lived server keeps nothing of a run in the simulated model once the run is over.
    const simulatedGemini = createSimulatedGemini({ chunkDelayMs: 40, keepRequests: 0 });
    simulated = await serveSimulatedGemini(simulatedGemini, config.simulatedGeminiPort).catch(async (error: unknown) => {
      await pooledFetch.close();
      throw error;
    });
    modelConfig.geminiBaseUrl = `${simulated.url}/v1beta`;
  }
  let backing: Backing;
  let drive: DriveBackend;
  try {
    backing = await openBacking(config);
    try {
      // Memory: the configured Drive, a simulated one beside the simulated model, else Google's.
      drive = await startDriveBackend({ simulated: mode === 'simulated' && !config.upstreamUrl, fetch: pooledFetch, ...(config.drive ? { config: config.drive } : {}) });
    } catch (error) {
      await backing.close();
      throw error;
    }
  } catch (error) {
    await simulated?.close();
    await pooledFetch.close();
    throw error;
  }
  // Media steps and uploads: the upstream backend as the caller, else the simulated one.
  const mediaUrl = config.upstreamUrl ?? simulated?.url;
  modelConfig.upstream = (accessToken) => {
    // The simulated backend takes anyone; a real upstream needs the caller's token.
    const mediaToken = accessToken ?? (config.upstreamUrl ? undefined : 'simulated');
    return mediaUrl && mediaToken ? createUpstreamBackendClient({ baseUrl: mediaUrl, fetch: pooledFetch, accessToken: mediaToken }) : undefined;
  };
  const backendFor = createModelBackend(modelConfig, pooledFetch);
  const model = modelFor(modelConfig);
  // Any request header, as the reference dev backend allows.
  const cors: CorsOptions = { origins: config.corsOrigins ?? '*', allowHeaders: '*' };
  // Callers' tokens are Google's when runs use Google's APIs with them: a run then belongs to the
  // account, not to the token, which the browser refreshes within the hour. Elsewhere (simulated or
  // configured APIs) a token is its own owner.
  const owners = drive.mode === 'google' ? { resolveOwner: googleTokenOwner(pooledFetch, config.tokenInfoUrl) } : {};
  const sessions = {
    log: backing.log,
    bus: backing.bus,
    ...(config.takeoverCheckMs === undefined ? {} : { livenessMs: config.takeoverCheckMs }),
  };
  const agent = createAgentHandler({
    createPorts: ({ accessToken }) => drive.withDrive({ backend: backendFor(accessToken), store: backing.store }, accessToken),
    runOptions: () => ({ ...(model ? { model } : {}), ...(config.leaseMs === undefined ? {} : { leaseMs: config.leaseMs }) }),
    cors,
    sessions,
    ...owners,
  });
  // The AI SDK's useChat endpoint: the same ports, runs and sessions as the agent endpoint.
  const chat = createUiMessageStreamHandler({
    createPorts: ({ accessToken }) => ({ backend: backendFor(accessToken), store: backing.store }),
    runOptions: () => ({ ...(model ? { model } : {}), ...(config.leaseMs === undefined ? {} : { leaseMs: config.leaseMs }) }),
    cors,
    sessions,
    ...owners,
  });
  // The reference dev backend lets pages call every proxied path with any method and header.
  const proxied = proxy ? withCors(proxy, { ...cors, allowMethods: '*' }) : undefined;

  const handler = async (request: Request): Promise<Response> => {
    const { pathname } = new URL(request.url);
    if (AGENT_RUN_PATHS.includes(pathname) || pathname.startsWith(SESSIONS_PATH)) return agent(request);
    if (pathname === UI_MESSAGE_STREAM_PATH || pathname.startsWith(`${UI_MESSAGE_STREAM_PATH}/`)) return chat(request);
    if (pathname.startsWith('/v1beta1/') || pathname.startsWith('//')) {
      if (proxied) return proxied(request);
      if (pathname.startsWith('//')) {
        return errorResponse(new AgentError('BAD_REQUEST', 'The path must start with a single "/"'));
      }
      return errorResponse(new AgentError('UPSTREAM_ERROR', `${pathname}: no UPSTREAM_URL is set, so the dev server cannot forward this path`));
    }
    if (request.method === 'GET' || request.method === 'HEAD') {
      if (pathname === '/') return staticFile(PLAYGROUND_HTML, 'text/html; charset=utf-8');
      if (pathname === '/playground/app.js' && script !== undefined) return staticFile(script, 'text/javascript; charset=utf-8');
    }
    return errorResponse(new AgentError('NOT_FOUND', `${request.method} ${pathname}: nothing here; the agent API is POST /v1beta1/streamRunAgent`));
  };

  const allowedHosts = config.allowedHosts ?? (cors.origins === '*' ? undefined : []);
  let server: RunningServer;
  try {
    server = await serve({ handler, port: config.port, host, ...(allowedHosts ? { allowedHosts } : {}) });
  } catch (error) {
    await simulated?.close();
    await backing.close();
    await drive.close();
    await pooledFetch.close();
    throw error;
  }
  const url = server.url;
  return {
    url,
    port: server.port,
    mode,
    ...(simulated && modelConfig.geminiBaseUrl ? { simulatedGeminiUrl: modelConfig.geminiBaseUrl } : {}),
    banner: banner({
      url,
      mode,
      modelLine: describeModelBackend(modelConfig),
      model: modelConfig.model,
      baseUrl: modelConfig.geminiBaseUrl,
      store: backing.description,
      upstreamUrl: config.upstreamUrl,
      cors,
      allowedHosts,
      memoryLine: drive.bannerLine,
      ownersLine:
        drive.mode === 'google'
          ? "Owners:    a run belongs to the Google account of the caller's token, as Google tells (a refreshed token resumes it)"
          : "Owners:    a run belongs to the caller's token (another token may not resume it)",
    }),
    close: async () => {
      await server.close();
      await simulated?.close();
      await backing.close();
      await drive.close();
      await pooledFetch.close();
    },
  };
}

/** Where the server keeps runs and sessions: Redis, PostgreSQL, or files plus this process. */
interface Backing {
  store: InteractionStore;
  log: SessionLog;
  bus: EventBus;
  /** For the banner: which, never a URL or a folder. */
  description: string;
  close(): Promise<void>;
}

async function openBacking(config: DevServerConfig): Promise<Backing> {
  if (config.redisUrl) {
    // Loaded only when asked for: a dev server on files never loads a database client.
    const { createRedisBackends } = await import('@org/adapter-node/redis');
    const backends = createRedisBackends({ url: config.redisUrl });
    await checkDatabase(backends, 'REDIS_URL', 'Redis');
    return { ...backends, description: 'Redis (REDIS_URL): interactions, session logs and the event bus, shared by every instance' };
  }
  if (config.databaseUrl) {
    const { createPostgresBackends } = await import('@org/adapter-node/postgres');
    const backends = createPostgresBackends({ url: config.databaseUrl });
    await checkDatabase(backends, 'DATABASE_URL', 'PostgreSQL');
    return { ...backends, description: 'PostgreSQL (DATABASE_URL): interactions, session logs and the event bus, shared by every instance' };
  }
  const storeDirectory = path.resolve(config.storeDirectory ?? path.join(os.tmpdir(), 'org-dev-proxy', 'interactions'));
  // Sessions beside the interactions, so dev servers sharing the folder share sessions too.
  const folders = { store: storeDirectory, sessions: path.join(storeDirectory, 'sessions'), bus: path.join(storeDirectory, 'bus') };
  checkFolders(Object.values(folders), config.storeDirectory !== undefined);
  const bus = createFileEventBus({ directory: folders.bus });
  return {
    store: createFileInteractionStore({ directory: folders.store }),
    log: createFileSessionLog({ directory: folders.sessions }),
    bus,
    // The folder itself is not printed: banners get pasted into issues and chats.
    description: `files, ${config.storeDirectory !== undefined ? 'in INTERACTION_STORE_DIR' : 'in a folder under the system temp directory (set INTERACTION_STORE_DIR to choose)'}; dev servers sharing it share runs and sessions (REDIS_URL or DATABASE_URL to use a database)`,
    close: () => bus.close(),
  };
}

/** How long the start waits for the database to answer (the PostgreSQL client has no connect timeout). */
const DATABASE_CHECK_MS = 10_000;

/**
 * Reads a session that does not exist, so a database that is down, or refuses the URL's password,
 * stops the start with one line instead of failing every run after a banner that said all was well.
 * The store's error names a reason code, never the URL or its password.
 */
async function checkDatabase(backends: Omit<Backing, 'description'>, setting: string, name: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AgentError('STORE_ERROR', `${name} did not answer within ${DATABASE_CHECK_MS / 1000} s`)), DATABASE_CHECK_MS);
  });
  try {
    await Promise.race([backends.log.get('dev-server-start-check'), timeout]);
  } catch (error) {
    await backends.close().catch(() => undefined);
    const reason = error instanceof Error ? error.message : String(error);
    throw new AgentError('STORE_ERROR', `${setting}: ${reason}. Is ${name} running there, and are the URL's user, password and database right?`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Creates the store's folders and writes in each, so a folder the server cannot use stops the start
 * rather than every run. The error gives the reason code, not the path (see the banner).
 */
function checkFolders(folders: readonly string[], chosen: boolean): void {
  try {
    for (const folder of folders) {
      mkdirSync(folder, { recursive: true });
      rmdirSync(mkdtempSync(path.join(folder, '.write-check-')));
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    throw new AgentError(
      'STORE_ERROR',
      chosen
        ? `INTERACTION_STORE_DIR cannot hold runs and sessions (${code}); choose a folder you can write to.`
        : `The store folder under the system temp directory (org-dev-proxy/interactions) cannot hold runs and sessions (${code}); set INTERACTION_STORE_DIR to a folder you can write to.`,
      { cause: error },
    );
  }
}

/** Serves the simulated Gemini; a port taken by something else is named as `SIMULATED_GEMINI_PORT`, not as the server's own. */
async function serveSimulatedGemini(gemini: SimulatedGemini, port: number | undefined): Promise<RunningServer> {
  try {
    return await serve({ handler: (request) => gemini.fetch(request), port: port ?? 0 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new AgentError('BAD_REQUEST', `SIMULATED_GEMINI_PORT ${port} is already in use; choose another port, or leave it unset for a free one.`, { cause: error });
    if (code === 'EACCES') throw new AgentError('BAD_REQUEST', `SIMULATED_GEMINI_PORT ${port} needs privileges to listen on; choose one above 1023.`, { cause: error });
    throw error;
  }
}

function staticFile(text: string, contentType: string): Response {
  return new Response(text, { headers: { 'content-type': contentType, 'cache-control': 'no-store' } });
}

/**
 * `GEMINI_BASE_URL` split into a URL without credentials and the basic-auth header they become:
 * `fetch` refuses URLs with credentials, and the banner and errors must never show them.
 */
function geminiEndpoint(raw: string | undefined): { baseUrl: string; headers?: Record<string, string> } | undefined {
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AgentError('BAD_REQUEST', 'GEMINI_BASE_URL is not a URL; expected e.g. http://127.0.0.1:9000/v1beta');
  }
  if (!url.username && !url.password) return { baseUrl: raw };
  const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  url.username = '';
  url.password = '';
  return { baseUrl: url.toString(), headers: { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` } };
}

/** The bundled playground app, next to the built server (`dist/playground/app.js`), read once at start. */
function playgroundScript(): string | undefined {
  for (const candidate of ['./playground/app.js', '../dist/playground/app.js']) {
    try {
      return readFileSync(new URL(candidate, import.meta.url), 'utf8');
    } catch {
      // Not built here; try the next place.
    }
  }
  return undefined;
}

/** A URL fit for the banner: no credentials, no secret query values. */
function displayUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.username || url.password) {
      url.username = 'redacted';
      url.password = '';
    }
    for (const name of [...url.searchParams.keys()]) {
      if (/key|token|secret|password|sig/i.test(name)) url.searchParams.set(name, 'redacted');
    }
    return url.toString();
  } catch {
    return '(not a URL)';
  }
}

interface BannerFacts {
  url: string;
  mode: DevServer['mode'];
  modelLine: string;
  model: string | undefined;
  baseUrl: string | undefined;
  store: string;
  upstreamUrl: string | undefined;
  cors: CorsOptions;
  allowedHosts: readonly string[] | undefined;
  memoryLine: string;
  ownersLine: string;
}

/**
 * The owner of a caller's token when runs use Google's APIs with it: its Google account for a token
 * shaped as Google's (`ya29.`), asked of Google once per token; the token itself for any other, or
 * for one Google does not vouch for (made up, expired, or Google out of reach).
 */
function googleTokenOwner(fetch: typeof globalThis.fetch, tokenInfoUrl: string | undefined): (token: string | undefined) => Promise<string | undefined> {
  const googleOwner = createGoogleAccountOwner({ fetch, unverified: 'token', timeoutMs: 5_000, ...(tokenInfoUrl ? { tokenInfoUrl } : {}) });
  return (token) => (token?.startsWith('ya29.') ? googleOwner(token) : digestOwner(token));
}

function banner(facts: BannerFacts): string {
  const { url, mode, baseUrl } = facts;
  const modeLines =
    mode === 'simulated'
      ? [
          `Model:     SIMULATED Gemini at ${baseUrl} (no GEMINI_API_KEY set): a local stand-in, no real model is called;`,
          '           it can also draw a picture and run code. Point other clients at it with GEMINI_BASE_URL.',
          ...(facts.model !== undefined && !/^(?:models\/)?gemini/i.test(facts.model)
            ? [`           MODEL=${facts.model.slice(0, 80)} names no provider, so the simulated Gemini answers; set MODEL_PROVIDER (or OPENAI_BASE_URL for a local server).`]
            : []),
        ]
      : mode === 'custom'
        ? [`Model:     Gemini-compatible endpoint at ${displayUrl(baseUrl ?? '')}`]
        : [facts.modelLine];
  const origins = facts.cors.origins === '*' ? 'any origin (set CORS_ORIGINS to a comma-separated list to narrow it)' : facts.cors.origins.join(', ');
  return [
    `Agent dev server on ${url}`,
    `Playground: ${url}/  (open it in a browser)`,
    ...modeLines,
    facts.memoryLine,
    facts.ownersLine,
    `Endpoints: POST ${url}/v1beta1/streamRunAgent  (alias POST ${url}/api/agent/run)`,
    `           POST ${url}/v1beta1/sessions/new, GET ${url}/v1beta1/sessions/{id}?alt=sse, :resume, :cancel, /status`,
    `           POST ${url}${UI_MESSAGE_STREAM_PATH}  (the AI SDK's useChat; GET ${UI_MESSAGE_STREAM_PATH}/{chatId} restores a chat)`,
    `Upstream:  ${facts.upstreamUrl ? `every other /v1beta1/* path (and media steps) -> ${displayUrl(facts.upstreamUrl)}` : 'none (set UPSTREAM_URL to forward other /v1beta1/* paths and media steps)'}`,
    `Browsers:  pages from ${origins} may call this server`,
    ...(facts.allowedHosts
      ? [`Hosts:     only requests for localhost, an IP address${facts.allowedHosts.map((name) => `, ${name}`).join('')} are served (ALLOWED_HOSTS adds names)`]
      : []),
    `Store:     ${facts.store}`,
    '',
    'Start a run:',
    `  curl -N ${url}/v1beta1/streamRunAgent -H 'content-type: application/json' \\`,
    `    -d '{"start":{"segments":[{"textSegment":{"text":"Ask me my name and greet me."}}]}}'`,
  ].join('\n');
}
