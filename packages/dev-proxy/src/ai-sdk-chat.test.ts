import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve, type RunningServer } from '@org/adapter-node';
import { bundleForBrowser, launchChromium, type Browser } from '@org/browser-testing';
import type { AgentUIMessage } from '@org/core/ai-sdk';
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls, type ChatState, type ChatStatus, type UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevProcess } from './test-support/dev-process.js';

const OBJECTIVE = 'Ask for my name, then let me pick a time of day, and greet me.';
const artifacts = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test-results');
const children: ChildProcess[] = [];
let browser: Browser;
let site: RunningServer;
let devUrl = '';
let storeDirectory = '';

beforeAll(async () => {
  storeDirectory = await mkdtemp(path.join(os.tmpdir(), 'ai-sdk-chat-'));
  ({ url: devUrl } = await startDevProcess({ INTERACTION_STORE_DIR: storeDirectory }, children));
  const script = await bundleForBrowser(fileURLToPath(new URL('../test/chat-page.tsx', import.meta.url)), {
    jsx: 'automatic',
    define: { 'process.env.NODE_ENV': '"production"' },
  });
  // The page comes from a site of its own, as an app's would; the dev server lets any origin call it.
  site = await serve({
    handler: async (request) =>
      new URL(request.url).pathname === '/app.js'
        ? new Response(script, { headers: { 'content-type': 'text/javascript' } })
        : new Response(
            `<!doctype html><title>chat</title><script>window.CHAT_SERVER = ${JSON.stringify(devUrl)};</script><div id="root"></div><script type="module" src="/app.js"></script>`,
            { headers: { 'content-type': 'text/html' } },
          ),
  });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await site?.close();
  for (const child of children) child.kill('SIGTERM');
  if (storeDirectory) await rm(storeDirectory, { recursive: true, force: true });
});

describe('a React page using @ai-sdk/react useChat against the dev server /api/chat (simulated model), in Chromium', () => {
  it('streams reasoning and tools, takes the answers through its own forms, survives a reload, and shows the greeting and the plan file', async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(site.url);
    await page.waitForSelector('body[data-ready=true]');

    await page.fill('#message', OBJECTIVE);
    await page.click('#send');

    const ask = page.locator('[data-testid=ask]');
    await ask.waitFor();
    expect(await ask.textContent()).toContain('What is your name?');
    expect(await page.locator('[data-part=reasoning]').first().textContent()).toContain('Planning');
    expect(await page.locator('[data-part=tool][data-name=system_write_file]').getAttribute('data-state')).toBe('output-available');
    await page.fill('#answer', 'Ada');
    await ask.locator('button[type=submit]').click();

    const choices = page.locator('[data-testid=choices]');
    await choices.waitFor();

    // A reload while the run waits: the page restores the chat from the server and answers it there.
    const chatUrl = page.url();
    expect(chatUrl).toMatch(/[?&]chat=/);
    await page.reload();
    await page.waitForSelector('body[data-ready=true]');
    await choices.waitFor();
    expect(await page.locator('[data-part=tool][data-name=chat_request_user_input]').getAttribute('data-state')).toBe('output-available');
    await choices.locator('input[value=noon]').check();
    await choices.locator('button[type=submit]').click();

    const greeting = page.locator('[data-part=text]', { hasText: 'Hello, Ada!' });
    await greeting.waitFor({ timeout: 30_000 });
    expect(await greeting.textContent()).toContain('You chose noon.');
    expect(await page.locator('[data-part=file-name]').allTextContents()).toContain('/mnt/plan.md');
    expect(await page.locator('[data-part=file][data-media-type="text/markdown"]').textContent()).toContain('# Plan');
    await page.locator('#status[data-status=ready]').waitFor();
    expect(await page.locator('#error').count()).toBe(0);
    expect(problems).toEqual([]);

    await mkdir(artifacts, { recursive: true });
    const screenshot = path.join(artifacts, 'ai-sdk-chat-completed.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    expect((await stat(screenshot)).size).toBeGreaterThan(10_000);
    await page.close();
  });
});

/** The AI SDK's own chat logic (what `useChat` runs), with its state in plain arrays. */
class NodeChat extends AbstractChat<UIMessage> {
  constructor({ messages, ...options }: Omit<ConstructorParameters<typeof AbstractChat<UIMessage>>[0], 'state'> & { messages?: UIMessage[] }) {
    super({ ...options, state: new ArrayState(structuredClone(messages ?? [])) });
  }
}

class ArrayState implements ChatState<UIMessage> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: UIMessage[];
  constructor(messages: UIMessage[]) {
    this.messages = messages;
  }
  pushMessage = (message: UIMessage): void => {
    this.messages = [...this.messages, message];
  };
  popMessage = (): void => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: UIMessage): void => {
    this.messages = this.messages.map((existing, position) => (position === index ? message : existing));
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

function settled(chat: NodeChat): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (chat.status === 'ready') resolve();
      else if (chat.status === 'error') reject(chat.error ?? new Error('chat failed'));
      else setTimeout(check, 10);
    };
    setTimeout(check, 10);
  });
}

function waitingCall(chat: NodeChat, name: string): string {
  const part = chat.lastMessage?.parts.find((candidate) => candidate.type === `tool-${name}`) as { toolCallId?: string; state?: string } | undefined;
  if (!part?.toolCallId || part.state !== 'input-available') throw new Error(`${name} is not waiting`);
  return part.toolCallId;
}

describe('DefaultChatTransport from ai, in Node, against the dev server /api/chat', () => {
  it('drives the same conversation to the greeting, and a request with another token is refused', async () => {
    let requests = 0;
    const transport = (token: string) =>
      new DefaultChatTransport<UIMessage>({
        api: `${devUrl}/api/chat`,
        headers: { authorization: `Bearer ${token}` },
        fetch: (input, init) => {
          requests += 1;
          return fetch(input, init);
        },
      });
    const chat = new NodeChat({ id: `node-${Date.now()}`, transport: transport('ada-token'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await chat.sendMessage({ text: OBJECTIVE });
    await settled(chat);

    // Someone else's answer to the same chat is refused; the run still waits for its owner.
    const other = new NodeChat({ id: chat.id, messages: chat.messages, transport: transport('other-token'), sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
    await other.addToolOutput({ tool: 'chat_request_user_input', toolCallId: waitingCall(other, 'chat_request_user_input'), output: { input: { parts: [{ text: 'Mallory' }] } } });
    await expect(settled(other)).rejects.toThrow(/FORBIDDEN/);

    await chat.addToolOutput({ tool: 'chat_request_user_input', toolCallId: waitingCall(chat, 'chat_request_user_input'), output: { input: { role: 'user', parts: [{ text: 'Ada' }] } } });
    await settled(chat);
    await chat.addToolOutput({ tool: 'chat_present_choices', toolCallId: waitingCall(chat, 'chat_present_choices'), output: { selected: { ids: ['sunrise'] } } });
    await settled(chat);

    const message = chat.lastMessage as AgentUIMessage;
    const text = message.parts.map((part) => (part.type === 'text' ? part.text : '')).join('');
    expect(text).toContain('Hello, Ada! You chose sunrise.');
    expect(message.parts.some((part) => part.type === 'data-file' && part.data.path === '/mnt/plan.md')).toBe(true);
    expect(message.parts.some((part) => part.type === 'file' && part.mediaType === 'text/markdown')).toBe(true);
    expect(requests).toBe(4); // the message, two answers sent by the chat itself, and the refused one
    expect(JSON.stringify(chat.messages)).not.toMatch(/thoughtSignature|providerMetadata/);
  });
});
