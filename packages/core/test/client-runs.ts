import type { AgentRun } from '../src/client/agent-run.js';
import type { AgentClientError } from '../src/client/errors.js';
import type { AgentEvent } from '../src/protocol/events.js';

/** What the app reads of a run: thought texts and the other event types, then how the run ended. */
export async function read(run: AgentRun): Promise<{ seen: string[]; error: AgentClientError | undefined }> {
  const seen: string[] = [];
  const error = await (async () => {
    for await (const event of run.events) seen.push(label(event));
  })().then(
    () => undefined,
    (caught: unknown) => caught as AgentClientError,
  );
  return { seen, error };
}

function label(event: AgentEvent): string {
  return event.type === 'thought' ? event.text : event.type;
}
