import { z } from 'zod';
import { AgentError } from '../errors/index.js';
import { formatFirstIssue } from '../errors/format-issues.js';
import { LLMContentSchema } from '../protocol/content.js';
import { lazy } from '../protocol/lazy.js';
import type { JsonObject } from '../protocol/content.js';
import type { AgentEventOf, SuspendEventType } from '../protocol/events.js';
import type { Segment, StartRequest } from '../protocol/requests.js';
import type { ResumeResponse } from '../protocol/resume-responses.js';
import type { ChatAnswer } from './ui-message-chunks.js';

/** A chat id: what `useChat` generates, or any id an app gives, within a safe alphabet. */
export const CHAT_ID = /^[A-Za-z0-9._-]{1,128}$/;
const CHAT_ID_TEXT = 'expected 1 to 128 letters, digits, ".", "_" or "-"';

/** The limits a chat request is read under. */
export interface ChatRequestLimits {
  maxMessages: number;
  maxParts: number;
}

/** One message of a chat request: only what the runtime reads is checked. */
export interface ChatMessageInput {
  id: string;
  role: 'system' | 'user' | 'assistant';
  parts: Array<{ type: string } & Record<string, unknown>>;
}

/** The body `useChat` (its `DefaultChatTransport`) sends, as read. */
export interface ChatRequest {
  id: string;
  messages: ChatMessageInput[];
  trigger: 'submit-message' | 'regenerate-message';
}

/** The suspended call a continuation answers: its id, its function, and the suspend event it raised. */
export interface PendingCall {
  callId: string;
  name: string;
  event: { type: SuspendEventType } & Record<string, unknown>;
}

const schemaFor = (limits: ChatRequestLimits) =>
  z.looseObject({
    id: z.string().regex(CHAT_ID, CHAT_ID_TEXT),
    messages: z
      .array(
        z.looseObject({
          id: z.string().max(256),
          role: z.enum(['system', 'user', 'assistant']),
          parts: z.array(z.looseObject({ type: z.string().max(256) })).max(limits.maxParts),
        }),
      )
      .min(1)
      .max(limits.maxMessages),
    trigger: z.enum(['submit-message', 'regenerate-message']).optional(),
    messageId: z.string().max(256).optional(),
  });

/**
 * Reads a chat request: the chat `id`, its `messages` (the last one says what to do) and the
 * `trigger`. Fields an app adds to the body are ignored. A bad body is `BAD_REQUEST` naming the field.
 */
export function parseChatRequest(json: unknown, limits: ChatRequestLimits): ChatRequest {
  const parsed = schemaFor(limits).safeParse(json);
  if (!parsed.success) throw badRequest(formatFirstIssue('', parsed.error.issues).text);
  return {
    id: parsed.data.id,
    messages: parsed.data.messages as ChatMessageInput[],
    trigger: parsed.data.trigger ?? 'submit-message',
  };
}

const DATA_URL = /^data:([^;,]+)((?:;[^;,]*)*);base64,([A-Za-z0-9+/=\s]*)$/;
const EARLIER_TITLE = 'Earlier in this conversation';
/** How much of the earlier conversation a new run is told, from its end. */
const MAX_EARLIER_CHARS = 16_000;

/**
 * The start request of a run for the user message at `index`: its texts, its files (data URLs, as
 * inline data; the server fetches nothing) and, when the chat had earlier turns, what was said in
 * them as an input of its own.
 */
export function toStartRequest(messages: readonly ChatMessageInput[], index: number): StartRequest {
  const message = messages[index] as ChatMessageInput;
  const texts: string[] = [];
  const files: Segment[] = [];
  message.parts.forEach((part, partIndex) => {
    const path = `messages[${index}].parts[${partIndex}]`;
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw badRequest(`${path}.text: expected string`);
      if (part.text.trim().length > 0) texts.push(part.text);
    } else if (part.type === 'file') {
      const url = typeof part.url === 'string' ? part.url : '';
      const match = DATA_URL.exec(url);
      if (!match) throw badRequest(`${path}.url: expected a base64 data: URL (the server fetches no other URL)`);
      const mimeType = typeof part.mediaType === 'string' && part.mediaType.length > 0 ? part.mediaType : (match[1] as string);
      const title = typeof part.filename === 'string' && part.filename.length > 0 ? part.filename.slice(0, 200) : 'file';
      files.push({ type: 'asset', title, content: { role: 'user', parts: [{ inlineData: { mimeType, data: (match[3] as string).replace(/\s+/g, '') } }] } });
    }
  });
  if (texts.length === 0 && files.length === 0) throw badRequest(`messages[${index}].parts: expected a text or a file part`);
  const segments: Segment[] = [];
  const earlier = transcript(messages.slice(0, index));
  if (earlier.length > 0) segments.push({ type: 'input', title: EARLIER_TITLE, content: { role: 'user', parts: [{ text: earlier }] } });
  if (texts.length > 0) segments.push({ type: 'text', text: texts.join('\n\n') });
  segments.push(...files);
  return { segments };
}

