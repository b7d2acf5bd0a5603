import { defineConfig } from 'vitest/config';

// Installing throwaway projects and type-checking them takes seconds, not milliseconds.
export default defineConfig({
  test: {
    globalSetup: ['./global-setup.ts'],
    testTimeout: 180_000,
    hookTimeout: 300_000,
    fileParallelism: false,
  },
});
