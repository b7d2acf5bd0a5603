import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../protocol/content.js';
import type { AgentEvent, AgentEventOf } from '../protocol/events.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { run } from '../run/index.js';
import { createMemoryInteractionStore, createScriptedBackendClient, functionCallChunk } from '../testing/index.js';

type Call = [name: string, args: JsonObject];

/**
 * Runs an objective whose model makes `turns` of calls (each turn its calls in parallel), then
 * fulfils the objective. Returns every response the model got, in call order, and the events.
 */
async function runCalls(turns: Call[][]): Promise<{ responses: JsonObject[]; events: AgentEvent[] }> {
  const script: GenerateContentResponse[][] = turns.map((calls) => calls.map(([name, args]) => functionCallChunk(name, args)));
  script.push([functionCallChunk('system_objective_fulfilled', { objective_outcome: 'Done', href: '/' })]);
  const backend = createScriptedBackendClient(script);
  const events: AgentEvent[] = [];
  for await (const event of run({ segments: [{ type: 'text', text: 'Work with files' }] }, { backend, store: createMemoryInteractionStore() })) {
    events.push(event);
  }
  const responses = events
    .filter((event): event is AgentEventOf<'functionResult'> => event.type === 'functionResult')
    .map((event) => event.content.parts[0]?.functionResponse?.response as JsonObject);
  return { responses: responses.slice(0, -1), events };
}

function completed(events: AgentEvent[]): AgentEventOf<'complete'> {
  const last = events.at(-1);
  expect(last).toMatchObject({ type: 'complete', result: { success: true } });
  return last as AgentEventOf<'complete'>;
}

const pathsOf = (events: AgentEvent[]) => (completed(events).result.intermediate ?? []).map((file) => file.path);
const write = (file_name: string, content = 'text'): Call => ['system_write_file', { file_name, content }];
const read = (file_path: string): Call => ['system_read_text_from_file', { file_path }];

