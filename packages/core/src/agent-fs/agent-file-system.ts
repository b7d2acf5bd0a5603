import { z } from 'zod';
import { AgentError, formatFirstIssue, messageOf } from '../errors/index.js';
import { textToBase64 } from '../protocol/base64.js';
import { lazy } from '../protocol/lazy.js';
import type { Part } from '../protocol/content.js';
import {
  DEFAULT_MIME_TYPE,
  extensionFromMimeType,
  fileNamePrefixFromMimeType,
  mimeTypeFromFileName,
} from './mime-types.js';
import { decodeSafely } from '../protocol/values.js';

/** How a file's `data` is to be read: text, base64 bytes, a file URI or a stored-data handle. */
export type FileDescriptorType = 'text' | 'inlineData' | 'fileData' | 'storedData';

/**
 * One file of the agent file system. `data` holds the text for `text` files, base64
 * for `inlineData`, the URI for `fileData` and the handle for `storedData`.
 */
export interface FileDescriptor {
  data: string;
  mimeType: string;
  type: FileDescriptorType;
  /** Kept from an `inlineData.title`. */
  title?: string;
  /** Kept from a Drive `fileData` / `storedData` part. */
  resourceKey?: string;
}

/** Reads a virtual file's current text; it runs on every read, never at registration. */
export type SystemFileGetter = () => string | Promise<string>;

/**
 * A directory whose files another system serves, read on demand (the memory sheets under
 * `/mnt/memory/`). Names are the file names inside the directory, percent-decoded.
 */
export interface MountedDirectory {
  /** The text of the file `name`, or `undefined` when there is no such file. */
  read(name: string): Promise<string | undefined>;
  /** The names of its files. */
  list(): Promise<string[]>;
}

/**
 * The saved form of an {@link AgentFileSystem}: plain JSON that survives `JSON.stringify` /
 * `JSON.parse` unchanged. Files are a list so insertion order never depends on key shapes; routes
 * hold only the ones added (`""` and `"/"` are implicit). System files are not saved: whoever
 * restores the file system registers them again. Built on first use: only a snapshot that fails
 * the plain shape check needs it.
 */
export const fileSystemSnapshotSchema = lazy(() =>
  z.object({
    files: z.array(
      // One file: its path and descriptor.
      z.object({
        path: z.string(),
        data: z.string(),
        mimeType: z.string(),
        type: z.enum(['text', 'inlineData', 'fileData', 'storedData']),
        title: z.string().optional(),
        resourceKey: z.string().optional(),
      }),
    ),
    routes: z.record(z.string(), z.string()),
    fileCount: z.number().int().nonnegative(),
  }),
);

/** The saved form of an {@link AgentFileSystem}, see {@link fileSystemSnapshotSchema}. */
export type FileSystemSnapshot = z.infer<ReturnType<typeof fileSystemSnapshotSchema>>;

/** The longest excerpt of an unsupported part quoted in an error message. */
const MAX_QUOTED_PART_LENGTH = 200;

/** The longest excerpt of a path or route name quoted in an error message. */
const MAX_QUOTED_NAME_LENGTH = 200;

/**
 * The most characters a text file written by a function may hold (16 Mi). Far more than a model
 * can read back, and it stops a run from growing a file without bound, say by writing a file that
 * quotes itself twice, over and over, until the process runs out of memory.
 */
const MAX_TEXT_FILE_LENGTH = 16 * 1024 * 1024;

/**
 * The most files a run may keep (1000), and the most characters all of them may hold together
 * (128 Mi, base64 included). The whole file system travels with every suspended run and ends up in
 * the run's result, so it must stay far below what a store or a client can take.
 */
const MAX_FILES = 1000;
const MAX_TOTAL_LENGTH = 128 * 1024 * 1024;

/** The longest file or directory name (255, as most disks allow) and the longest path (1024). */
const MAX_SEGMENT_LENGTH = 255;
const MAX_PATH_LENGTH = 1024;

/** Where system files live: the model reads them, never writes them. */
const SYSTEM_DIRECTORY = '/mnt/system/';

/** Control, format (zero-width, bidi overrides) and line-separator characters: invisible in a name. */
const INVISIBLE_CHARACTER = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/**
 * Characters that some clients turn into `.`, `/` or `\` (Windows "best fit" code pages, NFKC):
 * fullwidth and small forms, dot leaders, division, fraction and set-minus slashes. A name with one
 * could lead out of the directory a client saves the run's files in.
 */
