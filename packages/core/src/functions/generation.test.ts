import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import type { AgentPorts } from '../ports/index.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import type { AgentEvent, AgentEventOf } from '../protocol/events.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { resume, run } from '../run/index.js';
import {
  codeExecutionTurn,
  createMemoryInteractionStore,
  createScriptedBackendClient,
  SIMULATED_IMAGE_PNG,
  functionCallChunk,
  textChunk,
  type ScriptedBackendOptions,
  type ScriptedRequest,
} from '../testing/index.js';
import { CODE_MODEL, TEXT_MODELS, WEBPAGE_CONSENT } from './index.js';

const FIXTURES = new URL('../../../../fixtures/gemini/', import.meta.url);

/** The chunks of a recorded `streamGenerateContent` SSE stream. */
async function recordedStream(name: string): Promise<GenerateContentResponse[]> {
  const text = await readFile(new URL(name, FIXTURES), 'utf8');
  return text
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => JSON.parse(line.slice(5)) as GenerateContentResponse);
}

async function recordedResponse(name: string): Promise<GenerateContentResponse> {
  return JSON.parse(await readFile(new URL(name, FIXTURES), 'utf8')) as GenerateContentResponse;
}

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const start = (text: string) => ({ segments: [{ type: 'text' as const, text }] });
const isMain = (request: ScriptedRequest) => request.body.contents[0]?.parts[0]?.text?.includes('<objective>') === true;
const ofType = <T extends AgentEvent['type']>(events: AgentEvent[], type: T): Array<AgentEventOf<T>> =>
  events.filter((event) => event.type === type) as unknown as Array<AgentEventOf<T>>;

/**
 * A main model that calls `name(args)` once and then fulfils the objective; sub-requests (the
 * generation functions' own model calls) are answered by `sub`.
 */