describe('system_write_file and system_read_text_from_file with hostile paths', () => {
  it('answers a file name no disk should get with an error naming file_name, and the run goes on with every file it wrote', async () => {
    const hostile = ['', '..', 'a\u0000b', 'notes\n.md', 'invoice\u202Efdp.md', '．．／．．／etc／passwd', '%2e%2e/%2e%2e/etc/passwd', 'x'.repeat(300), 'system/chat_log.json'];
    const { responses, events } = await runCalls([[write('first.md', 'one')], hostile.map((name) => write(name)), [write('last.md', 'two'), read('/mnt/system/chat_log.json')]]);
    expect(responses.slice(1, -2)).toEqual(hostile.map(() => ({ error: expect.stringMatching(/^file_name: "[^"\n\u0000]*" (is not a usable file name|is a system file)/) })));
    expect(responses.at(-1)).toEqual({ text: '[]' });
    expect(pathsOf(events)).toEqual(['/mnt/first.md', '/mnt/last.md']);
  });

  it('keeps paths with .., /mnt/../, backslashes or absolute names inside /mnt/, and reads them back as written', async () => {
    const { responses } = await runCalls([
      [write('../../etc/passwd', 'a'), write('/mnt/../secrets/key', 'b'), write('..\\..\\windows\\win.ini', 'c')],
      [read('/mnt/../etc/passwd.txt'), read('secrets\\key.txt'), read('/mnt/windows/win.ini'), read('/etc/passwd')],
    ]);
    expect(responses).toEqual([
      { file_path: '/mnt/etc/passwd.txt' },
      { file_path: '/mnt/secrets/key.txt' },
      { file_path: '/mnt/windows/win.ini' },
      { text: 'a' },
      { text: 'b' },
      { text: 'c' },
      { error: 'file "/etc/passwd" not found' },
    ]);
  });

  it('resolves <file> tags once: a missing file is named, a tag naming the file being written uses its old text, thousands of tags are refused', async () => {
    const thousands = Array.from({ length: 5000 }, () => '<file src="/mnt/self.md" />').join('');
    const { responses, events } = await runCalls([
      [write('self.md', 'v1')],
      [write('self.md', 'v2 <file src="/mnt/self.md" />')],
      [write('other.md', '<file src="/mnt/missing.md" /> and <file src="<file src="/mnt/self.md" />" />')],
      [write('many.md', thousands)],
      [read('self.md')],
    ]);
    expect(responses).toEqual([
      { file_path: '/mnt/self.md' },
      { file_path: '/mnt/self.md' },
      { error: 'Agent unable to proceed: file "/mnt/missing.md" not found' },
      { error: 'content: Agent unable to proceed: the text has 5000 <file> tags, more than the 1000 one text may hold' },
      { text: 'v2 \nv1' },
    ]);
    expect(pathsOf(events)).toEqual(['/mnt/self.md']);
  });

  it('refuses a file past a limit with an error naming the field, loses nothing, and lists what there is within bounds', async () => {
    // Long names, so the list of 1000 files is longer than a result may be.
    const name = (index: number) => `${'d'.repeat(200)}/${'e'.repeat(200)}/${'f'.repeat(200)}/file_${index}.md`;
    const { responses, events } = await runCalls([
      Array.from({ length: 1001 }, (_, index) => write(name(index), `text ${index}`)),
      [write('huge.md', 'x'.repeat(16 * 1024 * 1024 + 1)), write(name(3), 'replaced')],
      [read(`/mnt/${name(0)}`), read(`/mnt/${name(3)}`), ['system_list_files', { status_update: '' }]],
    ]);
    expect(responses[999]).toEqual({ file_path: `/mnt/${name(999)}` });
    expect(responses[1000]).toEqual({ error: expect.stringMatching(/^file_name: There are already 1000 files, the most a run may keep/) });
    expect(responses[1001]).toEqual({ error: expect.stringMatching(/^content: File "\/mnt\/huge\.md" would hold 16777217 characters/) });
    expect(responses.slice(1002, 1005)).toEqual([{ file_path: `/mnt/${name(3)}` }, { text: 'text 0' }, { text: 'replaced' }]);
    const list = String(responses[1005]?.list);
    expect(list.length).toBeLessThanOrEqual(512 * 1024 + 100);
    expect(list).toMatch(/\n\[… and \d+ more files\]$/);
    expect(list.split('\n')[0]).toBe(`/mnt/${name(0)}`);
    expect(pathsOf(events)).toHaveLength(1000);
  });

  it('hands back at most 512 Ki characters of a file, saying how to use all of it', async () => {
    const text = `start ${'x'.repeat(1024 * 1024)} end`;
    const { responses } = await runCalls([[write('big.md', text)], [read('/mnt/big.md')]]);
    const shown = String(responses[1]?.text);
    expect(shown.startsWith('start xxx')).toBe(true);
    expect(shown.length).toBeLessThan(512 * 1024 + 300);
    expect(shown).toMatch(/\[… cut: \d+ more characters of 1048586\. Reference the file as <file src="\/mnt\/big\.md" \/> in a generate_text prompt/);
  });

  it('cuts a status line of megabytes to 500 characters', async () => {
    const { events } = await runCalls([[['system_list_files', { status_update: 's'.repeat(5 * 1024 * 1024) }]]]);
    const updates = events.filter((event): event is AgentEventOf<'functionCallUpdate'> => event.type === 'functionCallUpdate');
    expect(updates.map((event) => event.status?.length)).toEqual([501]);
  });

  it('answers wrong types and missing fields naming the field, and ignores extra fields', async () => {
    const { responses } = await runCalls([
      [
        ['system_write_file', { file_name: 5, content: 'x' }],
        ['system_write_file', { content: 'x' }],
        ['system_write_file', { file_name: 'ok.md', content: 'x', extra: { deeply: { nested: [1, 2, 3] } } }],
        ['system_read_text_from_file', { file_path: ['ok.md'] }],
      ],
    ]);
    expect(responses).toEqual([
      { error: 'Invalid arguments for system_write_file: file_name: Invalid input: expected string, received number' },
      { error: 'Invalid arguments for system_write_file: file_name: Invalid input: expected string, received undefined' },
      { file_path: '/mnt/ok.md' },
      { error: 'Invalid arguments for system_read_text_from_file: file_path: Invalid input: expected string, received array' },
    ]);
  });
});

describe('system_objective_fulfilled with hostile arguments', () => {
  it('answers an unknown href of any length with a short error and does not end the run', async () => {
    const { responses, events } = await runCalls([[['system_objective_fulfilled', { objective_outcome: 'x', href: `/route-${'9'.repeat(100_000)}` }]]]);
    expect(String(responses[0]?.error)).toMatch(/^Route "\/route-9+… \(100007 characters\)" not found$/);
    completed(events);
  });
});

describe('the task tree functions with hostile trees and ids', () => {
  const task = (task_id: string, subtasks?: JsonObject[]): JsonObject => ({
    task_id,
    description: `Do ${task_id}`,
    execution_mode: 'serial',
    status: 'not_started',
    ...(subtasks ? { subtasks } : {}),
  });

  it('answers a tree too deep or too big to keep with an error naming where, and the run goes on with the old tree', async () => {
    let deep = task('task_1000');
    for (let level = 999; level >= 1; level -= 1) deep = task(`task_${level}`, [deep]);
    const wide = task('task_000', Array.from({ length: 1000 }, (_, index) => task(`task_${index + 1}`)));
    const { responses, events } = await runCalls([
      [['system_create_task_tree', { task_tree: task('task_001', [task('task_002')]) }]],
      [['system_create_task_tree', { task_tree: deep }]],
      [['system_create_task_tree', { task_tree: wide }]],
      [['system_create_task_tree', { task_tree: { ...task('task_009'), status: 'x'.repeat(5 * 1024 * 1024) } }]],
      [['system_read_text_from_file', { file_path: '/mnt/task_tree.json' }]],
    ]);
    expect(responses.slice(0, 4)).toEqual([
      { file_path: '/mnt/task_tree.json' },
      { error: `Invalid arguments for system_create_task_tree: task_tree${'.subtasks[0]'.repeat(32)}: subtasks are nested more than 32 levels deep` },
      { error: 'Invalid arguments for system_create_task_tree: task_tree.subtasks[999]: the tree has more than 1000 tasks' },
      { error: 'Invalid arguments for system_create_task_tree: task_tree.status: Invalid option: expected one of "not_started"|"in_progress"|"complete"' },
    ]);
    expect(JSON.parse(String(responses[4]?.text))).toEqual(task('task_001', [task('task_002')]));
    completed(events);
  });

  it('says which task ids are unknown, marks the known ones, and says when there is no tree at all', async () => {
    const hugeId = `task_${'9'.repeat(1024 * 1024)}`;
    const { responses } = await runCalls([
      [['system_mark_completed_tasks', { task_ids: ['task_001'] }]],
      [['system_create_task_tree', { task_tree: task('task_001', [task('task_002'), task('task_003')]) }]],
      [['system_mark_completed_tasks', { task_ids: ['task_002', 'task_404', hugeId, 'task_404'] }]],
      [['system_mark_completed_tasks', { task_ids: ['task_003_1'] }]],
      [['system_read_text_from_file', { file_path: '/mnt/task_tree.json' }]],
    ]);
    // The path comes back every time, as the protocol's response requires it.
    expect(responses[0]).toEqual({ file_path: '/mnt/task_tree.json', error: 'task_ids: there is no task tree yet; make one with system_create_task_tree first' });
    expect(responses[2]).toEqual({
      file_path: '/mnt/task_tree.json',
      error: `task_ids: the task tree has no task "task_404", "task_${'9'.repeat(95)}…"; the other tasks were marked complete`,
    });
    expect(responses[3]).toEqual({ file_path: '/mnt/task_tree.json' });
    const tree = JSON.parse(String(responses[4]?.text)) as { subtasks: Array<{ status: string }> };
    expect(tree.subtasks.map((subtask) => subtask.status)).toEqual(['complete', 'complete']);
  });
});
