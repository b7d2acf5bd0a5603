import { AgentError } from '../errors/index.js';
import { formatPath } from '../errors/format-issues.js';
import { createContentCache, jsonWithContents } from '../protocol/content-json-cache.js';
import { utf8Length } from '../protocol/utf8-length.js';

/** The largest saved state the runtime writes, unless a store says less: 64 MiB of UTF-8 JSON. */
export const DEFAULT_MAX_STATE_BYTES = 64 * 1024 * 1024;

/** How long a store keeps a record after its last write, unless its factory says otherwise: 7 days. */
export const DEFAULT_INTERACTION_TTL_MS = 7 * 24 * 60 * 60 * 1000;

/** How deep a saved value may nest. Our own state nests about ten levels; the rest is the user's data. */
export const MAX_STATE_DEPTH = 256;

/** Options of {@link toJsonText}. */
export interface JsonTextOptions {
  /** Names the value in errors, e.g. `Interaction 6a28…`. */
  label: string;
  maxBytes?: number;
  maxDepth?: number;
}

/**
 * Serialises a value that must survive a store exactly: plain objects, arrays, strings, finite
 * numbers, booleans and `null`. Anything JSON would change or drop silently (`NaN`, `Infinity`,
 * `undefined` in an array, a `Date`, a class instance) or cannot hold (a `bigint`, a function, a
 * cycle) is refused with `STORE_ERROR` naming where it is; a value deeper than `maxDepth` or
 * bigger than `maxBytes` is refused too (`STORE_ERROR`, `PAYLOAD_TOO_LARGE`). Every store gets
 * its values through this function, so every store refuses the same values the same way.
 */
export function toJsonText(value: unknown, options: JsonTextOptions): string {
  assertJson(value, [], options.maxDepth ?? MAX_STATE_DEPTH, options.label);
  return withinLimit(JSON.stringify(value), options);
}

/**
 * {@link toJsonText} for the successive states of one run: each item of the value's `contents`
 * (the history, which only grows) is checked and serialised once, and its text is reused by the
 * next call while it is the same object with the same `parts` (see
 * {@link createContentCache}), so saving the state at every turn stays linear in the
 * history. The text has `contents` first; what it refuses, and how, is what `toJsonText` refuses.
 */
export function createJsonTextEncoder(options: JsonTextOptions): (value: unknown) => string {
  const maxDepth = options.maxDepth ?? MAX_STATE_DEPTH;
  const contentJson = createContentCache((content, index) => {
    if (content === undefined) refuse(options.label, ['contents', index], 'undefined is not JSON');
    assertJson(content, ['contents', index], maxDepth - 2, options.label);
    return JSON.stringify(content);
  });
  return (value) => {
    const contents = (value as { contents?: unknown } | null)?.contents;
    if (!Array.isArray(contents) || Object.getPrototypeOf(value) !== Object.prototype || maxDepth < 3) return toJsonText(value, options);
    const { contents: _contents, ...rest } = value as Record<string, unknown>;
    assertJson(rest, [], maxDepth, options.label);
    // A state's other fields hold no fixed values (those are parts of requests): one
    // `JSON.stringify` writes the same text faster than field by field.
    return withinLimit(jsonWithContents(contents, rest, contentJson, JSON.stringify), options);
  };
}

/** `text`, unless it is more UTF-8 bytes than `options.maxBytes` allows (`PAYLOAD_TOO_LARGE`). */
function withinLimit(text: string, options: JsonTextOptions): string {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_STATE_BYTES;
  // Three bytes per UTF-16 unit is the worst case, so short texts need no exact count.
  if (text.length * 3 > maxBytes) {
    const size = utf8Length(text);
    if (size > maxBytes) {
      throw new AgentError('PAYLOAD_TOO_LARGE', `${options.label} is ${size} bytes of JSON, more than the limit of ${maxBytes} bytes`, {
        details: { size, limit: maxBytes },
      });
    }
  }
  return text;
}

/**
 * Refuses `value` (see {@link toJsonText}) unless it is JSON no deeper than `depthLeft`. The common
 * case, a value that is JSON, is checked by {@link isJson}, which keeps no path and no set of the
 * objects it is in; only a value it refuses is walked again by {@link checkJson} to name the
 * problem, so every refusal reads as before (a cycle included, which `isJson` only sees as depth).
 */
function assertJson(value: unknown, path: PropertyKey[], depthLeft: number, label: string): void {
  if (!isJson(value, depthLeft)) checkJson(value, path, depthLeft, new Set(), label);
}

/** Whether {@link checkJson} accepts `value` (for a value with no cycles; a cycle is `false`). */
function isJson(value: unknown, depthLeft: number): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object': {
      if (value === null) return true;
      if (depthLeft === 0) return false;
      if (Array.isArray(value)) {
        for (let index = 0; index < value.length; index += 1) {
          const item: unknown = value[index];
          if (item === undefined || !isJson(item, depthLeft - 1)) return false;
        }
        return true;
      }
      const prototype = Object.getPrototypeOf(value) as unknown;
      if (prototype !== Object.prototype && prototype !== null) return false;
      for (const key of Object.keys(value)) {
        const item = (value as Record<string, unknown>)[key];
        if (item !== undefined && !isJson(item, depthLeft - 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

function checkJson(value: unknown, path: PropertyKey[], depthLeft: number, seen: Set<object>, label: string): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) refuse(label, path, `${value} is not JSON`);
      return;
    case 'object': {
      if (value === null) return;
      if (depthLeft === 0) refuse(label, path, `nests deeper than ${path.length} levels`);
      if (seen.has(value)) refuse(label, path, 'refers to itself (a cycle)');
      seen.add(value);
      if (Array.isArray(value)) {
        for (let index = 0; index < value.length; index += 1) {
          path.push(index);
          if (value[index] === undefined) refuse(label, path, 'undefined is not JSON');
          checkJson(value[index], path, depthLeft - 1, seen, label);
          path.pop();
        }
      } else {
        const prototype = Object.getPrototypeOf(value) as unknown;
        if (prototype !== Object.prototype && prototype !== null) {
          refuse(label, path, `a ${(value as object).constructor?.name ?? 'non-plain'} object is not JSON`);
        }
        for (const key of Object.keys(value)) {
          const item = (value as Record<string, unknown>)[key];
          // JSON leaves out undefined properties; optional fields are written that way on purpose.
          if (item === undefined) continue;
          path.push(key);
          checkJson(item, path, depthLeft - 1, seen, label);
          path.pop();
        }
      }
      seen.delete(value);
      return;
    }
    default:
      refuse(label, path, `a ${typeof value} is not JSON`);
  }
}

function refuse(label: string, path: PropertyKey[], problem: string): never {
  const where = formatPath('', path);
  throw new AgentError('STORE_ERROR', `${label} cannot be saved: ${where}: ${problem}`, { details: { path: where } });
}
