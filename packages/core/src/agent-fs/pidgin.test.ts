import { describe, expect, it } from 'vitest';
import type { LLMContent } from '../protocol/content.js';
import { AgentFileSystem } from './agent-file-system.js';
import { contentToPidginString, fromPidginString, mergeTextParts, toPidgin, type PidginSegment } from './pidgin.js';

const png = { inlineData: { mimeType: 'image/png', data: 'AAA' } };

describe('toPidgin', () => {
  it('concatenates text and an asset with its binary part as a file', () => {
    const fs = new AgentFileSystem();
    const result = toPidgin(
      [
        { type: 'text', text: 'Say hi ' },
        { type: 'asset', title: 'pic', content: { parts: [png] } },
      ],
      fs,
    );
    expect(result).toEqual({
      text: 'Say hi <asset title="pic">\n<file src="/mnt/image1.png" />\n</asset>',
      useMemory: false,
      useNotebookLM: false,
      customToolUrls: [],
    });
    expect(fs.files()).toEqual([{ path: '/mnt/image1.png', part: { inlineData: { data: 'AAA', mimeType: 'image/png' } } }]);
  });

  it('skips empty text', () => {
    expect(toPidgin([{ type: 'text', text: '' }, { type: 'text', text: 'a' }], new AgentFileSystem()).text).toBe('a');
  });

  it('defaults an absent asset title to "asset" but keeps an empty one', () => {
    const fs = new AgentFileSystem();
    const content = { parts: [{ text: 'x' }] };
    expect(toPidgin([{ type: 'asset', content }], fs).text).toBe('<asset title="asset">\nx\n</asset>');
    expect(toPidgin([{ type: 'asset', title: '', content }], fs).text).toBe('<asset title="">\nx\n</asset>');
  });

  it('wraps an input in <input source-agent>, defaulting the title, and skips an empty one', () => {
    const fs = new AgentFileSystem();
    expect(
      toPidgin([{ type: 'input', title: 'Writer', content: { parts: [{ text: 'draft' }] } }], fs).text,
    ).toBe('<input source-agent="Writer">\ndraft\n</input>');
    expect(toPidgin([{ type: 'input', content: { role: 'user', parts: [{ text: 'x' }] } }], fs).text).toBe(
      '<input source-agent="input">\nx\n</input>',
    );
    expect(toPidgin([{ type: 'input', title: 'None', content: { parts: [] } }, { type: 'input' }], fs).text).toBe('');
  });

  it('turns a routing tool into a link to a new route', () => {
    const fs = new AgentFileSystem();
    const result = toPidgin(
      [
        { type: 'text', text: 'Go to ' },
        { type: 'tool', path: 'control-flow/routing', title: 'Reviewer', instance: 'node-42' },
      ],
      fs,
    );
    expect(result.text).toBe('Go to <a href="/route-1">Reviewer</a>');
    expect(fs.getOriginalRoute('/route-1')).toBe('node-42');
  });

  it('turns memory and NotebookLM tools into their key phrases and flags', () => {
    const result = toPidgin(
      [
        { type: 'tool', path: 'function-group/use-memory' },
        { type: 'text', text: ' and ' },
        { type: 'tool', path: 'function-group/notebooklm' },
      ],
      new AgentFileSystem(),
    );
    expect(result).toMatchObject({ text: 'Use Memory and Use NotebookLM', useMemory: true, useNotebookLM: true });
  });

  it('starts useNotebookLM from the flag', () => {
    expect(toPidgin([], new AgentFileSystem(), { useNotebookLM: true }).useNotebookLM).toBe(true);
  });

  it('collects other tools as custom tool URLs without text', () => {
    const result = toPidgin(
      [{ type: 'tool', path: 'https://example.com/tool.json', title: 'Tool' }],
      new AgentFileSystem(),
    );
    expect(result.text).toBe('');
    expect(result.customToolUrls).toEqual([{ url: 'https://example.com/tool.json', title: 'Tool' }]);
  });

  it('rejects an asset without parts', () => {
    expect(() => toPidgin([{ type: 'asset', title: 'a', content: { parts: [] } }], new AgentFileSystem())).toThrow(
      'Agent: Invalid asset format',
    );
  });

  it('rejects a route without instance', () => {
    expect(() =>
      toPidgin([{ type: 'tool', path: 'control-flow/routing', title: 'R' }], new AgentFileSystem()),
    ).toThrow('Agent: Malformed route, missing instance param');
  });

  it('rejects unknown segment types, naming every error, and ignores typeless ones', () => {
    const segments = [
      { type: 'video', text: 'x' },
      { text: 'no type' },
      { type: 'asset', title: 'a' },
    ] as unknown as PidginSegment[];
    expect(() => toPidgin(segments, new AgentFileSystem())).toThrow(
      'Agent: Unknown segment type: video,Invalid asset format',
    );
    expect(toPidgin([{ text: 'no type' }] as unknown as PidginSegment[], new AgentFileSystem()).text).toBe('');
  });
});

