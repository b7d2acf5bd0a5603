import { AgentError } from '../errors/index.js';
import type { LLMContent, Part } from '../protocol/content.js';
import type { AgentFileSystem } from './agent-file-system.js';

/**
 * A request segment in its normalised form, as far as pidgin needs it. It is
 * structurally the `Segment` union of `protocol/requests.ts`, so those segments are accepted as is.
 */
export type PidginSegment =
  | { type: 'text'; text: string }
  | { type: 'asset'; title?: string; content?: LLMContent }
  | { type: 'input'; title?: string; content?: LLMContent }
  | { type: 'tool'; path: string; title?: string; instance?: string };

/** Options of {@link toPidgin}. */
export interface ToPidginOptions {
  /** The `useNotebookLM` flag of the request; a NotebookLM tool segment also turns it on. */
  useNotebookLM?: boolean;
}

/** A custom tool segment: not callable on the server, reported for completeness. */
export interface CustomToolUrl {
  url: string;
  title?: string;
}

/** What {@link toPidgin} makes of a request's segments. */
export interface PidginObjective {
  /** The objective text in pidgin. */
  text: string;
  /** A memory tool segment was present. */
  useMemory: boolean;
  /** The flag was set or a NotebookLM tool segment was present. */
  useNotebookLM: boolean;
  /** Tool segments with other paths, in order. */
  customToolUrls: CustomToolUrl[];
}

/** Options of {@link contentToPidginString}. */
export interface ContentToPidginOptions {
  /** Text longer than 1000 characters is also stored as a file and wrapped in `<content>`. Default `true`. */
  textAsFiles?: boolean;
}

const ROUTING_TOOL_PATH = 'control-flow/routing';
const MEMORY_TOOL_PATH = 'function-group/use-memory';
const NOTEBOOKLM_TOOL_PATH = 'function-group/notebooklm';
const NOTEBOOKLM_HANDLE_PREFIX = 'https://notebooklm.google.com/notebook/';

/** Longer text parts become files when translated to pidgin. */
const MAX_INLINE_TEXT_LENGTH = 1000;

/**
 * The most `<file>` tags one text may hold (1000), and the most characters its tags may bring in
 * together (64 Mi, base64 included). Each tag puts a whole file in its place, so a text that
 * names one big file thousands of times would otherwise grow past what memory or a request holds.
 */
const MAX_FILE_TAGS = 1000;
const MAX_EXPANDED_LENGTH = 64 * 1024 * 1024;

/** How many unreadable files an error names before it only counts the rest. */
const MAX_LISTED_ERRORS = 10;

/**
 * `<file src="..." />` and `<a href="...">title</a>`, the tags read back from model text. The
 * capturing group makes `split` keep them.
 */
const PIDGIN_TAG = /(<file\s+src\s*=\s*"[^"]*"\s*\/>|<a\s+href\s*=\s*"[^"]*"\s*>[^<]*<\/a>)/;
const FILE_TAG = /^<file\s+src\s*=\s*"([^"]*)"\s*\/>$/;
const LINK_TAG = /^<a\s+href\s*=\s*"[^"]*"\s*>([^<]*)<\/a>$/;

/**
 * Translates request segments into the objective text the model reads: text as
 * is, assets and upstream inputs as `<asset>` / `<input>` blocks whose binary parts are stored in
 * `fs` and referred to by `<file src>`, routing tools as `<a href="/route-N">` links, memory and
 * NotebookLM tools as their key phrases. Throws `Agent: ...` listing every bad segment, with the
 * prefix once (never `Agent: Agent:`).
 *
 * @example
 * ```ts
 * toPidgin([{ type: 'text', text: 'Say hi' }], new AgentFileSystem()).text; // 'Say hi'
 * ```
 */
