#!/usr/bin/env node
import nodeModule from 'node:module';
import type { DevServer } from './dev-server.js';

// Node 22.1 and later keep the compiled code of the modules loaded below on disk, so every later
// start skips compiling them; older versions have no such cache and start as before.
(nodeModule as { enableCompileCache?: () => unknown }).enableCompileCache?.();
const { startDevServer } = await import('./dev-server.js');
const { readModelBackendConfig } = await import('./model-backend-env.js');
const { readDriveBackendConfig } = await import('./drive-backend.js');

/** Reads `--port <n>` / `--port=<n>`, then `PORT`, then 8080. */
function readPort(argv: readonly string[]): number {
  const index = argv.findIndex((argument) => argument === '--port' || argument.startsWith('--port='));
  const raw = index === -1 ? process.env.PORT : (argv[index]?.split('=')[1] ?? argv[index + 1]);
  return portNumber(raw ?? '8080', '--port / PORT');
}

function portNumber(raw: string, name: string): number {
  const port = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(port) || port < 0 || port > 65535) fail(`${name} must be an integer between 0 and 65535, got "${raw}"`, 2);
  return port;
}

/** `CORS_ORIGINS`: `*` or a comma-separated list of origins. */
function readCorsOrigins(raw: string | undefined): '*' | string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  if (raw.trim() === '*') return '*';
  return raw.split(',').map((origin) => origin.trim()).filter((origin) => origin.length > 0);
}

/** `ALLOWED_HOSTS`: a comma-separated list of host names. */
function readAllowedHosts(raw: string | undefined): string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  return raw.split(',').map((host) => host.trim()).filter((host) => host.length > 0);
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
