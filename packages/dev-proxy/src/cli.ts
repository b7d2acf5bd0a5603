#!/usr/bin/env node
import nodeModule from 'node:module';
import type { DevServer } from './dev-server.js';

// Node 22.1 and later keep the compiled code of the modules loaded below on disk, so every later
// start skips compiling them; older versions have no such cache and start as before.
(nodeModule as { enableCompileCache?: () => unknown }).enableCompileCache?.();
const { startDevServer } = await import('./dev-server.js');
const { readModelBackendConfig } = await import('./model-backend-env.js');
const { readDriveBackendConfig } = await import('./drive-backend.js');

/**
 * Reads `--port <n>` / `--port=<n>`, then `PORT`, then 8080. `--help` says what the server takes
 * and exits; any other argument is named on stderr as ignored, so a mistyped flag does not pass
 * unnoticed (and a script that passes one still gets its server).
 */
function readPort(argv: readonly string[]): number {
  let raw: string | undefined;
  for (let index = 0; index < argv.length; index += 1) {
    const argument = argv[index] as string;
    // pnpm may pass the `--` of `pnpm dev -- --port 9000` through.
    if (argument === '--') continue;
    if (argument === '--port') {
      // `--port` as the last argument has no value; it must not fall back to the default quietly.
      raw = argv[index + 1] ?? '';
      index += 1;
    } else if (argument.startsWith('--port=')) {
      raw = argument.slice('--port='.length);
    } else if (argument === '--help' || argument === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else {
      console.error(`Ignoring the argument "${argument.slice(0, 40)}": the dev server takes only --port <n>; every other setting is an environment variable (see the README).`);
    }
  }
  return portNumber(raw ?? process.env.PORT ?? '8080', '--port / PORT');
}

const USAGE = [
  'pnpm dev [--port <n>]',
  '',
  'Starts the agent dev server (default port 8080, or PORT). Everything else is set in the',
  'environment: GEMINI_API_KEY, GEMINI_BASE_URL, MODEL, UPSTREAM_URL, INTERACTION_STORE_DIR,',
  'REDIS_URL, DATABASE_URL, CORS_ORIGINS, ALLOWED_HOSTS and more; the README lists them all.',
].join('\n');

function portNumber(raw: string, name: string): number {
  // Digits only: Number() also reads "1e3", "0x1f" and " 80 " as ports.
  const port = /^\d{1,5}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(port >= 0 && port <= 65535)) fail(`${name} must be an integer between 0 and 65535, got "${raw.slice(0, 40)}"`, 2);
  return port;
}

/**
 * `CORS_ORIGINS`: `*` or a comma-separated list of origins. Browsers send an origin as
 * `scheme://host[:port]` in lower case, and the list is compared with it exactly, so an entry is
 * brought to that form (a trailing slash copied from the address bar dropped) or refused when no
 * page could ever send it.
 */
function readCorsOrigins(raw: string | undefined): '*' | string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  if (raw.trim() === '*') return '*';
  const entries = raw.split(',').map((origin) => origin.trim()).filter((origin) => origin.length > 0);
  if (entries.length === 0) fail(`CORS_ORIGINS: "${raw.slice(0, 80)}" names no origin; write a comma-separated list, e.g. https://app.example.com (or * alone for any).`, 2);
  return entries.map((entry) => {
    let url: URL | undefined;
    try {
      url = new URL(entry);
    } catch {
      url = undefined;
    }
    const bare = url && url.host !== '' && !url.username && !url.password && (url.pathname === '/' || url.pathname === '') && !url.search && !url.hash;
    if (!url || !bare || !entry.includes('://')) {
      fail(`CORS_ORIGINS: "${entry.slice(0, 80)}" is not an origin; write each as scheme://host[:port], e.g. https://app.example.com (or * alone for any).`, 2);
    }
    // `origin` is "null" for schemes such as chrome-extension:, whose pages send scheme://host.
    return url.origin === 'null' ? `${url.protocol}//${url.host}` : url.origin;
  });
}

