import { createServer, type Server } from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createFileInteractionStore, createHandler, createNodeFetch, serve, type RunningServer } from '@org/adapter-node';
import { AgentError } from '@org/core';
import { AGENT_RUN_PATHS, createGeminiBackendClient, createUpstreamBackendClient } from '@org/core/http';
import { createSimulatedGemini } from '@org/core/testing';
import { PLAYGROUND_HTML } from './playground/page.js';
import { createReverseProxy } from './reverse-proxy.js';

/** Settings of the dev server, usually read from flags and the environment. */
export interface DevServerConfig {
  port: number;
  host?: string;
  /** Real Gemini API key; with neither key nor base URL the simulated Gemini is used. */
  geminiApiKey?: string;
  /** Any Gemini-compatible endpoint. */
  geminiBaseUrl?: string;
  /** Where suspended runs are kept; processes sharing it can resume each other's runs. */
  storeDirectory?: string;
  /** Gemini model id for runs. */
  model?: string;
  /** Every other `/v1beta1/*` path is proxied here. */
  upstreamUrl?: string;
}

/** A running dev server. */
export interface DevServer {
  url: string;
  port: number;
  mode: 'gemini' | 'custom' | 'simulated';
  banner: string;
  close(): Promise<void>;
}

/** Starts the agent API on `node:http`, with a simulated Gemini on loopback when no key is set. */
export async function startDevServer(config: DevServerConfig): Promise<DevServer> {
  const host = config.host ?? '127.0.0.1';
  let simulated: RunningServer | undefined;
  let mode: DevServer['mode'];
  let baseUrl: string | undefined;
  if (config.geminiBaseUrl) {
    mode = 'custom';
    baseUrl = config.geminiBaseUrl;
  } else if (config.geminiApiKey) {
    mode = 'gemini';
  } else {
    mode = 'simulated';
    const gemini = createSimulatedGemini({ chunkDelayMs: 40 });
    simulated = await serve({ handler: (request) => gemini.fetch(request) });
    baseUrl = `${simulated.url}/v1beta`;
  }
  const storeDirectory = path.resolve(config.storeDirectory ?? path.join(os.tmpdir(), 'org-dev-proxy', 'interactions'));
  mkdirSync(storeDirectory, { recursive: true });
  const store = createFileInteractionStore({ directory: storeDirectory });
  const pooledFetch = createNodeFetch();
  // Media steps and uploads: the upstream backend as the caller, else the simulated one.
  const mediaUrl = config.upstreamUrl ?? simulated?.url;
  const backendFor = (accessToken: string | undefined) => {
    // The simulated backend takes anyone; a real upstream needs the caller's token.
    const mediaToken = accessToken ?? (config.upstreamUrl ? undefined : 'simulated');
    return createGeminiBackendClient({
      apiKey: config.geminiApiKey ?? 'simulated',
      fetch: pooledFetch,
      ...(baseUrl ? { baseUrl } : {}),
      ...(mediaUrl && mediaToken
        ? { upstream: createUpstreamBackendClient({ baseUrl: mediaUrl, fetch: pooledFetch, accessToken: mediaToken }) }
        : {}),
    });
  };
  const agent = createHandler({
    createPorts: ({ accessToken }) => ({ backend: backendFor(accessToken), store }),
    runOptions: () => (config.model ? { model: config.model } : undefined),
  });
  const proxy = config.upstreamUrl ? createReverseProxy({ upstreamUrl: config.upstreamUrl }) : undefined;
  const server: Server = createServer((request, response) => {
    const pathname = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (AGENT_RUN_PATHS.includes(pathname)) {
      agent(request, response);
      return;
    }
    if (pathname.startsWith('/v1beta1/') && proxy) {
      void proxy(request, response);
      return;
    }
    if (request.method === 'GET' && (pathname === '/' || pathname === '/playground/app.js')) {
      const script = pathname !== '/' && playgroundScript();
      if (pathname === '/' || script) {
        response.writeHead(200, {
          'content-type': pathname === '/' ? 'text/html; charset=utf-8' : 'text/javascript; charset=utf-8',
          'cache-control': 'no-store',
        });
        response.end(pathname === '/' ? PLAYGROUND_HTML : script);
        return;
      }
    }
    const error = pathname.startsWith('/v1beta1/')
      ? new AgentError('UPSTREAM_ERROR', `${pathname}: no UPSTREAM_URL is set, so the dev server cannot forward this path`)
      : new AgentError('NOT_FOUND', `${request.method} ${pathname}: nothing here; the agent API is POST /v1beta1/streamRunAgent`);
    response.writeHead(error.status, { 'content-type': 'application/json; charset=utf-8' });
    response.end(JSON.stringify(error.toJSON()));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${host === '0.0.0.0' ? 'localhost' : host}:${port}`;
  return {
    url,
    port,
    mode,
    banner: banner(url, mode, baseUrl, storeDirectory, config.upstreamUrl),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await simulated?.close();
      await pooledFetch.close();
    },
  };
}

let cachedScript: string | undefined;

/** The bundled playground app, next to the built server (`dist/playground/app.js`). */
function playgroundScript(): string | undefined {
  if (cachedScript !== undefined) return cachedScript;
  for (const candidate of ['./playground/app.js', '../dist/playground/app.js']) {
    try {
      cachedScript = readFileSync(new URL(candidate, import.meta.url), 'utf8');
      return cachedScript;
    } catch {
      // Not built here; try the next place.
    }
  }
  return undefined;
}

function banner(url: string, mode: DevServer['mode'], baseUrl: string | undefined, storeDirectory: string, upstreamUrl: string | undefined): string {
  const modeLine =
    mode === 'simulated'
      ? 'Model:     SIMULATED Gemini (no GEMINI_API_KEY set): a local stand-in, no real model is called; it can also draw a picture and run code'
      : mode === 'custom'
        ? `Model:     Gemini-compatible endpoint at ${baseUrl}`
        : 'Model:     Gemini API (GEMINI_API_KEY)';
  return [
    `Agent dev server on ${url}`,
    `Playground: ${url}/  (open it in a browser)`,
    modeLine,
    `Endpoints: POST ${url}/v1beta1/streamRunAgent  (alias POST ${url}/api/agent/run)`,
    `Upstream:  ${upstreamUrl ? `every other /v1beta1/* path (and media steps) -> ${upstreamUrl}` : 'none (set UPSTREAM_URL to forward other /v1beta1/* paths and media steps)'}`,
    `Store:     ${storeDirectory}`,
    '',
    'Start a run:',
    `  curl -N ${url}/v1beta1/streamRunAgent -H 'content-type: application/json' \\`,
    `    -d '{"start":{"segments":[{"textSegment":{"text":"Ask me my name and greet me."}}]}}'`,
  ].join('\n');
}
