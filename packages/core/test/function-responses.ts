import type { JsonObject } from '../src/protocol/content.js';
import type { ScriptedRequest } from '../src/testing/index.js';

/** The function responses the model got in a request, in order, by function name. */
export function responsesIn(request: ScriptedRequest | undefined): Array<{ name: string; response: JsonObject }> {
  return (request?.body.contents ?? []).flatMap((content) =>
    content.parts.flatMap((part) => (part.functionResponse ? [part.functionResponse as { name: string; response: JsonObject }] : [])),
  );
}

/** Whether a request already carries a function response for `name`. */
export const answered = (request: ScriptedRequest, name: string): boolean => responsesIn(request).some((response) => response.name === name);
