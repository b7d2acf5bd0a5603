// @ts-check
// Drives `ours-server.mjs` over loopback the way an app does: createAgentClient from
// @org/core/client (global fetch), one run after another, each to its `complete` event.
import { createAgentClient } from '@org/core/client';
import { contenderSettings, runContender } from './contender.mjs';

const settings = contenderSettings();
const serverUrl = process.env.SERVER_URL;
if (!serverUrl) throw new Error('SERVER_URL is required');
const client = createAgentClient({ baseUrl: serverUrl });
const prompt =
  'What is the weather in City 1, City 2, City 3 and City 4? Look each one up with get_weather, one at a time.';

async function runOnce() {
  const run = client.startRun(prompt);
  for await (const event of run.events) if (event.type === 'error') throw new Error(event.message);
  const result = await run.result;
  return result.outcomes?.parts.map((part) => part.text ?? '').join('') ?? '';
}

await runContender(settings, runOnce);
