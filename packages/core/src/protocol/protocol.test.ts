import { describe, expect, it } from 'vitest';
import { isAgentError } from '../errors/index.js';
import { AGENT_EVENT_TYPES, type AgentEvent, isSuspendEvent } from './events.js';
import { parseAgentRequestBody, parseAgentRequestText } from './requests.js';
import { fromWireEvent, toWireEvent, toWireEventJson } from './wire.js';

/** JSON with object keys sorted at every depth, for byte comparison independent of key order. */
function normalised(value: unknown): string {
  const sort = (input: unknown): unknown => {
    if (Array.isArray(input)) return input.map(sort);
    if (input && typeof input === 'object') {
      return Object.fromEntries(Object.keys(input).sort().map((key) => [key, sort((input as Record<string, unknown>)[key])]));
    }
    return input;
  };
  return JSON.stringify(sort(value));
}

// Event streams of typical runs as the Opal protocol sends them: a question and its answer, a
// consent, a choice, and failures; bodies are small objects.
const TRANSCRIPTS: Record<string, string[]> = {
  'A.1 request 1': [
    '{"sendRequest":{"model":"gemini-3-flash-preview","body":{"contents":[]}}}',
    '{"thought":{"text":"thinking"}}',
    '{"functionCall":{"callId":"c1","name":"system_write_file","args":{"file_name":"a.md","content":"hello"},"icon":"edit","title":"Writing to file"}}',
    '{"functionCall":{"callId":"c2","name":"chat_request_user_input","args":{"user_message":"Name?","input_type":"text"},"icon":"chat_bubble","title":"Asking the user"}}',
    '{"usageMetadata":{"metadata":{"promptTokenCount":10}}}',
    '{"functionResult":{"callId":"c1","content":{"parts":[{"functionResponse":{"name":"system_write_file","response":{"file_path":"/mnt/a.md"}}}]}}}',
    '{"waitForInput":{"requestId":"r1","prompt":{"parts":[{"text":"Name?"}],"role":"user"},"inputType":"edit_note","interactionId":"i1"}}',
  ],
  'A.1 request 2': [
    '{"sendRequest":{"model":"gemini-3-flash-preview","body":{"contents":[]}}}',
    '{"functionCall":{"callId":"c3","name":"system_objective_fulfilled","args":{"objective_outcome":"Done <file src=\\"/mnt/a.md\\" />","href":"/"},"icon":"check_circle","title":"Returning final outcome"}}',
    '{"functionResult":{"callId":"c3","content":{"parts":[{"functionResponse":{"name":"system_objective_fulfilled","response":{}}}]}}}',
    '{"turnComplete":{}}',
    '{"finish":{}}',
    '{"complete":{"result":{"success":true,"outcomes":{"parts":[{"text":"Done \\nhello"}],"role":"user"},"intermediate":[{"path":"/mnt/image1.png","content":{"inlineData":{"data":"AAA","mimeType":"image/png"}}},{"path":"/mnt/a.md","content":{"text":"hello"}}]}}}',
  ],
  'A.3 consent': [
    '{"functionCall":{"callId":"c1","name":"generate_text","args":{"prompt":"read it","url_context":true},"icon":"text_analysis","title":"Generating Text"}}',
    '{"queryConsent":{"requestId":"r1","consentType":"GET_ANY_WEBPAGE","scope":{},"graphUrl":"drive:/g1","interactionId":"i1"}}',
  ],
  'A.4 choices': [
    '{"waitForChoice":{"requestId":"r1","prompt":{"parts":[{"text":"Pick"}],"role":"user"},"choices":[{"id":"a","content":{"parts":[{"text":"A"}],"role":"user"}},{"id":"b","content":{"parts":[{"text":"B"}],"role":"user"}}],"selectionMode":"single","layout":"row","interactionId":"i1"}}',
  ],
  'A.5 failures': [
    '{"finish":{}}',
    '{"error":{"message":"Agent error: <msg>"}}',
    '{"complete":{"result":{"success":false}}}',
    '{"paused":{"message":"busy","statusCode":503,"interactionId":"p1"}}',
    '{"error":{"message":"Unknown interaction ID: nope"}}',
  ],
};

