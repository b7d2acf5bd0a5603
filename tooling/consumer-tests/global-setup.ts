import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { createConsumer, packWorkspace } from './consumer.js';
import { NEWEST_ZOD } from './zod-versions.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Package name -> packed tarball. */
    tarballs: Record<string, string>;
    /** A project with every published package, the newest zod, `ai`, Node and Workers types installed. */
    appDirectory: string;
    /** Why the app could not be installed, when it could not. */
    appInstallFailure: string;
  }
}

const directories: string[] = [];

export default function setup(project: TestProject): () => void {
  const packDirectory = mkdtempSync(path.join(tmpdir(), 'consumer-packs-'));
  directories.push(packDirectory);
  const tarballs = packWorkspace(packDirectory);
  const app = createConsumer('app', {
    tarballs,
    // `ai` only for the types of `@org/core/ai-sdk` (an optional peer dependency of `@org/core`); its
    // provider types need `@types/json-schema` under a strict tsconfig (`skipLibCheck: false`).
    dependencies: { zod: NEWEST_ZOD, ai: '6.0.326', '@types/json-schema': '7.0.15', '@types/node': '20.19.9', '@cloudflare/workers-types': '4.20260426.1' },
  });
  directories.push(app.directory);
  project.provide('tarballs', tarballs);
  project.provide('appDirectory', app.directory);
  project.provide('appInstallFailure', app.install.status === 0 ? '' : app.install.output);
  return () => {
    for (const directory of directories) rmSync(directory, { recursive: true, force: true });
  };
}
