import { describe, expect, it } from 'vitest';
import type { AgentEvent } from '../protocol/events.js';
import { resume } from '../run/index.js';
import { createMemoryInteractionStore, createScriptedBackendClient } from '../testing/index.js';
import { readChat, updateChat } from './chat-record.js';

describe('chat records in the interaction store', () => {
  it('are no run to resume: naming one as an interaction id is an unknown id, for its owner and anyone else, and the chat is untouched', async () => {
    const store = createMemoryInteractionStore();
    await updateChat(store, 'chat-1', 'alice', (record) => record);
    const before = await readChat(store, 'chat-1');
    const backend = createScriptedBackendClient([]);
    for (const owner of ['alice', 'mallory', undefined]) {
      const events: AgentEvent[] = [];
      for await (const event of resume('ui-chat.chat-1', { input: { parts: [{ text: 'hi' }] } }, { backend, store }, owner === undefined ? {} : { owner })) {
        events.push(event);
      }
      expect(events).toEqual([expect.objectContaining({ type: 'error', code: 'INTERACTION_NOT_FOUND', message: 'Unknown interaction ID: ui-chat.chat-1' })]);
    }
    expect(await readChat(store, 'chat-1')).toEqual(before);
    expect(backend.requests).toHaveLength(0);
  });
});