function agentCalling(name: string, args: JsonObject, sub: (request: ScriptedRequest) => GenerateContentResponse[], options?: ScriptedBackendOptions) {
  return createScriptedBackendClient((request) => {
    if (!isMain(request)) return sub(request);
    const answered = request.body.contents.some((content) => content.parts.some((part) => part.functionResponse?.name === name));
    return answered
      ? [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' }, { thoughtSignature: 'sig-2' })]
      : [functionCallChunk(name, args, { thoughtSignature: 'sig-1' })];
  }, options);
}

/** The function response the main model got back for `name`, from the request after the call. */
function responseSeen(requests: ScriptedRequest[], name: string): JsonObject | undefined {
  for (const request of requests.filter(isMain)) {
    for (const content of request.body.contents) {
      for (const part of content.parts) if (part.functionResponse?.name === name) return part.functionResponse.response as JsonObject;
    }
  }
  return undefined;
}

function historyOfLastMainRequest(requests: ScriptedRequest[]): LLMContent[] {
  return requests.filter(isMain).at(-1)?.body.contents ?? [];
}

describe('generate_and_execute_code replaying recorded code execution', () => {
  it('reports code and results as progress, pairs them by order, and returns only the text to the model', async () => {
    const recorded = await recordedStream('stream-code-execution-thought-parts-gemini-2.5-pro.sse');
    const backend = agentCalling('generate_and_execute_code', { prompt: 'Compute 65465-6544 * 65464-6+1.02255' }, () => recorded);
    const events = await collect(run(start('Do the maths'), { backend, store: createMemoryInteractionStore() }));

    const sub = backend.requests.find((request) => !isMain(request));
    expect(sub?.model).toBe(CODE_MODEL);
    expect(sub?.body.tools).toEqual([{ codeExecution: {} }]);

    const call = ofType(events, 'functionCall').find((event) => event.name === 'generate_and_execute_code');
    const updates = ofType(events, 'functionCallUpdate').filter((event) => event.callId === call?.callId);
    expect(updates[0]).toMatchObject({ status: 'Generating Code', opts: { expectedDurationInSec: 40 } });
    const thoughts = updates.filter((event) => event.opts?.isThought);
    expect(thoughts.map((event) => event.status?.split('\n')[0])).toEqual(['Running code:', 'Code output:', 'Running code:', 'Code output:']);
    expect(updates.at(-1)?.status).toBeNull();

    const result = ofType(events, 'functionResult').find((event) => event.callId === call?.callId);
    const executions = (result?.metadata as { codeExecution: Array<{ code: string; outcome: string; output: string }> }).codeExecution;
    expect(executions).toHaveLength(2);
    expect(executions.every((execution) => execution.outcome === 'OUTCOME_OK' && execution.output === '-428330955.97745\n')).toBe(true);
    expect(executions[1]?.code).toContain('# Calculate the expression');

    expect(responseSeen(backend.requests, 'generate_and_execute_code')).toEqual({ result: 'The result is -428,330,955.97745.' });
    const history = JSON.stringify(historyOfLastMainRequest(backend.requests));
    expect(history).not.toContain('executableCode');
    expect(history).not.toContain('codeExecutionResult');
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('tells the model the code failed, with the recorded error output', async () => {
    const recorded = await recordedResponse('generate-code-execution-failed-gemini-3-flash.json');
    const backend = agentCalling('generate_and_execute_code', { prompt: 'Divide by zero' }, () => [recorded]);
    await collect(run(start('Try it'), { backend, store: createMemoryInteractionStore() }));
    const response = responseSeen(backend.requests, 'generate_and_execute_code');
    expect(response?.error).toMatch(/^The code generator tried and failed with the following error:\n\nstdout: ok/);
    expect(response?.error).toContain('ZeroDivisionError: division by zero');
  });

  it('saves images the code produced as files and returns them as file tags', async () => {
    const png = 'iVBORw0KGgo=';
    const backend = agentCalling('generate_and_execute_code', { prompt: 'Plot it' }, () => [
      { candidates: [{ content: { role: 'model', parts: [{ executableCode: { language: 'PYTHON', code: 'plot()' } }] } }] },
      { candidates: [{ content: { role: 'model', parts: [{ codeExecutionResult: { outcome: 'OUTCOME_OK', output: '' } }] } }] },
      { candidates: [{ content: { role: 'model', parts: [{ inlineData: { mimeType: 'image/png', data: png } }, { text: 'Here is the chart.' }] }, finishReason: 'STOP' }] },
    ]);
    const events = await collect(run(start('Chart'), { backend, store: createMemoryInteractionStore() }));
    const response = responseSeen(backend.requests, 'generate_and_execute_code');
    expect(response?.result).toMatch(/^<file src="\/mnt\/[^"]+\.png" \/>Here is the chart\.$/);
    const complete = ofType(events, 'complete')[0];
    expect(complete?.result.intermediate).toEqual([expect.objectContaining({ content: { inlineData: { mimeType: 'image/png', data: png } } })]);
  });
});

describe('generate_text model choice', () => {
  it('uses flash when the model leaves the choice out, and lite for a choice it does not know', async () => {
    const seen: Array<string | undefined> = [];
    for (const args of [{ prompt: 'Hi' }, { prompt: 'Hi', model: 'ultra' }, { prompt: 'Hi', model: 'pro' }]) {
      const backend = agentCalling('generate_text', args, () => [
        { candidates: [{ content: { role: 'model', parts: [{ text: 'Hello' }] }, finishReason: 'STOP', index: 0 }] } as GenerateContentResponse,
      ]);
      await collect(run(start('Say hi'), { backend, store: createMemoryInteractionStore() }));
      seen.push(backend.requests.find((request) => !isMain(request))?.model);
    }
    expect(seen).toEqual([TEXT_MODELS.flash, TEXT_MODELS.lite, TEXT_MODELS.pro]);
  });
});

describe('generate_text replaying recorded grounding', () => {
  it('grounds in Google Search, reports the sources, and returns the text', async () => {
    const recorded = await recordedStream('stream-google-search-grounding-gemini-2.5-pro.sse');
    const backend = agentCalling('generate_text', { prompt: 'Weather in San Francisco today', model: 'flash', search_grounding: true }, () => recorded);
    const events = await collect(run(start('Weather report'), { backend, store: createMemoryInteractionStore() }));

    const sub = backend.requests.find((request) => !isMain(request));
    expect(sub?.model).toBe(TEXT_MODELS.flash);
    expect(sub?.body.tools).toEqual([{ googleSearch: {} }]);
    expect(sub?.body.generationConfig).toEqual({});

    const call = ofType(events, 'functionCall').find((event) => event.name === 'generate_text');
    const updates = ofType(events, 'functionCallUpdate').filter((event) => event.callId === call?.callId);
    expect(updates[0]).toMatchObject({ status: 'Researching', opts: { expectedDurationInSec: 30 } });
    const sourcesUpdate = updates.find((event) => event.status?.startsWith('Sources: '));
    expect(sourcesUpdate?.opts).toEqual({ isThought: true });
    const result = ofType(events, 'functionResult').find((event) => event.callId === call?.callId);
    const grounding = (result?.metadata as { grounding: { sources: Array<{ uri: string; title: string }> } }).grounding;
    expect(grounding.sources.length).toBeGreaterThan(0);
    expect(grounding.sources[0]?.uri).toMatch(/^https:\/\//);

    const text = recorded.map((chunk) => chunk.candidates?.[0]?.content?.parts?.[0]?.text ?? '').join('');
    expect(responseSeen(backend.requests, 'generate_text')).toEqual({ text });
    expect(JSON.stringify(historyOfLastMainRequest(backend.requests))).not.toContain('groundingMetadata');
  });
});

describe('generate_text with url_context behind queryConsent', () => {
  const urlCall = { prompt: 'What does https://ai.pydantic.dev announce?', model: 'flash', url_context: true };

  async function suspendForConsent() {
    const recorded = await recordedStream('stream-url-context-metadata-gemini-2.5-flash.sse');
    const backend = agentCalling('generate_text', urlCall, () => recorded);
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const events = await collect(run({ ...start('Check the site'), graph: { url: 'drive:/graph-1' } }, ports));
    return { backend, ports, events };
  }

  it('suspends with queryConsent before generating, and never emits a result for the call', async () => {
    const { backend, events } = await suspendForConsent();
    const consent = events.at(-1);
    expect(consent).toMatchObject({ type: 'queryConsent', consentType: WEBPAGE_CONSENT, scope: {}, graphUrl: 'drive:/graph-1' });
    expect(ofType(events, 'functionResult')).toEqual([]);
    expect(backend.requests.filter((request) => !isMain(request))).toEqual([]);
  });

  it('with consent: runs the URL-context generation and the model sees only its text', async () => {
    const { backend, ports, events } = await suspendForConsent();
    const interactionId = (events.at(-1) as AgentEventOf<'queryConsent'>).interactionId as string;
    const resumed = await collect(resume(interactionId, { consent: true }, ports));

    const sub = backend.requests.find((request) => !isMain(request));
    expect(sub?.body.tools).toEqual([{ urlContext: {} }]);
    expect(responseSeen(backend.requests, 'generate_text')).toEqual({ text: 'Pydantic AI Gateway is now available!' });
    const history = JSON.stringify(historyOfLastMainRequest(backend.requests));
    expect(history).not.toContain('consent');
    expect(history).not.toContain('urlContextMetadata');
    // The re-run after consent is silent: the call's events were already sent before the suspend.
    expect(ofType(resumed, 'functionCallUpdate')).toEqual([]);
    expect(resumed.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('without consent: the model is told the user refused, and nothing is fetched', async () => {
    const { backend, ports, events } = await suspendForConsent();
    const interactionId = (events.at(-1) as AgentEventOf<'queryConsent'>).interactionId as string;
    await collect(resume(interactionId, { consent: false }, ports));
    expect(responseSeen(backend.requests, 'generate_text')).toEqual({ error: 'User declined URL access consent' });
    expect(backend.requests.filter((request) => !isMain(request))).toEqual([]);
  });
});

describe('generation failures', () => {
  it('ends the run when the quota is exhausted', async () => {
    const backend = agentCalling('generate_images', { prompt: 'A cat', images: [] }, () => [], {
      executeStep: async () => ({ errorMessage: JSON.stringify({ code: 'RESOURCE_EXHAUSTED', error_reason: 'FREE_QUOTA_EXHAUSTED', message: 'Daily limit' }) }),
    });
    const events = await collect(run(start('Draw'), { backend, store: createMemoryInteractionStore() }));
    expect(events.slice(-3).map((event) => event.type)).toEqual(['finish', 'error', 'complete']);
    expect(ofType(events, 'error')[0]?.message).toContain('FREE_QUOTA_EXHAUSTED');
  });

  it('returns a safety block to the model so it can try something else', async () => {
    const backend = agentCalling('generate_images', { prompt: 'Something blocked', images: [] }, () => [], {
      executeStep: async () => ({ errorMessage: 'The image was blocked by safety filters' }),
    });
    const events = await collect(run(start('Draw'), { backend, store: createMemoryInteractionStore() }));
    expect(responseSeen(backend.requests, 'generate_images')).toEqual({ error: 'The image was blocked by safety filters' });
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
  });

  it('explains Veo support codes as safety reasons', async () => {
    const backend = agentCalling('generate_video', { prompt: 'A crowd' }, () => [], {
      executeStep: async () => ({ errorMessage: 'Video blocked. Support codes: 29310472, 62263041' }),
    });
    await collect(run(start('Film'), { backend, store: createMemoryInteractionStore() }));
    expect(responseSeen(backend.requests, 'generate_video')).toEqual({
      error: 'Video blocked. Support codes: 29310472, 62263041',
      metadata: { origin: 'server', kind: 'safety', reasons: ['celebrity', 'dangerous'], model: 'veo-3.1-generate-preview' },
    });
  });

  it('ends the run with a clear error when the main model is blocked for safety', async () => {
    const blocked = await recordedResponse('generate-finish-reason-safety-empty-content-gemini-1.5-flash.json');
    const backend = createScriptedBackendClient([[blocked]]);
    const events = await collect(run(start('Something'), { backend, store: createMemoryInteractionStore() }));
    expect(ofType(events, 'error')[0]?.message).toBe('Agent error: the response was blocked by safety filters (finishReason SAFETY)');
    expect(backend.requests).toHaveLength(1);
  });
});

describe('media the model itself returns', () => {
  it('keeps a recorded inline image as a file of the run and part of the answer', async () => {
    const recorded = await recordedStream('stream-image-output-inline-data-gemini-2.0-flash-image-TRUNCATED.sse');
    const backend = createScriptedBackendClient([recorded]);
    const events = await collect(run(start('Draw the Eiffel Tower'), { backend, store: createMemoryInteractionStore() }, { mode: 'chat' }));
    const complete = ofType(events, 'complete')[0];
    const image = { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgoAAAANSUhEUgAAAf4AAAQACAIAAACPray8AAAAiXpUWHRSYXcgcHJv' } };
    expect(complete?.result.intermediate).toEqual([{ path: expect.stringMatching(/^\/mnt\/.+\.png$/), content: image }]);
    expect(complete?.result.outcomes?.parts.at(-1)).toEqual(image);
    expect(complete?.result.outcomes?.parts[0]?.text).toMatch(/^I will generate an image of the Eiffel Tower/);
  });
});

describe('the scripted backend answers media and code out of the box', () => {
  it('gives generate_images and generate_speech_from_text canned media, recorded as steps', async () => {
    let turn = 0;
    const backend = createScriptedBackendClient(() => {
      turn += 1;
      if (turn === 1) {
        return [
          functionCallChunk('generate_images', { prompt: 'A lighthouse', images: [], file_name: 'lighthouse' }, { thoughtSignature: 's1' }),
          functionCallChunk('generate_speech_from_text', { text: 'Hello', file_name: 'hello' }),
        ];
      }
      return [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done' }, { thoughtSignature: 's2' })];
    });
    const events = await collect(run(start('Make media'), { backend, store: createMemoryInteractionStore() }));
    expect(backend.steps.map((step) => step.planStep.modelApi)).toEqual(['ai_image_tool', 'tts']);
    const files = ofType(events, 'complete')[0]?.result.intermediate ?? [];
    expect(files.map((file) => file.path)).toEqual(['/mnt/lighthouse.png', '/mnt/hello.wav']);
    expect(files[0]?.content).toEqual({ inlineData: { mimeType: 'image/png', data: SIMULATED_IMAGE_PNG } });
    expect(responseSeen(backend.requests, 'generate_speech_from_text')).toEqual({ speech: '/mnt/hello.wav' });
  });

  it('plays a scripted code-execution turn through generate_and_execute_code', async () => {
    const backend = agentCalling('generate_and_execute_code', { prompt: 'Add' }, () => codeExecutionTurn('print(2 + 2)', '4\n', 'The sum is 4.'));
    await collect(run(start('Add'), { backend, store: createMemoryInteractionStore() }));
    expect(responseSeen(backend.requests, 'generate_and_execute_code')).toEqual({ result: 'The sum is 4.' });
  });
});

describe('generation when the backend fails or misbehaves', () => {
  const TOKEN = 'ya29.a0-user-access-token';
  /** What the model is told for one call of `name`, the sub-model or the step answering with `fail`. */
  async function seen(name: string, args: JsonObject, sub: (request: ScriptedRequest) => GenerateContentResponse[], options?: ScriptedBackendOptions) {
    const backend = agentCalling(name, args, sub, options);
    const events = await collect(run(start('Go'), { backend, store: createMemoryInteractionStore() }));
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    return { response: responseSeen(backend.requests, name), backend, events };
  }
  const failing = (error: unknown) => () => {
    throw error;
  };

  it('tells the model what failed (timeouts, 4xx, 5xx), with no token, key or server path in it', async () => {
    const failures: Array<[unknown, string]> = [
      [new AgentError('TIMEOUT', 'Gemini did not answer within 120 s'), 'Gemini did not answer within 120 s'],
      [new AgentError('BAD_REQUEST', 'Gemini API error 400: Request contains an invalid argument.'), 'Gemini API error 400: Request contains an invalid argument.'],
      [new AgentError('UPSTREAM_ERROR', `Gemini API error 503: overloaded (https://gemini.test/v1?key=AIzaSyA-1234567890abcdefghij and Bearer ${TOKEN})`), 'Gemini API error 503: overloaded (https://gemini.test/v1?key=[redacted] and Bearer [redacted])'],
      [new Error(`EACCES: permission denied, open '/srv/agent/keys/service-account.json' with authorization: ${TOKEN} set`), "EACCES: permission denied, open '[path]' with authorization: [redacted] set"],
      [new TypeError("Cannot read properties of undefined (reading 'x') at C:\\deploy\\agent\\server.js:10"), "Cannot read properties of undefined (reading 'x') at [path]"],
    ];
    for (const [error, told] of failures) {
      expect((await seen('generate_text', { prompt: 'Hi', model: 'flash' }, failing(error))).response, told).toEqual({ error: told });
      const media = await seen('generate_images', { prompt: 'A cat', images: [] }, () => [], { executeStep: async () => Promise.reject(error) });
      expect(media.response, told).toEqual({ error: told });
    }
  });

  it('answers a malformed model stream without a TypeError, and a malformed step result naming the field', async () => {
    for (const chunk of [{ candidates: [{ content: { parts: 5 } }] }, { candidates: 'x' }, { candidates: [null] }, { candidates: [{ content: { parts: [null, 7] } }] }]) {
      const { response } = await seen('generate_text', { prompt: 'Hi', model: 'flash' }, () => [chunk as unknown as GenerateContentResponse]);
      expect(response, JSON.stringify(chunk)).toEqual({ error: 'No text was generated. Please try again' });
    }
    const grounded = {
      candidates: [
        {
          content: { role: 'model', parts: [{ text: 'Grounded answer' }] },
          groundingMetadata: { groundingChunks: [null, { web: null }, { web: { uri: 'https://example.com', title: 5 } }], webSearchQueries: ['q'] },
          urlContextMetadata: { urlMetadata: [null, 'x'] },
        },
      ],
    };
    const { response: answered } = await seen('generate_text', { prompt: 'Hi', model: 'flash', search_grounding: true }, () => [grounded as unknown as GenerateContentResponse]);
    expect(answered).toEqual({ text: 'Grounded answer' });
    const answers: Array<[unknown, string]> = [
      [null, 'the answer is not an object'],
      [{ executionOutputs: { generated_image: { chunks: 'x' } } }, 'executionOutputs.generated_image.chunks is not a list'],
      [{ executionOutputs: { generated_image: { chunks: [null] } } }, 'executionOutputs.generated_image.chunks[0] is not a chunk with a string mimetype and data'],
      [{ executionOutputs: { generated_image: { chunks: [{ mimetype: 'image/png', data: 'AAAA' }, { mimetype: 5, data: 1 }] } } }, 'executionOutputs.generated_image.chunks[1] is not a chunk'],
    ];
    for (const [answer, field] of answers) {
      const { response, events } = await seen('generate_images', { prompt: 'A cat', images: [] }, () => [], { executeStep: async () => answer as never });
      expect(response?.error, JSON.stringify(answer)).toContain(`The media backend answered with something that is not a step result: ${field}`);
      expect(ofType(events, 'complete')[0]?.result.intermediate).toBeUndefined();
    }
  });

  it('refuses step chunks whose data is not base64 or whose type is not a MIME type, and saves nothing of them', async () => {
    const field = 'executionOutputs.generated_image.chunks[0]';
    const answers: Array<[unknown, string]> = [
      [{ mimetype: 'image/png', data: 'data:image/png;base64,AAAA' }, `${field} has data that is not base64`],
      [{ mimetype: 'image/png', data: 'not base64!' }, `${field} has data that is not base64`],
      [{ mimetype: 'text/html', data: '<b>raw</b>' }, `${field} has data that is not base64`],
      [{ mimetype: 'text/gcs-path/image/png', data: '%%%' }, `${field} has data that is not base64`],
      [{ mimetype: 'text/html,<script>alert(1)</script>#', data: 'AAAA' }, `${field} has a mimetype that is not a MIME type`],
      [{ mimetype: 'image/png,<svg onload=alert(1)>/storedData', data: 'blob-1' }, `${field} has a mimetype that is not a MIME type`],
      [{ mimetype: 'image/png/storedData', data: '' }, `${field} names no blob`],
      [{ mimetype: 'text/gcs-path/image/png', data: 'Z3M6Ly9idWNrZXQv' }, `${field} names no blob`],
    ];
    for (const [chunk, told] of answers) {
      const { response, events } = await seen('generate_images', { prompt: 'A cat', images: [] }, () => [], {
        executeStep: async () => ({ executionOutputs: { generated_image: { chunks: [chunk as never] } } }),
      });
      expect(response, JSON.stringify(chunk)).toEqual({ error: `The media backend answered with something that is not a step result: ${told}` });
      expect(ofType(events, 'complete')[0]?.result.intermediate, JSON.stringify(chunk)).toBeUndefined();
    }
    // A model name that cannot be read is left out; the image is still the user's.
    const { response } = await seen('generate_images', { prompt: 'A cat', images: [] }, () => [], {
      executeStep: async () => ({
        executionOutputs: { generated_image: { chunks: [{ mimetype: 'text/plain', data: '%%', substreamName: 'executed-model' }, { mimetype: 'image/png', data: 'AAAA' }] } },
      }),
    });
    expect(response).toEqual({ images: ['/mnt/image1.png'] });
  });

  it('hands back at most 512 Ki characters of a huge generated text, keeping all of it in a file', async () => {
    const text = `begin ${'y'.repeat(3 * 1024 * 1024)} end`;
    const { response, events } = await seen('generate_text', { prompt: 'Write a lot', model: 'flash' }, () => [textChunk(text)]);
    const shown = String(response?.text);
    expect(shown.length).toBeLessThan(512 * 1024 + 300);
    expect(shown).toMatch(/^<content src="\/mnt\/text1\.md">\nbegin y+\n\[… cut: \d+ more characters of 3145738\. The whole text is in \/mnt\/text1\.md\.\]<\/content>$/);
    expect(ofType(events, 'complete')[0]?.result.intermediate).toEqual([{ path: '/mnt/text1.md', content: { text } }]);
  });

  it('cuts a huge error to its start and end, where a traceback keeps its cause', async () => {
    const traceback = `Traceback (most recent call last):\n${'  File "<string>", line 1, in <module>\n'.repeat(50_000)}ZeroDivisionError: division by zero`;
    const { response } = await seen('generate_and_execute_code', { prompt: 'Divide' }, () => codeExecutionTurn('1/0', traceback, '').map((chunk) => {
      const part = chunk.candidates?.[0]?.content?.parts?.[0];
      if (part?.codeExecutionResult) part.codeExecutionResult.outcome = 'OUTCOME_FAILED';
      return chunk;
    }));
    const error = String(response?.error);
    expect(error.length).toBeLessThan(4100);
    expect(error).toMatch(/^The code generator tried and failed with the following error:\n\nTraceback/);
    expect(error).toMatch(/characters left out …\n[\s\S]*ZeroDivisionError: division by zero$/);
    const huge = await seen('generate_text', { prompt: 'Hi', model: 'flash' }, failing(new AgentError('MODEL_ERROR', 'e'.repeat(1024 * 1024))));
    expect(String(huge.response?.error).length).toBeLessThan(4100);
  });

  it('refuses a file_name no file can have before the generator runs', async () => {
    for (const [name, args] of [
      ['generate_images', { prompt: 'A cat', images: [], file_name: '..\u2215..\u2215etc' }],
      ['generate_video', { prompt: 'A cat', file_name: 'clip\u0000' }],
      ['generate_speech_from_text', { text: 'Hi', file_name: '%2e%2e' }],
      ['generate_music_from_text', { prompt: 'Calm', file_name: 'system/chat_log' }],
    ] as const) {
      const { response, backend } = await seen(name, args, () => []);
      expect(response?.error, name).toMatch(/^file_name: "/);
      if (name !== 'generate_music_from_text') expect(backend.steps, name).toEqual([]);
    }
  });

  it('says once why generated media could not all be saved, and which were', async () => {
    const chunks = Array.from({ length: 3000 }, () => ({ mimetype: 'image/png', data: 'AAAA' }));
    const { response } = await seen('generate_images', { prompt: 'Many cats', images: [] }, () => [], {
      executeStep: async () => ({ executionOutputs: { generated_image: { chunks } } }),
    });
    const error = String(response?.error);
    expect(error.length).toBeLessThan(4100);
    expect(error.match(/There are already 1000 files/g)).toHaveLength(1);
    expect(error).toContain('(1000 of 3000 saved: /mnt/image1.png, /mnt/image2.png');
  });
});
