import { defineConfig } from 'vitest/config';

// One file at a time: each starts the whole bench, which would otherwise share two cores with the other.
export default defineConfig({ test: { include: ['test/**/*.test.mjs'], environment: 'node', fileParallelism: false } });
