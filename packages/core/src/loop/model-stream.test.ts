import { describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
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