/** What was said before, as lines of text: the user's messages, the questions asked and answered, the run's answers. */
function transcript(messages: readonly ChatMessageInput[]): string {
  const lines: string[] = [];
  for (const message of messages) {
    for (const part of message.parts) {
      if (part.type === 'text' && typeof part.text === 'string' && part.text.length > 0) {
        lines.push(`${message.role === 'user' ? 'User' : 'Agent'}: ${part.text}`);
      } else if (part.type === 'tool-chat_request_user_input' || part.type === 'tool-chat_present_choices') {
        const question = (part.input as { user_message?: unknown } | undefined)?.user_message;
        if (typeof question === 'string') lines.push(`Agent asked: ${question}`);
        const answer = answerText(part.output);
        if (answer !== undefined) lines.push(`User answered: ${answer}`);
      }
    }
  }
  const text = lines.join('\n');
  return text.length > MAX_EARLIER_CHARS ? text.slice(text.length - MAX_EARLIER_CHARS) : text;
}

function answerText(output: unknown): string | undefined {
  if (typeof output !== 'object' || output === null) return undefined;
  const { input, selected } = output as { input?: { parts?: Array<{ text?: unknown }> }; selected?: { ids?: unknown } };
  if (input && Array.isArray(input.parts)) return input.parts.map((part) => (typeof part.text === 'string' ? part.text : '')).join('');
  if (selected && Array.isArray(selected.ids)) return selected.ids.map(String).join(', ');
  return undefined;
}

/** The schemas of the answers to each kind of suspend, built when the first answer is checked. */
const answerSchemas = lazy(() => ({
  input: z.looseObject({ input: LLMContentSchema }),
  choice: z.looseObject({ selected: z.looseObject({ ids: z.array(z.string().max(256)).max(1000) }) }),
  consent: z.looseObject({ consent: z.boolean() }),
}));
const NONE_OF_THE_ABOVE = '__none_of_the_above__';

/**
 * The answer an assistant message gives to the pending call: the output of its tool part (exactly
 * the `ResumeResponses` answer of the suspend: `{input}`, `{selected:{ids}}`, `{consent}`), an
 * error the app reported on it, or, for a consent, the approval. Anything else is `BAD_REQUEST`
 * naming the part.
 */
export function answerOf(message: ChatMessageInput, index: number, pending: PendingCall): { response: ResumeResponse; answer: ChatAnswer } {
  const partIndex = message.parts.findIndex((part) => part.toolCallId === pending.callId);
  const part = message.parts[partIndex];
  if (!part) {
    throw badRequest(`messages[${index}].parts: no tool part for call ${pending.callId} (${pending.name}), which the run waits for`);
  }
  const path = `messages[${index}].parts[${partIndex}]`;
  switch (part.state) {
    case 'output-available': {
      const output = checkedOutput(part.output, `${path}.output`, pending);
      return { response: output as ResumeResponse, answer: { output } };
    }
    case 'output-error': {
      const errorText = typeof part.errorText === 'string' ? part.errorText.slice(0, 10_000) : 'The app reported an error';
      return { response: { error: errorText } as unknown as ResumeResponse, answer: { errorText } };
    }
    case 'approval-responded':
    case 'output-denied': {
      const approved = (part.approval as { approved?: unknown } | undefined)?.approved;
      if (typeof approved !== 'boolean') throw badRequest(`${path}.approval.approved: expected boolean`);
      if (pending.event.type !== 'queryConsent') {
        throw badRequest(`${path}: ${pending.name} waits for its output (addToolOutput), not for an approval`);
      }
      return { response: { consent: approved }, answer: { approved } };
    }
    default:
      throw badRequest(`${path}.state: the run waits for the output of ${pending.name} (call ${pending.callId}); give it with addToolOutput (state is "${String(part.state)}")`);
  }
}

function checkedOutput(output: unknown, path: string, pending: PendingCall): JsonObject {
  if (typeof output !== 'object' || output === null || Array.isArray(output)) throw badRequest(`${path}: expected the answer as an object`);
  const schemas = answerSchemas();
  const schema =
    pending.event.type === 'waitForInput'
      ? schemas.input
      : pending.event.type === 'waitForChoice'
        ? schemas.choice
        : pending.event.type === 'queryConsent'
          ? schemas.consent
          : undefined;
  if (schema) {
    const parsed = schema.safeParse(output);
    if (!parsed.success) throw badRequest(formatFirstIssue(path, parsed.error.issues).text);
  }
  if (pending.event.type === 'waitForChoice') checkChoices((output as { selected: { ids: string[] } }).selected.ids, `${path}.selected.ids`, pending.event as unknown as AgentEventOf<'waitForChoice'>);
  return output as JsonObject;
}

function checkChoices(ids: readonly string[], path: string, event: AgentEventOf<'waitForChoice'>): void {
  const offered = event.choices.map((choice) => choice.id);
  if (event.noneOfTheAboveLabel !== undefined) offered.push(NONE_OF_THE_ABOVE);
  ids.forEach((id, position) => {
    if (!offered.includes(id)) throw badRequest(`${path}[${position}]: "${id.slice(0, 100)}" is not one of the choices (${offered.join(', ')})`);
  });
  if (event.selectionMode === 'single' && ids.length !== 1) throw badRequest(`${path}: expected exactly one id (the choice is single), got ${ids.length}`);
}

function badRequest(message: string): AgentError {
  const path = message.split(':')[0] ?? '(body)';
  return new AgentError('BAD_REQUEST', message, { details: { path } });
}
