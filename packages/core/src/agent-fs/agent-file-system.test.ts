import { describe, expect, it } from 'vitest';
import { AgentError } from '../errors/index.js';
import { AgentFileSystem, type FileSystemSnapshot } from './agent-file-system.js';

const png = { inlineData: { mimeType: 'image/png', data: 'AAA' } };

function roundTrip<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

describe('AgentFileSystem write / overwrite / append / read', () => {
  it('writes a named text file under /mnt, adding .txt when the name has no extension', async () => {
    const fs = new AgentFileSystem();
    expect(fs.write('notes', 'hello')).toBe('/mnt/notes.txt');
    // Dot segments never lead out of /mnt/.
    expect(fs.write('../../etc/passwd', 'x')).toBe('/mnt/etc/passwd.txt');
    expect(fs.write('/mnt/../x', 'x')).toBe('/mnt/x.txt');
    expect(fs.write('a/./b/../c.md', 'x')).toBe('/mnt/a/b/c.md');
    expect(fs.write('..\\..\\win.ini', 'x')).toBe('/mnt/win.ini');
    expect(await fs.get('/mnt/notes.txt')).toEqual([{ text: 'hello' }]);
    expect(await fs.readText('/mnt/notes.txt')).toBe('hello');
  });

  it('refuses a text file of more than 16 Mi characters, keeping what was there', async () => {
    const fs = new AgentFileSystem();
    const limit = 16 * 1024 * 1024;
    fs.write('log.md', 'x'.repeat(limit - 2));
    const refused = { code: 'PAYLOAD_TOO_LARGE', message: expect.stringContaining('"/mnt/log.md"') };
    expect(() => fs.append('/mnt/log.md', 'yy')).toThrow(expect.objectContaining(refused));
    expect(() => fs.overwrite('log.md', 'x'.repeat(limit + 1))).toThrow(expect.objectContaining(refused));
    expect(() => fs.write('log.md', 'x'.repeat(limit + 1))).toThrow(expect.objectContaining(refused));
    expect((await fs.readText('/mnt/log.md')).length).toBe(limit - 2);
    fs.append('/mnt/log.md', 'y');
    expect((await fs.readText('/mnt/log.md')).length).toBe(limit);
  });

  it('infers the MIME type from the extension and stores text as text', () => {
    const fs = new AgentFileSystem();
    fs.write('report.md', '# Title');
    fs.write('data.csv', 'a,b');
    fs.write('data.json', '{}');
    fs.write('notes', 'plain');
    expect(fs.snapshot().files.map(({ path, mimeType, type }) => ({ path, mimeType, type }))).toEqual([
      { path: '/mnt/report.md', mimeType: 'text/markdown', type: 'text' },
      { path: '/mnt/data.csv', mimeType: 'text/csv', type: 'text' },
      { path: '/mnt/data.json', mimeType: 'application/json', type: 'text' },
      { path: '/mnt/notes.txt', mimeType: 'text/plain', type: 'text' },
    ]);
  });

  it('stores written HTML as base64 inlineData, so its URL is a real data URL', async () => {
    const fs = new AgentFileSystem();
    const html = '<p>héllo</p>';
    const path = fs.write('page.html', html);
    expect(path).toBe('/mnt/page.html');
    const [part] = await fs.get(path);
    expect(part?.inlineData?.mimeType).toBe('text/html');
    expect(new TextDecoder().decode(Uint8Array.from(atob(part!.inlineData!.data), (c) => c.charCodeAt(0)))).toBe(html);
    expect(fs.getFileUrl(path)).toBe(`data:text/html;base64,${part!.inlineData!.data}`);
    await expect(fs.readText(path)).rejects.toThrow('File at /mnt/page.html is not a text file');
  });

  it('does not nest a name the model already wrote as a /mnt path', () => {
    const fs = new AgentFileSystem();
    expect(fs.write('/mnt/a.md', 'x')).toBe('/mnt/a.md');
    expect(fs.write('mnt/b.md', 'x')).toBe('/mnt/b.md');
  });

  it('replaces an existing file on write and overwrite, keeping its place in the order', async () => {
    const fs = new AgentFileSystem();
    fs.write('a.md', 'one');
    fs.write('b.md', 'two');
    fs.write('a.md', 'three');
    expect(fs.overwrite('b', 'four')).toBe('/mnt/b.txt');
    fs.overwrite('b.md', 'five');
    expect(await fs.readText('a.md')).toBe('three');
    expect(await fs.readText('b.md')).toBe('five');
    expect(fs.listFiles()).toBe('/mnt/a.md\n/mnt/b.md\n/mnt/b.txt');
  });

  it('overwrite stores HTML as text', async () => {
    const fs = new AgentFileSystem();
    fs.overwrite('page.html', '<p>x</p>');
    expect(await fs.get('page.html')).toEqual([{ text: '<p>x</p>' }]);
  });

  it('appends on a new line, creating a markdown file when missing', async () => {
    const fs = new AgentFileSystem();
    fs.append('/mnt/log.md', 'first');
    fs.append('/mnt/log.md', 'second');
    expect(await fs.readText('/mnt/log.md')).toBe('first\nsecond');
    expect(fs.snapshot().files[0]).toMatchObject({ mimeType: 'text/markdown', type: 'text' });
  });

  it('refuses to append to a binary file', () => {
    const fs = new AgentFileSystem();
    const path = fs.addPart(png);
    expect(() => fs.append(path, 'x')).toThrow(`File "${path}" already exists and is not a text file`);
  });

  it('resolves mnt/x and x to /mnt/x', async () => {
    const fs = new AgentFileSystem();
    fs.write('x.md', 'hi');
    expect(await fs.get('mnt/x.md')).toEqual([{ text: 'hi' }]);
    expect(await fs.get('x.md')).toEqual([{ text: 'hi' }]);
  });

  it('reports a missing file with the Opal message', async () => {
    const fs = new AgentFileSystem();
    await expect(fs.get('/mnt/nope.png')).rejects.toThrow('file "/mnt/nope.png" not found');
    await expect(fs.get('nope.png')).rejects.toThrow('file "/mnt/nope.png" not found');
    await expect(fs.readText('/mnt/nope.png')).rejects.toBeInstanceOf(AgentError);
  });

  it('getMany returns all parts in order, or one error naming every missing file', async () => {
    const fs = new AgentFileSystem();
    const image = fs.addPart(png);
    const text = fs.write('a.md', 'hi');
    expect(await fs.getMany([text, image])).toEqual([{ text: 'hi' }, png]);
    await expect(fs.getMany([image, '/mnt/x', '/mnt/y'])).rejects.toThrow(
      'file "/mnt/x" not found,file "/mnt/y" not found',
    );
  });

  it('lists nothing as an empty string', () => {
    expect(new AgentFileSystem().listFiles()).toBe('');
  });
});

