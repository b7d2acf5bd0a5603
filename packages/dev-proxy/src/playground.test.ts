import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, type Browser } from '@org/browser-testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevProcess } from './test-support/dev-process.js';

const artifacts = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test-results');
const children: ChildProcess[] = [];
let browser: Browser;
let storeDirectory = '';
let url = '';

beforeAll(async () => {
  storeDirectory = await mkdtemp(path.join(os.tmpdir(), 'playground-'));
  ({ url } = await startDevProcess({ INTERACTION_STORE_DIR: storeDirectory }, children));
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  for (const child of children) child.kill('SIGTERM');
  if (storeDirectory) await rm(storeDirectory, { recursive: true, force: true });
});

describe('the playground at / of a real dev server (simulated model)', () => {
  it('runs an objective that asks for a name and a choice, and shows the completed result', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    // Nothing the page asks for goes unanswered (a missing favicon included).
    page.on('requestfinished', (request) => {
      void request.response().then((response) => {
        if (response && response.status() >= 400) problems.push(`${response.status()} ${request.url()}`);
      });
    });
    await page.goto(`${url}/`);
    await page.waitForSelector('body[data-ready=true]');
    // A browser asks no server for the icon of the tab.
    expect(await page.locator('link[rel=icon]').getAttribute('href')).toBe('data:,');

    await page.fill('#objective', 'Ask for my name, then let me pick a time of day, and greet me.');
    await page.click('#run');

    const inputForm = page.locator('[data-testid=input-form]');
    await inputForm.waitFor();
    expect(await inputForm.textContent()).toContain('What is your name?');
    await page.fill('#input-text', 'Ada');
    await inputForm.locator('button[type=submit]').click();

    const choiceForm = page.locator('[data-testid=choice-form]');
    await choiceForm.waitFor();
    await choiceForm.locator('input[value=noon]').check();
    await choiceForm.locator('button[type=submit]').click();

    const result = page.locator('#result[data-status=success]');
    await result.waitFor({ timeout: 30_000 });
    const text = await result.textContent();
    expect(text).toContain('Hello, Ada!');
    expect(text).toContain('You chose noon.');
    // The plan file the agent wrote is shown as an output.
    expect(text).toContain('/mnt/plan.md');

    // The timeline shows the run as it happened: thoughts, calls with results, usage.
    const kinds = await page.locator('#timeline > li').evaluateAll((items) => items.map((item) => item.getAttribute('data-kind')));
    expect(kinds).toEqual(expect.arrayContaining(['start', 'request', 'thought', 'call', 'usage', 'suspend', 'finish', 'complete']));
    const calls = await page.locator('#timeline > li[data-kind=call]').evaluateAll((items) => items.map((item) => item.getAttribute('data-name')));
    expect(calls).toEqual(['system_write_file', 'chat_request_user_input', 'chat_present_choices', 'system_objective_fulfilled']);
    expect(problems).toEqual([]);

    await mkdir(artifacts, { recursive: true });
    const screenshot = path.join(artifacts, 'playground-completed.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    expect((await stat(screenshot)).size).toBeGreaterThan(10_000);
    await page.close();
  });

  it('shows a generated picture and the code the model ran', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${url}/`);
    await page.waitForSelector('body[data-ready=true]');
    await page.fill('#objective', 'Draw a picture of a sunset, then compute 65465-6544 * 65464-6+1.02255 with code.');
    await page.click('#run');
    const result = page.locator('#result[data-status=success]');
    await result.waitFor({ timeout: 30_000 });
    expect(await result.textContent()).toContain('The computation says: The result is -428330955.97745.');
    // The picture is rendered from the file the image step produced.
    const image = result.locator('img').first();
    expect(await image.getAttribute('src')).toMatch(/^data:image\/png;base64,iVBORw0KGgo/);
    expect(await image.evaluate((element) => (element as unknown as { naturalWidth: number }).naturalWidth)).toBe(160);
    // The code run is shown as progress of its call.
    const codeCall = page.locator('#timeline > li[data-name=generate_and_execute_code]');
    const updates = await codeCall.locator('.update').allTextContents();
    expect(updates.some((text) => text.startsWith('Running code:'))).toBe(true);
    expect(updates).toContain('Code output:\n-428330955.97745\n');
    await mkdir(artifacts, { recursive: true });
    await page.screenshot({ path: path.join(artifacts, 'playground-media.png'), fullPage: true });
    await page.close();
  });

  it('runs the same scenario inside the page, without calling the server\'s agent endpoint', async () => {
    const page = await browser.newPage();
    const agentCalls: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/v1beta1/')) agentCalls.push(request.url());
    });
    await page.goto(`${url}/`);
    await page.waitForSelector('body[data-ready=true]');
    await page.selectOption('#run-in', 'page');
    await page.click('#run');
    const inputForm = page.locator('[data-testid=input-form]');
    await inputForm.waitFor();
    await page.fill('#input-text', 'Grace');
    await inputForm.locator('button[type=submit]').click();
    const choiceForm = page.locator('[data-testid=choice-form]');
    await choiceForm.waitFor();
    await choiceForm.locator('input[value=sunset]').check();
    await choiceForm.locator('button[type=submit]').click();
    const result = page.locator('#result[data-status=success]');
    await result.waitFor({ timeout: 30_000 });
    expect(await result.textContent()).toContain('Hello, Grace! You chose sunset.');
    expect(agentCalls).toEqual([]);
    await page.close();
  });

  it('keeps notes in memory across two runs, on the simulated Drive + Sheets of the dev server', async () => {
    const page = await browser.newPage();
    await page.goto(`${url}/`);
    await page.waitForSelector('body[data-ready=true]');
    await page.check('#use-memory');
    const runOnce = async (objective: string): Promise<{ text: string; calls: Array<string | null> }> => {
      await page.fill('#objective', objective);
      await page.click('#run');
      const result = page.locator('#result[data-status=success]');
      await result.waitFor({ timeout: 30_000 });
      const text = (await result.textContent()) ?? '';
      const calls = await page.locator('#timeline > li[data-kind=call]').evaluateAll((items) => items.map((item) => item.getAttribute('data-name')));
      await page.waitForSelector('#run:not([disabled])');
      return { text, calls };
    };
    const first = await runOnce('Remember that I like tea.');
    expect(first.calls).toEqual(expect.arrayContaining(['memory_get_metadata', 'memory_create_sheet', 'memory_update_sheet', 'memory_read_sheet']));
    expect(first.text).toContain('I remember 1 note in my memory sheet');
    const second = await runOnce('Remember that I like green tea too.');
    expect(second.calls).not.toContain('memory_create_sheet');
    expect(second.text).toContain('I remember 2 notes in my memory sheet');
    expect(second.text).toContain('Remember that I like tea.');
    await page.close();
  });

  it('stops a run from the Stop button while it waits for input', async () => {
    const page = await browser.newPage();
    await page.goto(`${url}/`);
    await page.waitForSelector('body[data-ready=true]');
    await page.fill('#objective', 'Ask for my name and greet me.');
    await page.click('#run');
    await page.locator('[data-testid=input-form]').waitFor();
    await page.click('#stop');
    const result = page.locator('#result[data-status=error]');
    await result.waitFor();
    expect(await result.textContent()).toContain('Run was stopped');
    expect(await page.isEnabled('#run')).toBe(true);
    await page.close();
  });
});
