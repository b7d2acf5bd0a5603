import { defineConfig } from 'tsup';

export default defineConfig({
  // `redis` and `postgres` are entries of their own, so the main entry never loads a database client.
  entry: { index: 'src/index.ts', redis: 'src/redis.ts', postgres: 'src/postgres.ts' },
  format: ['esm'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'es2022',
});