const SEPARATOR_LOOK_ALIKE = /[\u2024\u2025\uFE52\uFF0E\u2044\u2215\u29F8\uFF0F\u2216\u29F9\uFE68\uFF3C]/u;

function checkTextLength(path: string, length: number): void {
  if (length > MAX_TEXT_FILE_LENGTH) {
    throw new AgentError('PAYLOAD_TOO_LARGE', `File "${quoteName(path)}" would hold ${length} characters, more than the ${MAX_TEXT_FILE_LENGTH} a file may hold`, {
      details: { field: 'data' },
    });
  }
}

/**
 * The agent's virtual file system under `/mnt/`: files the model reads and writes,
 * binary parts it refers to as `<file src="/mnt/..." />`, route names for links, and lazily read
 * system files. Failures throw an {@link AgentError} whose message is the Opal wording, so a
 * function handler that lets it through tells the model exactly what was wrong; a failure caused
 * by a name or by the data written says which in `details.field` (`name` or `data`).
 *
 * Names are checked when a file is written: `.` and `..` segments are dropped and `\` separates
 * like `/`, so a path never leaves `/mnt/`; a name with control or invisible characters, a
 * look-alike of `/`, `\` or `.`, a percent-encoded `..` or separator, or more than 255 characters
 * (1024 for the whole path) is refused. A run keeps at most 1000 files of at most 128 Mi characters
 * together (16 Mi for one text file); a write past a limit is refused and changes nothing.
 *
 * @example
 * ```ts
 * const fs = new AgentFileSystem();
 * const path = fs.write('notes', 'hello'); // '/mnt/notes.txt'
 * await fs.readText(path); // 'hello'
 * ```
 */
export class AgentFileSystem {
  readonly #files = new Map<string, FileDescriptor>();
  /** Added routes, name -> original; `""` and `"/"` map to themselves without being stored. */
  readonly #routes = new Map<string, string>();
  readonly #systemFiles = new Map<string, SystemFileGetter>();
  /** Mounted directories, by their path with a trailing `/`. */
  readonly #mounts = new Map<string, MountedDirectory>();
  #fileCount = 0;
  /** The characters all files hold together. */
  #totalLength = 0;

  /**
   * Writes `data` to `/mnt/{name}` (`.txt` added when the name has no extension), replacing any
   * file there, and returns the path. The MIME type follows the extension; HTML is stored as base64
   * `inlineData` so it can be handed out as a data URL, everything else as text.
   */
  write(name: string, data: string): string {
    const path = namedPath(name, 'txt');
    checkTextLength(path, data.length);
    const mimeType = mimeTypeFromFileName(path);
    if (mimeType === 'text/html') {
      this.#store(path, { data: textToBase64(data), mimeType, type: 'inlineData' });
    } else {
      this.#store(path, { data, mimeType, type: 'text' });
    }
    return path;
  }

  /** Like {@link AgentFileSystem.write}, but always stores text (HTML included). Returns the path. */
  overwrite(name: string, data: string): string {
    const path = namedPath(name, 'txt');
    checkTextLength(path, data.length);
    this.#store(path, { data, mimeType: mimeTypeFromFileName(path), type: 'text' });
    return path;
  }

  /**
   * Appends `data` on a new line of the text file at `path`, creating a markdown file when there is
   * none. The path is normalised as in {@link AgentFileSystem.get}, so what
   * is appended can be read back under the same name.
   */
  append(path: string, data: string): void {
    const normalised = normalisePath(path);
    const existing = this.#files.get(normalised);
    checkTextLength(normalised, (existing?.type === 'text' ? existing.data.length + 1 : 0) + data.length);
    if (!existing) {
      this.#store(normalised, { data, mimeType: 'text/markdown', type: 'text' });
      return;
    }
    if (existing.type !== 'text') {
      throw new AgentError('BAD_REQUEST', `File "${quoteName(normalised)}" already exists and is not a text file`);
    }
    this.#store(normalised, { ...existing, data: `${existing.data}\n${data}` });
  }

