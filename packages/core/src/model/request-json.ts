import type { LLMContent } from '../protocol/content.js';
import type { GenerateContentRequest } from '../protocol/gemini.js';

/** The JSON of one content, and what it was taken from. */
interface CachedContent {
  parts: unknown;
  partCount: number;
  json: string;
}

/**
 * Serialises request bodies whose `contents` grow from request to request: each content's JSON is
 * kept once it has been sent, and the next request's body is joined from those pieces, so a run
 * of `n` turns serialises each content once instead of `n` times. A content is treated as final
 * once it was sent (the loop only appends to its history); one whose `parts` array was replaced
 * or grew is serialised again.
 */
export function createRequestSerializer(): (body: GenerateContentRequest) => string {
  const cache = new WeakMap<LLMContent, CachedContent>();
  const contentJson = (content: LLMContent): string => {
    if (typeof content !== 'object' || content === null) return JSON.stringify(content) ?? 'null';
    const parts = content.parts;
    const partCount = Array.isArray(parts) ? parts.length : -1;
    const cached = cache.get(content);
    if (cached && cached.parts === parts && cached.partCount === partCount) return cached.json;
    const json = JSON.stringify(content);
    cache.set(content, { parts, partCount, json });
    return json;
  };
  return (body) => {
    const { contents, ...rest } = body;
    if (!Array.isArray(contents)) return JSON.stringify(body);
    let text = '{"contents":[';
    for (let index = 0; index < contents.length; index += 1) {
      if (index > 0) text += ',';
      text += contentJson(contents[index] as LLMContent);
    }
    text += ']';
    const others = JSON.stringify(rest);
    return others === '{}' ? `${text}}` : `${text},${others.slice(1)}`;
  };
}
