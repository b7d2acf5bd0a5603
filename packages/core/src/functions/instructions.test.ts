import { describe, expect, it } from 'vitest';
import type { AgentEvent } from '../protocol/events.js';
import { run } from '../run/index.js';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk, textChunk, type ScriptedRequest } from '../testing/index.js';
import { createGoogleDriveGroup, createMemoryGroup, defaultFunctionGroups } from './index.js';

/** Names that look like a function of one of the protocol's groups (`chat_log.json` is a file). */
const FUNCTION_NAME = /\b(?:system|generate|chat|memory|google_drive|notebooklm)_[a-z_]+\b(?!\.)/g;

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const groups = [...defaultFunctionGroups(), createMemoryGroup(), createGoogleDriveGroup()];
const instructionOf = (name: string): string => groups.find((group) => group.name === name)?.instruction ?? '';
const declared = new Set(groups.flatMap((group) => group.functions.map((definition) => definition.name)));

describe('the instructions the model gets', () => {
  it('sends the group instructions, joined, as the system instruction of every turn', async () => {
    const backend = createScriptedBackendClient([[functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Hi', href: '/' })]]);
    await collect(run({ segments: [{ type: 'text', text: 'Say hi' }] }, { backend, store: createMemoryInteractionStore() }));
    const expected = defaultFunctionGroups()
      .map((group) => group.instruction ?? '')
      .filter((text) => text.length > 0)
      .join('\n\n');
    expect(backend.requests[0]?.body.systemInstruction).toEqual({ role: 'user', parts: [{ text: expected }] });
  });

  it('names only declared functions, and explains every declared one', () => {
    for (const group of groups) {
      for (const name of (group.instruction ?? '').match(FUNCTION_NAME) ?? []) {
        expect(declared.has(name), `the ${group.name} instruction names ${name}, which is not declared`).toBe(true);
      }
    }
    const all = groups.map((group) => group.instruction ?? '').join('\n');
    for (const name of declared) expect(all.includes(name), `no instruction explains ${name}`).toBe(true);
  });

  it('covers the orchestration conventions, the plan, the content policy, files and the outcome', () => {
    const system = instructionOf('system');
    const topics: Array<[string, RegExp]> = [
      ['upstream agent inputs', /<input source-agent="/],
      ['links to other agents and handing over through href', /<a href="[^"]*">[\s\S]*"href"/],
      ['the date in the metadata', /<metadata>[\s\S]*<current_date>/],
      ['checking feasibility first and failing fast', /### 1\.[\s\S]*system_failed_to_fulfill_objective/],
      ['content policy: children', /children/],
      ['content policy: prominent people', /prominent people/],
      ['content policy: violence', /violent/],
      ['content policy: dangerous or hateful content', /dangerous or hateful/],
      ['content policy: sexual content', /sexual/],
      ['content policy: copyrighted work', /copyrighted/],
      ['problem kinds', /Simple[\s\S]*Complicated[\s\S]*Complex/],
      ['observe, orient, decide, act', /observe[\s\S]*orient[\s\S]*decide[\s\S]*act/i],
      ['concurrent calls', /several function calls in the same turn/],
      ['task ids and their parts', /"task_id"[\s\S]*task_003_1/],
      ['escalating the problem kind', /turn out harder/],
      ['what to return, without preamble', /no commentary[\s\S]*"Here is"/],
      ['an empty outcome is fine', /empty "objective_outcome"/],
      ['the /mnt file system', /"\/mnt\/name\.ext"/],
      ['snake_case file names', /snake_case/],
      ['file tags replaced by content', /<file src="\/mnt\/name\.ext" \/>[\s\S]*replaced by the whole file/],
      ['no tags for files that do not exist', /Reference only files you know exist/],
    ];
    for (const [topic, pattern] of topics) expect(system, topic).toMatch(pattern);
  });

  it('covers choosing a generator, prompting the code generator, and files in prompts', () => {
    const generate = instructionOf('generate');
    const topics: Array<[string, RegExp]> = [
      ['when generate_text is worth its latency', /latency[\s\S]*yourself/],
      ['a generator per kind of output', /generate_images[\s\S]*generate_video[\s\S]*generate_speech_from_text[\s\S]*generate_music_from_text/],
      ['file tags in prompts', /only the files its prompt references with <file/],
      ['the code generator is a sandboxed sub-agent', /sub-agent[\s\S]*sandbox/],
      ['prompt parts: library, input, approach, deliverable', /library[\s\S]*input[\s\S]*approach[\s\S]*"return"[\s\S]*"save"/],
      ['no paths for the sandbox', /never with paths/],
      ['no file names for the sandbox', /Do not name the files/],
    ];
    for (const [topic, pattern] of topics) expect(generate, topic).toMatch(pattern);
  });

  it('covers choices against free input, the chat log, and one question per turn', () => {
    const chat = instructionOf('chat');
    expect(chat).toMatch(/chat_present_choices[\s\S]*chat_request_user_input[\s\S]*prefer choices/);
    expect(chat).toMatch(/\/mnt\/system\/chat_log\.json/);
    expect(chat).toMatch(/one question each/);
  });

  it('covers the memory key phrase, one sheet, reading sheets as files, and the automatic chat log', () => {
    const memory = instructionOf('memory');
    expect(memory).toMatch(/"Use Memory"/);
    expect(memory).toMatch(/one sheet named "memory"/);
    expect(memory).toMatch(/\/mnt\/memory\/<sheet name>/);
    expect(memory).toMatch(/\/mnt\/system\/chat_log\.json[\s\S]*earlier sessions/);
    expect(instructionOf('google-drive')).toMatch(/google_drive_upload_file[\s\S]*google_drive_create_folder/);
  });

  it('tells the generate_text and code sub-requests to give just the output', async () => {
    const backend = createScriptedBackendClient((request: ScriptedRequest) => {
      if (!request.body.contents[0]?.parts[0]?.text?.includes('<objective>')) return [textChunk('Result')];
      const answered = request.body.contents.filter((content) => content.parts.some((part) => part.functionResponse)).length;
      if (answered === 0) return [functionCallChunk('generate_text', { prompt: 'Write', model: 'flash', status_update: 'Writing' })];
      if (answered === 1) return [functionCallChunk('generate_and_execute_code', { prompt: 'Add', status_update: 'Adding' })];
      return [functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done', href: '/' })];
    });
    await collect(run({ segments: [{ type: 'text', text: 'Write and add' }] }, { backend, store: createMemoryInteractionStore() }));
    const sub = backend.requests.filter((request) => !request.body.contents[0]?.parts[0]?.text?.includes('<objective>'));
    expect(sub).toHaveLength(2);
    for (const request of sub) {
      const text = request.body.systemInstruction?.parts[0]?.text ?? '';
      expect(text).toMatch(/automated system/);
      expect(text).toMatch(/no chit-chat/);
      expect(text).toMatch(/no opening such as "Okay"/);
      expect(text).toMatch(/just the output/);
    }
    expect(sub[1]?.body.systemInstruction?.parts[0]?.text).toMatch(/^Your job is to write and run code/);
  });
});
