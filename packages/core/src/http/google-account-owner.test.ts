import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseSseStream } from '../sse/index.js';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk } from '../testing/index.js';
import { createAgentHandler } from './agent-handler.js';
import { createGoogleAccountOwner } from './google-account-owner.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A token information endpoint on loopback: each known token names its account, as Google's does. */
async function tokenInfo(accounts: Record<string, { sub?: string; aud?: string; exp?: number }>): Promise<{ url: string; asked: string[]; rawUrls: string[] }> {
  const asked: string[] = [];
  const rawUrls: string[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      rawUrls.push(request.url ?? '');
      const token = new URLSearchParams(body).get('access_token') ?? '';
      asked.push(token);
      const account = accounts[token];
      if (!account) {
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: 'invalid_token', error_description: 'Invalid Value' }));
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      const exp = String(account.exp ?? Math.floor(Date.now() / 1000) + 3600);
      response.end(JSON.stringify({ azp: account.aud ?? 'opal-client', aud: account.aud ?? 'opal-client', scope: 'openid email', exp, expires_in: '3599', ...(account.sub ? { sub: account.sub } : {}) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/v3/tokeninfo`, asked, rawUrls };
}

async function wireEvents(response: Response): Promise<Array<Record<string, Record<string, unknown>>>> {
  const events = [];
  for await (const event of parseSseStream(response.body as ReadableStream<Uint8Array>)) events.push(JSON.parse(event.data));
  return events;
}

const post = (body: unknown, url = 'http://agent.test/v1beta1/streamRunAgent?alt=sse') =>
  new Request(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe('createGoogleAccountOwner', () => {
  it('lets the account that started a run resume it with a refreshed token, and still refuses another account', async () => {
    const google = await tokenInfo({ 'ya29.first': { sub: '1001' }, 'ya29.refreshed': { sub: '1001' }, 'ya29.mallory': { sub: '2002' } });
    const backend = createScriptedBackendClient((request) => {
      const answer = request.body.contents.at(-1)?.parts[0]?.functionResponse?.response?.user_input;
      return typeof answer === 'string'
        ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: `Hello ${answer}` })]
        : [functionCallChunk('chat_request_user_input', { user_message: 'Name?' })];
    });
    const store = createMemoryInteractionStore();
    const handler = createAgentHandler({ createPorts: () => ({ backend, store }), resolveOwner: createGoogleAccountOwner({ tokenInfoUrl: google.url }) });

    const started = await wireEvents(await handler(post({ segments: [{ type: 'text', text: 'Greet me' }], accessToken: 'ya29.first' })));
    const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
    const answer = { input: { parts: [{ text: 'Ada' }] } };
    const stolen = await wireEvents(await handler(post({ interactionId, response: answer, accessToken: 'ya29.mallory' })));
    expect(stolen).toEqual([{ error: { message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' } }]);
    const resumed = await wireEvents(await handler(post({ interactionId, response: answer, accessToken: 'ya29.refreshed' })));
    expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true, outcomes: { parts: [{ text: 'Hello Ada' }] } } } });
    // The token went in the body, never in the URL.
    expect(google.rawUrls.every((url) => url === '/oauth2/v3/tokeninfo')).toBe(true);
  });

  it('asks Google once per token, even for requests at the same moment, and not again while the answer holds', async () => {
    const google = await tokenInfo({ 'ya29.a': { sub: '7' } });
    const owner = createGoogleAccountOwner({ tokenInfoUrl: google.url });
    expect(await Promise.all([owner('ya29.a'), owner('ya29.a'), owner('ya29.a')])).toEqual(['google:7', 'google:7', 'google:7']);
    expect(await owner('ya29.a')).toBe('google:7');
    expect(google.asked).toEqual(['ya29.a']);
    expect(await owner(undefined)).toBeUndefined();
    expect(google.asked).toHaveLength(1);
  });

  it('asks again once the token has expired', async () => {
    const google = await tokenInfo({ 'ya29.old': { sub: '7', exp: Math.floor(Date.now() / 1000) - 1 } });
    const owner = createGoogleAccountOwner({ tokenInfoUrl: google.url });
    await owner('ya29.old');
    await owner('ya29.old');
    expect(google.asked).toEqual(['ya29.old', 'ya29.old']);
  });

  it('refuses a token Google does not take, or one issued to another application, with UNAUTHENTICATED', async () => {
    const google = await tokenInfo({ 'ya29.other-app': { sub: '7', aud: 'someone-else' } });
    const handler = createAgentHandler({
      createPorts: () => ({ backend: createScriptedBackendClient([]), store: createMemoryInteractionStore() }),
      resolveOwner: createGoogleAccountOwner({ tokenInfoUrl: google.url, audiences: ['opal-client'] }),
    });
    const url = 'http://agent.test/v1beta1/streamRunAgent';
    for (const [token, message] of [
      ['ya29.expired', 'Google does not accept the access token (expired or revoked); sign in again'],
      ['ya29.other-app', 'The access token was issued to another application'],
    ]) {
      const response = await handler(post({ segments: [{ type: 'text', text: 'x' }], accessToken: token }, url));
      expect(response.status, token).toBe(401);
      expect(await response.json(), token).toEqual({ error: { code: 'UNAUTHENTICATED', message, status: 401 } });
    }
  });

  it('fails with UPSTREAM_ERROR, naming no token, when Google cannot be asked', async () => {
    const owner = createGoogleAccountOwner({ tokenInfoUrl: 'http://127.0.0.1:1/tokeninfo', timeoutMs: 2_000 });
    const failure = await owner('ya29.secret-token').catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: 'UPSTREAM_ERROR', message: 'Could not ask Google who the access token belongs to; try again' });
    expect(JSON.stringify(failure)).not.toContain('secret-token');
  });

  it("with unverified: 'token', makes a token Google does not vouch for its own owner, and asks again only after a while", async () => {
    const google = await tokenInfo({ 'ya29.known': { sub: '7' } });
    const owner = createGoogleAccountOwner({ tokenInfoUrl: google.url, unverified: 'token' });
    expect(await owner('ya29.known')).toBe('google:7');
    const refused = await owner('ya29.unknown');
    expect(refused).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await owner('ya29.unknown')).toBe(refused);
    expect(google.asked).toEqual(['ya29.known', 'ya29.unknown']);
    const offline = createGoogleAccountOwner({ tokenInfoUrl: 'http://127.0.0.1:1/tokeninfo', unverified: 'token', timeoutMs: 2_000 });
    expect(await offline('ya29.known')).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('binds a token that names no account to itself', async () => {
    const google = await tokenInfo({ 'ya29.service': {}, 'ya29.other-service': {} });
    const owner = createGoogleAccountOwner({ tokenInfoUrl: google.url });
    const first = await owner('ya29.service');
    expect(first).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await owner('ya29.other-service')).not.toBe(first);
  });
});
