import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { startDevServer, type DevServer } from './dev-server.js';
import { createReverseProxy } from './reverse-proxy.js';

let upstream: Server | undefined;
let victim: Server | undefined;
let dev: DevServer | undefined;
/** Every request the fake upstream received: its path as sent, and its headers. */
let received: Array<{ url: string; headers: IncomingHttpHeaders }> = [];
afterEach(async () => {
  await dev?.close();
  for (const server of [upstream, victim]) {
    server?.closeAllConnections();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  }
  dev = undefined;
  upstream = undefined;
  victim = undefined;
  received = [];
});

/** A second server on loopback that no proxied request may ever reach; resolves its port and log. */
async function victimServer(): Promise<{ port: number; hits: string[] }> {
  const hits: string[] = [];
  victim = createServer((request, response) => {
    hits.push(`${request.method} ${request.url}`);
    response.end('victim answered');
  });
  await new Promise<void>((resolve) => victim?.listen(0, '127.0.0.1', resolve));
  return { port: (victim.address() as AddressInfo).port, hits };
}

/** Sends a raw request (exactly these bytes) and resolves with the raw answer. */
function raw(url: string, text: string): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
  });
}

async function fakeUpstream(): Promise<string> {
  upstream = createServer((request, response) => {
    received.push({ url: request.url ?? '', headers: request.headers });
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', 'http://x');
      if (url.pathname === '/v1beta1/hang') return;
      if (url.pathname.endsWith('/v1beta1/hop')) {
        response.writeHead(200, { 'content-type': 'application/json', connection: 'x-upstream-hop', 'x-upstream-hop': 'private', 'keep-alive': 'timeout=5' });
        response.end(JSON.stringify({ headers: request.headers }));
        return;
      }
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

  it('hands a gzip answer over decoded, without the encoding or length that no longer match it', async () => {
    dev = await startDevServer({ port: 0, upstreamUrl: await fakeUpstream() });
    const rawAnswer = await new Promise<{ headers: IncomingHttpHeaders; text: string }>((resolve, reject) => {
      httpRequest(`${dev?.url}/v1beta1/gzip`, (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ headers: response.headers, text }));
      })
        .on('error', reject)
        .end();
    });
    expect(rawAnswer.headers['content-encoding']).toBeUndefined();
    expect(rawAnswer.headers['content-length']).toBeUndefined();
    expect(JSON.parse(rawAnswer.text)).toEqual({ compressed: true });
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

describe('reverse proxy: reaches the upstream and nothing else', () => {
  it('refuses //host, absolute-form, dot segments and encoded escapes with 400; a second loopback server sees nothing', async () => {
    const target = await victimServer();
    const upstreamUrl = await fakeUpstream();
    dev = await startDevServer({ port: 0, upstreamUrl });
    const elsewhere = `127.0.0.1:${target.port}`;
    const targets = [
      `//${elsewhere}/v1beta1/x`,
      `http://${elsewhere}/v1beta1/x`,
      `http://${elsewhere}//v1beta1/x`,
      '/v1beta1/../../x',
      '/v1beta1/%2e%2e/%2e%2e/x',
      '/v1beta1/%2E%2E%2Fx',
      '/v1beta1/..%2f..%2fx',
      `/v1beta1/%2f%2f${elsewhere}/x`,
      '/v1beta1/%5c..%5cx',
      '/v1beta1/%252e%252e/x',
      '/v1beta1/..;/x',
      '/v1beta1/a//b',
      '/v1beta1\\..\\x',
      '/v1beta1/./x',
    ];
    for (const requestTarget of targets) {
      const answer = await raw(dev.url, `GET ${requestTarget} HTTP/1.1\r\nHost: ${elsewhere}\r\nAuthorization: Bearer secret\r\nConnection: close\r\n\r\n`);
      expect(answer, requestTarget).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer, requestTarget).toContain('"code":"BAD_REQUEST"');
    }
    // The same through fetch, which sends `//host` paths as they are.
    const viaFetch = await fetch(`${dev.url}//${elsewhere}/v1beta1/x`, { method: 'POST', body: 'x', headers: { cookie: 'session=1' } });
    expect(viaFetch.status).toBe(400);
    expect(target.hits).toEqual([]);
    expect(received).toEqual([]);
    // A plain path still goes through, to the upstream only.
    expect((await fetch(`${dev.url}/v1beta1/fine?x=1`)).status).toBe(200);
    expect(received.map((request) => request.url)).toEqual(['/v1beta1/fine?x=1']);
    expect(target.hits).toEqual([]);
  });

  it('refuses segments a server that decodes or normalises paths would read as a dot segment, a separator or a control character', async () => {
    dev = await startDevServer({ port: 0, upstreamUrl: await fakeUpstream() });
    const targets = [
      '/v1beta1/%c0%ae%c0%ae/x', // an overlong ".", not UTF-8
      '/v1beta1/%EF%BC%8E%EF%BC%8E/x', // full-width dots, ".." once normalised
      '/v1beta1/a%EF%BC%8Fb', // a full-width "/"
      '/v1beta1/%EF%BC%BC..', // a full-width "\"
      '/v1beta1/%09../x', // a tab, dropped by some servers
      '/v1beta1/..%20/x', // a trailing space, dropped by some servers
      '/v1beta1/..%3b/x', // an encoded ";"
      '/v1beta1/x%0d%0aX-Injected:%20yes', // an encoded CR LF
      '/v1beta1/x%7f',
      '/v1beta1/%zz',
    ];
    for (const requestTarget of targets) {
      const answer = await raw(dev.url, `GET ${requestTarget} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
      expect(answer, requestTarget).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer, requestTarget).toContain('"code":"BAD_REQUEST"');
    }
    expect(received).toEqual([]);
    // Encoded spaces, colons, "@" and other scripts are plain paths, forwarded as they came.
    const plain = ['/v1beta1/files/My%20File.txt', '/v1beta1/models/m%3AgenerateContent', '/v1beta1/%E6%97%A5%E6%9C%AC%EF%BC%8Etxt', '/v1beta1/a@b'];
    for (const path of plain) expect((await fetch(`${dev.url}${path}`)).status, path).toBe(200);
    expect(received.map((request) => request.url)).toEqual(plain);
  });

  it('keeps the path prefix of UPSTREAM_URL', async () => {
    const upstreamUrl = await fakeUpstream();
    dev = await startDevServer({ port: 0, upstreamUrl: `${upstreamUrl}/api/` });
    const answer = await (await fetch(`${dev.url}/v1beta1/things/1?q=a`)).json();
    expect(answer).toMatchObject({ path: '/api/v1beta1/things/1', query: '?q=a' });
  });

  it('drops hop-by-hop headers, and those named in Connection, in both directions', async () => {
    dev = await startDevServer({ port: 0, upstreamUrl: await fakeUpstream() });
    const answer = await raw(
      dev.url,
      [
        'GET /v1beta1/hop HTTP/1.1',
        'Host: localhost',
        'Connection: close, x-client-hop',
        'X-Client-Hop: private',
        'Keep-Alive: timeout=9',
        'TE: trailers',
        'Proxy-Authorization: Basic c2VjcmV0',
        'Authorization: Bearer user-token',
        'X-Kept: yes',
        '',
        '',
      ].join('\r\n'),
    );
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(head.toLowerCase()).not.toContain('x-upstream-hop');
    expect(head.toLowerCase()).not.toContain('keep-alive: timeout=5');
    const seen = received[0]?.headers ?? {};
    expect(seen['x-kept']).toBe('yes');
    expect(seen.authorization).toBe('Bearer user-token');
    for (const name of ['x-client-hop', 'keep-alive', 'te', 'proxy-authorization']) expect(seen[name], name).toBeUndefined();
    expect(seen.host).toBe(new URL(dev.url.replace(String(dev.port), String((upstream?.address() as AddressInfo).port))).host);
    expect(body.length).toBeGreaterThan(0);
  });

  it('lets pages from any origin call proxied paths, as the reference dev backend does', async () => {
    dev = await startDevServer({ port: 0, upstreamUrl: await fakeUpstream() });
    const preflight = await fetch(`${dev.url}/v1beta1/things`, {
      method: 'OPTIONS',
      headers: { origin: 'https://opal.example.com', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'x-custom,authorization' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-methods')).toBe('PUT');
    expect(preflight.headers.get('access-control-allow-headers')).toBe('x-custom,authorization');
    expect(received).toEqual([]);
    const response = await fetch(`${dev.url}/v1beta1/things`, { headers: { origin: 'https://opal.example.com' } });
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(received[0]?.headers.origin).toBe('https://opal.example.com');
    // The agent and sessions endpoints take any request header too.
    for (const target of ['/v1beta1/streamRunAgent', '/v1beta1/sessions/new']) {
      const agent = await fetch(`${dev.url}${target}`, {
        method: 'OPTIONS',
        headers: { origin: 'https://opal.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-goog-api-client' },
      });
      expect(agent.status, target).toBe(204);
      expect(agent.headers.get('access-control-allow-headers'), target).toBe('content-type,x-goog-api-client');
    }
  });

  it('refuses an UPSTREAM_URL that holds credentials without printing them', async () => {
    const failure = await startDevServer({ port: 0, upstreamUrl: 'https://user:hunter2-secret@backend.example.com' }).catch((error: Error) => error);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toMatch(/may not hold credentials/);
    expect((failure as Error).message).not.toContain('hunter2-secret');
  });
});

describe('createReverseProxy', () => {
  it('answers 504 when the upstream sends no headers within the timeout', async () => {
    const proxy = createReverseProxy({ upstreamUrl: await fakeUpstream(), fetch, headersTimeoutMs: 200 });
    const response = await proxy(new Request('http://localhost/v1beta1/hang'));
    expect(response.status).toBe(504);
    expect(((await response.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'TIMEOUT',
      message: expect.stringMatching(/sent no answer within 200 ms$/),
    });
  });
});
