import { run, toWireEvent, encodeSseEvent, createSseEventStream } from '@org/core';
import { createAgentHandler } from '@org/core/http';
import { serve } from '@org/adapter-node';
import { createMemoryInteractionStore } from '@org/core/testing';
const thoughts = 2000;
const chunk = (parts, end = {}) => ({ candidates: [{ content: { role: 'model', parts }, index: 0, ...end }], modelVersion: 'm', responseId: 'r' });
const turn = [...Array.from({ length: thoughts }, (_, i) => chunk([{ text: `Thinking step ${i}: weighing the next move.`, thought: true }])), chunk([{ text: 'Done.' }], { finishReason: 'STOP' })];
const backend = { async *streamGenerateContent() { yield* turn; }, executeStep() {}, uploadGeminiFile() {}, uploadBlobFile() {} };
const store = createMemoryInteractionStore();
const options = { mode: 'chat', maxTurns: 2, defaultFunctionGroups: false };
const handler = createAgentHandler({ createPorts: () => ({ backend, store }), runOptions: () => options });
const mode = process.argv[2];
let server;
if (mode === 'http') server = await serve({ handler });
const body = JSON.stringify({ start: { segments: [{ type: 'text', text: 'x' }] } });
async function once() {
  const response = mode === 'http'
    ? await fetch(`${server.url}/v1beta1/streamRunAgent`, { method: 'POST', body, headers: { 'content-type': 'application/json' } })
    : await handler(new Request('http://x/v1beta1/streamRunAgent', { method: 'POST', body, headers: { 'content-type': 'application/json' } }));
  const t = await response.text(); return t.length;
}
for (let i = 0; i < 5; i++) await once();
const t = process.cpuUsage();
for (let i = 0; i < 20; i++) await once();
const u = process.cpuUsage(t);
console.log(mode, ((u.user + u.system) / 40000).toFixed(2), 'µs/event');
await server?.close();
