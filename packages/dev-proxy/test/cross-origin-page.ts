// Bundled into a page served from an origin other than the agent server's: runs one objective
// through the client SDK against `baseUrl`, answering the question with a name.
import { AgentClientError, createAgentClient, type AgentEvent } from '@org/core/client';

async function runAgainst(baseUrl: string, objective: string) {
  const run = createAgentClient({ baseUrl }).startRun(objective, {
    onSuspend: (event) => (event.type === 'waitForInput' ? { input: { role: 'user', parts: [{ text: 'Ada' }] } } : {}),
  });
  const types: string[] = [];
  try {
    for await (const event of run.events as AsyncIterable<AgentEvent>) types.push(event.type);
    const result = await run.result;
    return { types, result: JSON.stringify(result) };
  } catch (error) {
    return { types, error: error instanceof AgentClientError ? { kind: error.kind, message: error.message } : { kind: 'other', message: String(error) } };
  }
}

(globalThis as unknown as { runAgainst: typeof runAgainst }).runAgainst = runAgainst;
