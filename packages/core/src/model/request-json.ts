import { createContentJsonCache } from '../protocol/content-json-cache.js';
import type { GenerateContentRequest } from '../protocol/gemini.js';

/**
 * Serialises request bodies whose `contents` grow from request to request: each content's JSON is
 * kept once it has been sent, and the next request's body is joined from those pieces, so a run
 * of `n` turns serialises each content once instead of `n` times (see
 * {@link createContentJsonCache} for when a content is written again).
 */
export function createRequestSerializer(): (body: GenerateContentRequest) => string {
  const contentJson = createContentJsonCache((content) => JSON.stringify(content) ?? 'null');
  return (body) => {
    const { contents, ...rest } = body;
    if (!Array.isArray(contents)) return JSON.stringify(body);
    let text = '{"contents":[';
    for (let index = 0; index < contents.length; index += 1) {
      if (index > 0) text += ',';
      text += contentJson(contents[index], index);
    }
    text += ']';
    const others = JSON.stringify(rest);
    return others === '{}' ? `${text}}` : `${text},${others.slice(1)}`;
  };
}
