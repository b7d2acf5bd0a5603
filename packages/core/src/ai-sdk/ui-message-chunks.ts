import { mimeTypeFromFileName } from '../agent-fs/mime-types.js';
import type { ErrorCode } from '../errors/index.js';
import { redactSecrets, redactServerMessage } from '../http/redact.js';
import type { JsonObject, LLMContent, Part } from '../protocol/content.js';
import type { AgentEvent, AgentResult } from '../protocol/events.js';
import { textToBase64 } from '../protocol/base64.js';
import type { RunEvent } from '../protocol/run-events.js';
import type { AgentUIMessageChunk } from './agent-ui-message.js';

/** How a chat answered a suspended call: the tool output it gave, the error it reported, or its approval. */
export type ChatAnswer = { output: JsonObject } | { errorText: string } | { approved: boolean };

/** Options of {@link UiChunkMapper}. */
export interface UiChunkMapperOptions {
  /**
   * Answers the chat gave to suspended calls, by tool call id. Where a replayed run went on after a
   * suspend, the answer is put back on its tool part, as the app had it.
   */
  answers?: Readonly<Record<string, ChatAnswer>>;
  /**
   * A consent this request answered: the call then runs, and its result (read from the next model
   * request, the only place it appears) becomes the tool part's output.
   */
  awaitingResult?: { callId: string; position: number };
}

type LooseEvent = { type: string } & Record<string, unknown>;
type Outcome = 'suspended' | 'completed' | 'incomplete';
type RunError = { code: ErrorCode; message: string; resumable: boolean };

/** What a tool part whose call the run left unfinished says, so no page shows it running forever. */
const UNFINISHED_CALL = 'The run stopped before this call finished';

const SEND_REQUEST_PREFIX = '{"sendRequest":';
const SUSPEND_TYPES = new Set(['waitForInput', 'waitForChoice', 'readGraph', 'inspectNode', 'applyEdits', 'queryConsent']);

/**
 * Turns the events of one run (one segment after another) into UI message chunks of one assistant
 * message: a step per model turn with its reasoning and tool parts, data parts for progress, the
 * outcome as text and files in a last step of its own (so `lastAssistantMessageIsCompleteWithToolCalls`
 * never sends a finished run again), and the terminal chunk from {@link UiChunkMapper.end}.
 * Provider data (thought signatures) never reaches a chunk: only texts, arguments and results do.
 */
export class UiChunkMapper {
  readonly #answers: Readonly<Record<string, ChatAnswer>>;
  #awaiting: { callId: string; position: number } | undefined;
  #reasoningId: string | undefined;
  #stepOpen = false;
  #stepCalls: string[] = [];
  readonly #open = new Set<string>();
  #ids = 0;
  #suspended: { callId?: string; consent: boolean } | undefined;
  #heldError: RunError | undefined;
  #outcome: Outcome | undefined;