  /**
   * The parts of the file at `path` (`mnt/x` and `x` both mean `/mnt/x`). A system file is read
   * through its getter now; a getter's failure is thrown as is.
   */
  async get(path: string): Promise<Part[]> {
    const normalised = normalisePath(path);
    const getter = this.#systemFiles.get(normalised);
    if (getter) return [{ text: await getter() }];
    const mounted = this.#mountOf(normalised);
    if (mounted) {
      const text = mounted.name.length > 0 ? await mounted.directory.read(mounted.name) : undefined;
      if (text === undefined) throw new AgentError('NOT_FOUND', `file "${quoteName(normalised)}" not found`);
      return [{ text }];
    }
    const descriptor = this.#files.get(normalised);
    if (!descriptor) throw new AgentError('NOT_FOUND', `file "${quoteName(normalised)}" not found`);
    return [toPart(descriptor)];
  }

  /** The parts of all `paths`, in order; if any is missing, one error naming every failure. */
  async getMany(paths: readonly string[]): Promise<Part[]> {
    const parts: Part[] = [];
    const errors: string[] = [];
    for (const path of paths) {
      try {
        parts.push(...(await this.get(path)));
      } catch (error) {
        errors.push(messageOf(error));
      }
    }
    if (errors.length > 0) throw new AgentError('NOT_FOUND', errors.join(','));
    return parts;
  }

  /** The text of the file at `path`, parts joined with `\n`; throws when it is not a text file. */
  async readText(path: string): Promise<string> {
    const parts = await this.get(path);
    const texts: string[] = [];
    for (const part of parts) {
      if (typeof part.text !== 'string') {
        throw new AgentError('BAD_REQUEST', `File at ${quoteName(path)} is not a text file`);
      }
      texts.push(part.text);
    }
    return texts.join('\n');
  }

