#!/usr/bin/env node
import { createServer } from 'node:http';
import { AgentError } from '@org/core';

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

const port = readPort(process.argv.slice(2));
const server = createServer((request, response) => {
  const error = new AgentError(
    'NOT_IMPLEMENTED',
    `${request.method} ${request.url}: the agent endpoints are not wired into the dev server yet`,
  );
  response.writeHead(error.status, { 'content-type': 'application/json; charset=utf-8' });
  response.end(JSON.stringify(error.toJSON()));
});
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  console.log(
    [
      `dev-proxy listening on http://127.0.0.1:${actual}`,
      'Status: early build. The agent loop, the HTTP protocol handler and the simulated Gemini are',
      'still being wired in; every request is answered with 501 and a JSON error until then.',
    ].join('\n'),
  );
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => server.close(() => process.exit(0)));
