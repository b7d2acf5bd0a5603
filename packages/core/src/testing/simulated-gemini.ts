import type { JsonObject, LLMContent, Part } from '../protocol/content.js';
import type { GenerateContentRequest, GenerateContentResponse } from '../protocol/gemini.js';
import type { ExecuteStepRequest } from '../ports/index.js';
import { simulatedExecuteStep } from './simulated-media.js';

/** Options of {@link createSimulatedGemini}. */
export interface SimulatedGeminiOptions {
  /** Pause between streamed chunks, so a client sees the stream arrive. Default 0. */
  chunkDelayMs?: number;
  /**
   * How many of the latest requests `requests` keeps (older ones are dropped). Default 100; a
   * long-lived server (`pnpm dev`) passes 0 so nothing of a run outlives it.
   */
  keepRequests?: number;
}

/** A Gemini-compatible endpoint as a Web handler, plus the latest requests it saw. */
export interface SimulatedGemini {
  fetch(request: Request): Promise<Response>;
  /** The latest requests, oldest first (at most `keepRequests`). */
  readonly requests: Array<{ model: string; body: GenerateContentRequest }>;
}

const SIGNATURE_PREFIX = 'c2ltOnNpZ25lZDo';

/**
 * A deterministic stand-in for the Gemini API, speaking the real `streamGenerateContent` SSE
 * format: it thinks, writes a file, asks for the user's name when the objective asks for input,
 * offers choices when asked to choose, draws a picture (`generate_images`) or runs code
 * (`generate_and_execute_code`, answered with a code-execution turn) when the objective asks, keeps
 * a note of the run in a `memory` sheet and reads its notes back when the objective mentions
 * remembering and the memory functions are offered (a memory tool with a Drive client), and
 * fulfils the objective with the results. It also answers `/v1beta1/executeStep` like the media
 * backend, with a generated picture or a short tone. Like Gemini 3
 * it signs the first function call of each turn and answers 400, with the real error text, to a
 * history that lost a signature.
 *
 * @example
 * ```ts
 * const gemini = createSimulatedGemini();
 * const backend = createGeminiBackendClient({ apiKey: 'simulated', fetch: (input, init) => gemini.fetch(new Request(input, init)) });
 * ```
 */