/** `ALLOWED_HOSTS`: a comma-separated list of host names (`.example.test` takes in its subdomains). */
function readAllowedHosts(raw: string | undefined): string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const hosts = raw.split(',').map((host) => host.trim()).filter((host) => host.length > 0);
  for (const host of hosts) {
    // The Host header is compared without its port, so a port, a scheme or a path never matches.
    if (!/^\.?[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i.test(host)) {
      fail(`ALLOWED_HOSTS: "${host.slice(0, 80)}" is not a host name; write names without scheme or port, e.g. dev.example.test (or .example.test for its subdomains).`, 2);
    }
  }
  return hosts;
}

function positiveNumber(raw: string, name: string): number {
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) fail(`${name} must be a positive number of milliseconds, got "${raw.slice(0, 40)}"`, 2);
  return value;
}

function fail(message: string, code = 1): never {
  console.error(message);
  process.exit(code);
}

const port = readPort(process.argv.slice(2));
const corsOrigins = readCorsOrigins(process.env.CORS_ORIGINS);
const allowedHosts = readAllowedHosts(process.env.ALLOWED_HOSTS);
// Ctrl-C (or a stop from the process manager) closes the server and exits with success; a second
// one while closing, or one before the server is up, exits at once.
let server: DevServer | undefined;
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (stopping || !server) process.exit(0);
    stopping = true;
    console.log('\nStopping the dev server.');
    void server.close().finally(() => process.exit(0));
  });
}

try {
  const modelConfig = readModelBackendConfig(process.env);
  server = await startDevServer({
    port,
    ...(modelConfig.provider ? { modelProvider: modelConfig.provider } : {}),
    ...(modelConfig.model ? { model: modelConfig.model } : {}),
    ...(modelConfig.openaiApiKey ? { openaiApiKey: modelConfig.openaiApiKey } : {}),
    ...(modelConfig.openaiBaseUrl ? { openaiBaseUrl: modelConfig.openaiBaseUrl } : {}),
    ...(modelConfig.anthropicApiKey ? { anthropicApiKey: modelConfig.anthropicApiKey } : {}),
    ...(process.env.REDIS_URL ? { redisUrl: process.env.REDIS_URL } : {}),
    ...(process.env.DATABASE_URL ? { databaseUrl: process.env.DATABASE_URL } : {}),
    ...(process.env.INTERACTION_LEASE_MS ? { leaseMs: positiveNumber(process.env.INTERACTION_LEASE_MS, 'INTERACTION_LEASE_MS') } : {}),
    ...(process.env.SESSION_TAKEOVER_CHECK_MS
      ? { takeoverCheckMs: positiveNumber(process.env.SESSION_TAKEOVER_CHECK_MS, 'SESSION_TAKEOVER_CHECK_MS') }
      : {}),
    ...(process.env.GEMINI_API_KEY ? { geminiApiKey: process.env.GEMINI_API_KEY } : {}),
    ...(process.env.GEMINI_BASE_URL ? { geminiBaseUrl: process.env.GEMINI_BASE_URL } : {}),
    ...(process.env.INTERACTION_STORE_DIR ? { storeDirectory: process.env.INTERACTION_STORE_DIR } : {}),
    ...(process.env.UPSTREAM_URL ? { upstreamUrl: process.env.UPSTREAM_URL } : {}),
    ...(corsOrigins ? { corsOrigins } : {}),
    ...(allowedHosts ? { allowedHosts } : {}),
    ...(process.env.SIMULATED_GEMINI_PORT ? { simulatedGeminiPort: portNumber(process.env.SIMULATED_GEMINI_PORT, 'SIMULATED_GEMINI_PORT') } : {}),
    drive: readDriveBackendConfig(process.env),
  });
} catch (error) {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') {
    fail(`Port ${(error as { port?: number }).port ?? port} is already in use (another dev server?). Start on another one with --port <n>, e.g. pnpm dev --port ${port + 1}.`);
  }
  if (code === 'EACCES') fail(`Not allowed to listen on port ${port}; ports below 1024 need privileges. Use --port <n>, e.g. --port 8080.`);
  fail(`The dev server could not start: ${error instanceof Error ? error.message : String(error)}`);
}
console.log(server.banner);
