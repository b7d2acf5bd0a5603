import { createContentCache, jsonWithContents } from '../protocol/content-json-cache.js';
import type { GenerateContentRequest } from '../protocol/gemini.js';

/**
 * Serialises request bodies whose `contents` grow from request to request: each content's JSON is
 * kept once it has been sent, and the next request's body is joined from those pieces, so a run
 * of `n` turns serialises each content once instead of `n` times (see
 * {@link createContentCache} for when a content is written again).
 */
export function createRequestSerializer(): (body: GenerateContentRequest) => string {
  const contentJson = createContentCache((content) => JSON.stringify(content) ?? 'null');
  return (body) => {
    const { contents, ...rest } = body;
    if (!Array.isArray(contents)) return JSON.stringify(body);
    return jsonWithContents(contents, rest, contentJson);
  };
}
