#!/usr/bin/env node
// Fails when a built JavaScript file holds a character outside ASCII. One such character, even in
// a comment the bundler kept, makes V8 hold the module's whole source as two bytes per character
// (for as long as the process runs) and scan it more slowly at start-up. The bundler escapes what
// is in strings; what remains is in comments: write them with ASCII (`->`, `...`).
// Usage: node check-dist-ascii.mjs <dir> [...]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

function* builtFiles(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* builtFiles(path);
    else if (/\.(js|mjs|cjs)$/.test(name)) yield path;
  }
}

const dirs = process.argv.slice(2);
if (dirs.length === 0) {
  console.error('usage: check-dist-ascii.mjs <dir> [...]');
  process.exit(2);
}
const problems = [];
for (const dir of dirs) {
  for (const file of builtFiles(dir)) {
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, index) => {
      const at = line.search(/[^\x00-\x7f]/);
      if (at >= 0) {
        const code = line.codePointAt(at)?.toString(16).toUpperCase().padStart(4, '0');
        problems.push(`${relative(process.cwd(), file)}:${index + 1}:${at + 1}: U+${code} in: ${line.trim().slice(0, 120)}`);
      }
    });
  }
}
if (problems.length > 0) {
  console.error(`Built code must be ASCII (${problems.length} line(s)); the source comment that was kept is the one to change:`);
  for (const problem of problems) console.error(`  ${problem}`);
  process.exit(1);
}
console.log(`ascii guard: ${dirs.join(', ')} is ASCII`);
