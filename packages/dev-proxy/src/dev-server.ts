import { mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createFileInteractionStore, createNodeFetch, serve, type RunningServer } from '@org/adapter-node';
import { AgentError } from '@org/core';
import {
  AGENT_RUN_PATHS,
  createAgentHandler,
  createGeminiBackendClient,
  createUpstreamBackendClient,
  errorResponse,
  withCors,
  type CorsOptions,
} from '@org/core/http';
import { createSimulatedGemini } from '@org/core/testing';
import { startDriveBackend, type DriveBackendConfig } from './drive-backend.js';
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
  /** Gemini model id for runs. */
  model?: string;
  /** Every other `/v1beta1/*` path is proxied here, and only here (its path prefix kept). */
  upstreamUrl?: string;
  /** Origins whose pages may call the server from a browser. Default `'*'`, as the reference dev backend. */
  corsOrigins?: '*' | readonly string[];
  /** Port of the simulated Gemini (when it runs). Default: a free one. */
  simulatedGeminiPort?: number;
  /** Where runs keep memory (Drive + Sheets); see `startDriveBackend`. */
  drive?: DriveBackendConfig;
}

/** A running dev server. */
export interface DevServer {
  url: string;
  port: number;
  mode: 'gemini' | 'custom' | 'simulated';
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
  let mode: DevServer['mode'];
  let baseUrl: string | undefined;
  if (gemini) {
    mode = 'custom';
    baseUrl = gemini.baseUrl;
  } else if (config.geminiApiKey) {
    mode = 'gemini';
  } else {
    mode = 'simulated';
    const simulatedGemini = createSimulatedGemini({ chunkDelayMs: 40 });
    simulated = await serve({ handler: (request) => simulatedGemini.fetch(request), port: config.simulatedGeminiPort ?? 0 });
    baseUrl = `${simulated.url}/v1beta`;
  }
  // Memory: the configured Drive, a simulated one beside the simulated model, else Google's.
  const drive = await startDriveBackend({ simulated: mode === 'simulated' && !config.upstreamUrl, fetch: pooledFetch, ...(config.drive ? { config: config.drive } : {}) });
  const storeDirectory = path.resolve(config.storeDirectory ?? path.join(os.tmpdir(), 'org-dev-proxy', 'interactions'));
  mkdirSync(storeDirectory, { recursive: true });
  const store = createFileInteractionStore({ directory: storeDirectory });
  // Media steps and uploads: the upstream backend as the caller, else the simulated one.
  const mediaUrl = config.upstreamUrl ?? simulated?.url;
  const backendFor = (accessToken: string | undefined) => {
    // The simulated backend takes anyone; a real upstream needs the caller's token.
    const mediaToken = accessToken ?? (config.upstreamUrl ? undefined : 'simulated');
    return createGeminiBackendClient({
      apiKey: config.geminiApiKey ?? 'simulated',
      fetch: pooledFetch,
      ...(baseUrl ? { baseUrl } : {}),
      ...(gemini?.headers ? { headers: gemini.headers } : {}),
      ...(mediaUrl && mediaToken
        ? { upstream: createUpstreamBackendClient({ baseUrl: mediaUrl, fetch: pooledFetch, accessToken: mediaToken }) }
        : {}),
    });
  };
  const cors: CorsOptions = { origins: config.corsOrigins ?? '*' };
  const agent = createAgentHandler({
    createPorts: ({ accessToken }) => drive.withDrive({ backend: backendFor(accessToken), store }, accessToken),
    runOptions: () => (config.model ? { model: config.model } : undefined),
    cors,
  });
  // The reference dev backend lets pages call every proxied path with any method and header.
  const proxied = proxy ? withCors(proxy, { ...cors, allowMethods: '*', allowHeaders: '*' }) : undefined;

  const handler = async (request: Request): Promise<Response> => {
    const { pathname } = new URL(request.url);
    if (AGENT_RUN_PATHS.includes(pathname)) return agent(request);
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

  let server: RunningServer;
  try {
    server = await serve({ handler, port: config.port, host });
  } catch (error) {
    await simulated?.close();
    await drive.close();
    await pooledFetch.close();
    throw error;
  }
  const url = server.url;
  return {
    url,
    port: server.port,
    mode,
    ...(simulated && baseUrl ? { simulatedGeminiUrl: baseUrl } : {}),
    banner: banner({ url, mode, baseUrl, storeChosen: config.storeDirectory !== undefined, upstreamUrl: config.upstreamUrl, cors, memoryLine: drive.bannerLine }),
    close: async () => {
      await server.close();
      await simulated?.close();
      await drive.close();
      await pooledFetch.close();
    },
  };
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
  baseUrl: string | undefined;
  storeChosen: boolean;
  upstreamUrl: string | undefined;
  cors: CorsOptions;
  memoryLine: string;
}

function banner(facts: BannerFacts): string {
  const { url, mode, baseUrl } = facts;
  const modeLines =
    mode === 'simulated'
      ? [
          `Model:     SIMULATED Gemini at ${baseUrl} (no GEMINI_API_KEY set): a local stand-in, no real model is called;`,
          '           it can also draw a picture and run code. Point other clients at it with GEMINI_BASE_URL.',
        ]
      : mode === 'custom'
        ? [`Model:     Gemini-compatible endpoint at ${displayUrl(baseUrl ?? '')}`]
        : ['Model:     Gemini API (GEMINI_API_KEY)'];
  const origins = facts.cors.origins === '*' ? 'any origin (set CORS_ORIGINS to a comma-separated list to narrow it)' : facts.cors.origins.join(', ');
  return [
    `Agent dev server on ${url}`,
    `Playground: ${url}/  (open it in a browser)`,
    ...modeLines,
    facts.memoryLine,
    `Endpoints: POST ${url}/v1beta1/streamRunAgent  (alias POST ${url}/api/agent/run)`,
    `Upstream:  ${facts.upstreamUrl ? `every other /v1beta1/* path (and media steps) -> ${displayUrl(facts.upstreamUrl)}` : 'none (set UPSTREAM_URL to forward other /v1beta1/* paths and media steps)'}`,
    `Browsers:  pages from ${origins} may call this server`,
    // The folder itself is not printed: banners get pasted into issues and chats.
    `Store:     files, ${facts.storeChosen ? 'in INTERACTION_STORE_DIR' : 'in a folder under the system temp directory (set INTERACTION_STORE_DIR to choose)'}`,
    '',
    'Start a run:',
    `  curl -N ${url}/v1beta1/streamRunAgent -H 'content-type: application/json' \\`,
    `    -d '{"start":{"segments":[{"textSegment":{"text":"Ask me my name and greet me."}}]}}'`,
  ].join('\n');
}
