import { describe, expect, it } from 'vitest';
import type { AgentPorts } from '../ports/index.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import type { AgentEvent } from '../protocol/events.js';
import { resume, run } from '../run/index.js';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk, type ScriptedRequest } from '../testing/index.js';
import { CHAT_LOG_PATH, deriveChatLog, type ChatLogEntry } from './index.js';

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const call = (name: string, args: JsonObject, id?: string): LLMContent => ({
  role: 'model',
  parts: [{ functionCall: id === undefined ? { name, args } : { name, args, id } }],
});
const answer = (name: string, response: JsonObject, id?: string): LLMContent => ({
  role: 'user',
  parts: [{ functionResponse: id === undefined ? { name, response } : { name, response, id } }],
});
const said = (role: ChatLogEntry['role'], text: string): ChatLogEntry => ({ role, parts: [{ text }] });

/** The function response the model got for the last call of `name`. */
function lastResponse(requests: ScriptedRequest[], name: string): JsonObject | undefined {
  const contents = requests.at(-1)?.body.contents ?? [];
  const parts = contents.flatMap((content) => content.parts).filter((part) => part.functionResponse?.name === name);
  return parts.at(-1)?.functionResponse?.response as JsonObject | undefined;
}

describe('deriveChatLog', () => {
  it('lists the questions and answers of the history, after the seed', () => {
    const history: LLMContent[] = [
      { role: 'user', parts: [{ text: '<objective>Plan a trip</objective>' }] },
      call('chat_request_user_input', { user_message: 'Where to?' }),
      answer('chat_request_user_input', { user_input: 'Lisbon' }),
      call('chat_present_choices', {
        user_message: 'When?',
        choices: [{ id: 'may', label: 'In May' }, { id: 'june', label: 'In June' }],
        none_of_the_above_label: 'Later',
      }, 'c2'),
      answer('chat_present_choices', { selected: ['june', '__none_of_the_above__'] }, 'c2'),
      call('chat_request_user_input', { user_message: 'Anything else?', skip_label: 'No' }),
      answer('chat_request_user_input', { skipped: true }),
      call('system_list_files', { status_update: 'Looking' }),
      answer('system_list_files', { list: '' }),
    ];
    expect(deriveChatLog(history, [said('model', 'Hello again'), said('user', 'Hi')])).toEqual([
      said('model', 'Hello again'),
      said('user', 'Hi'),
      said('model', 'Where to?'),
      said('user', 'Lisbon'),
      said('model', 'When?'),
      said('user', 'In June, Later'),
      said('model', 'Anything else?'),
    ]);
  });

  it('reads a choice saved as the client sent it, and keeps unknown ids as they are', () => {
    const history = [
      call('chat_present_choices', { user_message: 'Pick', choices: [{ id: 'a', label: 'Apples' }] }),
      answer('chat_present_choices', { selected: { ids: ['a', 'z'] } }),
    ];
    expect(deriveChatLog(history)).toEqual([said('model', 'Pick'), said('user', 'Apples, z')]);
  });
});

describe('/mnt/system/chat_log.json', () => {
  it('gives the model its question and the user answer after a round of chat_request_user_input', async () => {
    const backend = createScriptedBackendClient((request) => {
      const contents = request.body.contents;
      const responded = (name: string) => contents.some((content) => content.parts.some((part) => part.functionResponse?.name === name));
      if (!responded('chat_request_user_input')) {
        return [functionCallChunk('chat_request_user_input', { user_message: 'What is your name?', input_type: 'text' }, { thoughtSignature: 's1' })];
      }
      if (!responded('system_read_text_from_file')) {
        return [
          functionCallChunk('system_read_text_from_file', { file_path: CHAT_LOG_PATH }, { thoughtSignature: 's2' }),
          functionCallChunk('system_list_files', { status_update: 'Checking' }),
        ];
      }
      return [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Hello', href: '/' }, { thoughtSignature: 's3' })];
    });
    const ports: AgentPorts = { backend, store: createMemoryInteractionStore() };
    const first = await collect(run({ segments: [{ type: 'text', text: 'Greet me' }] }, ports));
    const suspend = first.at(-1) as { type: string; interactionId: string };
    expect(suspend.type).toBe('waitForInput');

    const events = await collect(resume(suspend.interactionId, { input: { role: 'user', parts: [{ text: 'Ada' }] } }, ports));
    expect(events.at(-1)).toMatchObject({ type: 'complete', result: { success: true } });
    const log = lastResponse(backend.requests, 'system_read_text_from_file');
    expect(JSON.parse(String(log?.text))).toEqual([said('model', 'What is your name?'), said('user', 'Ada')]);
    expect(String(lastResponse(backend.requests, 'system_list_files')?.list).split('\n')).toContain(CHAT_LOG_PATH);
    const complete = events.at(-1) as { result: { intermediate?: Array<{ path: string }> } };
    expect((complete.result.intermediate ?? []).map((file) => file.path)).not.toContain(CHAT_LOG_PATH);
  });

  it('exists before any chat, as an empty log', async () => {
    const backend = createScriptedBackendClient([
      [functionCallChunk('system_read_text_from_file', { file_path: CHAT_LOG_PATH })],
      [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'ok', href: '/' })],
    ]);
    await collect(run({ segments: [{ type: 'text', text: 'Read the log' }] }, { backend, store: createMemoryInteractionStore() }));
    expect(lastResponse(backend.requests, 'system_read_text_from_file')).toEqual({ text: '[]' });
  });
});
