// The playground: a page that drives runs through the client SDK and shows every event.
import { AgentClientError, createBrowserAgentClient, createIndexedDbInteractionStore, dispatchAgentEvents, type AgentClient } from '@org/adapter-browser';
import type { AgentEvent, AgentEventOf, AgentResult, AgentRun, JsonObject, Part, ResumeResponse, StartRequest } from '@org/core/client';
import { createGeminiBackendClient, createHttpDriveOperationsClient, createUpstreamBackendClient } from '@org/core/http';
import { createFakeGoogleDrive, createSimulatedGemini } from '@org/core/testing';
import { el, renderContent, renderMarkdown, renderPart, safeLink } from './render.js';

/** Runs on this dev server, through its agent endpoint. */
const serverClient = createBrowserAgentClient({ runIn: 'server', baseUrl: location.origin });
let pageClient: AgentClient | undefined;

/** Runs the loop in this page against a simulated model, keeping suspended runs in IndexedDB. */
function inPageClient(): AgentClient {
  if (pageClient) return pageClient;
  const gemini = createSimulatedGemini({ chunkDelayMs: 40 });
  const fetchSimulated = (input: RequestInfo | URL, init?: RequestInit) => gemini.fetch(new Request(input, init));
  const backend = createGeminiBackendClient({
    apiKey: 'simulated',
    baseUrl: 'https://simulated.invalid/v1beta',
    fetch: fetchSimulated,
    upstream: createUpstreamBackendClient({ baseUrl: 'https://simulated.invalid', fetch: fetchSimulated, accessToken: 'simulated' }),
  });
  // Memory of in-page runs: a simulated Drive + Sheets in this page (gone on reload).
  const google = createFakeGoogleDrive();
  const drive = createHttpDriveOperationsClient({
    fetch: (input, init) => google.fetch(new Request(input, init)),
    getAccessToken: () => 'simulated',
    baseUrls: google.baseUrls('https://simulated.invalid'),
  });
  pageClient = createBrowserAgentClient({ runIn: 'page', backend, drive, store: createIndexedDbInteractionStore({ databaseName: 'agent-playground' }) });
  return pageClient;
}

/** Every playground run belongs to this graph, so runs with memory share one memory. */
const PLAYGROUND_GRAPH = { url: 'drive:/agent-playground', title: 'Agent playground' };

/** The start request: the objective, and a memory tool segment when memory is on. */
function startRequest(objective: string, memory: boolean): StartRequest {
  if (!memory) return { segments: [{ type: 'text', text: objective }], graph: PLAYGROUND_GRAPH };
  return {
    segments: [{ type: 'text', text: objective }, { type: 'tool', path: 'function-group/use-memory', title: 'Use Memory' }],
    graph: PLAYGROUND_GRAPH,
  };
}

const $ = <T extends HTMLElement>(selector: string): T => {
  const element = document.querySelector<T>(selector);
  if (!element) throw new Error(`playground: missing ${selector}`);
  return element;
};

const timeline = (): HTMLOListElement => $('#timeline');
const calls = new Map<string, HTMLElement>();

function addEntry(kind: string, title: string, ...body: Array<Node | string | undefined>): HTMLElement {
  const entry = el('li', { class: `entry ${kind}`, 'data-kind': kind }, el('div', { class: 'title' }, title), ...body);
  timeline().append(entry);
  entry.scrollIntoView({ block: 'nearest' });
  return entry;
}

