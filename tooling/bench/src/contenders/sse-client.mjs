// @ts-check
// Drives `sse-server.mjs`: one run after another over loopback (global fetch), each read to its
// end. It counts the SSE events of each run and prints the count of the last run and whether
// every run ended with `complete`.
import { contenderSettings, runContender } from './contender.mjs';

const settings = contenderSettings();
const serverUrl = process.env.SERVER_URL;
if (!serverUrl) throw new Error('SERVER_URL is required');
const body = JSON.stringify({ start: { segments: [{ type: 'text', text: 'Think it through.' }] } });

async function runOnce() {
  const response = await fetch(`${serverUrl}/v1beta1/streamRunAgent?alt=sse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
  const text = await response.text();
  let events = 0;
  for (let at = text.indexOf('data: '); at !== -1; at = text.indexOf('data: ', at + 6)) events += 1;
  const complete = text.lastIndexOf('data: {"complete"');
  if (complete === -1 || text.indexOf('data: ', complete + 6) !== -1) throw new Error('the run did not end with complete');
  return `${events} events`;
}

await runContender(settings, runOnce);