describe('Appendix A transcripts', () => {
  for (const [name, lines] of Object.entries(TRANSCRIPTS)) {
    it(`${name}: every event parses and re-serialises to the same JSON`, () => {
      for (const line of lines) {
        const event = fromWireEvent(JSON.parse(line));
        expect(normalised(JSON.parse(JSON.stringify(toWireEvent(event))))).toBe(normalised(JSON.parse(line)));
      }
    });
  }

  it('A.1 and A.2 request bodies parse in both spellings to the same start', () => {
    const envelope = parseAgentRequestBody({
      start: {
        kind: 'content',
        segments: [
          { textSegment: { text: 'Say hi ' } },
          { assetSegment: { title: 'pic', content: { parts: [{ inlineData: { mimeType: 'image/png', data: 'AAA' } }] } } },
        ],
        flags: { useNotebookLM: false, googleOne: false },
        graph: { url: 'drive:/g1', title: 'T' },
      },
      accessToken: 'ya29.x',
    });
    const flat = parseAgentRequestBody({
      segments: [
        { type: 'text', text: 'Say hi ' },
        { type: 'asset', title: 'pic', content: { parts: [{ inlineData: { mimeType: 'image/png', data: 'AAA' } }] } },
      ],
      flags: { useNotebookLM: false, googleOne: false },
      graph: { url: 'drive:/g1', title: 'T' },
      accessToken: 'ya29.x',
    });
    expect(envelope).toEqual(flat);
    expect(envelope).toMatchObject({
      kind: 'start',
      accessToken: 'ya29.x',
      start: { segments: [{ type: 'text', text: 'Say hi ' }, { type: 'asset', title: 'pic' }] },
    });
  });

  it('parses resume bodies in the envelope and the flat form', () => {
    const response = { input: { role: 'user', parts: [{ text: 'Bob' }] } };
    expect(parseAgentRequestBody({ resume: { interactionId: 'i1', response }, accessToken: 'ya29.x' })).toEqual({
      kind: 'resume',
      resume: { interactionId: 'i1', response },
      accessToken: 'ya29.x',
    });
    expect(parseAgentRequestBody({ interactionId: 'i1', response })).toEqual({
      kind: 'resume',
      resume: { interactionId: 'i1', response },
    });
  });
});

const SAMPLES: AgentEvent[] = [
  { type: 'start', objective: { role: 'user', parts: [{ text: 'Go' }] } },
  { type: 'thought', text: 'hmm' },
  { type: 'functionCall', callId: 'c', name: 'f', args: { a: 1 }, icon: 'edit', title: 'T' },
  { type: 'functionCallUpdate', callId: 'c', status: null },
  { type: 'functionResult', callId: 'c', content: { parts: [{ functionResponse: { name: 'f', response: {} } }] } },
  { type: 'content', content: { role: 'model', parts: [{ text: 'x', thoughtSignature: 'sig' }] } },
  { type: 'turnComplete' },
  { type: 'sendRequest', model: 'm', body: { contents: [] } },
  { type: 'waitForInput', requestId: 'r', prompt: { parts: [{ text: '?' }] }, inputType: 'asterisk', skipLabel: 'Skip', interactionId: 'i' },
  {
    type: 'waitForChoice',
    requestId: 'r',
    prompt: { parts: [{ text: '?' }] },
    choices: [{ id: 'a', content: { parts: [{ text: 'A' }] } }],
    selectionMode: 'multiple',
    layout: 'grid',
    noneOfTheAboveLabel: 'None',
  },
  { type: 'readGraph', requestId: 'r' },
  { type: 'inspectNode', requestId: 'r', nodeId: 'n' },
  { type: 'applyEdits', requestId: 'r', label: 'L', edits: [{ type: 'addnode' }] },
  { type: 'queryConsent', requestId: 'r', consentType: 'GET_ANY_WEBPAGE', scope: {}, graphUrl: 'drive:/g' },
  { type: 'graphEdit', edits: [], label: 'L' },
  { type: 'complete', result: { success: true, intermediate: [{ path: '/mnt/a.md', content: { text: 'a' } }] } },
  { type: 'error', message: 'bad' },
  { type: 'finish' },
  { type: 'subagentAddJson', callId: 'c', title: 'T', data: null },
  { type: 'subagentError', callId: 'c', error: { $error: 'boom' } },
  { type: 'subagentFinish', callId: 'c' },
  { type: 'usageMetadata', metadata: { promptTokenCount: 3, totalTokenCount: 5 } },
  { type: 'paused', message: 'busy', statusCode: 503, interactionId: 'i' },
  { type: 'subagentAddContent', callId: 'c', title: 'T', content: { parts: [{ text: 'x' }] }, icon: 'i' },
];

