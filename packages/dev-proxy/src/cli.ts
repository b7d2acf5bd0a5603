#!/usr/bin/env node
import { startDevServer } from './dev-server.js';

/** Reads `--port <n>` / `--port=<n>`, then `PORT`, then 8080. */
function readPort(argv: readonly string[]): number {
  const index = argv.findIndex((argument) => argument === '--port' || argument.startsWith('--port='));
  const raw = index === -1 ? process.env.PORT : (argv[index]?.split('=')[1] ?? argv[index + 1]);
  const port = Number(raw ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`--port / PORT must be an integer between 0 and 65535, got "${raw}"`);
    process.exit(2);
  }
  return port;
}

const server = await startDevServer({
  port: readPort(process.argv.slice(2)),
  ...(process.env.GEMINI_API_KEY ? { geminiApiKey: process.env.GEMINI_API_KEY } : {}),
  ...(process.env.GEMINI_BASE_URL ? { geminiBaseUrl: process.env.GEMINI_BASE_URL } : {}),
  ...(process.env.INTERACTION_STORE_DIR ? { storeDirectory: process.env.INTERACTION_STORE_DIR } : {}),
  ...(process.env.GEMINI_MODEL ? { model: process.env.GEMINI_MODEL } : {}),
  ...(process.env.UPSTREAM_URL ? { upstreamUrl: process.env.UPSTREAM_URL } : {}),
});
console.log(server.banner);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    void server.close().then(() => process.exit(0));
  });
}
