import { describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import type { BackendClient } from '../ports/index.js';
import type { RunEvent } from '../protocol/run-events.js';
import { run } from '../run/index.js';
import { createMemoryInteractionStore, thoughtChunk } from '../testing/index.js';
import { sleep, stopError } from './model-stream.js';

describe('stopping a run', () => {
  it('ends every wait with the coded reason the run was stopped with, the same error each time', async () => {
    const controller = new AbortController();
    const reason = new AgentError('CONFLICT', 'Another instance took over the run');
    const waiting = sleep(60_000, controller.signal);
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    await expect(sleep(60_000, controller.signal)).rejects.toBe(reason);
    expect(stopError(controller.signal)).toBe(reason);
  });

  it('ends with ABORTED, keeping the reason as its cause, when the reason is not an AgentError', async () => {
    const controller = new AbortController();
    const reason = new Error('the user closed the tab');
    controller.abort(reason);
    const error = await sleep(60_000, controller.signal).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(AgentError);
    expect(error).toMatchObject({ code: 'ABORTED', message: 'Run was stopped', cause: reason });
  });
});

describe('a model failure the backend says asking again cannot help', () => {
  it('pauses the run after a chunk, without asking the model again', async () => {
    let requests = 0;
    const unsupported = () => Promise.reject(new AgentError('NOT_IMPLEMENTED', 'not in this test'));
    const backend: BackendClient = {
      async *streamGenerateContent() {
        requests += 1;
        yield thoughtChunk('Starting…');
        throw new AgentError('RATE_LIMITED', 'The daily Gemini quota is used up', { details: { retryable: false } });
      },
      executeStep: unsupported,
      uploadGeminiFile: unsupported,
      uploadBlobFile: unsupported,
    };
    const events: RunEvent[] = [];
    for await (const event of run({ segments: [{ type: 'text', text: 'Work' }] }, { backend, store: createMemoryInteractionStore() }, { modelPolicy: { baseDelayMs: 1, maxDelayMs: 5 } })) {
      events.push(event);
    }
    expect(requests).toBe(1);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'RATE_LIMITED', interactionId: expect.any(String) });
  });
});

describe("a custom backend's own fetch failing", () => {
  /** A backend whose first request fails with `failure`, and whose later ones answer. */
  const failingOnce = (failure: Error) => {
    let requests = 0;
    const unsupported = () => Promise.reject(new AgentError('NOT_IMPLEMENTED', 'not in this test'));
    const backend: BackendClient = {
      async *streamGenerateContent() {
        requests += 1;
        if (requests === 1) throw failure;
        yield { candidates: [{ content: { role: 'model', parts: [{ text: 'Done.' }] }, finishReason: 'STOP', index: 0 }] };
      },
      executeStep: unsupported,
      uploadGeminiFile: unsupported,
      uploadBlobFile: unsupported,
    };
    return { backend, requests: () => requests };
  };
  const lastEvent = async (backend: BackendClient) => {
    let last: RunEvent | undefined;
    const events = run({ segments: [{ type: 'text', text: 'Work' }] }, { backend, store: createMemoryInteractionStore() }, { mode: 'chat', modelPolicy: { baseDelayMs: 1, maxDelayMs: 5 } });
    for await (const event of events) last = event;
    return last;
  };

  it('asks again after a network failure, as the built-in clients do', async () => {
    for (const message of ['fetch failed', 'Failed to fetch', 'terminated']) {
      const { backend, requests } = failingOnce(new TypeError(message));
      expect(await lastEvent(backend)).toMatchObject({ type: 'complete', result: { success: true } });
      expect(requests()).toBe(2);
    }
  });

  it('does not ask again after a bug in the backend', async () => {
    const { backend, requests } = failingOnce(new TypeError("Cannot read properties of undefined (reading 'parts')"));
    expect(await lastEvent(backend)).toMatchObject({ type: 'complete', result: { success: false } });
    expect(requests()).toBe(1);
  });
});
