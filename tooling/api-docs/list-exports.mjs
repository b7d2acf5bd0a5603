// Lists every public export of every published entry point, from the TypeScript sources, so
// `docs/api.md` can be checked against it. `node list-exports.mjs` prints them.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Every entry point of every published package: `{ specifier, source }`, where `source` is the
 * TypeScript file tsup builds that entry from (`dist/x/index.js` ← `src/x/index.ts`).
 */
export function entryPoints() {
  const entries = [];
  const packagesDir = path.join(root, 'packages');
  for (const folder of readdirSync(packagesDir).sort()) {
    const manifestPath = path.join(packagesDir, folder, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    if (manifest.private) continue;
    for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
      if (subpath === './package.json') continue;
      const types = typeof target === 'string' ? target : target.types;
      const source = types.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$/, '.ts');
      entries.push({
        specifier: subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`,
        source: path.join(packagesDir, folder, source),
      });
    }
  }
  return entries;
}

/** The names each entry point exports (values and types), sorted. */
export function exportsByEntryPoint() {
  const entries = entryPoints();
  const program = ts.createProgram(
    entries.map((entry) => entry.source),
    {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
      types: [],
      skipLibCheck: true,
      noEmit: true,
      paths: {
        '@org/core': [path.join(root, 'packages/core/src/index.ts')],
        '@org/core/*': [path.join(root, 'packages/core/src/*/index.ts')],
      },
    },
  );
  const checker = program.getTypeChecker();
  const result = new Map();
  for (const entry of entries) {
    const file = program.getSourceFile(entry.source);
    if (!file) throw new Error(`${entry.specifier}: cannot read ${path.relative(root, entry.source)}`);
    const symbol = checker.getSymbolAtLocation(file);
    const names = symbol ? checker.getExportsOfModule(symbol).map((item) => item.getName()) : [];
    result.set(entry.specifier, names.sort());
  }
  return result;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const [specifier, names] of exportsByEntryPoint()) {
    console.log(`## ${specifier} (${names.length})`);
    for (const name of names) console.log(`- ${name}`);
  }
}
