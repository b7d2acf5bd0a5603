import { env } from 'cloudflare:workers';
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { JsonObject } from '@org/core';
import { createScriptedBackendClient } from '@org/core/testing';
import { agentRequest, wireEvents, type WireEvent } from '../test/helpers.js';
import { playMemoryScenario, scenario } from '../test/memory-scenario.js';
import { createHandler } from './create-handler.js';

type TestEnv = Cloudflare.Env;

/**
 * Fresh Worker instances as the README builds them, with a model that plays the scenario. Drive is
 * the default client built from the caller's token, at `GOOGLE_API_BASE_URL` (the fake Google
 * Drive of vitest.config.ts). Runs are served in the Worker itself (the Durable Object store), or
 * by session objects whose model plays the same scenario (test/worker.ts).
 */
const WORKERS: Array<[string, () => ExportedHandler<TestEnv>]> = [
  ['in the Worker', () => createHandler<TestEnv>({ sessionNamespace: () => undefined, createBackend: () => createScriptedBackendClient(playMemoryScenario) })],
  ['in session objects', () => createHandler<TestEnv>({ sessionNamespace: (workerEnv) => workerEnv.MEMORY_SESSIONS })],
];

async function send(worker: ExportedHandler<TestEnv>, body: unknown): Promise<WireEvent[]> {
  const executionContext = createExecutionContext();
  const response = await worker.fetch?.(agentRequest(body) as Request<unknown, IncomingRequestCfProperties>, env, executionContext);
  if (!response) throw new Error('the worker has no fetch handler');
  const events = await wireEvents(response);
  await waitOnExecutionContext(executionContext);
  return events;
}

const startBody = (objective: string) => ({
  start: {
    segments: [{ textSegment: { text: objective } }, { toolSegment: { path: 'function-group/use-memory', title: 'Use Memory' } }],
    graph: scenario.graph,
  },
  accessToken: scenario.accessToken,
});

function results(stream: WireEvent[]): JsonObject[] {
  return stream.flatMap((event) => {
    const part = (event.functionResult?.content as { parts: Array<{ functionResponse: { response: JsonObject } }> } | undefined)?.parts[0];
    return part ? [part.functionResponse.response] : [];
  });
}

describe('memory in workerd', () => {
  for (const [where, memoryWorker] of WORKERS) {
    it(`plays the memory scenario ${where}: sheets and the chat log of one run (suspend and resume on other instances) reach a later run`, async () => {
      expect((await fetch('https://google-apis.test/__fake-drive/reset', { method: 'POST' })).status).toBe(204);
      const [firstRun, secondRun] = scenario.runs as [(typeof scenario.runs)[number], (typeof scenario.runs)[number]];
      const rows = [['player', 'score', 'notes'], ['Ada', '42', 'Ada beat the record'], ['Bob', '17', 'steady']];

      const suspended = await send(memoryWorker(), startBody(firstRun.objective));
      const waiting = suspended.at(-1)?.waitForInput as { interactionId: string; prompt: unknown };
      expect(waiting.prompt).toEqual({ parts: [{ text: 'Who should I watch next game?' }], role: 'user' });
      expect(results(suspended)).toEqual([
        { file_path: '/mnt/notes.md' },
        { success: true },
        { success: true },
        { file_path: '/mnt/scores.md' },
        { json: JSON.stringify({ values: rows }) },
        { success: true },
        {
          sheets: [
            { name: 'Scores', file_path: '/mnt/memory/Scores', columns: ['player', 'score', 'notes'] },
            { name: 'Scratch', file_path: '/mnt/memory/Scratch', columns: ['tmp'] },
          ],
        },
        { success: true },
      ]);
      const resumed = await send(memoryWorker(), {
        resume: { interactionId: waiting.interactionId, response: { input: { role: 'user', parts: [{ text: scenario.answer }] } } },
        accessToken: scenario.accessToken,
      });
      expect(resumed.at(-1)).toMatchObject({ complete: { result: { success: true, outcomes: { parts: [{ text: `Saved the scores: \n${JSON.stringify({ values: rows })}` }] } } } });

      const recalled = await send(memoryWorker(), startBody(secondRun.objective));
      expect(recalled.at(-1)).toMatchObject({ complete: { result: { success: true } } });
      const [sheetFile, json, chatLog] = results(recalled);
      expect(sheetFile).toEqual({ text: JSON.stringify(rows) });
      expect(json).toEqual({ json: JSON.stringify({ values: rows.slice(1) }) });
      expect(JSON.parse(chatLog?.text as string)).toEqual([
        { role: 'model', parts: [{ text: 'Who should I watch next game?' }] },
        { role: 'user', parts: [{ text: scenario.answer }] },
      ]);

      // The same REST calls as the dev server made, read from the fake's log.
      const log = (await (await fetch('https://google-apis.test/__fake-drive/requests')).json()) as Array<{ method: string; path: string; query: Record<string, string>; status: number }>;
      const calls = log.map(({ method, path, query }) => {
        const pairs = Object.entries(query).map(([name, value]) => `${name}=${value}`);
        return `${method} ${path}${pairs.length > 0 ? `?${pairs.join('&')}` : ''}`;
      });
      expect(calls).toEqual(scenario.expectedRequests);
      expect(log.every((request) => request.status < 300)).toBe(true);
    });
  }
});
