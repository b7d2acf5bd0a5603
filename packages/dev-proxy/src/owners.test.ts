import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type RunningServer } from '@org/adapter-node';
import { createSimulatedGemini } from '@org/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { startDevServer, type DevServer } from './dev-server.js';

let dev: DevServer | undefined;
let gemini: RunningServer | undefined;
let google: Server | undefined;
afterEach(async () => {
  await dev?.close();
  await gemini?.close();
  google?.closeAllConnections();
  await new Promise((resolve) => (google ? google.close(resolve) : resolve(undefined)));
  dev = undefined;
  gemini = undefined;
  google = undefined;
});

/** Google's token information endpoint on loopback: each token names its account. */
async function tokenInfo(accounts: Record<string, string>): Promise<{ url: string; asked: string[] }> {
  const asked: string[] = [];
  google = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const token = new URLSearchParams(body).get('access_token') ?? '';
      asked.push(token);
      const sub = accounts[token];
      response.writeHead(sub ? 200 : 400, { 'content-type': 'application/json' });
      response.end(JSON.stringify(sub ? { sub, aud: 'opal', exp: String(Math.floor(Date.now() / 1000) + 3600) } : { error: 'invalid_token' }));
    });
  });
  await new Promise<void>((resolve) => google?.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(google.address() as AddressInfo).port}/tokeninfo`, asked };
}

async function events(response: Response): Promise<Array<Record<string, Record<string, unknown>>>> {
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)));
}

describe('dev server: who owns a run', () => {
  it("with Google's APIs, the account that started a run resumes it with a refreshed token; another account may not", async () => {
    const accounts = await tokenInfo({ 'ya29.morning': '1001', 'ya29.afternoon': '1001', 'ya29.mallory': '2002' });
    const simulated = createSimulatedGemini();
    gemini = await serve({ handler: (request) => simulated.fetch(request) });
    // A Gemini-compatible endpoint and no Drive settings: runs use Google's Drive with the caller's token.
    dev = await startDevServer({ port: 0, geminiBaseUrl: `${gemini.url}/v1beta`, tokenInfoUrl: accounts.url });
    expect(dev.banner).toContain("Owners:    a run belongs to the Google account of the caller's token");
    const post = (body: unknown) =>
      fetch(`${dev?.url}/v1beta1/streamRunAgent?alt=sse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

    const started = await events(await post({ start: { segments: [{ textSegment: { text: 'Ask me my name and greet me.' } }] }, accessToken: 'ya29.morning' }));
    const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
    expect(interactionId).toEqual(expect.any(String));
    const answer = { input: { role: 'user', parts: [{ text: 'Ada' }] } };

    const stolen = await events(await post({ resume: { interactionId, response: answer }, accessToken: 'ya29.mallory' }));
    expect(stolen).toEqual([{ error: { message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' } }]);
    // A token Google does not take, or one not shaped as Google's, is its own owner: not the account's.
    for (const token of ['ya29.gone', 'made-up-token']) {
      const refused = await events(await post({ resume: { interactionId, response: answer }, accessToken: token }));
      expect(refused, token).toEqual([{ error: { message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' } }]);
    }

    const resumed = await events(await post({ resume: { interactionId, response: answer }, accessToken: 'ya29.afternoon' }));
    expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true } } });
    expect(JSON.stringify(resumed.at(-1))).toContain('Hello, Ada!');
    expect(accounts.asked).toEqual(['ya29.morning', 'ya29.mallory', 'ya29.gone', 'ya29.afternoon']);
  });

  it("with Google's APIs out of reach, a Google token is its own owner and runs go on", async () => {
    const simulated = createSimulatedGemini();
    gemini = await serve({ handler: (request) => simulated.fetch(request) });
    dev = await startDevServer({ port: 0, geminiBaseUrl: `${gemini.url}/v1beta`, tokenInfoUrl: 'http://127.0.0.1:1/tokeninfo' });
    const post = (body: unknown) =>
      fetch(`${dev?.url}/v1beta1/streamRunAgent?alt=sse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const started = await events(await post({ start: { segments: [{ textSegment: { text: 'Ask me my name and greet me.' } }] }, accessToken: 'ya29.offline' }));
    const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
    const answer = { input: { role: 'user', parts: [{ text: 'Ada' }] } };
    expect(await events(await post({ resume: { interactionId, response: answer }, accessToken: 'ya29.someone-else' }))).toEqual([
      { error: { message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' } },
    ]);
    const resumed = await events(await post({ resume: { interactionId, response: answer }, accessToken: 'ya29.offline' }));
    expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true } } });
  });

  it('with the simulated model, a token is its own owner and Google is never asked', async () => {
    const accounts = await tokenInfo({});
    dev = await startDevServer({ port: 0, tokenInfoUrl: accounts.url });
    expect(dev.banner).toContain("Owners:    a run belongs to the caller's token");
    const post = (body: unknown) =>
      fetch(`${dev?.url}/v1beta1/streamRunAgent?alt=sse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const started = await events(await post({ start: { segments: [{ textSegment: { text: 'Ask me my name and greet me.' } }] }, accessToken: 'tok-a' }));
    const interactionId = started.at(-1)?.waitForInput?.interactionId as string;
    const stolen = await events(await post({ resume: { interactionId, response: {} }, accessToken: 'tok-b' }));
    expect(stolen).toEqual([{ error: { message: `Interaction ${interactionId} belongs to another user`, code: 'FORBIDDEN' } }]);
    expect(accounts.asked).toEqual([]);
  });
});