describe('toWireEvent / fromWireEvent', () => {
  it('has a sample of every one of the 24 event types', () => {
    expect(AGENT_EVENT_TYPES).toHaveLength(24);
    expect(new Set(SAMPLES.map((event) => event.type))).toEqual(new Set(AGENT_EVENT_TYPES));
  });

  it.each(SAMPLES.map((event) => [event.type, event] as const))('%s round-trips through JSON', (_type, event) => {
    const wire = JSON.parse(JSON.stringify(toWireEvent(event)));
    expect(Object.keys(wire)).toEqual([event.type]);
    expect(fromWireEvent(wire)).toEqual(event);
  });

  it.each(SAMPLES.map((event) => [event.type, event] as const))('%s is written by toWireEventJson as JSON.stringify(toWireEvent) writes it', (_type, event) => {
    expect(toWireEventJson(event)).toBe(JSON.stringify(toWireEvent(event)));
  });

  it('omits undefined fields and always sends functionCallUpdate.status, in toWireEventJson too', () => {
    expect(toWireEventJson({ type: 'functionCall', callId: 'c', name: 'f', args: {}, icon: undefined, title: 'F' })).toBe(
      '{"functionCall":{"callId":"c","name":"f","args":{},"title":"F"}}',
    );
    expect(toWireEventJson({ type: 'functionCallUpdate', callId: 'c' } as never)).toBe('{"functionCallUpdate":{"callId":"c","status":null}}');
  });

  it('always sends subagentAddJson.data, as null when the event has none (spec 2.6)', () => {
    const event = { type: 'subagentAddJson', callId: 'c', title: 'T', data: undefined, icon: 'i' } as const;
    expect(toWireEventJson(event)).toBe('{"subagentAddJson":{"callId":"c","title":"T","icon":"i","data":null}}');
    expect(JSON.parse(JSON.stringify(toWireEvent({ type: 'subagentAddJson', callId: 'c', title: 'T' })))).toEqual({
      subagentAddJson: { callId: 'c', title: 'T', data: null },
    });
    expect(toWireEventJson({ type: 'subagentAddJson', callId: 'c', title: 'T', data: 0 })).toBe('{"subagentAddJson":{"callId":"c","title":"T","data":0}}');
  });

  it('writes fields outside the protocol, functions, dates and empty payloads as JSON.stringify does', () => {
    const events = [
      { type: 'thought', text: 'a "quoted"\n\u2028 line', 'x":1,"y': 'escaped key', 'ünï': 1 },
      { type: 'thought', text: 'only some', skip: () => 1, symbol: Symbol('s'), gone: undefined, when: new Date(0) },
      { type: 'turnComplete' },
      { type: 'functionCallUpdate', callId: 'c', extra: [undefined, () => 1] },
      { type: 'functionCallUpdate', status: undefined },
    ] as never[];
    for (const event of events) {
      const json = toWireEventJson(event);
      expect(json).toBe(JSON.stringify(toWireEvent(event)));
      expect(() => JSON.parse(json)).not.toThrow();
    }
    expect(JSON.parse(toWireEventJson(events[0] as never))).toEqual({
      thought: { text: 'a "quoted"\n\u2028 line', 'x":1,"y': 'escaped key', 'ünï': 1 },
    });
  });

  it('writes a thought as JSON.stringify does, whether it is only its text or carries more', () => {
    const inherited = Object.assign(Object.create({ inheritedNote: 'from the prototype' }) as object, { type: 'thought', text: 'hi' });
    const events = [
      { type: 'thought', text: 'plain' },
      { text: 'type written second', type: 'thought' },
      { type: 'thought', text: 'quotes " and \\ and \n and \u2028 and \u{1F600} and \ud800' },
      { type: 'thought', text: '' },
      { type: 'thought', text: 'with more', more: { a: 1 } },
      { type: 'thought', text: 'with a gap', gone: undefined },
      { type: 'thought', text: 42 },
      { type: 'thought', text: { nested: true } },
      { type: 'thought' },
      inherited,
    ] as never[];
    for (const event of events) {
      const json = toWireEventJson(event);
      expect(json).toBe(JSON.stringify(toWireEvent(event)));
      expect(() => JSON.parse(json)).not.toThrow();
    }
    expect(toWireEventJson(events[0] as never)).toBe('{"thought":{"text":"plain"}}');
    expect(JSON.parse(toWireEventJson(inherited as never))).toEqual({ thought: { text: 'hi', inheritedNote: 'from the prototype' } });
  });

  it('writes valid JSON for an event whose type is not one of the protocol names', () => {
    const event = { type: 'x"}, "injected": {"', text: 'hi' } as never;
    const json = toWireEventJson(event);
    expect(JSON.parse(json)).toEqual({ 'x"}, "injected": {"': { text: 'hi' } });
    expect(json).toBe(JSON.stringify(toWireEvent(event)));
  });

  it('omits undefined fields and always sends functionCallUpdate.status', () => {
    expect(toWireEvent({ type: 'functionCall', callId: 'c', name: 'f', args: {}, icon: undefined })).toEqual({
      functionCall: { callId: 'c', name: 'f', args: {} },
    });
    expect(JSON.stringify(toWireEvent({ type: 'functionCallUpdate', callId: 'c', status: null }))).toBe(
      '{"functionCallUpdate":{"callId":"c","status":null}}',
    );
  });

  it('keeps part fields it does not know, byte for byte', () => {
    const line = '{"content":{"content":{"role":"model","parts":[{"text":"","thoughtSignature":"c2ln","futureSignature":{"v":[1,2]}}]}}}';
    expect(JSON.stringify(toWireEvent(fromWireEvent(JSON.parse(line))))).toBe(line);
  });

  it('names the path of a bad field and refuses unknown types', () => {
    expect(() => fromWireEvent({ functionCall: { callId: 1, name: 'f', args: {} } })).toThrow(/^functionCall\.callId: /);
    expect(() => fromWireEvent({ bogus: {} })).toThrow(/unknown event type "bogus"/);
    expect(() => fromWireEvent({ thought: { text: 'a' }, finish: {} })).toThrow(/exactly one event key/);
  });

  it('keeps the event type its key names when the payload carries a field called type', () => {
    const event = fromWireEvent(JSON.parse('{"thought":{"text":"a","type":"complete"}}'));
    expect(event.type).toBe('thought');
    expect(fromWireEvent({ functionCallUpdate: { type: 'finish', callId: 'c', status: null } })).toMatchObject({ type: 'functionCallUpdate', callId: 'c' });
  });

  it('keeps a payload field called __proto__ a field, as toWireEventJson writes it, and inherits nothing from it', () => {
    const line = '{"error":{"message":"m","__proto__":{"code":"RATE_LIMITED"}}}';
    const event = fromWireEvent(JSON.parse(line));
    const wire = toWireEvent(event);
    expect(JSON.stringify(wire)).toBe(line);
    expect(toWireEventJson(event)).toBe(line);
    expect(Object.getPrototypeOf(wire.error)).toBe(Object.prototype);
    expect(wire.error?.code).toBeUndefined();
  });

  it('quotes at most 80 characters of an unknown event type in its error', () => {
    const type = 'x'.repeat(100_000);
    let message = '';
    try {
      fromWireEvent({ [type]: {} });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/unknown event type "x{80}\.\.\."$/);
    expect(message.length).toBeLessThan(250);
  });

  it('tells suspend events apart', () => {
    expect(SAMPLES.filter(isSuspendEvent).map((event) => event.type)).toEqual([
      'waitForInput',
      'waitForChoice',
      'readGraph',
      'inspectNode',
      'applyEdits',
      'queryConsent',
    ]);
  });
});

