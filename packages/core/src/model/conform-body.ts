import { AgentError, toAgentError } from '../errors/index.js';
import type { BackendClient } from '../ports/index.js';
import type { LLMContent, Part } from '../protocol/content.js';
import type { GenerateContentRequest } from '../protocol/gemini.js';

const GEMINI_FILES_BASE = 'https://generativelanguage.googleapis.com/v1beta/';
const NOTEBOOKLM_PREFIX = 'https://notebooklm.google.com/notebook/';
/** An Opal blob handle, absolute (`https://host/board/blobs/<id>`) or relative (`/board/blobs/<id>`). */
const BLOB_HANDLE = /^(?:https?:\/\/[^/]+)?\/board\/blobs\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
/** A Gemini File API URI, with the single or the double slash before `files/`. */
const GEMINI_FILE_URI = /^https:\/\/generativelanguage\.googleapis\.com\/v1beta\/\/?files\//;

/** The blob id of an Opal blob handle, or `undefined`. */
export function blobIdOf(handle: string): string | undefined {
  return BLOB_HANDLE.exec(handle)?.[1];
}

function needsWork(part: Part): boolean {
  return part.json !== undefined || part.storedData !== undefined || part.fileData !== undefined;
}

/**
 * Makes a request body sendable to Gemini: `json` parts become text, Opal blob
 * and Drive references are uploaded through the backend and become `fileData`, NotebookLM
 * references pass as text, Gemini File API and YouTube URIs pass unchanged. Returns a new body
 * (the history is not changed); a body with nothing to resolve is returned as is.
 *
 * Throws an `AgentError` (`BAD_REQUEST`) naming the part it cannot resolve, e.g.
 * `contents[2].parts[0].storedData: unknown handle "blob:x"`.
 */
export async function conformBody(
  body: GenerateContentRequest,
  backend: BackendClient,
  signal?: AbortSignal,
): Promise<GenerateContentRequest> {
  return new BodyConformer(backend).conform(body, signal);
}

/**
 * {@link conformBody} for the requests of one run, whose history grows by appending: each content
 * is conformed once (its files uploaded once) and reused by every later request, so a request
 * costs work only for the contents appended since the last one. A body whose contents are not the
 * last ones plus new contents at the end is conformed whole again.
 */
export class BodyConformer {
  readonly #backend: BackendClient;
  /** The contents conformed so far, as the history holds them, and what each became. */
  #sources: LLMContent[] = [];
  #conformed: LLMContent[] = [];
  #changed = false;

  constructor(backend: BackendClient) {
    this.#backend = backend;
  }

  /** The sendable form of `body`; the body itself when none of its contents needed work. */
  async conform(body: GenerateContentRequest, signal?: AbortSignal): Promise<GenerateContentRequest> {
    const contents = body.contents ?? [];
    const done = this.#sources.length;
    if (contents.length < done || (done > 0 && contents[done - 1] !== this.#sources[done - 1])) {
      this.#sources = [];
      this.#conformed = [];
      this.#changed = false;
    }
    for (let contentIndex = this.#sources.length; contentIndex < contents.length; contentIndex += 1) {
      const content = contents[contentIndex] as LLMContent;
      let conformed = content;
      if (content.parts?.some(needsWork)) {
        const parts: Part[] = [];
        for (const [partIndex, part] of content.parts.entries()) {
          parts.push(await conformPart(part, this.#backend, `contents[${contentIndex}].parts[${partIndex}]`, signal));
        }
        conformed = { ...content, parts };
        this.#changed = true;
      }
      this.#sources.push(content);
      this.#conformed.push(conformed);
    }
    return this.#changed ? { ...body, contents: this.#conformed.slice() } : body;
  }
}

async function conformPart(part: Part, backend: BackendClient, path: string, signal?: AbortSignal): Promise<Part> {
  if (part.json !== undefined) return { text: JSON.stringify(part.json) };
  const stored = part.storedData;
  if (stored) {
    const handle = stored.handle;
    if (handle.startsWith(NOTEBOOKLM_PREFIX)) return { text: handle };
    if (handle.startsWith('drive:')) {
      return upload(backend, { driveFileId: handle.replace(/^drive:\/*/, '') }, `${path}.storedData`, signal);
    }
    const blobId = blobIdOf(handle);
    if (blobId) return upload(backend, { blobId }, `${path}.storedData`, signal);
    throw unresolvable(`${path}.storedData`, `unknown handle "${handle}" (expected drive:<id>, /board/blobs/<id> or a NotebookLM URL)`);
  }
  const file = part.fileData;
  if (file) {
    if (GEMINI_FILE_URI.test(file.fileUri) || file.mimeType === 'video/mp4') return part;
    if (file.fileUri.startsWith('drive:')) {
      const driveFileId = file.fileUri.replace(/^drive:\/*/, '');
      const request = file.resourceKey === undefined ? { driveFileId } : { driveFileId, driveResourceKey: file.resourceKey };
      return upload(backend, request, `${path}.fileData`, signal);
    }
    throw unresolvable(`${path}.fileData`, `unknown URI "${file.fileUri}" (expected a Gemini File API URI, drive:<id> or a YouTube video)`);
  }
  return part;
}

async function upload(
  backend: BackendClient,
  request: Parameters<BackendClient['uploadGeminiFile']>[0],
  path: string,
  signal?: AbortSignal,
): Promise<Part> {
  let uploaded: Awaited<ReturnType<BackendClient['uploadGeminiFile']>>;
  try {
    uploaded = await backend.uploadGeminiFile(request, signal);
  } catch (error) {
    const cause = toAgentError(error);
    throw new AgentError(cause.code, `${path}: could not upload the file for the model: ${cause.message}`, { cause: error });
  }
  const fileUri = uploaded.fileUrl.startsWith('http') ? uploaded.fileUrl : `${GEMINI_FILES_BASE}${uploaded.fileUrl.replace(/^\/+/, '')}`;
  return { fileData: { fileUri, mimeType: uploaded.mimeType } };
}

function unresolvable(path: string, problem: string): AgentError {
  return new AgentError('BAD_REQUEST', `${path}: ${problem}`, { details: { path } });
}
