import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'src/index.ts' },
  format: ['esm'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'es2022',
  platform: 'neutral',
  // Provided by the Workers runtime; @org/core is a dependency the user's bundler resolves.
  external: ['cloudflare:workers', '@org/core', '@org/core/http'],
});
