// Throwaway consumer projects: the packed packages (what npm would publish) installed with npm
// next to a chosen zod, as a user's app gets them.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repositoryRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The folders of the published packages (`private` ones are never packed). */
export function publishedPackages(): { folder: string; name: string; manifest: Record<string, any> }[] {
  const packagesDir = path.join(repositoryRoot, 'packages');
  return readdirSync(packagesDir)
    .sort()
    .map((folder) => ({ folder, manifest: JSON.parse(readFileSync(path.join(packagesDir, folder, 'package.json'), 'utf8')) }))
    .filter(({ manifest }) => !manifest.private)
    .map(({ folder, manifest }) => ({ folder, name: manifest.name as string, manifest }));
}

/** The TypeScript compiler of the workspace (the consumers install none). */
export const tscPath = createRequire(import.meta.url).resolve('typescript/bin/tsc');

export interface CommandResult {
  status: number | null;
  output: string;
}

/** Runs a command without the package manager's `npm_*` variables leaking into it. */
export function runCommand(command: string, args: string[], cwd: string, timeoutMs = 240_000): CommandResult {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key) && key !== 'NODE_OPTIONS') env[key] = value;
  }
  env.NO_UPDATE_NOTIFIER = '1';
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: timeoutMs });
  return { status: result.status, output: `${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? String(result.error) : ''}` };
}

/** Packs every published package into `destination`: package name -> tarball path. */
export function packWorkspace(destination: string): Record<string, string> {
  mkdirSync(destination, { recursive: true });
  const tarballs: Record<string, string> = {};
  for (const { folder, name } of publishedPackages()) {
    const result = runCommand('pnpm', ['pack', '--pack-destination', destination], path.join(repositoryRoot, 'packages', folder));
    if (result.status !== 0) throw new Error(`pnpm pack failed in packages/${folder}:\n${result.output}`);
    const file = readdirSync(destination).find((entry) => entry.startsWith(`${name.replace('@', '').replace('/', '-')}-`) && entry.endsWith('.tgz'));
    if (!file) throw new Error(`pnpm pack wrote no tarball for ${name}`);
    tarballs[name] = path.join(destination, file);
  }
  return tarballs;
}

export interface ConsumerOptions {
  /** Tarballs (package name -> path) to depend on; other workspace packages resolve to them too. */
  tarballs: Record<string, string>;
  /** Which of the tarballs the app depends on directly (default: all). */
  packages?: string[];
  /** Registry dependencies, exact versions: `{ zod: '4.0.0' }`. */
  dependencies: Record<string, string>;
  /** Files to write into the project: relative path -> content. */
  files?: Record<string, string>;
  /** Install as `--legacy-peer-deps` does (pnpm and yarn users only get a warning). */
  legacyPeerDeps?: boolean;
}

export interface Consumer {
  directory: string;
  install: CommandResult;
}

/**
 * Creates a project in a fresh temp directory and installs it with npm: from the local cache
 * first (`--offline`), from the registry when the cache lacks something.
 */
export function createConsumer(name: string, options: ConsumerOptions): Consumer {
  const directory = mkdtempSync(path.join(tmpdir(), `consumer-${name}-`));
  const names = options.packages ?? Object.keys(options.tarballs);
  const dependencies: Record<string, string> = { ...options.dependencies };
  const overrides: Record<string, string> = {};
  for (const packageName of names) dependencies[packageName] = `file:${options.tarballs[packageName]}`;
  // An adapter's tarball depends on `@org/core` by version, which no registry has: point it here.
  for (const packageName of Object.keys(options.tarballs)) overrides[packageName] = `file:${options.tarballs[packageName]}`;
  const manifest = { name: `consumer-${name}`, version: '0.0.0', private: true, type: 'module', dependencies, overrides };
  writeFileSync(path.join(directory, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  for (const [file, content] of Object.entries(options.files ?? {})) {
    mkdirSync(path.dirname(path.join(directory, file)), { recursive: true });
    writeFileSync(path.join(directory, file), content);
  }
  const flags = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', ...(options.legacyPeerDeps ? ['--legacy-peer-deps'] : [])];
  let install = runCommand('npm', [...flags, '--offline'], directory);
  if (install.status !== 0) install = runCommand('npm', [...flags, '--prefer-offline'], directory);
  return { directory, install };
}

/** A strict tsconfig for the consumer's own files. */
export function strictTsconfig(files: string[], compilerOptions: Record<string, unknown> = {}): string {
  return JSON.stringify(
    {
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        skipLibCheck: false,
        noEmit: true,
        lib: ['ES2023', 'DOM', 'DOM.Iterable'],
        types: [],
        ...compilerOptions,
      },
      files,
    },
    null,
    2,
  );
}
