// Test-only: a Gemini streamGenerateContent endpoint on loopback that the test steers request by
// request (answer, hold open, cut mid-line) and that records every request body it received.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { GenerateContentRequest, GenerateContentResponse, JsonObject } from '@org/core';

/** One request the mock received. */
export interface MockGeminiRequest {
  index: number;
  /** The model named in the path. */
  model: string;
  body: GenerateContentRequest;
  headers: IncomingHttpHeaders;
  /** The answer was written to its end. */
  finished: boolean;
  /** The connection closed before the answer ended (the caller left, or the mock cut it). */
  closedEarly: boolean;
}

/** What the mock does with one request. */
export type MockGeminiAnswer =
  /**
   * Streams these chunks as SSE, then ends the response. A promise among them holds the stream
   * there until it settles (one that never settles holds it until the caller leaves).
   */
  | { kind: 'chunks'; chunks: Array<GenerateContentResponse | Promise<unknown>> }
  /** Never answers; with `headers` the status line and headers go out first. Ends when the caller leaves. */
  | { kind: 'hang'; headers?: boolean }
  /** Streams `chunks`, then the first half of the `data:` line of `cut`, then destroys the socket. */
  | { kind: 'cut'; chunks: GenerateContentResponse[]; cut: GenerateContentResponse };

/** A running mock Gemini. */
export interface MockGemini {
  /** What `GEMINI_BASE_URL` should be: `http://127.0.0.1:<port>/v1beta`. */
  baseUrl: string;
  /** Every model request, in arrival order. */
  readonly requests: MockGeminiRequest[];
  /** Requests whose answer has neither ended nor been cut: streams the mock holds open. */
  openCount(): number;
  /** Closes every connection and the server. */
  close(): Promise<void>;
}

/**
 * Starts the mock on a free loopback port. `answer` decides per request; it may return a promise
 * that settles later (the request waits, unanswered, until then).
 */
export async function startMockGemini(answer: (request: MockGeminiRequest) => MockGeminiAnswer | Promise<MockGeminiAnswer>): Promise<MockGemini> {
  const requests: MockGeminiRequest[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((incoming, response) => {
    const match = /\/v1beta\/models\/([^/:]+):streamGenerateContent$/.exec(new URL(incoming.url ?? '/', 'http://mock').pathname);
    if (incoming.method !== 'POST' || !match) {
      response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 404, message: 'not found', status: 'NOT_FOUND' } }));
      return;
    }
    const pieces: Buffer[] = [];
    incoming.on('data', (piece: Buffer) => pieces.push(piece));
    incoming.on('end', () => {
      const request: MockGeminiRequest = {
        index: requests.length,
        model: decodeURIComponent(match[1] as string),
        body: JSON.parse(Buffer.concat(pieces).toString('utf8')) as GenerateContentRequest,
        headers: incoming.headers,
        finished: false,
        closedEarly: false,
      };
      requests.push(request);
      response.on('close', () => {
        if (!request.finished) request.closedEarly = true;
      });
      void Promise.resolve()
        .then(() => answer(request))
        .then((decided) => play(decided, request, response))
        .catch((error: unknown) => {
          if (!response.headersSent) {
            response.writeHead(500, { 'content-type': 'application/json' });
            response.end(JSON.stringify({ error: { code: 500, message: String(error), status: 'INTERNAL' } }));
          } else response.destroy();
        });
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1beta`,
    requests,
    openCount: () => requests.filter((request) => !request.finished && !request.closedEarly).length,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const line = (chunk: GenerateContentResponse) => `data: ${JSON.stringify(chunk)}\r\n\r\n`;

async function play(decided: MockGeminiAnswer, request: MockGeminiRequest, response: ServerResponse): Promise<void> {
  if (response.destroyed) return;
  if (decided.kind === 'hang') {
    if (decided.headers) response.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders();
    return;
  }
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const chunk of decided.chunks) {
    if (chunk instanceof Promise) {
      await chunk;
      if (response.destroyed) return;
      continue;
    }
    // One write per chunk, like Gemini's own stream.
    await new Promise<void>((resolve) => response.write(line(chunk), () => resolve()));
  }
  if (decided.kind === 'cut') {
    const text = line(decided.cut);
    await new Promise<void>((resolve) => response.write(text.slice(0, Math.floor(text.length / 2)), () => resolve()));
    response.socket?.destroy();
    return;
  }
  request.finished = true;
  response.end();
}

let signatures = 0;

/** A model chunk with one function call carrying a thought signature, as Gemini 3 sends it. */
export function callChunk(name: string, args: JsonObject = {}): GenerateContentResponse {
  signatures += 1;
  const thoughtSignature = Buffer.from(`mock-signature-${signatures}-${name}`).toString('base64');
  return {
    candidates: [{ content: { role: 'model', parts: [{ functionCall: { name, args }, thoughtSignature }] }, index: 0 }],
  } as GenerateContentResponse;
}

/** A chunk of thought text. */
export function thoughtOf(text: string): GenerateContentResponse {
  return { candidates: [{ content: { role: 'model', parts: [{ text, thought: true }] }, index: 0 }] } as GenerateContentResponse;
}

/** The closing chunk: an empty text part, `STOP` and usage, as Gemini ends a turn. */
export function stopChunk(): GenerateContentResponse {
  return {
    candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 20, candidatesTokenCount: 5, totalTokenCount: 25 },
  } as GenerateContentResponse;
}

/** The objective text of a request (its first content). */
export function objectiveOf(request: MockGeminiRequest): string {
  return request.body.contents?.[0]?.parts?.[0]?.text ?? '';
}

/** The function response at the end of a request's history, if the history ends with one. */
export function lastFunctionResponse(request: MockGeminiRequest): { name: string; response: JsonObject } | undefined {
  const part = request.body.contents?.at(-1)?.parts?.find((candidate) => candidate.functionResponse);
  return part?.functionResponse as { name: string; response: JsonObject } | undefined;
}
