import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import type { BackendClient } from '../ports/index.js';
import { createUpstreamBackendClient } from './upstream-backend-client.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

type Seen = { path: string; authorization?: string; origin?: string; body: unknown };
async function backend(answer: (path: string) => [number, unknown]): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const path = request.url ?? '';
      seen.push({ path, authorization: request.headers.authorization, origin: request.headers.origin, body: body ? JSON.parse(body) : undefined });
      const [status, value] = answer(path);
      if (path.includes('streamGenerateContent')) {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.end(`data: ${JSON.stringify(value)}\r\n\r\n`);
        return;
      }
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(value));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

describe('createUpstreamBackendClient', () => {
  it('sends media steps and uploads to the backend with the bearer token and origin', async () => {
    const { url, seen } = await backend((path) =>
      path.endsWith('executeStep')
        ? [200, { executionOutputs: { out: { chunks: [{ mimetype: 'image/png', data: 'AAA' }] } } }]
        : path.endsWith('uploadBlobFile')
          ? [200, { blobId: 'b1' }]
          : [200, { fileUrl: 'files/abc', mimeType: 'application/pdf' }],
    );
    const client = createUpstreamBackendClient({ baseUrl: url, fetch, accessToken: 'tok', origin: 'https://app.example' });
    const step = { planStep: { stepName: 's', modelApi: 'image', inputParameters: [], output: 'out' }, execution_inputs: {} };
    expect(await client.executeStep(step)).toMatchObject({ executionOutputs: { out: { chunks: [{ data: 'AAA' }] } } });
    expect(await client.uploadBlobFile('drive-1')).toBe('/board/blobs/b1');
    expect(await client.uploadGeminiFile({ blobId: 'b1' })).toEqual({ fileUrl: 'files/abc', mimeType: 'application/pdf' });
    expect(seen.map((entry) => entry.path)).toEqual(['/v1beta1/executeStep', '/v1beta1/uploadBlobFile', '/v1beta1/uploadGeminiFile']);
    for (const entry of seen) expect(entry).toMatchObject({ authorization: 'Bearer tok', origin: 'https://app.example' });
    expect(seen[0]?.body).toEqual(step);
    expect(seen[1]?.body).toEqual({ driveFileId: 'drive-1', accessToken: 'tok' });
    expect(seen[2]?.body).toEqual({ blobId: 'b1', accessToken: 'tok' });
  });

  it('reports backend failures and errorMessage answers as UPSTREAM_ERROR', async () => {
    const { url } = await backend((path) => (path.endsWith('executeStep') ? [200, { errorMessage: 'Quota exceeded' }] : [500, { error: { message: 'boom' } }]));
    const client = createUpstreamBackendClient({ baseUrl: url, fetch, accessToken: 'tok' });
    const step = { planStep: { stepName: 's', modelApi: 'image', inputParameters: [], output: 'out' }, execution_inputs: {} };
    await expect(client.executeStep(step)).rejects.toMatchObject({ code: 'UPSTREAM_ERROR', message: 'Quota exceeded' });
    await expect(client.uploadBlobFile('x')).rejects.toMatchObject({ code: 'UPSTREAM_ERROR', message: '/v1beta1/uploadBlobFile request failed: boom' });
  });

  it('streams model calls as the user, with the bearer token', async () => {
    const { url, seen } = await backend(() => [200, { candidates: [{ content: { role: 'model', parts: [{ text: 'hi' }] }, finishReason: 'STOP' }] }]);
    const client = createUpstreamBackendClient({ baseUrl: url, fetch, accessToken: 'tok', geminiBaseUrl: `${url}/v1beta` });
    const chunks = [];
    for await (const chunk of client.streamGenerateContent('m', { contents: [] })) chunks.push(chunk);
    expect(chunks).toHaveLength(1);
    expect(seen[0]).toMatchObject({ path: '/v1beta/models/m:streamGenerateContent?alt=sse', authorization: 'Bearer tok' });
  });
});

/** A backend that answers every request with `answer`, written raw. */
async function rawBackend(answer: (response: import('node:http').ServerResponse) => void): Promise<string> {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => answer(response));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const previous = close;
  close = async () => {
    await previous?.();
    await new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  };
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const STEP = { planStep: { stepName: 's', modelApi: 'image', inputParameters: [], output: 'out' }, execution_inputs: {} };

