import { afterEach, describe, expect, it } from 'vitest';
import { startDevServer, type DevServer } from './dev-server.js';

let dev: DevServer | undefined;
afterEach(async () => {
  await dev?.close();
  dev = undefined;
});

describe('dev server banner', () => {
  it('says when MODEL names no provider, so the simulated Gemini answers instead', async () => {
    dev = await startDevServer({ port: 0, model: 'llama3' });
    expect(dev.mode).toBe('simulated');
    expect(dev.banner).toContain('MODEL=llama3 names no provider, so the simulated Gemini answers; set MODEL_PROVIDER (or OPENAI_BASE_URL for a local server).');
  });

  it('says nothing more for a Gemini model', async () => {
    dev = await startDevServer({ port: 0, model: 'gemini-2.5-flash' });
    expect(dev.banner).toContain('SIMULATED Gemini');
    expect(dev.banner).not.toContain('names no provider');
  });
});
