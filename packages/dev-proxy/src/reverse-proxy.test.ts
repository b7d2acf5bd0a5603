import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync, gunzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { startDevServer, type DevServer } from './dev-server.js';

let upstream: Server | undefined;
let dev: DevServer | undefined;
afterEach(async () => {
  await dev?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => (upstream ? upstream.close(resolve) : resolve(undefined)));
  dev = undefined;
  upstream = undefined;
});

async function fakeUpstream(): Promise<string> {
  upstream = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', 'http://x');
      if (url.pathname === '/v1beta1/gzip') {
        response.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        response.end(gzipSync(JSON.stringify({ compressed: true })));
        return;
      }
      if (url.pathname === '/v1beta1/stream') {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write('data: one\n\n');
        setTimeout(() => response.end('data: two\n\n'), 150);
        return;
      }
      const status = Number(url.searchParams.get('status') ?? 200);
      response.writeHead(status, { 'content-type': 'application/json', 'x-upstream': 'yes', connection: 'keep-alive' });
      response.end(
        JSON.stringify({ method: request.method, path: url.pathname, query: url.search, body, auth: request.headers.authorization ?? null }),
      );
    });
  });
  await new Promise<void>((resolve) => upstream?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
}

describe('reverse proxy', () => {
  it('forwards methods, paths, queries, bodies, auth and statuses', async () => {
    dev = await startDevServer({ port: 0, upstreamUrl: await fakeUpstream() });
    for (const [method, status] of [['GET', 200], ['POST', 201], ['PUT', 404], ['DELETE', 500]] as const) {
      const response = await fetch(`${dev.url}/v1beta1/things/1?status=${status}&q=a`, {
        method,
        headers: { authorization: 'Bearer tok' },
        ...(method === 'GET' ? {} : { body: `payload-${method}` }),
      });
      expect(response.status).toBe(status);
      expect(response.headers.get('x-upstream')).toBe('yes');
      expect(await response.json()).toEqual({
        method,
        path: '/v1beta1/things/1',
        query: `?status=${status}&q=a`,
        body: method === 'GET' ? '' : `payload-${method}`,
        auth: 'Bearer tok',
      });
    }
  });

  it('streams the upstream body as it arrives', async () => {
    dev = await startDevServer({ port: 0, upstreamUrl: await fakeUpstream() });
    const response = await fetch(`${dev.url}/v1beta1/stream`);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toBe('data: one\n\n');
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toBe('data: two\n\n');
  });

  it('passes a gzip body through with its content-encoding, so body and headers agree', async () => {
    dev = await startDevServer({ port: 0, upstreamUrl: await fakeUpstream() });
    const raw = await new Promise<{ encoding: string | undefined; bytes: Buffer }>((resolve, reject) => {
      httpRequest(`${dev?.url}/v1beta1/gzip`, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ encoding: response.headers['content-encoding'], bytes: Buffer.concat(chunks) }));
      })
        .on('error', reject)
        .end();
    });
    expect(raw.encoding).toBe('gzip');
    expect(JSON.parse(gunzipSync(raw.bytes).toString())).toEqual({ compressed: true });
    // fetch decodes it for the client, which only works when the headers match the bytes.
    expect(await (await fetch(`${dev.url}/v1beta1/gzip`)).json()).toEqual({ compressed: true });
  });

  it('answers 502 with a clear message when the upstream is down, and when none is set', async () => {
    const url = await fakeUpstream();
    upstream?.closeAllConnections();
    await new Promise((resolve) => upstream?.close(resolve));
    upstream = undefined;
    dev = await startDevServer({ port: 0, upstreamUrl: url });
    const down = await fetch(`${dev.url}/v1beta1/anything`);
    expect(down.status).toBe(502);
    expect(((await down.json()) as { error: { message: string } }).error.message).toBe(`Upstream ${url} is unreachable: ECONNREFUSED`);
    await dev.close();
    dev = await startDevServer({ port: 0 });
    const unset = await fetch(`${dev.url}/v1beta1/anything`);
    expect(unset.status).toBe(502);
    expect(((await unset.json()) as { error: { message: string } }).error.message).toMatch(/no UPSTREAM_URL is set/);
  });
});