export function toPidgin(
  segments: readonly PidginSegment[],
  fs: AgentFileSystem,
  options: ToPidginOptions = {},
): PidginObjective {
  const pieces: string[] = [];
  const errors: string[] = [];
  const result: PidginObjective = {
    text: '',
    useMemory: false,
    useNotebookLM: options.useNotebookLM === true,
    customToolUrls: [],
  };
  for (const segment of segments) {
    switch (segment.type) {
      case 'text':
        if (segment.text) pieces.push(segment.text);
        break;
      case 'asset': {
        if (!segment.content?.parts?.length) {
          errors.push('Invalid asset format');
          break;
        }
        const title = segment.title ?? 'asset';
        pieces.push(`<asset title="${title}">\n${contentToPidginString(segment.content, fs)}\n</asset>`);
        break;
      }
      case 'input': {
        if (!segment.content?.parts?.length) break;
        const title = segment.title ?? 'input';
        pieces.push(`<input source-agent="${title}">\n${contentToPidginString(segment.content, fs)}\n</input>`);
        break;
      }
      case 'tool':
        switch (segment.path) {
          case ROUTING_TOOL_PATH:
            if (segment.instance === undefined || segment.instance === '') {
              errors.push('Malformed route, missing instance param');
              break;
            }
            pieces.push(`<a href="${fs.addRoute(segment.instance)}">${segment.title ?? ''}</a>`);
            break;
          case MEMORY_TOOL_PATH:
            pieces.push('Use Memory');
            result.useMemory = true;
            break;
          case NOTEBOOKLM_TOOL_PATH:
            pieces.push('Use NotebookLM');
            result.useNotebookLM = true;
            break;
          default: {
            const customTool: CustomToolUrl = { url: segment.path };
            if (segment.title !== undefined) customTool.title = segment.title;
            result.customToolUrls.push(customTool);
          }
        }
        break;
      default: {
        // Segments arrive from the wire: a type outside the union is reported, an empty one ignored.
        const type: unknown = (segment as { type?: unknown }).type;
        if (type !== undefined && type !== null && type !== '') errors.push(`Unknown segment type: ${String(type)}`);
      }
    }
  }
  if (errors.length > 0) throw new AgentError('BAD_REQUEST', `Agent: ${errors.join(',')}`);
  result.text = pieces.join('');
  return result;
}

/**
 * Translates a content into pidgin, one line per part: text as is (longer text
 * also stored as a file and wrapped in `<content src>`), NotebookLM handles as bare URLs, and every
 * other part stored in `fs` and written as `<file src="/mnt/..." />`. Parts the file system cannot
 * hold (function calls, for instance) are left out.
 *
 * @example
 * ```ts
 * contentToPidginString({ parts: [{ inlineData: { mimeType: 'image/png', data: 'AAA' } }] }, fs);
 * // '<file src="/mnt/image1.png" />'
 * ```
 */
export function contentToPidginString(
  content: LLMContent,
  fs: AgentFileSystem,
  options: ContentToPidginOptions = {},
): string {
  const textAsFiles = options.textAsFiles ?? true;
  const pieces: string[] = [];
  for (const part of content.parts ?? []) {
    if (typeof part.text === 'string') {
      if (textAsFiles && exceedsCodePoints(part.text, MAX_INLINE_TEXT_LENGTH)) {
        pieces.push(`<content src="${fs.addPart(part)}">\n${part.text}</content>`);
      } else {
        pieces.push(part.text);
      }
      continue;
    }
    const handle = part.storedData?.handle;
    if (typeof handle === 'string' && handle.startsWith(NOTEBOOKLM_HANDLE_PREFIX)) {
      pieces.push(handle);
      continue;
    }
    let path: string;
    try {
      path = fs.addPart(part);
    } catch {
      continue;
    }
    pieces.push(`<file src="${path}" />`);
  }
  return pieces.join('\n');
}