  /** Every path, one a line: files in insertion order, then system files; `""` when empty. */
  listFiles(): string {
    const paths = [...this.#files.keys()];
    for (const path of this.#systemFiles.keys()) {
      if (!this.#files.has(path)) paths.push(path);
    }
    return paths.join('\n');
  }

  /**
   * Like {@link AgentFileSystem.listFiles}, followed by the files of mounted directories
   * (`/mnt/memory/Scores`). A directory that cannot be listed is left out.
   */
  async listAllFiles(): Promise<string> {
    const listed = this.listFiles();
    const paths = listed === '' ? [] : [listed];
    for (const [directory, source] of this.#mounts) {
      try {
        for (const name of await source.list()) paths.push(`${directory}${encodeURIComponent(name)}`);
      } catch {
        // Listing is best effort: reading a file of the directory reports its own error.
      }
    }
    return paths.join('\n');
  }

  /**
   * A URL for the file at `path`: the URI or handle of a `fileData` / `storedData` file, a base64
   * data URL for `inlineData`; `undefined` for text files and missing paths.
   */
  getFileUrl(path: string): string | undefined {
    const descriptor = this.#files.get(normalisePath(path));
    if (!descriptor) return undefined;
    switch (descriptor.type) {
      case 'fileData':
      case 'storedData':
        return descriptor.data;
      case 'inlineData':
        return `data:${descriptor.mimeType};base64,${descriptor.data}`;
      case 'text':
        return undefined;
    }
  }

  /**
   * Stores a content part as a file and returns its path: `/mnt/{fileName}` (the MIME type's
   * extension added when the name has none) or an automatic name. Text parts
   * become markdown files. A `storedData` / `fileData` part already stored under the same handle or
   * URI is not stored twice: its existing path is returned.
   */
  addPart(part: Part, fileName?: string): string {
    let descriptor: FileDescriptor;
    if (typeof part.text === 'string') {
      descriptor = { data: part.text, mimeType: 'text/markdown', type: 'text' };
    } else if (part.inlineData) {
      const { data, mimeType, title } = part.inlineData;
      descriptor = { data, mimeType: mimeType || DEFAULT_MIME_TYPE, type: 'inlineData' };
      if (title) descriptor.title = title;
    } else if (part.storedData || part.fileData) {
      const [type, data, mimeType, resourceKey] = part.storedData
        ? (['storedData', part.storedData.handle, part.storedData.mimeType, part.storedData.resourceKey] as const)
        : (['fileData', part.fileData!.fileUri, part.fileData!.mimeType, part.fileData!.resourceKey] as const);
      const existing = this.#findReference(data);
      if (existing !== undefined) return existing;
      descriptor = { data, mimeType: mimeType || DEFAULT_MIME_TYPE, type };
      if (resourceKey) descriptor.resourceKey = resourceKey;
    } else {
      throw new AgentError('BAD_REQUEST', `Unsupported part: ${quote(part)}`);
    }
    const path =
      fileName === undefined
        ? this.create(descriptor.mimeType)
        : namedPath(fileName, extensionFromMimeType(descriptor.mimeType));
    this.#store(path, descriptor);
    return path;
  }

  /**
   * Reserves an automatic path for a new file of `mimeType`: `/mnt/{prefix}{n}.{ext}`, where `n`
   * counts every automatic name of this file system (`/mnt/image1.png`, `/mnt/audio2.mp3`). A
   * number whose name the model already gave a file is skipped, so that file is never replaced.
   */
  create(mimeType: string): string {
    const prefix = fileNamePrefixFromMimeType(mimeType);
    const extension = extensionFromMimeType(mimeType);
    let path: string;
    do {
      this.#fileCount += 1;
      path = `/mnt/${prefix}${this.#fileCount}.${extension}`;
    } while (this.#files.has(path));
    return path;
  }

  /** Gives `original` (a node id) a short route name the model can link to: `/route-1`, `/route-2`... */
  addRoute(original: string): string {
    const name = `/route-${this.#routes.size + 1}`;
    this.#routes.set(name, original);
    return name;
  }

  /** The original a route name stands for; `""` and `"/"` stand for themselves. */
  getOriginalRoute(name: string): string {
    if (name === '' || name === '/') return name;
    const original = this.#routes.get(name);
    if (original === undefined) throw new AgentError('NOT_FOUND', `Route "${quoteName(name)}" not found`);
    return original;
  }

  /**
   * Registers a virtual file whose text `getter` produces each time it is read. System files are
   * listed but never saved in a snapshot nor returned by {@link AgentFileSystem.files}.
   */
  addSystemFile(path: string, getter: SystemFileGetter): void {
    this.#systemFiles.set(normalisePath(path), getter);
  }

  /**
   * Serves the files under `directory` (e.g. `/mnt/memory/`) from `source`: reading
   * `/mnt/memory/My%20Sheet` or `/mnt/memory/My Sheet` asks it for `My Sheet`. Mounts are not saved
   * in a snapshot: whoever restores the file system mounts them again.
   */
  mount(directory: string, source: MountedDirectory): void {
    const normalised = normalisePath(directory);
    this.#mounts.set(normalised.endsWith('/') ? normalised : `${normalised}/`, source);
  }

  /** Every stored file as a part, in insertion order (for `complete.result.intermediate`). */
  files(): Array<{ path: string; part: Part }> {
    return Array.from(this.#files, ([path, descriptor]) => ({ path, part: toPart(descriptor) }));
  }

  /** The file system as plain JSON, to be restored with {@link AgentFileSystem.fromSnapshot}. */
  snapshot(): FileSystemSnapshot {
    return {
      files: Array.from(this.#files, ([path, descriptor]) => ({ path, ...descriptor })),
      routes: Object.fromEntries(this.#routes),
      fileCount: this.#fileCount,
    };
  }

  /**
   * A file system holding the files, routes and name counter of `snapshot` (system files have to
   * be registered again). Throws `STORE_ERROR` naming the first invalid field.
   */
  static fromSnapshot(snapshot: FileSystemSnapshot): AgentFileSystem {
    // Resuming is on the hot path: a plain shape check first, the schema only to name what is wrong.
    let data = snapshot;
    if (!looksLikeSnapshot(snapshot)) {
      const parsed = fileSystemSnapshotSchema().safeParse(snapshot);
      if (!parsed.success) {
        throw new AgentError('STORE_ERROR', `Invalid file system snapshot: ${formatFirstIssue('', parsed.error.issues).text}`);
      }
      data = parsed.data;
    }
    const fileSystem = new AgentFileSystem();
    for (const { path, ...descriptor } of data.files) {
      fileSystem.#files.set(path, descriptor);
      fileSystem.#totalLength += descriptor.data.length;
    }
    for (const [name, original] of Object.entries(data.routes)) fileSystem.#routes.set(name, original);
    fileSystem.#fileCount = data.fileCount;
    return fileSystem;
  }

  /**
   * Puts a file at `path` unless that breaks a limit or the path belongs to a system file or a
   * mounted directory (a file there could never be read back); a refused write changes nothing.
   */
  #store(path: string, descriptor: FileDescriptor): void {
    if (path.startsWith(SYSTEM_DIRECTORY) || this.#systemFiles.has(path)) {
      throw new AgentError('BAD_REQUEST', `"${quoteName(path)}" is a system file: it can be read, not written`, { details: { field: 'name' } });
    }
    const mounted = this.#mountOf(path);
    if (mounted) {
      throw new AgentError('BAD_REQUEST', `"${quoteName(path)}" is in a directory whose files this run cannot write; choose a name outside it`, {
        details: { field: 'name' },
      });
    }
    const existing = this.#files.get(path);
    if (!existing && this.#files.size >= MAX_FILES) {
      throw new AgentError('PAYLOAD_TOO_LARGE', `There are already ${MAX_FILES} files, the most a run may keep, so "${quoteName(path)}" cannot be added; write to one of the existing files instead`, {
        details: { field: 'name' },
      });
    }
    const total = this.#totalLength - (existing?.data.length ?? 0) + descriptor.data.length;
    if (total > MAX_TOTAL_LENGTH) {
      throw new AgentError(
        'PAYLOAD_TOO_LARGE',
        `File "${quoteName(path)}" (${descriptor.data.length} characters) would bring all files to ${total} characters, more than the ${MAX_TOTAL_LENGTH} a run may keep`,
        { details: { field: 'data' } },
      );
    }
    this.#files.set(path, descriptor);
    this.#totalLength = total;
  }

  #mountOf(path: string): { directory: MountedDirectory; name: string } | undefined {
    for (const [prefix, directory] of this.#mounts) {
      if (!path.startsWith(prefix)) continue;
      return { directory, name: decodeSafely(path.slice(prefix.length)) };
    }
    return undefined;
  }

  #findReference(data: string): string | undefined {
    for (const [path, descriptor] of this.#files) {
      if ((descriptor.type === 'storedData' || descriptor.type === 'fileData') && descriptor.data === data) return path;
    }
    return undefined;
  }
}

const FILE_TYPES: ReadonlySet<unknown> = new Set(['text', 'inlineData', 'fileData', 'storedData']);

/** Whether `value` has exactly the shape {@link fileSystemSnapshotSchema} accepts (checked by hand: no allocation). */
function looksLikeSnapshot(value: unknown): value is FileSystemSnapshot {
  if (typeof value !== 'object' || value === null) return false;
  const { files, routes, fileCount } = value as Partial<FileSystemSnapshot>;
  if (!Array.isArray(files) || typeof routes !== 'object' || routes === null || Array.isArray(routes)) return false;
  if (typeof fileCount !== 'number' || !Number.isInteger(fileCount) || fileCount < 0) return false;
  for (const file of files as unknown[]) {
    if (typeof file !== 'object' || file === null) return false;
    const entry = file as Record<string, unknown>;
    if (typeof entry.path !== 'string' || typeof entry.data !== 'string' || typeof entry.mimeType !== 'string') return false;
    if (!FILE_TYPES.has(entry.type)) return false;
    if (entry.title !== undefined && typeof entry.title !== 'string') return false;
    if (entry.resourceKey !== undefined && typeof entry.resourceKey !== 'string') return false;
  }
  for (const key in routes) if (typeof (routes as Record<string, unknown>)[key] !== 'string') return false;
  return true;
}

/**
 * A path as the file system keys it: `mnt/x` and `x` mean `/mnt/x`; inside `/mnt/`, `\` separates
 * like `/` and empty, `.` and `..` segments are dropped (as {@link namedPath} does when writing), and
 * the text is NFC-normalised; other absolute paths stay as they are (no file lives there).
 */
function normalisePath(path: string): string {
  const text = path.normalize('NFC');
  if (text.startsWith('/') && !/^\/mnt(?:[/\\]|$)/.test(text)) return text;
  return `/mnt/${segmentsOf(text).join('/')}`;
}

/** The segments of a path inside `/mnt/`, `/mnt/` itself left out. */
function segmentsOf(path: string): string[] {
  const segments = path.split(/[/\\]/).filter((segment) => segment !== '' && segment !== '.' && segment !== '..');
  if (segments[0] === 'mnt' && /^[/\\]?mnt[/\\]/.test(path)) segments.shift();
  return segments;
}

/**
 * `/mnt/{name}`, with `.{extension}` added when the file name has none. A name the model already
 * wrote as a path (`/mnt/a.md`, `mnt/a.md`) is not nested a second time, `\` separates like `/`,
 * and `.` and `..` segments are dropped, so a path never leaves `/mnt/` (a client may save the run's
 * files under their paths). Throws `BAD_REQUEST` (`details.field: 'name'`) for a name no disk
 * should get: empty, with invisible characters or look-alikes of separators, with a percent-encoded
 * separator or dot segment, or too long.
 */
function namedPath(name: string, extension: string): string {
  const text = name.normalize('NFC');
  if (INVISIBLE_CHARACTER.test(text)) throw invalidName(name, 'it contains a control or invisible character');
  if (SEPARATOR_LOOK_ALIKE.test(text)) throw invalidName(name, 'it contains a character that looks like "/", "\\" or "."; use those characters themselves');
  const segments = segmentsOf(text);
  if (segments.length === 0) throw invalidName(name, 'it names no file');
  for (const segment of segments) {
    if (!segment.includes('%')) continue;
    const decoded = decodeSafely(segment);
    if (decoded === '.' || decoded === '..' || /[/\\]/.test(decoded) || INVISIBLE_CHARACTER.test(decoded)) {
      throw invalidName(name, 'its percent-encoding hides a separator, a dot segment or a control character');
    }
  }
  const relative = segments.join('/');
  const baseName = segments[segments.length - 1] as string;
  const path = baseName.includes('.') ? `/mnt/${relative}` : `/mnt/${relative}.${extension}`;
  if (path.length > MAX_PATH_LENGTH) throw invalidName(name, `the path would be longer than ${MAX_PATH_LENGTH} characters`);
  if (path.split('/').some((segment) => segment.length > MAX_SEGMENT_LENGTH)) {
    throw invalidName(name, `a file or directory name may have at most ${MAX_SEGMENT_LENGTH} characters`);
  }
  return path;
}

function invalidName(name: string, reason: string): AgentError {
  return new AgentError('BAD_REQUEST', `"${quoteName(name)}" is not a usable file name: ${reason}`, { details: { field: 'name' } });
}

/** A name or path as an error message quotes it: control characters escaped, cut when long. */
function quoteName(name: string): string {
  const shown = name.length > MAX_QUOTED_NAME_LENGTH ? `${name.slice(0, MAX_QUOTED_NAME_LENGTH)}… (${name.length} characters)` : name;
  return INVISIBLE_CHARACTER.test(shown) ? JSON.stringify(shown).slice(1, -1) : shown;
}

/** The content part a descriptor stands for. */
function toPart(descriptor: FileDescriptor): Part {
  switch (descriptor.type) {
    case 'text':
      return { text: descriptor.data };
    case 'inlineData': {
      const inlineData: NonNullable<Part['inlineData']> = { data: descriptor.data, mimeType: descriptor.mimeType };
      if (descriptor.title) inlineData.title = descriptor.title;
      return { inlineData };
    }
    case 'fileData': {
      const fileData: NonNullable<Part['fileData']> = { fileUri: descriptor.data, mimeType: descriptor.mimeType };
      if (descriptor.resourceKey) fileData.resourceKey = descriptor.resourceKey;
      return { fileData };
    }
    case 'storedData': {
      const storedData: NonNullable<Part['storedData']> = { handle: descriptor.data, mimeType: descriptor.mimeType };
      if (descriptor.resourceKey) storedData.resourceKey = descriptor.resourceKey;
      return { storedData };
    }
  }
}


function quote(part: Part): string {
  const json = JSON.stringify(part) ?? String(part);
  return json.length > MAX_QUOTED_PART_LENGTH ? `${json.slice(0, MAX_QUOTED_PART_LENGTH)}…` : json;
}

/**
 * Checks a file name the model gave before anything is made for it: throws the `BAD_REQUEST` that
 * writing under that name would throw (`details.field: 'name'`), so a generator is not run for
 * nothing.
 */
export function checkFileName(name: string): void {
  namedPath(name, 'txt');
}
