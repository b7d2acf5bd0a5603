import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { defineConfig } from 'vitest/config';

// Every test runs inside workerd (the Workers runtime) through Miniflare, against the bindings of
// test/wrangler.jsonc; test/worker.ts is the Worker under test and exports the Durable Objects.
export default defineConfig({
  plugins: [
    cloudflareTest({
      main: './test/worker.ts',
      wrangler: { configPath: './test/wrangler.jsonc' },
    }),
  ],
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
  },
});