/**
 * Turns model text back into a user content: each `<file src="..." />` becomes
 * the parts of that file, each `<a href="...">title</a>` its title, the text around them text
 * parts; neighbouring plain text parts are merged with `\n`. `<content>` tags stay literal text.
 * Throws `Agent unable to proceed: ...` naming the files that could not be read (each once, the
 * first ten, then a count), or `PAYLOAD_TOO_LARGE` when the text has more than 1000 `<file>` tags
 * or they bring in more than 64 Mi characters.
 *
 * @example
 * ```ts
 * await fromPidginString('Here: <file src="/mnt/image1.png" />', fs);
 * // { parts: [{ text: 'Here: ' }, { inlineData: { ... } }], role: 'user' }
 * ```
 */
export async function fromPidginString(text: string, fs: AgentFileSystem): Promise<LLMContent> {
  const pieces = text.split(PIDGIN_TAG);
  let tags = 0;
  // Tags are the odd pieces of the split.
  for (let index = 1; index < pieces.length; index += 2) if ((pieces[index] as string).startsWith('<file')) tags += 1;
  if (tags > MAX_FILE_TAGS) {
    throw new AgentError('PAYLOAD_TOO_LARGE', `Agent unable to proceed: the text has ${tags} <file> tags, more than the ${MAX_FILE_TAGS} one text may hold`, {
      details: { field: 'text' },
    });
  }
  const parts: Part[] = [];
  const errors = new Set<string>();
  let length = 0;
  for (const piece of pieces) {
    if (piece === '') continue;
    const file = FILE_TAG.exec(piece);
    if (file) {
      let resolved: Part[];
      try {
        resolved = await fs.get(file[1] ?? '');
      } catch (error) {
        errors.add(error instanceof Error ? error.message : String(error));
        continue;
      }
      for (const part of resolved) {
        length += part.text?.length ?? part.inlineData?.data.length ?? 0;
        parts.push(part);
      }
      if (length > MAX_EXPANDED_LENGTH) {
        throw new AgentError(
          'PAYLOAD_TOO_LARGE',
          `Agent unable to proceed: the <file> tags bring the text to more than ${MAX_EXPANDED_LENGTH} characters; name each file once, or fewer files`,
          { details: { field: 'text' } },
        );
      }
      continue;
    }
    const link = LINK_TAG.exec(piece);
    parts.push({ text: link ? (link[1] ?? '').trim() : piece });
  }
  if (errors.size > 0) throw new AgentError('BAD_REQUEST', `Agent unable to proceed: ${listErrors([...errors])}`);
  return { parts: mergeTextParts(parts), role: 'user' };
}

/** The first errors joined with `,` (as Opal joins them), then how many more there were. */
function listErrors(errors: readonly string[]): string {
  if (errors.length <= MAX_LISTED_ERRORS) return errors.join(',');
  return `${errors.slice(0, MAX_LISTED_ERRORS).join(',')} and ${errors.length - MAX_LISTED_ERRORS} more files that could not be read`;
}

/**
 * Merges each run of neighbouring plain text parts (parts whose only field is `text`) into one,
 * joined with `separator`; other parts are kept as they are.
 *
 * @example
 * ```ts
 * mergeTextParts([{ text: 'a' }, { text: 'b' }], ''); // [{ text: 'ab' }]
 * ```
 */
export function mergeTextParts(parts: readonly Part[], separator = '\n'): Part[] {
  const merged: Part[] = [];
  let run: string[] | undefined;
  const flush = (): void => {
    if (run) merged.push({ text: run.join(separator) });
    run = undefined;
  };
  for (const part of parts) {
    if (isPlainText(part)) {
      (run ??= []).push(part.text);
    } else {
      flush();
      merged.push(part);
    }
  }
  flush();
  return merged;
}

function isPlainText(part: Part): part is Part & { text: string } {
  if (typeof part.text !== 'string') return false;
  for (const key in part) if (key !== 'text') return false;
  return true;
}

/** Whether `text` has more than `limit` Unicode code points (as Python counts a string's length). */
function exceedsCodePoints(text: string, limit: number): boolean {
  if (text.length <= limit) return false;
  if (text.length > limit * 2) return true;
  let count = 0;
  for (const _ of text) if (++count > limit) return true;
  return false;
}
