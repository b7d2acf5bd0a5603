import { defineConfig } from 'tsup';

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    'testing/index': 'src/testing/index.ts',
    'http/index': 'src/http/index.ts',
    'client/index': 'src/client/index.ts',
    'ai-sdk/index': 'src/ai-sdk/index.ts',
  },
  format: ['esm'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'es2022',
  platform: 'neutral',
  splitting: true,
  treeshake: true,
  external: ['vitest', 'ai'],
});
