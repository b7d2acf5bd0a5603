import { describe, expect, it } from 'vitest';
import type { BackendClient, UploadGeminiFileRequest } from '../ports/index.js';
import type { LLMContent, Part } from '../protocol/content.js';
import type { GenerateContentRequest } from '../protocol/gemini.js';
import { createScriptedBackendClient } from '../testing/index.js';
import { BodyConformer, conformBody } from './conform-body.js';

const BLOB = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';

function uploader() {
  const uploads: UploadGeminiFileRequest[] = [];
  const backend: BackendClient = createScriptedBackendClient([], {
    uploadGeminiFile: async (request) => {
      uploads.push(request);
      return { fileUrl: `files/${uploads.length}`, mimeType: 'image/png' };
    },
  });
  return { backend, uploads };
}

const body = (...parts: Part[]): GenerateContentRequest & { contents: LLMContent[] } => ({
  contents: [
    { role: 'user', parts: [{ text: 'hello' }] },
    { role: 'user', parts },
  ],
});

describe('conformBody', () => {
  it('returns the same body when nothing needs resolving', async () => {
    const { backend, uploads } = uploader();
    const request = body({ text: 'plain' }, { inlineData: { mimeType: 'image/png', data: 'AAA' } });
    expect(await conformBody(request, backend)).toBe(request);
    expect(uploads).toEqual([]);
  });

  it('uploads absolute and relative blob handles and Drive files, making File API URLs absolute', async () => {
    const { backend, uploads } = uploader();
    const request = body(
      { storedData: { handle: `https://opal.example/board/blobs/${BLOB}`, mimeType: 'image/png' } },
      { storedData: { handle: `/board/blobs/${BLOB}`, mimeType: 'image/png' } },
      { storedData: { handle: 'drive:/abc', mimeType: 'application/pdf' } },
      { fileData: { fileUri: 'drive:xyz', mimeType: 'application/pdf', resourceKey: 'rk' } },
    );
    const conformed = await conformBody(request, backend);
    expect(uploads).toEqual([{ blobId: BLOB }, { blobId: BLOB }, { driveFileId: 'abc' }, { driveFileId: 'xyz', driveResourceKey: 'rk' }]);
    expect(conformed.contents?.[1]?.parts).toEqual([1, 2, 3, 4].map((n) => ({
      fileData: { fileUri: `https://generativelanguage.googleapis.com/v1beta/files/${n}`, mimeType: 'image/png' },
    })));
    // The history the loop keeps is untouched.
    expect(request.contents[1]?.parts[0]).toHaveProperty('storedData');
    expect(conformed.contents?.[0]).toBe(request.contents[0]);
  });

  it('turns json parts into text, passes NotebookLM, File API (both forms) and YouTube references through', async () => {
    const { backend, uploads } = uploader();
    const singleSlash = { fileData: { fileUri: 'https://generativelanguage.googleapis.com/v1beta/files/a', mimeType: 'text/plain' } };
    const doubleSlash = { fileData: { fileUri: 'https://generativelanguage.googleapis.com/v1beta//files/b', mimeType: 'text/plain' } };
    const youtube = { fileData: { fileUri: 'https://www.youtube.com/watch?v=x', mimeType: 'video/mp4' } };
    const conformed = await conformBody(
      body({ json: { a: 1 } }, { storedData: { handle: 'https://notebooklm.google.com/notebook/n1', mimeType: 'text/plain' } }, singleSlash, doubleSlash, youtube),
      backend,
    );
    expect(conformed.contents?.[1]?.parts).toEqual([{ text: '{"a":1}' }, { text: 'https://notebooklm.google.com/notebook/n1' }, singleSlash, doubleSlash, youtube]);
    expect(uploads).toEqual([]);
  });

  it('names the part it cannot resolve', async () => {
    const { backend } = uploader();
    await expect(conformBody(body({ text: 'x' }, { storedData: { handle: 'blob:nope', mimeType: 'image/png' } }), backend)).rejects.toThrow(
      'contents[1].parts[1].storedData: unknown handle "blob:nope"',
    );
    await expect(conformBody(body({ fileData: { fileUri: 'https://example.com/a.pdf', mimeType: 'application/pdf' } }), backend)).rejects.toThrow(
      'contents[1].parts[0].fileData: unknown URI "https://example.com/a.pdf"',
    );
  });

  it('names the part whose upload failed, keeping the backend error code', async () => {
    const backend = createScriptedBackendClient([]);
    await expect(conformBody(body({ storedData: { handle: `/board/blobs/${BLOB}`, mimeType: 'image/png' } }), backend)).rejects.toMatchObject({
      code: 'NOT_IMPLEMENTED',
      message: expect.stringMatching(/^contents\[1\]\.parts\[0\]\.storedData: could not upload the file for the model/),
    });
  });

  it('uploads a file of a run once, however many later requests send the content again', async () => {
    const { backend, uploads } = uploader();
    const conformer = new BodyConformer(backend);
    const history: LLMContent[] = [{ role: 'user', parts: [{ storedData: { handle: `/board/blobs/${BLOB}`, mimeType: 'image/png' } }] }];
    const first = await conformer.conform({ contents: history.slice() });
    history.push({ role: 'model', parts: [{ text: 'a picture' }] }, { role: 'user', parts: [{ json: { more: true } }] });
    const second = await conformer.conform({ contents: history.slice() });
    expect(uploads).toEqual([{ blobId: BLOB }]);
    expect(second.contents?.[0]).toBe(first.contents?.[0]);
    expect(second.contents?.map((content) => content.parts[0])).toEqual([
      { fileData: { fileUri: 'https://generativelanguage.googleapis.com/v1beta/files/1', mimeType: 'image/png' } },
      { text: 'a picture' },
      { text: '{"more":true}' },
    ]);
    // Another history (not the same one grown at its end) is conformed whole.
    const other: LLMContent[] = [{ role: 'user', parts: [{ storedData: { handle: `/board/blobs/${BLOB}`, mimeType: 'image/png' } }] }];
    await conformer.conform({ contents: other });
    expect(uploads).toHaveLength(2);
  });

  it('conforms a content again after its upload failed', async () => {
    let fail = true;
    const backend = createScriptedBackendClient([], {
      uploadGeminiFile: async () => {
        if (fail) throw new Error('upload refused');
        return { fileUrl: 'files/ok', mimeType: 'image/png' };
      },
    });
    const conformer = new BodyConformer(backend);
    const request = body({ storedData: { handle: `/board/blobs/${BLOB}`, mimeType: 'image/png' } });
    await expect(conformer.conform(request)).rejects.toThrow(/contents\[1\]\.parts\[0\]\.storedData: could not upload/);
    fail = false;
    const conformed = await conformer.conform(request);
    expect(conformed.contents?.[1]?.parts[0]?.fileData?.fileUri).toBe('https://generativelanguage.googleapis.com/v1beta/files/ok');
  });
});
