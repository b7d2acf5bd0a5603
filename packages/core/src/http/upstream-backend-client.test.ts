import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
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
