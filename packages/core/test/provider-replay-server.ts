import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GenerateContentResponse } from '../src/protocol/gemini.js';

/** Recorded provider traffic of the repository (`fixtures/<provider>/<name>`). */
export function fixture(provider: 'openai' | 'anthropic' | 'openai-compat', name: string): string {
  return readFileSync(new URL(`../../../fixtures/${provider}/${name}`, import.meta.url), 'utf8');
}

/**
 * A JSONL capture (one `data:` payload per line, `event:` lines stripped by its source) as the
 * event stream the provider sent: each line, bytes unchanged, behind the `event:` line its `type` names.
 */
export function sseFromJsonl(text: string): string {
  return text
    .split('\n')
    .filter((line) => line.trim().length > 0)
    .map((line) => `event: ${(JSON.parse(line) as { type: string }).type}\ndata: ${line}\n\n`)
    .join('');
}

/** A JSONL capture of a server that sends `data:` lines only (Chat Completions), as its event stream. */
export function sseDataOnly(text: string): string {
  return text
    .split('\n')
    .filter((line) => line.trim().length > 0)
    .map((line) => `data: ${line}\n\n`)
    .join('');
}

/** The JSON payloads of a JSONL capture, in order. */
export function jsonlEvents(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((line) => line.trim().length > 0)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Splits a capture of several streams in a row at each line whose `type` is `startType`. */
export function splitJsonl(text: string, startType: string): string[] {
  const streams: string[][] = [];
  for (const line of text.split('\n')) {
    if (line.trim().length === 0) continue;
    if ((JSON.parse(line) as { type: string }).type === startType || streams.length === 0) streams.push([]);
    streams.at(-1)?.push(line);
  }
  return streams.map((lines) => `${lines.join('\n')}\n`);
}

/** One request the mock received. */
export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** Answers one request; `response` is the raw node response. */
export type MockRoute = (request: RecordedRequest, response: ServerResponse, index: number) => void;

/** A provider stand-in on loopback that records every request. */
export interface MockProvider {
  baseUrl: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/** Starts a mock provider on 127.0.0.1 port 0; `route` answers request `index`. */
export async function startMockProvider(route: MockRoute, pathPrefix = '/v1'): Promise<MockProvider> {
  const requests: RecordedRequest[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const recorded = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8') };
      requests.push(recorded);
      route(recorded, response, requests.length - 1);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}${pathPrefix}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Sends `body` as a 200 event stream. */
export function sendStream(response: ServerResponse, body: string): void {
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  response.end(body);
}

/** Sends a JSON error with `status` and extra headers. */
export function sendJson(response: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(body);
}

/** Every chunk of a stream, or the error it ended with. */
export async function collect(stream: AsyncIterable<GenerateContentResponse>): Promise<GenerateContentResponse[]> {
  const chunks: GenerateContentResponse[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}