describe('createUpstreamBackendClient facing a hostile backend', () => {
  it('refuses an answer past its size limit instead of holding all of it in memory', async () => {
    let written = 0;
    const url = await rawBackend((response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      // An endless chunk: only a reader that stops can get past this.
      response.write('{"executionOutputs":{"out":{"chunks":[{"mimetype":"image/png","data":"');
      const block = 'A'.repeat(64 * 1024);
      const pump = (): void => {
        while (written < 64 * 1024 * 1024) {
          written += block.length;
          if (!response.write(block)) {
            response.once('drain', pump);
            return;
          }
        }
        response.end('"}]}}}');
      };
      pump();
    });
    const client = createUpstreamBackendClient({ baseUrl: url, fetch, accessToken: 'tok', maxResponseBytes: 1024 * 1024 });
    const failure = await client.executeStep(STEP).catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: 'UPSTREAM_ERROR', message: '/v1beta1/executeStep answered with more than the 1048576 bytes an answer may have' });
    expect(written).toBeLessThan(64 * 1024 * 1024);
  });

  it('treats answers that are not what was asked for as UPSTREAM_ERROR, saying what was missing', async () => {
    for (const [body, call, message] of [
      ['null', (client: BackendClient) => client.executeStep(STEP), '/v1beta1/executeStep answered with JSON that is not an object'],
      ['[1]', (client: BackendClient) => client.uploadBlobFile('d1'), '/v1beta1/uploadBlobFile answered with JSON that is not an object'],
      ['{}', (client: BackendClient) => client.uploadGeminiFile({ blobId: 'b1' }), '/v1beta1/uploadGeminiFile answered without a fileUrl'],
      ['{"fileUrl":"","mimeType":"image/png"}', (client: BackendClient) => client.uploadGeminiFile({ blobId: 'b1' }), '/v1beta1/uploadGeminiFile answered without a fileUrl'],
      ['{"fileUrl":"files/a"}', (client: BackendClient) => client.uploadGeminiFile({ blobId: 'b1' }), '/v1beta1/uploadGeminiFile answered without a mimeType'],
      ['{"blobId":""}', (client: BackendClient) => client.uploadBlobFile('d1'), '/v1beta1/uploadBlobFile answered without a blobId'],
    ] as const) {
      const url = await rawBackend((response) => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(body);
      });
      const client = createUpstreamBackendClient({ baseUrl: url, fetch, accessToken: 'tok' });
      const failure = await call(client).then((value) => ({ resolved: value }), (error: unknown) => error);
      expect(failure, body).toBeInstanceOf(AgentError);
      expect(failure, body).toMatchObject({ code: 'UPSTREAM_ERROR', message });
      await close?.();
      close = undefined;
    }
  });

  it('quotes at most 500 characters of an error the backend sends, with the token redacted', async () => {
    const url = await rawBackend((response) => {
      response.writeHead(500, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: `token tok-secret-1 ${'x'.repeat(100_000)}` } }));
    });
    const client = createUpstreamBackendClient({ baseUrl: url, fetch, accessToken: 'tok-secret-1' });
    const failure = (await client.executeStep(STEP).catch((error: unknown) => error)) as AgentError;
    expect(failure.code).toBe('UPSTREAM_ERROR');
    expect(failure.message).toMatch(/^\/v1beta1\/executeStep request failed: token \[redacted\] x+$/);
    expect(failure.message.length).toBeLessThan(600);
  });
});

describe('createUpstreamBackendClient facing a backend that does not answer', () => {
  it('gives up with TIMEOUT after timeoutMs of silence, and says ABORTED when the caller cancels', async () => {
    const url = await rawBackend(() => {
      // Never answers.
    });
    const client = createUpstreamBackendClient({ baseUrl: url, fetch, accessToken: 'tok', timeoutMs: 50 });
    await expect(client.executeStep(STEP)).rejects.toMatchObject({ code: 'TIMEOUT', message: '/v1beta1/executeStep got no answer for 50 ms' });
    const silentBody = await rawBackend((response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"blobId":');
    });
    await expect(createUpstreamBackendClient({ baseUrl: silentBody, fetch, accessToken: 'tok', timeoutMs: 50 }).uploadBlobFile('d1')).rejects.toMatchObject({
      code: 'TIMEOUT',
      message: '/v1beta1/uploadBlobFile got no answer for 50 ms',
    });
    const patient = createUpstreamBackendClient({ baseUrl: silentBody, fetch, accessToken: 'tok' });
    const controller = new AbortController();
    const cancelled = patient.executeStep(STEP, controller.signal);
    controller.abort();
    await expect(cancelled).rejects.toMatchObject({ code: 'ABORTED' });
  });
});
