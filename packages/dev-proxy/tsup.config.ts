import { defineConfig } from 'tsup';

export default defineConfig([
  {
    entry: { index: 'src/index.ts', cli: 'src/cli.ts' },
    format: ['esm'],
    dts: true,
    clean: false,
    sourcemap: true,
    target: 'es2022',
  },
  {
    // The playground page's script: the client SDK and the app, bundled for the browser.
    entry: { 'playground/app': 'src/playground/app.ts' },
    format: ['esm'],
    platform: 'browser',
    noExternal: [/.*/],
    dts: false,
    clean: false,
    sourcemap: true,
    target: 'es2022',
    esbuildOptions(options) {
      options.logOverride = { 'ignored-bare-import': 'silent' };
    },
  },
]);