describe('AgentFileSystem automatic names and parts', () => {
  it('names created files by MIME type with one counter', () => {
    const fs = new AgentFileSystem();
    expect(fs.create('image/png')).toBe('/mnt/image1.png');
    expect(fs.create('audio/mpeg')).toBe('/mnt/audio2.mp3');
    expect(fs.create('text/plain')).toBe('/mnt/text3.txt');
    expect(fs.create('application/pdf')).toBe('/mnt/file4.pdf');
    expect(fs.create('application/x-unknown')).toBe('/mnt/file5.txt');
  });

  it('named writes do not advance the counter', () => {
    const fs = new AgentFileSystem();
    fs.write('a', 'x');
    expect(fs.create('image/jpeg')).toBe('/mnt/image1.jpg');
  });

  it('stores text parts as markdown and inline data with its title', async () => {
    const fs = new AgentFileSystem();
    expect(fs.addPart({ text: 'hello' })).toBe('/mnt/text1.md');
    const path = fs.addPart({ inlineData: { mimeType: 'image/png', data: 'AAA', title: 'cat' } });
    expect(path).toBe('/mnt/image2.png');
    expect(await fs.get(path)).toEqual([{ inlineData: { data: 'AAA', mimeType: 'image/png', title: 'cat' } }]);
  });

  it('stores the same stored / file data only once', () => {
    const fs = new AgentFileSystem();
    const pdf = { storedData: { handle: 'https://example.com/board/blobs/1', mimeType: 'application/pdf' } };
    expect(fs.addPart(pdf)).toBe('/mnt/file1.pdf');
    expect(fs.addPart(pdf)).toBe('/mnt/file1.pdf');
    const video = { fileData: { fileUri: 'https://youtu.be/x', mimeType: 'video/mp4', resourceKey: 'k' } };
    expect(fs.addPart(video)).toBe('/mnt/video2.mp4');
    expect(fs.addPart(video, 'clip')).toBe('/mnt/video2.mp4');
    expect(fs.files().map(({ path }) => path)).toEqual(['/mnt/file1.pdf', '/mnt/video2.mp4']);
  });

  it('names a part after file_name, adding the extension of its MIME type', async () => {
    const fs = new AgentFileSystem();
    expect(fs.addPart(png, 'cat')).toBe('/mnt/cat.png');
    expect(fs.addPart({ text: 'x' }, 'summary')).toBe('/mnt/summary.md');
    expect(fs.addPart(png, 'dog.image')).toBe('/mnt/dog.image');
    expect(await fs.get('/mnt/cat.png')).toEqual([png]);
  });

  it('refuses parts it cannot store', () => {
    const fs = new AgentFileSystem();
    expect(() => fs.addPart({ functionCall: { name: 'f', args: {} } })).toThrow(/^Unsupported part: \{"functionCall"/);
  });

  it('gives file URLs for references and inline data, none for text', () => {
    const fs = new AgentFileSystem();
    const stored = fs.addPart({ storedData: { handle: 'drive:/abc', mimeType: 'image/png' } });
    const inline = fs.addPart(png);
    const text = fs.write('a.md', 'x');
    expect(fs.getFileUrl(stored)).toBe('drive:/abc');
    expect(fs.getFileUrl(inline)).toBe('data:image/png;base64,AAA');
    expect(fs.getFileUrl(text)).toBeUndefined();
    expect(fs.getFileUrl('/mnt/missing.png')).toBeUndefined();
  });

  it('lists files in insertion order for the result', () => {
    const fs = new AgentFileSystem();
    fs.addPart(png);
    fs.write('a.md', 'hello');
    expect(fs.files()).toEqual([
      { path: '/mnt/image1.png', part: { inlineData: { data: 'AAA', mimeType: 'image/png' } } },
      { path: '/mnt/a.md', part: { text: 'hello' } },
    ]);
  });
});

describe('AgentFileSystem routes', () => {
  it('numbers routes from 1 and resolves them back', () => {
    const fs = new AgentFileSystem();
    expect(fs.addRoute('node-42')).toBe('/route-1');
    expect(fs.addRoute('node-7')).toBe('/route-2');
    expect(fs.getOriginalRoute('/route-1')).toBe('node-42');
    expect(fs.getOriginalRoute('/route-2')).toBe('node-7');
    expect(fs.getOriginalRoute('/')).toBe('/');
    expect(fs.getOriginalRoute('')).toBe('');
  });

  it('reports an unknown route with the Opal message', () => {
    expect(() => new AgentFileSystem().getOriginalRoute('/route-9')).toThrow('Route "/route-9" not found');
  });
});

describe('AgentFileSystem system files', () => {
  it('reads a system file through its getter each time, never at registration', async () => {
    const fs = new AgentFileSystem();
    let reads = 0;
    let log = '[]';
    fs.addSystemFile('/mnt/system/chat_log.json', () => {
      reads += 1;
      return log;
    });
    expect(reads).toBe(0);
    log = '[{"role":"user"}]';
    expect(await fs.readText('/mnt/system/chat_log.json')).toBe('[{"role":"user"}]');
    expect(await fs.get('system/chat_log.json')).toEqual([{ text: '[{"role":"user"}]' }]);
    expect(reads).toBe(2);
  });

  it('accepts asynchronous getters and passes on their failures', async () => {
    const fs = new AgentFileSystem();
    fs.addSystemFile('/mnt/system/a.json', async () => 'async');
    fs.addSystemFile('/mnt/system/b.json', async () => {
      throw new Error('chat log unavailable');
    });
    expect(await fs.readText('/mnt/system/a.json')).toBe('async');
    await expect(fs.get('/mnt/system/b.json')).rejects.toThrow('chat log unavailable');
  });

  it('lists system files after files but keeps them out of results and snapshots', () => {
    const fs = new AgentFileSystem();
    fs.addSystemFile('/mnt/system/chat_log.json', () => '[]');
    fs.write('a.md', 'x');
    expect(fs.listFiles()).toBe('/mnt/a.md\n/mnt/system/chat_log.json');
    expect(fs.files().map(({ path }) => path)).toEqual(['/mnt/a.md']);
    expect(fs.snapshot().files.map(({ path }) => path)).toEqual(['/mnt/a.md']);
  });
});

describe('AgentFileSystem snapshots', () => {
  it('round-trips through JSON unchanged and keeps working', async () => {
    const fs = new AgentFileSystem();
    fs.addPart({ inlineData: { mimeType: 'image/png', data: 'AAA', title: 'cat' } });
    fs.write('a.md', 'hello');
    fs.addPart({ storedData: { handle: 'https://x/board/blobs/1', mimeType: 'application/pdf', resourceKey: 'rk' } });
    fs.addRoute('node-42');
    const snapshot = fs.snapshot();
    expect(roundTrip(snapshot)).toStrictEqual(snapshot);

    const restored = AgentFileSystem.fromSnapshot(roundTrip(snapshot));
    expect(restored.snapshot()).toStrictEqual(snapshot);
    expect(restored.files()).toEqual(fs.files());
    expect(restored.getOriginalRoute('/route-1')).toBe('node-42');
    expect(restored.addRoute('node-43')).toBe('/route-2');
    expect(restored.create('image/png')).toBe('/mnt/image3.png');
    expect(await restored.readText('/mnt/a.md')).toBe('hello');
  });

  it('snapshots an empty file system as plain JSON', () => {
    expect(new AgentFileSystem().snapshot()).toStrictEqual({ files: [], routes: {}, fileCount: 0 });
  });

  it('is not changed by later writes', () => {
    const fs = new AgentFileSystem();
    fs.write('a.md', 'one');
    const snapshot = fs.snapshot();
    fs.append('a.md', 'two');
    expect(snapshot.files[0]?.data).toBe('one');
  });

  it('refuses a snapshot that is not one, naming the field', () => {
    const broken = { files: [{ path: '/mnt/a', data: 1 }], routes: {}, fileCount: 0 } as unknown as FileSystemSnapshot;
    expect(() => AgentFileSystem.fromSnapshot(broken)).toThrow(/^Invalid file system snapshot: files\[0\]\.data: /);
  });
});

describe('AgentFileSystem: mounted directories', () => {
  const sheets = new Map([['Scores', '[["a"]]'], ['My Sheet', '[["b"]]']]);
  const memory = { read: async (name: string) => sheets.get(name), list: async () => [...sheets.keys()] };

  it('reads a mounted file by its plain or percent-encoded name, and says when there is none', async () => {
    const fs = new AgentFileSystem();
    fs.mount('/mnt/memory', memory);
    expect(await fs.readText('/mnt/memory/Scores')).toBe('[["a"]]');
    expect(await fs.readText('mnt/memory/My%20Sheet')).toBe('[["b"]]');
    expect(await fs.readText('/mnt/memory/My Sheet')).toBe('[["b"]]');
    await expect(fs.get('/mnt/memory/Missing')).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'file "/mnt/memory/Missing" not found' });
    await expect(fs.get('/mnt/memory/')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('lists mounted files after the others, leaves out a directory that cannot be listed, and never snapshots them', async () => {
    const fs = new AgentFileSystem();
    fs.write('a.md', 'one');
    fs.addSystemFile('/mnt/system/chat_log.json', () => '[]');
    fs.mount('/mnt/memory/', memory);
    fs.mount('/mnt/broken/', { read: async () => undefined, list: async () => Promise.reject(new Error('offline')) });
    expect(await fs.listAllFiles()).toBe('/mnt/a.md\n/mnt/system/chat_log.json\n/mnt/memory/Scores\n/mnt/memory/My%20Sheet');
    expect(fs.listFiles()).toBe('/mnt/a.md\n/mnt/system/chat_log.json');
    expect(fs.snapshot().files.map((file) => file.path)).toEqual(['/mnt/a.md']);
    expect(await new AgentFileSystem().listAllFiles()).toBe('');
  });
});

describe('AgentFileSystem: hostile names', () => {
  const refused = (name: string) => {
    try {
      new AgentFileSystem().write(name, 'x');
    } catch (error) {
      return error as AgentError;
    }
    return undefined;
  };

  it('refuses names no disk should get, saying why, and writes nothing', () => {
    const cases: Array<[string, RegExp]> = [
      ['', /names no file/],
      ['..', /names no file/],
      ['/mnt/', /names no file/],
      ['a\u0000b', /control or invisible character/],
      ['notes\n.md', /control or invisible character/],
      ['invoice\u202Efdp.exe', /control or invisible character/],
      ['zero\u200Bwidth.md', /control or invisible character/],
      ['．．／．．／etc／passwd', /looks like "\/", "\\" or "\."/],
      ['..\u2215..\u2215etc', /looks like/],
      ['%2e%2e/%2e%2e/etc/passwd', /percent-encoding hides/],
      ['a%2Fb', /percent-encoding hides/],
      ['a%00b', /percent-encoding hides/],
      ['x'.repeat(256), /at most 255 characters/],
      [`${'d/'.repeat(600)}x`, /longer than 1024 characters/],
    ];
    for (const [name, reason] of cases) {
      const error = refused(name);
      expect(error, JSON.stringify(name)).toMatchObject({ code: 'BAD_REQUEST', details: { field: 'name' } });
      expect(error?.message, JSON.stringify(name)).toMatch(reason);
      // Long names are quoted cut, control characters escaped.
      expect(error?.message.length, JSON.stringify(name)).toBeLessThan(400);
      expect(error?.message, JSON.stringify(name)).not.toMatch(/[\u0000\n]/);
    }
    const fs = new AgentFileSystem();
    expect(() => fs.addPart(png, 'cat\u0000')).toThrow(/control or invisible character/);
    expect(fs.files()).toEqual([]);
  });

  it('keeps every written path under /mnt/, treating \\ as a separator, and reads a path back however it was written', async () => {
    const fs = new AgentFileSystem();
    expect(fs.write('a\\b', 'one')).toBe('/mnt/a/b.txt');
    expect(fs.write('\\..\\..\\windows\\win.ini', 'two')).toBe('/mnt/windows/win.ini');
    expect(fs.write('/mnt//x/./y.md', 'three')).toBe('/mnt/x/y.md');
    expect(fs.write('100%.md', 'four')).toBe('/mnt/100%.md');
    expect(await fs.readText('a\\b.txt')).toBe('one');
    expect(await fs.readText('/mnt/../windows/win.ini')).toBe('two');
    expect(await fs.readText('mnt/x//y.md')).toBe('three');
    // A composed and a decomposed "é" are one name.
    fs.write('caf\u00e9.md', 'five');
    expect(await fs.readText('/mnt/cafe\u0301.md')).toBe('five');
    await expect(fs.get('/etc/passwd')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    for (const { path } of fs.files()) expect(path).toMatch(/^\/mnt\/(?!.*(^|\/)\.\.?(\/|$))[^\\]+$/);
  });

  it('keeps system files and mounted directories read-only: a write there could never be read back', async () => {
    const fs = new AgentFileSystem();
    fs.addSystemFile('/mnt/system/chat_log.json', () => '[]');
    fs.mount('/mnt/memory/', { read: async () => '[["a"]]', list: async () => ['Scores'] });
    for (const name of ['system/chat_log.json', '/mnt/system/chat_log.json', 'system/other.md', 'memory/Scores']) {
      expect(() => fs.write(name, 'fake'), name).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', details: { field: 'name' } }));
    }
    expect(() => fs.addPart(png, 'memory/chart')).toThrow(/cannot write/);
    expect(await fs.readText('/mnt/system/chat_log.json')).toBe('[]');
    expect(fs.files()).toEqual([]);
  });

  it('never gives an automatic name to a file the model already named', async () => {
    const fs = new AgentFileSystem();
    fs.write('image1.png', 'my notes, not an image');
    expect(fs.addPart(png)).toBe('/mnt/image2.png');
    expect(await fs.readText('/mnt/image1.png')).toBe('my notes, not an image');
  });

  it('quotes a long path or route name cut in its error messages', async () => {
    const fs = new AgentFileSystem();
    const long = `/mnt/${'x'.repeat(100_000)}`;
    const error = await fs.get(long).then(
      () => undefined,
      (caught: unknown) => caught as AgentError,
    );
    expect(error).toMatchObject({ code: 'NOT_FOUND', message: expect.stringContaining('(100005 characters)') });
    expect(error?.message.length).toBeLessThan(300);
    expect(() => fs.getOriginalRoute(`/route-${'9'.repeat(100_000)}`)).toThrow(/^Route "\/route-9+… \(100007 characters\)" not found$/);
  });
});

describe('AgentFileSystem: limits of a run', () => {
  it('keeps at most 1000 files: the next new one is refused naming the name, and nothing is lost', async () => {
    const fs = new AgentFileSystem();
    for (let index = 0; index < 1000; index += 1) fs.write(`file_${index}.md`, `text ${index}`);
    expect(() => fs.write('one_more.md', 'x')).toThrow(
      expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE', details: { field: 'name' }, message: expect.stringContaining('1000 files') }),
    );
    expect(() => fs.addPart(png)).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
    // Replacing a file is still fine.
    fs.write('file_7.md', 'new text');
    expect(fs.files()).toHaveLength(1000);
    expect(await fs.readText('file_7.md')).toBe('new text');
    expect(await fs.readText('file_999.md')).toBe('text 999');
  });

  it('keeps at most 128 Mi characters in all: a write past it is refused naming the data, and changes nothing', async () => {
    const fs = new AgentFileSystem();
    const big = 'x'.repeat(16 * 1024 * 1024);
    for (let index = 0; index < 8; index += 1) fs.write(`big_${index}.txt`, big);
    expect(() => fs.write('small.txt', 'y')).toThrow(
      expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE', details: { field: 'data' }, message: expect.stringContaining('more than the 134217728') }),
    );
    expect(() => fs.addPart({ inlineData: { mimeType: 'image/png', data: 'AAAA' } })).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
    expect(() => fs.append('/mnt/big_0.txt', 'more')).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
    expect(fs.files()).toHaveLength(8);
    expect((await fs.readText('big_0.txt')).length).toBe(big.length);
    // Making room by shrinking a file lets the next write through.
    fs.write('big_0.txt', 'short');
    expect(fs.write('small.txt', 'y')).toBe('/mnt/small.txt');
  });

  it('counts the files of a restored snapshot toward the limits', () => {
    const fs = new AgentFileSystem();
    const big = 'x'.repeat(16 * 1024 * 1024);
    for (let index = 0; index < 8; index += 1) fs.write(`big_${index}.txt`, big);
    const restored = AgentFileSystem.fromSnapshot(fs.snapshot());
    expect(() => restored.write('small.txt', 'y')).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
  });
});