export function createSimulatedGemini(options: SimulatedGeminiOptions = {}): SimulatedGemini {
  const requests: SimulatedGemini['requests'] = [];
  return {
    requests,
    async fetch(request) {
      const url = new URL(request.url);
      if (request.method === 'POST' && url.pathname.endsWith('/v1beta1/executeStep')) return executeStep(request);
      const match = /\/models\/([^/:]+):streamGenerateContent$/.exec(url.pathname);
      if (request.method !== 'POST' || !match) {
        return json(404, { error: { code: 404, message: `Simulated Gemini has no ${request.method} ${url.pathname}`, status: 'NOT_FOUND' } });
      }
      let body: GenerateContentRequest;
      try {
        body = (await request.json()) as GenerateContentRequest;
      } catch {
        return json(400, { error: { code: 400, message: 'Invalid JSON payload received.', status: 'INVALID_ARGUMENT' } });
      }
      const model = decodeURIComponent(match[1] as string);
      const keep = options.keepRequests ?? 100;
      if (keep > 0) {
        requests.push({ model, body });
        if (requests.length > keep) requests.splice(0, requests.length - keep);
      }
      const lost = findLostSignature(body.contents ?? []);
      if (lost) {
        return json(400, {
          error: {
            code: 400,
            message: `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${lost.name}\` , position ${lost.position}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`,
            status: 'INVALID_ARGUMENT',
          },
        });
      }
      const chunks = decide(body, model);
      const encoder = new TextEncoder();
      const delay = options.chunkDelayMs ?? 0;
      const stream = new ReadableStream<Uint8Array>({
        async start(controller) {
          for (const chunk of chunks) {
            if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
            controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\r\n\r\n`));
          }
          controller.close();
        },
      });
      return new Response(stream, { status: 200, headers: { 'content-type': 'text/event-stream' } });
    },
  };
}

function json(status: number, value: unknown): Response {
  return new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json; charset=UTF-8' } });
}

function findLostSignature(contents: readonly LLMContent[]): { name: string; position: number } | undefined {
  for (const [position, content] of contents.entries()) {
    if (content.role !== 'model') continue;
    const first = content.parts.find((part) => part.functionCall);
    if (first && !(first.thoughtSignature ?? '').startsWith(SIGNATURE_PREFIX)) {
      return { name: first.functionCall?.name ?? 'unknown', position };
    }
  }
  return undefined;
}

/** Answers `executeStep` like the media backend (see {@link simulatedExecuteStep}). */
async function executeStep(request: Request): Promise<Response> {
  let body: ExecuteStepRequest;
  try {
    body = (await request.json()) as ExecuteStepRequest;
  } catch {
    return json(400, { error: { code: 400, message: 'Invalid JSON payload received.', status: 'INVALID_ARGUMENT' } });
  }
  return json(200, simulatedExecuteStep(body));
}

/**
 * A code-execution turn as Gemini streams it (the shape of the recorded
 * `stream-code-execution-thought-parts` fixture): the code, its result, then the answer.
 */
function codeExecutionTurn(model: string, prompt: string): GenerateContentResponse[] {
  const expression = arithmeticIn(prompt) ?? '65465 - 6544 * 65464 - 6 + 1.02255';
  const value = evaluate(expression);
  const output = value === undefined ? 'nan' : String(value);
  const code = `# ${prompt.replace(/\s+/g, ' ').slice(0, 80)}\nresult = ${expression}\nprint(result)`;
  return [
    envelope(model, [{ text: '**Planning the computation** I will write a short Python program and run it.', thought: true }]),
    envelope(model, [{ executableCode: { language: 'PYTHON', code } }]),
    envelope(model, [{ codeExecutionResult: { outcome: 'OUTCOME_OK', output: `${output}\n` } }]),
    envelope(model, [{ text: 'The result is' }]),
    { ...envelope(model, [{ text: ` ${output}.` }], 'STOP'), usageMetadata: usage([]) },
  ];
}

/** The longest arithmetic expression in `text` (numbers, + - * / ** and parentheses), if any. */
function arithmeticIn(text: string): string | undefined {
  const candidates = text.match(/[\d.()][\d.\s()+\-*/]*[\d.)]/g) ?? [];
  const expressions = candidates.filter((candidate) => /\d\s*(\*\*|[+\-*/])\s*[\d(]/.test(candidate));
  return expressions.sort((a, b) => b.length - a.length)[0]?.trim();
}

/** Evaluates + - * / ** and parentheses with the usual precedence; `undefined` when malformed. */
function evaluate(expression: string): number | undefined {
  const tokens = expression.match(/\*\*|\d+(?:\.\d+)?|\.\d+|[-+*/()]/g) ?? [];
  let index = 0;
  const peek = () => tokens[index];
  const sum = (): number => {
    let value = product();
    while (peek() === '+' || peek() === '-') value = tokens[index++] === '+' ? value + product() : value - product();
    return value;
  };
  const product = (): number => {
    let value = power();
    while (peek() === '*' || peek() === '/') value = tokens[index++] === '*' ? value * power() : value / power();
    return value;
  };
  const power = (): number => {
    const base = unary();
    if (peek() !== '**') return base;
    index += 1;
    return base ** power();
  };
  const unary = (): number => {
    if (peek() === '-') {
      index += 1;
      return -unary();
    }
    if (peek() === '(') {
      index += 1;
      const value = sum();
      if (tokens[index++] !== ')') throw new Error('unbalanced');
      return value;
    }
    const token = tokens[index++];
    const value = Number(token);
    if (token === undefined || Number.isNaN(value)) throw new Error('not a number');
    return value;
  };
  try {
    const value = sum();
    return index === tokens.length && Number.isFinite(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Picks the next turn from the conversation so far. */
function decide(body: GenerateContentRequest, model: string): GenerateContentResponse[] {
  const contents = body.contents ?? [];
  if ((body.tools ?? []).some((tool) => 'codeExecution' in tool)) return codeExecutionTurn(model, textOf(contents[0]));
  const declared = new Set((body.tools ?? []).flatMap((tool) => (tool.functionDeclarations ?? []).map((declaration) => declaration.name)));
  const objective = textOf(contents[0]).match(/<objective>([\s\S]*)<\/objective>/)?.[1] ?? textOf(contents[0]);
  const turn = contents.filter((content) => content.role === 'model').length + 1;
  const responses = contents
    .filter((content) => content.role === 'user')
    .flatMap((content) => content.parts.flatMap((part) => (part.functionResponse ? [part.functionResponse] : [])));
  const answerOf = (name: string) => responses.find((response) => response.name === name)?.response;
  const answersOf = (name: string) => responses.filter((response) => response.name === name).map((response) => response.response);
  const written = answerOf('system_write_file')?.file_path;
  const userInput = answerOf('chat_request_user_input');
  const choice = answerOf('chat_present_choices');
  const wantsInput = /\b(ask|name|input|tell me|question)\b/i.test(objective);
  const wantsChoice = /\b(choose|choice|pick|option)\b/i.test(objective);
  const wantsImage = /\b(image|picture|draw|illustration|photo)\b/i.test(objective);
  const wantsCode = /\b(code|compute|calculate|python)\b/i.test(objective);
  const images = answerOf('generate_images')?.images;
  const computed = answerOf('generate_and_execute_code');
  // With a memory tool the objective says "Use Memory"; the memory functions are declared only when a Drive client is there too.
  const wantsMemory = /\b(remember|memory|memorise|memorize|recall)\b/i.test(objective) && declared.has('memory_get_metadata');
  const memoryStep = wantsMemory ? nextMemoryStep(objective, textOf(contents[0]), answersOf) : undefined;

  if (!declared.has('system_objective_fulfilled')) {
    return textTurn(model, turn, `Here is my answer to: ${objective.trim().slice(0, 200)}`);
  }
  const calls: Array<{ name: string; args: JsonObject }> = [];
  let thought: string;
  if (written === undefined && declared.has('system_write_file')) {
    thought = `**Planning** I will note the objective in a file first, then work on it.`;
    calls.push({ name: 'system_write_file', args: { file_name: 'plan.md', content: `# Plan\n\nObjective: ${objective.trim().slice(0, 500)}` } });
  } else if (memoryStep && !('notes' in memoryStep)) {
    thought = memoryStep.thought;
    calls.push(memoryStep.call);
  } else if (wantsInput && userInput === undefined && declared.has('chat_request_user_input')) {
    thought = `**Asking** I need the user's answer before I can finish.`;
    calls.push({ name: 'chat_request_user_input', args: { user_message: 'What is your name?', input_type: 'text' } });
  } else if (wantsChoice && choice === undefined && declared.has('chat_present_choices')) {
    thought = `**Offering choices** The user should pick one option.`;
    calls.push({
      name: 'chat_present_choices',
      args: {
        user_message: 'Which one do you prefer?',
        choices: [
          { id: 'sunrise', label: 'Sunrise' },
          { id: 'noon', label: 'Noon' },
          { id: 'sunset', label: 'Sunset' },
        ],
        selection_mode: 'single',
      },
    });
  } else if (wantsImage && images === undefined && declared.has('generate_images')) {
    thought = `**Drawing** A picture will show this best.`;
    calls.push({
      name: 'generate_images',
      args: { prompt: `An illustration for: ${objective.trim().slice(0, 200)}`, images: [], aspect_ratio: '16:9', file_name: 'picture' },
    });
  } else if (wantsCode && computed === undefined && declared.has('generate_and_execute_code')) {
    thought = `**Computing** This needs an exact calculation, so I will run code.`;
    calls.push({ name: 'generate_and_execute_code', args: { prompt: objective.trim().slice(0, 500) } });
  } else {
    thought = `**Wrapping up** I have what I need.`;
    const name = typeof userInput?.user_input === 'string' ? userInput.user_input : undefined;
    const picked = Array.isArray(choice?.selected) ? choice.selected.join(', ') : undefined;
    const pieces = ['Done.'];
    if (name) pieces.push(`Hello, ${name}!`);
    if (picked) pieces.push(`You chose ${picked}.`);
    if (Array.isArray(images)) pieces.push(`The picture: ${images.map((path) => `<file src="${String(path)}" />`).join(' ')}`);
    if (typeof computed?.result === 'string') pieces.push(`The computation says: ${computed.result}`);
    if (memoryStep && 'notes' in memoryStep) {
      pieces.push(`I remember ${memoryStep.notes.length} ${memoryStep.notes.length === 1 ? 'note' : 'notes'} in my memory sheet: ${memoryStep.notes.join('; ')}.`);
    }
    if (typeof written === 'string') pieces.push(`The plan: <file src="${written}" />`);
    calls.push({ name: 'system_objective_fulfilled', args: { objective_outcome: pieces.join(' ') } });
  }
  const parts: Part[] = calls.map((call, index) => {
    const part: Part = { functionCall: { name: call.name, args: call.args } };
    if (index === 0) part.thoughtSignature = sign(`${turn}:${call.name}`);
    return part;
  });
  return [
    envelope(model, [{ text: thought, thought: true }]),
    { ...envelope(model, parts, 'STOP'), usageMetadata: usage(contents) },
  ];
}

/** The sheet the simulated model keeps its notes in, one row per run: the date and the objective. */
const MEMORY_SHEET = 'memory';

/**
 * The next step of keeping a note in memory: list the sheets, create the notes sheet when it is
 * missing, read it, add a row for this run, read it back; then the notes it holds.
 */
function nextMemoryStep(
  objective: string,
  firstMessage: string,
  answersOf: (name: string) => JsonObject[],
): { thought: string; call: { name: string; args: JsonObject } } | { notes: string[] } {
  const read = { name: 'memory_read_sheet', args: { range: `${MEMORY_SHEET}!A:B`, output_format: 'json', status_update: 'Reading my notes' } };
  const [metadata] = answersOf('memory_get_metadata');
  if (!metadata) {
    return { thought: '**Checking my memory** Let me see which sheets I keep.', call: { name: 'memory_get_metadata', args: { status_update: 'Looking at my memory' } } };
  }
  const sheets = Array.isArray(metadata.sheets) ? (metadata.sheets as Array<{ name?: unknown }>) : [];
  if (!sheets.some((sheet) => sheet.name === MEMORY_SHEET) && answersOf('memory_create_sheet').length === 0) {
    return {
      thought: '**Starting a memory** I have no notes yet, so I will make a sheet for them.',
      call: { name: 'memory_create_sheet', args: { name: MEMORY_SHEET, columns: ['date', 'note'], status_update: 'Creating my notes sheet' } },
    };
  }
  const reads = answersOf('memory_read_sheet');
  const rowsOf = (answer: JsonObject | undefined): string[][] => {
    if (typeof answer?.json !== 'string') return [];
    try {
      const values = (JSON.parse(answer.json) as { values?: unknown }).values;
      return Array.isArray(values) ? (values as string[][]) : [];
    } catch {
      return [];
    }
  };
  if (reads.length === 0) return { thought: '**Recalling** Let me read what I noted in earlier runs.', call: read };
  if (answersOf('memory_update_sheet').length === 0) {
    const row = Math.max(rowsOf(reads[0]).length, 1) + 1;
    const date = /<current_date>([^<]*)<\/current_date>/.exec(firstMessage)?.[1] ?? new Date().toISOString();
    const note = objective.replace(/Use Memory/g, '').replace(/\s+/g, ' ').trim().slice(0, 200);
    return {
      thought: '**Noting** I will add this run to my notes.',
      call: { name: 'memory_update_sheet', args: { range: `${MEMORY_SHEET}!A${row}:B${row}`, values: [[date, note]] } },
    };
  }
  if (reads.length === 1) return { thought: '**Checking** Let me read my notes back.', call: read };
  return { notes: rowsOf(reads.at(-1)).slice(1).map((row) => `${row[0] ?? ''}: ${row[1] ?? ''}`) };
}

function textTurn(model: string, turn: number, text: string): GenerateContentResponse[] {
  const half = Math.ceil(text.length / 2);
  return [
    envelope(model, [{ text: `**Thinking** turn ${turn}`, thought: true }]),
    envelope(model, [{ text: text.slice(0, half) }]),
    { ...envelope(model, [{ text: text.slice(half) }], 'STOP'), usageMetadata: usage([]) },
  ];
}

function envelope(model: string, parts: Part[], finishReason?: string): GenerateContentResponse {
  const candidate: JsonObject = { content: { parts, role: 'model' }, index: 0 };
  if (finishReason) candidate.finishReason = finishReason;
  return { candidates: [candidate], modelVersion: model, responseId: 'simulated' } as GenerateContentResponse;
}

function usage(contents: readonly LLMContent[]) {
  const prompt = 20 + JSON.stringify(contents).length / 4;
  return { promptTokenCount: Math.round(prompt), candidatesTokenCount: 24, totalTokenCount: Math.round(prompt) + 24 };
}

function sign(seed: string): string {
  return `${SIGNATURE_PREFIX}${btoa(seed).replace(/=+$/, '')}`;
}

function textOf(content: LLMContent | undefined): string {
  return (content?.parts ?? []).map((part) => part.text ?? '').join('');
}
