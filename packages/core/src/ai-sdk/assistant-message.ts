import type { AgentUIMessage, AgentUIMessageChunk } from './agent-ui-message.js';

type MessagePart = AgentUIMessage['parts'][number];
type MutablePart = Record<string, unknown> & { type: string };

/**
 * Collects the chunks a run was streamed as into its assistant message, the way the AI SDK's
 * `useChat` builds it from the same chunks: for the chunks a run produces (text, reasoning, tool
 * parts with their states, data parts updated in place by id, files, step boundaries).
 */
export class AssistantMessageBuilder {
  readonly #parts: MutablePart[] = [];
  readonly #active = new Map<string, MutablePart>();
  readonly #tools = new Map<string, MutablePart>();

  add(chunk: AgentUIMessageChunk): void {
    switch (chunk.type) {
      case 'start-step':
        this.#parts.push({ type: 'step-start' });
        return;
      case 'text-start':
      case 'reasoning-start': {
        const part: MutablePart = { type: chunk.type === 'text-start' ? 'text' : 'reasoning', text: '', state: 'streaming' };
        this.#active.set(`${part.type}:${chunk.id}`, part);
        this.#parts.push(part);
        return;
      }
      case 'text-delta':
      case 'reasoning-delta': {
        const part = this.#active.get(`${chunk.type === 'text-delta' ? 'text' : 'reasoning'}:${chunk.id}`);
        if (part) part.text = `${String(part.text)}${chunk.delta}`;
        return;
      }
      case 'text-end':
      case 'reasoning-end': {
        const key = `${chunk.type === 'text-end' ? 'text' : 'reasoning'}:${chunk.id}`;
        const part = this.#active.get(key);
        if (part) part.state = 'done';
        this.#active.delete(key);
        return;
      }
      case 'tool-input-available': {
        const part: MutablePart = { type: `tool-${chunk.toolName}`, toolCallId: chunk.toolCallId, state: 'input-available', input: chunk.input };
        if (chunk.title !== undefined) part.title = chunk.title;
        const existing = this.#tools.get(chunk.toolCallId);
        if (existing) Object.assign(existing, part);
        else {
          this.#tools.set(chunk.toolCallId, part);
          this.#parts.push(part);
        }
        return;
      }
      case 'tool-output-available': {
        const part = this.#tools.get(chunk.toolCallId);
        if (part) Object.assign(part, { state: 'output-available', output: chunk.output });
        return;
      }
      case 'tool-output-error': {
        const part = this.#tools.get(chunk.toolCallId);
        if (part) Object.assign(part, { state: 'output-error', errorText: chunk.errorText });
        return;
      }
      case 'tool-approval-request': {
        const part = this.#tools.get(chunk.toolCallId);
        if (part) Object.assign(part, { state: 'approval-requested', approval: { id: chunk.approvalId } });
        return;
      }
      case 'file':
        this.#parts.push({ type: 'file', mediaType: chunk.mediaType, url: chunk.url });
        return;
      default:
        if (chunk.type.startsWith('data-')) {
          const data = chunk as { type: string; id?: string; data: unknown };
          const existing = data.id === undefined ? undefined : this.#parts.find((part) => part.type === data.type && part.id === data.id);
          if (existing) existing.data = data.data;
          else this.#parts.push(data.id === undefined ? { type: data.type, data: data.data } : { type: data.type, id: data.id, data: data.data });
        }
    }
  }

  /** The message so far; text and reasoning still streaming are shown as they are. */
  message(id: string): AgentUIMessage {
    return { id, role: 'assistant', parts: this.#parts as unknown as MessagePart[] };
  }
}