describe('contentToPidginString', () => {
  it('registers inline binary parts as files and refers to them, one line per part', () => {
    const fs = new AgentFileSystem();
    const text = contentToPidginString(
      { parts: [{ text: 'Look:' }, png, { inlineData: { mimeType: 'audio/mpeg', data: 'BBB' } }] },
      fs,
    );
    expect(text).toBe('Look:\n<file src="/mnt/image1.png" />\n<file src="/mnt/audio2.mp3" />');
    expect(fs.files().map(({ path }) => path)).toEqual(['/mnt/image1.png', '/mnt/audio2.mp3']);
  });

  it('stores text over 1000 characters as a file and inlines it in <content>', async () => {
    const fs = new AgentFileSystem();
    const long = 'a'.repeat(1001);
    expect(contentToPidginString({ parts: [{ text: long }] }, fs)).toBe(`<content src="/mnt/text1.md">\n${long}</content>`);
    expect(await fs.readText('/mnt/text1.md')).toBe(long);
  });

  it('keeps text of exactly 1000 characters, and long text when textAsFiles is false', () => {
    const fs = new AgentFileSystem();
    const exact = 'é'.repeat(1000);
    expect(contentToPidginString({ parts: [{ text: exact }] }, fs)).toBe(exact);
    // 1000 emoji are 2000 UTF-16 units but 1000 characters.
    const emoji = '😀'.repeat(1000);
    expect(contentToPidginString({ parts: [{ text: emoji }] }, fs)).toBe(emoji);
    const long = 'b'.repeat(5000);
    expect(contentToPidginString({ parts: [{ text: long }] }, fs, { textAsFiles: false })).toBe(long);
    expect(fs.files()).toEqual([]);
  });

  it('passes NotebookLM handles through as bare URLs', () => {
    const fs = new AgentFileSystem();
    const handle = 'https://notebooklm.google.com/notebook/abc';
    expect(contentToPidginString({ parts: [{ storedData: { handle, mimeType: 'application/x-notebooklm' } }] }, fs)).toBe(
      handle,
    );
    expect(fs.files()).toEqual([]);
  });

  it('refers to stored data and drops parts the file system cannot hold', () => {
    const fs = new AgentFileSystem();
    const content: LLMContent = {
      parts: [
        { functionCall: { name: 'f', args: {} } },
        { storedData: { handle: 'https://x/board/blobs/1', mimeType: 'application/pdf' } },
      ],
    };
    expect(contentToPidginString(content, fs)).toBe('<file src="/mnt/file1.pdf" />');
  });
});

