import type { GenerateContentRequest, GenerateContentResponse } from '../protocol/gemini.js';
import type { ScriptedRequest, ScriptedTurn } from './scripted-backend-client.js';

/** A Gemini-compatible endpoint that plays a script, as a Web handler, plus the requests it saw. */
export interface ScriptedGemini {
  fetch(request: Request): Promise<Response>;
  /** Every model request, in order. */
  readonly requests: ScriptedRequest[];
}

/**
 * A Gemini-compatible HTTP endpoint (`POST .../models/<model>:streamGenerateContent`, answered as
 * SSE) that plays a script, the way {@link createScriptedBackendClient} does in-process: a list of
 * turns, or one function of the request for every turn. Serve it on loopback and point a
 * server's Gemini base URL at it to test that server over real HTTP with a model you control.
 * Running out of script answers 500 with the Gemini error envelope.
 *
 * @example
 * ```ts
 * const gemini = createScriptedGemini([[functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Hi' })]]);
 * const server = await serve({ handler: (request) => gemini.fetch(request) });
 * // GEMINI_BASE_URL=`${server.url}/v1beta`
 * ```
 */
export function createScriptedGemini(
  script: ScriptedTurn[] | ((request: ScriptedRequest) => GenerateContentResponse[] | Promise<GenerateContentResponse[]>),
): ScriptedGemini {
  const requests: ScriptedRequest[] = [];
  return {
    requests,
    async fetch(request) {
      const url = new URL(request.url);
      const match = /\/models\/([^/:]+):streamGenerateContent$/.exec(url.pathname);
      if (request.method !== 'POST' || !match) {
        return json(404, { error: { code: 404, message: `The scripted Gemini has no ${request.method} ${url.pathname}`, status: 'NOT_FOUND' } });
      }
      let body: GenerateContentRequest;
      try {
        body = (await request.json()) as GenerateContentRequest;
      } catch {
        return json(400, { error: { code: 400, message: 'Invalid JSON payload received.', status: 'INVALID_ARGUMENT' } });
      }
      const scripted: ScriptedRequest = { model: decodeURIComponent(match[1] as string), body, index: requests.length };
      requests.push(scripted);
      const turn = typeof script === 'function' ? script : script[scripted.index];
      if (turn === undefined) {
        return json(500, { error: { code: 500, message: `The scripted Gemini has no turn ${scripted.index + 1}`, status: 'INTERNAL' } });
      }
      const chunks = endedAnswer(typeof turn === 'function' ? await turn(scripted) : turn);
      const text = chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\r\n\r\n`).join('');
      return new Response(text, { status: 200, headers: { 'content-type': 'text/event-stream' } });
    },
  };
}

function json(status: number, value: unknown): Response {
  return new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json; charset=UTF-8' } });
}

/**
 * The turn's chunks with a `finishReason` on the last one, as Gemini ends every answer; a turn
 * that sets its own, or reports a blocked prompt, is played as it is.
 */
function endedAnswer(chunks: GenerateContentResponse[]): GenerateContentResponse[] {
  const last = chunks.at(-1);
  const candidate = last?.candidates?.[0];
  if (!last || !candidate || last.promptFeedback?.blockReason !== undefined) return chunks;
  if (chunks.some((chunk) => chunk.candidates?.some((each) => each.finishReason !== undefined))) return chunks;
  return [...chunks.slice(0, -1), { ...last, candidates: [{ ...candidate, finishReason: 'STOP' }, ...(last.candidates?.slice(1) ?? [])] }];
}