  constructor(options: UiChunkMapperOptions = {}) {
    this.#answers = options.answers ?? {};
    this.#awaiting = options.awaitingResult;
    // The answered consent's call runs now: until its result is read, it is as open as any other.
    if (this.#awaiting) this.#open.add(this.#awaiting.callId);
  }

  /** The chunks of one event as the session log keeps it (its wire JSON). */
  pushJson(json: string): AgentUIMessageChunk[] {
    // The model request carries the whole conversation: it is read only when a result is awaited.
    if (json.startsWith(SEND_REQUEST_PREFIX)) {
      return this.#sendRequest(() => (JSON.parse(json) as { sendRequest: { body: JsonObject } }).sendRequest.body);
    }
    const wire = JSON.parse(json) as Record<string, Record<string, unknown>>;
    const type = Object.keys(wire)[0];
    if (type === undefined) return [];
    return this.push({ ...wire[type], type } as LooseEvent);
  }

  /** The chunks of one event. */
  push(event: AgentEvent | RunEvent | LooseEvent): AgentUIMessageChunk[] {
    const current = event as LooseEvent;
    if (current.type === 'sendRequest') return this.#sendRequest(() => (current.body as JsonObject | undefined) ?? {});
    const out: AgentUIMessageChunk[] = [];
    this.#continueAfterSuspend(out, current.type);
    if (current.type !== 'thought') this.#closeReasoning(out);
    switch (current.type) {
      case 'thought': {
        if (this.#reasoningId === undefined) {
          this.#reasoningId = `reasoning-${(this.#ids += 1)}`;
          out.push({ type: 'reasoning-start', id: this.#reasoningId });
        }
        out.push({ type: 'reasoning-delta', id: this.#reasoningId, delta: String(current.text ?? '') });
        break;
      }
      case 'functionCall': {
        const callId = String(current.callId);
        this.#stepCalls.push(callId);
        this.#open.add(callId);
        const chunk: AgentUIMessageChunk = { type: 'tool-input-available', toolCallId: callId, toolName: String(current.name), input: current.args ?? {} };
        if (typeof current.title === 'string') chunk.title = current.title;
        out.push(chunk);
        break;
      }
      case 'functionCallUpdate': {
        const options = (current.opts ?? {}) as { expectedDurationInSec?: number; isThought?: boolean };
        const data: { callId: string; status: string | null; expectedDurationInSec?: number; isThought?: boolean } = {
          callId: String(current.callId),
          status: typeof current.status === 'string' ? current.status : null,
        };
        if (typeof options.expectedDurationInSec === 'number') data.expectedDurationInSec = options.expectedDurationInSec;
        if (typeof options.isThought === 'boolean') data.isThought = options.isThought;
        out.push({ type: 'data-function-update', id: data.callId, data });
        break;
      }
      case 'functionResult': {
        const callId = String(current.callId);
        this.#open.delete(callId);
        const content = current.content as LLMContent | undefined;
        out.push(outputChunk(callId, content?.parts?.[0]?.functionResponse?.response ?? {}));
        break;
      }
      case 'usageMetadata':
        out.push({ type: 'data-usage', data: (current.metadata ?? {}) as never });
        break;
      case 'turnComplete':
        this.#finishStep(out);
        break;
      case 'error': {
        const code = (typeof current.code === 'string' ? current.code : 'INTERNAL') as ErrorCode;
        const raw = String(current.message ?? 'The run failed');
        // As the model is told of failures: an INTERNAL message is a throw nobody worded for a
        // caller (it may name server files or a connection URL); any other may still quote a credential.
        const message = code === 'INTERNAL' ? redactServerMessage(raw) : redactSecrets(raw);
        // The run goes no further in this segment: a call it left open gets no result.
        this.#closeOpenCalls(out);
        this.#finishStep(out);
        // Held until the segment's end: only then is it known whether the run can go on.
        this.#heldError = { code, message, resumable: typeof current.interactionId === 'string' };
        break;
      }
      case 'complete':
        // A failure followed by an unsuccessful outcome ended the run for good (its session failed):
        // sending the conversation again cannot continue it, whatever id the error carried.
        if (this.#heldError && (current.result as AgentResult | undefined)?.success !== true) this.#heldError.resumable = false;
        this.#complete(out, current.result as AgentResult);
        break;
      default:
        if (SUSPEND_TYPES.has(current.type)) this.#suspend(out, current);
    }
    return out;
  }

  /**
   * The chunks that end the stream: the open step closed, then `finish` (or `error` when the run
   * failed or paused). `stopped`: the run is not running (its client stopped it mid-answer, a newer
   * message cancelled it), so a call it announced and never finished ends as an error, not running forever.
   */
  end(options: { stopped?: boolean } = {}): AgentUIMessageChunk[] {
    const out: AgentUIMessageChunk[] = [];
    this.#closeReasoning(out);
    if (options.stopped) this.#closeOpenCalls(out);
    this.#finishStep(out);
    if (this.#heldError !== undefined) {
      out.push(errorPart(this.#heldError), { type: 'error', errorText: this.#heldError.message });
      return out;
    }
    if (this.#suspended) out.push({ type: 'finish', finishReason: 'tool-calls' });
    else if (this.#outcome === 'completed') out.push({ type: 'finish', finishReason: 'stop' });
    else out.push({ type: 'finish', finishReason: 'other' });
    return out;
  }

  #sendRequest(body: () => JsonObject): AgentUIMessageChunk[] {
    const out: AgentUIMessageChunk[] = [];
    this.#continueAfterSuspend(out, 'sendRequest');
    this.#closeReasoning(out);
    this.#finishStep(out);
    if (this.#awaiting) {
      // The answered call's result sits in the last content of the conversation, at the call's position.
      const { callId, position } = this.#awaiting;
      this.#awaiting = undefined;
      const contents = body().contents;
      const last = Array.isArray(contents) ? (contents[contents.length - 1] as LLMContent | undefined) : undefined;
      const response = last?.parts?.[position]?.functionResponse?.response;
      if (response) {
        this.#open.delete(callId);
        out.push(outputChunk(callId, response));
      }
    }
    out.push({ type: 'start-step' });
    this.#stepOpen = true;
    this.#stepCalls = [];
    return out;
  }

  /** A run that suspended went on: its answer goes back on the waiting tool part first. */
  #continueAfterSuspend(out: AgentUIMessageChunk[], type: string): void {
    if (this.#heldError && type !== 'finish' && type !== 'complete') {
      // The run went on after it (a resumed pause, replayed): the failure stays where it happened.
      out.push(errorPart(this.#heldError));
      this.#heldError = undefined;
    }
    const suspended = this.#suspended;
    if (!suspended) return;
    this.#suspended = undefined;
    const callId = suspended.callId;
    const answer = callId === undefined ? undefined : this.#answers[callId];
    if (callId === undefined || answer === undefined) return;
    if ('output' in answer) out.push({ type: 'tool-output-available', toolCallId: callId, output: answer.output });
    else if ('errorText' in answer) out.push({ type: 'tool-output-error', toolCallId: callId, errorText: answer.errorText });
    else if (suspended.consent) {
      this.#awaiting = { callId, position: Math.max(0, this.#stepCalls.indexOf(callId)) };
      this.#open.add(callId);
    }
  }

  #suspend(out: AgentUIMessageChunk[], event: LooseEvent): void {
    // The call still open when the turn suspended is the one waiting (the others reported their results).
    const callId = [...this.#open].pop();
    if (callId !== undefined) this.#open.delete(callId);
    const { interactionId: _interactionId, ...payload } = event;
    const data: { toolCallId?: string; event: never } = { event: payload as never };
    if (callId !== undefined) data.toolCallId = callId;
    out.push({ type: 'data-suspend', id: callId ?? String(event.requestId ?? ''), data });
    if (event.type === 'queryConsent' && callId !== undefined) {
      out.push({ type: 'tool-approval-request', approvalId: String(event.requestId ?? callId), toolCallId: callId });
    }
    this.#finishStep(out);
    this.#suspended = callId === undefined ? { consent: event.type === 'queryConsent' } : { callId, consent: event.type === 'queryConsent' };
  }

  #complete(out: AgentUIMessageChunk[], result: AgentResult | undefined): void {
    this.#finishStep(out);
    this.#outcome = result?.success ? 'completed' : 'incomplete';
    const parts = result?.outcomes?.parts ?? [];
    const files = result?.intermediate ?? [];
    const text = parts
      .map((part) => part.text ?? '')
      .filter((piece) => piece.length > 0)
      .join('\n');
    if (text.length === 0 && files.length === 0 && !parts.some((part) => part.inlineData)) return;
    out.push({ type: 'start-step' });
    if (text.length > 0) {
      const id = `text-${(this.#ids += 1)}`;
      out.push({ type: 'text-start', id }, { type: 'text-delta', id, delta: text }, { type: 'text-end', id });
    }
    for (const part of parts) {
      if (part.inlineData) out.push({ type: 'file', mediaType: part.inlineData.mimeType, url: `data:${part.inlineData.mimeType};base64,${part.inlineData.data}` });
    }
    for (const file of files) {
      const chunk = fileChunk(file.path, file.content);
      if (!chunk) continue;
      out.push({ type: 'data-file', data: { path: file.path, mediaType: chunk.mediaType } }, chunk);
    }
    out.push({ type: 'finish-step' });
  }

  #closeOpenCalls(out: AgentUIMessageChunk[]): void {
    for (const callId of this.#open) out.push({ type: 'tool-output-error', toolCallId: callId, errorText: UNFINISHED_CALL });
    this.#open.clear();
  }

  #closeReasoning(out: AgentUIMessageChunk[]): void {
    if (this.#reasoningId === undefined) return;
    out.push({ type: 'reasoning-end', id: this.#reasoningId });
    this.#reasoningId = undefined;
  }

  #finishStep(out: AgentUIMessageChunk[]): void {
    this.#closeReasoning(out);
    if (!this.#stepOpen) return;
    out.push({ type: 'finish-step' });
    this.#stepOpen = false;
  }
}

/**
 * The UI message chunks of a run's events, for a server that runs `run()` / `resume()` itself: a
 * `start` chunk (with `messageId` when given), the events' chunks, and the closing chunks.
 *
 * @example
 * ```ts
 * for await (const chunk of toUiMessageChunks(run(request, ports))) {
 *   writer.write(`data: ${JSON.stringify(chunk)}\n\n`);
 * }
 * ```
 */
export async function* toUiMessageChunks(
  events: AsyncIterable<AgentEvent | RunEvent>,
  options: { messageId?: string } = {},
): AsyncGenerator<AgentUIMessageChunk> {
  const mapper = new UiChunkMapper();
  yield options.messageId === undefined ? { type: 'start' } : { type: 'start', messageId: options.messageId };
  for await (const event of events) yield* mapper.push(event);
  yield* mapper.end();
}

/** The data part of a run's failure. */
function errorPart(error: RunError): AgentUIMessageChunk {
  return { type: 'data-error', data: { code: error.code, message: error.message, resumable: error.resumable } };
}

/** A function's response as the tool part's output; `{error}` alone is a failed call. */
function outputChunk(callId: string, response: JsonObject): AgentUIMessageChunk {
  const keys = Object.keys(response);
  if (keys.length === 1 && typeof response.error === 'string') return { type: 'tool-output-error', toolCallId: callId, errorText: response.error };
  return { type: 'tool-output-available', toolCallId: callId, output: response };
}

/** A file of the run as a `file` chunk with a URL the page can use (a data URL, or the file's own URI). */
function fileChunk(path: string, part: Part): { type: 'file'; mediaType: string; url: string } | undefined {
  if (part.inlineData) return { type: 'file', mediaType: part.inlineData.mimeType, url: `data:${part.inlineData.mimeType};base64,${part.inlineData.data}` };
  if (typeof part.text === 'string') {
    const mediaType = mimeTypeFromFileName(path);
    return { type: 'file', mediaType, url: `data:${mediaType};base64,${textToBase64(part.text)}` };
  }
  if (part.fileData) return { type: 'file', mediaType: part.fileData.mimeType, url: part.fileData.fileUri };
  return undefined;
}