function summarize(args: JsonObject): string {
  const text = JSON.stringify(args);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

function callEntry(callId: string): HTMLElement | undefined {
  return calls.get(callId);
}

/** One form per suspend: resolves with the response payload the protocol expects. */
function askUser(event: AgentEvent, run: AgentRun): void {
  const panel = $('#suspend');
  panel.replaceChildren();
  panel.hidden = false;
  const send = (response: ResumeResponse): void => {
    panel.hidden = true;
    panel.replaceChildren();
    run.respond(response);
  };
  if (event.type === 'waitForInput') {
    const upload = event.inputType === 'upload';
    const text = el('textarea', { id: 'input-text', rows: '3', placeholder: 'Your answer' });
    const file = el('input', { id: 'input-file', type: 'file' });
    const form = el('form', { 'data-testid': 'input-form' }, renderContent(event.prompt), upload ? file : text, upload ? undefined : file);
    const submit = el('button', { type: 'submit' }, 'Send');
    form.append(submit);
    if (event.skipLabel !== undefined) {
      const skip = el('button', { type: 'button', class: 'secondary' }, event.skipLabel || 'Skip');
      skip.addEventListener('click', () => send({ input: { role: 'user', parts: [{ text: '__skipped__' }] } }));
      form.append(skip);
    }
    form.addEventListener('submit', (submitEvent) => {
      submitEvent.preventDefault();
      void (async () => {
        const parts: Part[] = [];
        if (text.value.trim()) parts.push({ text: text.value });
        const chosen = file.files?.[0];
        if (chosen) parts.push({ inlineData: { mimeType: chosen.type || 'application/octet-stream', data: await toBase64(chosen) } });
        if (parts.length === 0) return;
        send({ input: { role: 'user', parts } });
      })();
    });
    panel.append(form);
    text.focus();
    return;
  }
  if (event.type === 'waitForChoice') {
    const multiple = event.selectionMode === 'multiple';
    const form = el('form', { 'data-testid': 'choice-form' }, renderContent(event.prompt));
    const options = [...event.choices];
    if (event.noneOfTheAboveLabel) options.push({ id: '__none_of_the_above__', content: { parts: [{ text: event.noneOfTheAboveLabel }] } });
    for (const choice of options) {
      const input = el('input', { type: multiple ? 'checkbox' : 'radio', name: 'choice', value: choice.id });
      form.append(el('label', { class: 'choice' }, input, renderContent(choice.content)));
    }
    form.append(el('button', { type: 'submit' }, 'Choose'));
    form.addEventListener('submit', (submitEvent) => {
      submitEvent.preventDefault();
      const ids = [...form.querySelectorAll<HTMLInputElement>('input[name=choice]:checked')].map((input) => input.value);
      if (ids.length > 0) send({ selected: { ids } });
    });
    panel.append(form);
    return;
  }
  if (event.type === 'queryConsent') {
    const allow = el('button', { type: 'button' }, 'Allow');
    const deny = el('button', { type: 'button', class: 'secondary' }, 'Deny');
    allow.addEventListener('click', () => send({ consent: true }));
    deny.addEventListener('click', () => send({ consent: false }));
    panel.append(el('div', { 'data-testid': 'consent-form' }, el('p', {}, `The agent asks for ${event.consentType}: ${JSON.stringify(event.scope)}`), allow, deny));
    return;
  }
  // readGraph, inspectNode, applyEdits: the playground has no graph, so it answers with nothing.
  const next = el('button', { type: 'button' }, 'Continue');
  next.addEventListener('click', () => send({}));
  panel.append(el('div', {}, el('p', {}, `The agent sent ${event.type}; the playground has no graph to offer.`), next));
}

function showResult(result: AgentResult): void {
  const box = $('#result');
  box.hidden = false;
  box.replaceChildren(
    el('h2', {}, result.success ? 'Completed' : 'Not fulfilled'),
    renderContent(result.outcomes, { markdown: true }),
  );
  box.dataset.status = result.success ? 'success' : 'failure';
  if (result.intermediate?.length) box.append(el('h3', {}, 'Files'));
  for (const file of result.intermediate ?? []) {
    box.append(el('figure', { class: 'file' }, el('figcaption', {}, file.path), renderPart(file.content)));
  }
}

function showFailure(error: unknown): void {
  const box = $('#result');
  box.hidden = false;
  box.dataset.status = 'error';
  const message = error instanceof AgentClientError ? `${error.kind}: ${error.message}` : String(error);
  box.replaceChildren(el('h2', {}, 'Stopped'), el('p', { class: 'error' }, message));
}

async function start(objective: string): Promise<void> {
  timeline().replaceChildren();
  calls.clear();
  $('#result').hidden = true;
  $('#suspend').hidden = true;
  const runButton = $<HTMLButtonElement>('#run');
  const stopButton = $<HTMLButtonElement>('#stop');
  runButton.disabled = true;
  stopButton.disabled = false;
  const runIn = $<HTMLSelectElement>('#run-in').value;
  const memory = $<HTMLInputElement>('#use-memory').checked;
  const run = (runIn === 'page' ? inPageClient() : serverClient).startRun(startRequest(objective, memory));
  stopButton.onclick = () => run.abort();
  let turn = 0;
  const handlers = {
    start: (event: AgentEventOf<'start'>) => void addEntry('start', 'Objective', renderContent(event.objective)),
    sendRequest: (event: AgentEventOf<'sendRequest'>) => void addEntry('request', `Model request ${++turn} · ${event.model}`),
    thought: (event: AgentEventOf<'thought'>) => void addEntry('thought', 'Thought', renderMarkdown(event.text)),
    content: (event: AgentEventOf<'content'>) => void addEntry('content', 'Content', renderContent(event.content)),
    functionCall: (event: AgentEventOf<'functionCall'>) => {
      const entry = addEntry('call', `${event.title ?? event.name}`, el('code', {}, `${event.name}(${summarize(event.args)})`), el('div', { class: 'status' }));
      entry.dataset.name = event.name;
      calls.set(event.callId, entry);
    },
    functionCallUpdate: (event: AgentEventOf<'functionCallUpdate'>) => {
      const entry = callEntry(event.callId);
      if (!entry) return;
      if (event.opts?.isThought && event.status) {
        // Progress of the work itself (code run, sources read): kept as a log under the call.
        entry.querySelector('.status')?.before(el('pre', { class: 'update' }, event.status));
        return;
      }
      const status = entry.querySelector('.status');
      if (!status) return;
      const eta = event.opts?.expectedDurationInSec ? ` (about ${event.opts.expectedDurationInSec}s)` : '';
      status.textContent = event.status === null ? '' : `${event.status}${eta}`;
    },
    functionResult: (event: AgentEventOf<'functionResult'>) => {
      const response = event.content.parts[0]?.functionResponse?.response ?? {};
      const entry = callEntry(event.callId);
      const body = el('pre', { class: 'response' }, summarize(response as JsonObject));
      const sources = (event.metadata as { grounding?: { sources?: Array<{ uri: string; title: string }> } } | undefined)?.grounding?.sources;
      const links = sources?.length
        ? el('div', { class: 'sources' }, 'Sources: ', ...sources.map((source) => safeLink(String(source.uri), String(source.title ?? source.uri))))
        : undefined;
      if (entry) entry.append(body, ...(links ? [links] : []));
      else addEntry('result', 'Result', body, links);
    },
    usageMetadata: (event: AgentEventOf<'usageMetadata'>) => {
      const { promptTokenCount = 0, candidatesTokenCount = 0, thoughtsTokenCount = 0 } = event.metadata;
      addEntry('usage', `Tokens: ${promptTokenCount} in · ${candidatesTokenCount} out${thoughtsTokenCount ? ` · ${thoughtsTokenCount} thinking` : ''}`);
    },
    waitForInput: (event: AgentEventOf<'waitForInput'>) => {
      addEntry('suspend', 'Waiting for your input', renderContent(event.prompt));
      askUser(event, run);
    },
    waitForChoice: (event: AgentEventOf<'waitForChoice'>) => {
      addEntry('suspend', 'Waiting for your choice', renderContent(event.prompt));
      askUser(event, run);
    },
    queryConsent: (event: AgentEventOf<'queryConsent'>) => {
      addEntry('suspend', 'Waiting for your consent');
      askUser(event, run);
    },
    readGraph: (event: AgentEventOf<'readGraph'>) => askUser(event, run),
    inspectNode: (event: AgentEventOf<'inspectNode'>) => askUser(event, run),
    applyEdits: (event: AgentEventOf<'applyEdits'>) => askUser(event, run),
    error: (event: AgentEventOf<'error'>) => void addEntry('error', 'Error', event.message),
    finish: () => void addEntry('finish', 'Finished'),
    complete: (event: AgentEventOf<'complete'>) => void addEntry('complete', event.result.success ? 'Complete' : 'Complete (not fulfilled)'),
  };
  try {
    await dispatchAgentEvents(run.events, handlers);
    showResult(await run.result);
  } catch (error) {
    showFailure(error);
  } finally {
    $('#suspend').hidden = true;
    runButton.disabled = false;
    stopButton.disabled = true;
  }
}

function toBase64(file: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ''));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

$('#objective-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const objective = $<HTMLTextAreaElement>('#objective').value.trim();
  if (objective) void start(objective);
});
document.body.dataset.ready = 'true';