describe('fromPidginString', () => {
  it('replaces file tags with the file parts and keeps the text around them', async () => {
    const fs = new AgentFileSystem();
    const path = fs.addPart(png);
    expect(await fromPidginString(`Here is the cat: <file src="${path}" /> Enjoy`, fs)).toEqual({
      parts: [{ text: 'Here is the cat: ' }, { inlineData: { data: 'AAA', mimeType: 'image/png' } }, { text: ' Enjoy' }],
      role: 'user',
    });
  });

  it('accepts relative paths and tags without a space before />', async () => {
    const fs = new AgentFileSystem();
    fs.addPart(png);
    expect(await fromPidginString('<file src="mnt/image1.png"/><file  src = "image1.png" />', fs)).toEqual({
      parts: [png, png].map((part) => ({ inlineData: { data: part.inlineData.data, mimeType: part.inlineData.mimeType } })),
      role: 'user',
    });
  });

  it('merges a text file with the text around it', async () => {
    const fs = new AgentFileSystem();
    fs.write('a.md', 'file text');
    expect(await fromPidginString('Before <file src="/mnt/a.md" /> after', fs)).toEqual({
      parts: [{ text: 'Before \nfile text\n after' }],
      role: 'user',
    });
  });

  it('turns links into their trimmed titles', async () => {
    expect(await fromPidginString('See <a href="/route-1"> Reviewer </a>.', new AgentFileSystem())).toEqual({
      parts: [{ text: 'See \nReviewer\n.' }],
      role: 'user',
    });
  });

  it('leaves <content> tags and malformed file tags as text', async () => {
    const text = '<content src="/mnt/text1.md">\nabc</content> <file src=\'/mnt/a\' />';
    expect(await fromPidginString(text, new AgentFileSystem())).toEqual({ parts: [{ text }], role: 'user' });
  });

  it('returns no parts for empty text', async () => {
    expect(await fromPidginString('', new AgentFileSystem())).toEqual({ parts: [], role: 'user' });
  });

  it('throws "Agent unable to proceed" naming every missing file', async () => {
    await expect(
      fromPidginString('<file src="/mnt/a.png" /> and <file src="/mnt/b.png" />', new AgentFileSystem()),
    ).rejects.toThrow('Agent unable to proceed: file "/mnt/a.png" not found,file "/mnt/b.png" not found');
  });

  it('round-trips content through pidgin, files restored in place', async () => {
    const fs = new AgentFileSystem();
    const content: LLMContent = {
      role: 'user',
      parts: [
        { text: 'Caption' },
        { inlineData: { data: 'AAA', mimeType: 'image/png' } },
        { storedData: { handle: 'https://x/board/blobs/1', mimeType: 'video/mp4' } },
        { text: 'End' },
      ],
    };
    // The line breaks between pieces stay in the text: the round trip keeps the text as written.
    expect(await fromPidginString(contentToPidginString(content, fs), fs)).toEqual({
      parts: [
        { text: 'Caption\n' },
        { inlineData: { data: 'AAA', mimeType: 'image/png' } },
        { text: '\n' },
        { storedData: { handle: 'https://x/board/blobs/1', mimeType: 'video/mp4' } },
        { text: '\nEnd' },
      ],
      role: 'user',
    });
  });

  it('reads system files', async () => {
    const fs = new AgentFileSystem();
    fs.addSystemFile('/mnt/system/chat_log.json', () => '[]');
    expect(await fromPidginString('<file src="/mnt/system/chat_log.json" />', fs)).toEqual({
      parts: [{ text: '[]' }],
      role: 'user',
    });
  });
});

describe('fromPidginString with hostile text', () => {
  it('refuses a text with more than 1000 <file> tags before reading any, and takes 1000', async () => {
    const fs = new AgentFileSystem();
    fs.write('a.md', 'A');
    const tags = (count: number) => Array.from({ length: count }, () => '<file src="/mnt/a.md" />').join(' ');
    await expect(fromPidginString(tags(1001), fs)).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      details: { field: 'text' },
      message: 'Agent unable to proceed: the text has 1001 <file> tags, more than the 1000 one text may hold',
    });
    const content = await fromPidginString(tags(1000), fs);
    expect(content.parts[0]?.text?.split('A')).toHaveLength(1001);
  });

  it('refuses tags that bring the text past 64 Mi characters, however few they are', async () => {
    const fs = new AgentFileSystem();
    fs.write('big.txt', 'x'.repeat(16 * 1024 * 1024));
    const text = Array.from({ length: 5 }, () => '<file src="/mnt/big.txt" />').join('\n');
    await expect(fromPidginString(text, fs)).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE', message: expect.stringContaining('more than 67108864 characters') });
    expect((await fromPidginString(text.split('\n').slice(0, 4).join('\n'), fs)).parts[0]?.text?.length).toBeGreaterThan(4 * 16 * 1024 * 1024);
  });

  it('names each unreadable file once, the first ten of them, then how many more', async () => {
    const missing = Array.from({ length: 25 }, (_, index) => `<file src="/mnt/missing_${index}.md" /><file src="/mnt/missing_${index}.md" />`).join('');
    const error = await fromPidginString(missing, new AgentFileSystem()).catch((caught: unknown) => caught as Error);
    expect(error?.message).toBe(
      `Agent unable to proceed: ${Array.from({ length: 10 }, (_, index) => `file "/mnt/missing_${index}.md" not found`).join(',')} and 15 more files that could not be read`,
    );
  });

  it('takes a tag inside a tag, or a tag naming the text being written, as one level of files and text', async () => {
    const fs = new AgentFileSystem();
    fs.write('self.md', 'old');
    expect(await fromPidginString('<file src="<file src="/mnt/self.md" />" />', fs)).toEqual({ parts: [{ text: '<file src="\nold\n" />' }], role: 'user' });
  });
});

describe('mergeTextParts', () => {
  it('merges only runs of plain text parts', () => {
    const thought = { text: 'hmm', thought: true };
    expect(mergeTextParts([{ text: 'a' }, { text: 'b' }, thought, { text: 'c' }, png, { text: 'd' }], '')).toEqual([
      { text: 'ab' },
      thought,
      { text: 'c' },
      png,
      { text: 'd' },
    ]);
  });
});