describe('invalid request bodies', () => {
  const failure = (run: () => unknown): { message: string; path: unknown } => {
    try {
      run();
    } catch (error) {
      if (!isAgentError(error)) throw error;
      expect(error.code).toBe('BAD_REQUEST');
      expect(error.status).toBe(400);
      return { message: error.message, path: error.details?.path };
    }
    throw new Error('expected the body to be refused');
  };

  it('refuses text that is not JSON', () => {
    expect(failure(() => parseAgentRequestText('{"start":')).message).toMatch(/^\(body\): not valid JSON/);
    expect(failure(() => parseAgentRequestText('')).message).toMatch(/^\(body\): expected a JSON object/);
  });

  it('names the field with the wrong type', () => {
    expect(failure(() => parseAgentRequestBody({ start: { segments: 'hi' } }))).toMatchObject({
      message: expect.stringMatching(/^start\.segments: /),
      path: 'start.segments',
    });
    expect(failure(() => parseAgentRequestBody({ start: { segments: [{ textSegment: { text: 5 } }] } })).message).toMatch(
      /^start\.segments\[0\]\.textSegment\.text: /,
    );
    expect(failure(() => parseAgentRequestBody({ resume: { interactionId: 7 } })).message).toMatch(/^resume\.interactionId: /);
    expect(failure(() => parseAgentRequestBody({ accessToken: 5, segments: [] })).message).toMatch(/^accessToken: expected string/);
    expect(failure(() => parseAgentRequestBody([1, 2])).message).toMatch(/^\(root\): expected a JSON object, got array/);
  });

  it('refuses a start without segments', () => {
    expect(failure(() => parseAgentRequestBody({ start: { flags: {} } }))).toMatchObject({
      message: expect.stringMatching(/^start\.segments: required/),
      path: 'start.segments',
    });
    expect(failure(() => parseAgentRequestBody({ start: { segments: [] } })).message).toBe("start.segments: empty: Missing 'segments' in request body");
  });

  it('refuses an unknown segment type, and leaves out segments of no kind and inputs without content, as the reference does', () => {
    expect(failure(() => parseAgentRequestBody({ start: { segments: [{ type: 'text', text: 'a' }, { type: 'bogus' }] } }))).toMatchObject({
      message: 'start.segments[1].type: Unknown segment type: bogus',
      path: 'start.segments[1].type',
    });
    // A newer client's kind, an empty type and an input with no content are left out; the rest runs.
    const body = parseAgentRequestBody({
      segments: [{ videoSegment: {} }, { type: '' }, { inputSegment: { title: 'x' } }, { type: 'input', content: { parts: [] } }, { textSegment: { text: 'Hi' } }],
    });
    expect(body).toEqual({ kind: 'start', start: { segments: [{ type: 'text', text: 'Hi' }] } });
    // With nothing left, the request is refused.
    expect(failure(() => parseAgentRequestBody({ segments: [{ videoSegment: {} }] }))).toMatchObject({
      message: 'segments: no segment of a kind this server knows (text, asset, input or tool)',
      path: 'segments',
    });
    // An asset needs its content.
    expect(failure(() => parseAgentRequestBody({ segments: [{ assetSegment: { title: 'pic' } }] }))).toMatchObject({
      message: 'segments[0].assetSegment.content: Invalid asset format: an asset needs content with at least one part',
    });
  });
});
