import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { createFakeGoogleDrive, createSimulatedGemini } from '@org/core/testing';
import { defineConfig } from 'vitest/config';

/** Where the test Worker's default Gemini backend sends requests; answered by the simulated Gemini below. */
const SIMULATED_GEMINI_URL = 'https://simulated-gemini.test/v1beta';
/** Where the test Worker's default Drive client sends requests; answered by the fake Google Drive below. */
const GOOGLE_API_URL = 'https://google-apis.test';
/** The fake's request log, for the tests to read, and a fresh fake on POST (not part of any Google API). */
const FAKE_DRIVE_LOG_PATH = '/__fake-drive/requests';
const FAKE_DRIVE_RESET_PATH = '/__fake-drive/reset';

const gemini = createSimulatedGemini();
let drive = createFakeGoogleDrive();

// Every test runs inside workerd (the Workers runtime) through Miniflare, against the bindings of
// test/wrangler.jsonc; test/worker.ts is the Worker under test and exports the Durable Objects.
export default defineConfig({
  plugins: [
    cloudflareTest({
      main: './test/worker.ts',
      wrangler: { configPath: './test/wrangler.jsonc' },
      miniflare: {
        bindings: { GEMINI_API_KEY: 'test-key', GEMINI_BASE_URL: SIMULATED_GEMINI_URL, GOOGLE_API_BASE_URL: GOOGLE_API_URL },
        // The Worker's global fetch leaves workerd here: only the simulated Gemini and the fake Google Drive answer.
        outboundService: async (request) => {
          if (request.url.startsWith(`${GOOGLE_API_URL}/`)) {
            const { pathname } = new URL(request.url);
            if (pathname === FAKE_DRIVE_LOG_PATH) return Response.json(drive.requests) as never;
            if (pathname === FAKE_DRIVE_RESET_PATH) {
              drive = createFakeGoogleDrive();
              return new Response(null, { status: 204 }) as never;
            }
            const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : new Uint8Array(await request.arrayBuffer());
            return (await drive.fetch(new Request(request.url, { method: request.method, headers: request.headers as never, ...(body ? { body } : {}) }))) as never;
          }
          if (!request.url.startsWith(SIMULATED_GEMINI_URL)) {
            return new Response(`No network in tests: ${request.url}`, { status: 502 }) as never;
          }
          const response = await gemini.fetch(new Request(request.url, { method: request.method, headers: request.headers as never, body: await request.text() }));
          return response as never;
        },
      },
    }),
  ],
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
  },
});
