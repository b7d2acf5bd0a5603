#!/usr/bin/env node
// Fails when runtime-agnostic source imports a Node built-in or touches a Node/DOM global.
// Usage: node check-core-runtime.mjs <dir> [...]
// Test files (*.test.ts) run under Node and are exempt.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const rules = [
  { pattern: /\bfrom\s+['"]node:[^'"]+['"]|\bimport\s*\(\s*['"]node:/, why: 'imports a node:* module' },
  {
    pattern: /\bfrom\s+['"](fs|path|os|http|https|net|stream|crypto|buffer|child_process|url|util|events|zlib|worker_threads)(\/[^'"]*)?['"]/,
    why: 'imports a Node built-in without the node: prefix',
  },
  { pattern: /\bfrom\s+['"]undici['"]/, why: 'imports undici (adapters supply fetch)' },
  { pattern: /(?<![\w.$])process\s*\./, why: 'uses the Node global `process`' },
  { pattern: /(?<![\w.$])Buffer\s*[.(]/, why: 'uses the Node global `Buffer`' },
  { pattern: /(?<![\w.$])(__dirname|__filename)\b/, why: 'uses a CommonJS module global' },
  { pattern: /(?<![\w.$])require\s*\(/, why: 'uses CommonJS require()' },
  { pattern: /(?<![\w.$])(window|document|localStorage|sessionStorage)\s*\./, why: 'uses a DOM global' },
];

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|mts|js|mjs)$/.test(name) && !/\.test(-d)?\.ts$/.test(name)) yield path;
  }
}

function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, (m) => m.replace(/[^\n]/g, ' ')).replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

const dirs = process.argv.slice(2);
if (dirs.length === 0) {
  console.error('usage: check-core-runtime.mjs <dir> [...]');
  process.exit(2);
}
const problems = [];
for (const dir of dirs) {
  for (const file of sourceFiles(dir)) {
    const lines = stripComments(readFileSync(file, 'utf8')).split('\n');
    lines.forEach((line, index) => {
      for (const rule of rules) {
        if (rule.pattern.test(line)) problems.push(`${relative(process.cwd(), file)}:${index + 1}: ${rule.why}: ${line.trim()}`);
      }
    });
  }
}
if (problems.length > 0) {
  console.error(`Runtime-agnostic code must not depend on Node or the DOM (${problems.length} problem(s)):`);
  for (const problem of problems) console.error(`  ${problem}`);
  process.exit(1);
}
console.log(`runtime guard: ${dirs.join(', ')} uses only Web-standard APIs`);
