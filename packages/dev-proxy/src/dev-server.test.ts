import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDevProcess } from './test-support.js';

const children: ChildProcess[] = [];
let storeDirectory = '';

afterAll(async () => {
  for (const child of children) child.kill('SIGTERM');
  if (storeDirectory) await rm(storeDirectory, { recursive: true, force: true });
});

function startProcess(env: Record<string, string>): Promise<{ url: string; banner: string }> {
  return startDevProcess(env, children);
}

async function events(response: Response): Promise<Array<Record<string, Record<string, unknown>>>> {
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)));
}

const post = (url: string, body: unknown) =>
  fetch(`${url}/v1beta1/streamRunAgent?alt=sse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('dev server process', () => {
  it('runs against the simulated Gemini: suspend on one process, resume on another sharing the store', async () => {
    storeDirectory = await mkdtemp(path.join(os.tmpdir(), 'org-dev-store-'));
    const first = await startProcess({ INTERACTION_STORE_DIR: storeDirectory });
    expect(first.banner).toMatch(/SIMULATED Gemini/);
    expect(first.banner).toContain('curl -N');
    const started = await events(await post(first.url, { start: { segments: [{ textSegment: { text: 'Ask me my name and greet me.' } }] } }));
    expect(started.map((event) => Object.keys(event)[0])).toContain('thought');
    const suspend = started.at(-1)?.waitForInput;
    expect(suspend?.interactionId).toEqual(expect.any(String));

    const second = await startProcess({ INTERACTION_STORE_DIR: storeDirectory });
    const resumed = await events(
      await post(second.url, { resume: { interactionId: suspend?.interactionId, response: { input: { role: 'user', parts: [{ text: 'Ada' }] } } } }),
    );
    expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true } } });
    expect(JSON.stringify(resumed.at(-1))).toContain('Hello, Ada!');

    const reused = await events(await post(first.url, { resume: { interactionId: suspend?.interactionId, response: {} } }));
    expect(reused).toEqual([{ error: { message: `Unknown interaction ID: ${suspend?.interactionId}`, code: 'INTERACTION_NOT_FOUND' } }]);

    const unknown = await events(await post(first.url, { resume: { interactionId: 'no-such-run', response: {} } }));
    expect(unknown).toEqual([{ error: { message: 'Unknown interaction ID: no-such-run', code: 'INTERACTION_NOT_FOUND' } }]);

    const oversized = await fetch(`${first.url}/v1beta1/streamRunAgent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ segments: [{ type: 'text', text: 'x'.repeat(33 * 1024 * 1024) }] }),
    });
    expect(oversized.status).toBe(413);
    expect(((await oversized.json()) as { error: { code: string } }).error.code).toBe('PAYLOAD_TOO_LARGE');

    const malformed = await post(first.url, { start: { segments: 'nope' } });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { message: string } }).error.message).toMatch(/^start\.segments: /);
  });
});
