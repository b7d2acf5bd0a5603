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

/**
 * The agent's virtual file system under `/mnt/`: files the model reads and writes,
 * binary parts it refers to as `<file src="/mnt/..." />`, route names for links, and lazily read
 * system files. Failures throw an {@link AgentError} whose message is the Opal wording, so a
 * function handler that lets it through tells the model exactly what was wrong.
 *
 * @example
 * ```ts
 * const fs = new AgentFileSystem();
 * const path = fs.write('notes', 'hello'); // '/mnt/notes.txt'
 * await fs.readText(path); // 'hello'
 * ```
 */
/**
 * The most characters a text file written by a function may hold (16 Mi). Far more than a model
 * can read back, and it stops a run from growing a file without bound, say by writing a file that
 * quotes itself twice, over and over, until the process runs out of memory.
 */
const MAX_TEXT_FILE_LENGTH = 16 * 1024 * 1024;

function checkTextLength(path: string, length: number): void {
  if (length > MAX_TEXT_FILE_LENGTH) {
    throw new AgentError('PAYLOAD_TOO_LARGE', `File "${path}" would hold ${length} characters, more than the ${MAX_TEXT_FILE_LENGTH} a file may hold`);
  }
}

export class AgentFileSystem {
  readonly #files = new Map<string, FileDescriptor>();
  /** Added routes, name -> original; `""` and `"/"` map to themselves without being stored. */
  readonly #routes = new Map<string, string>();
  readonly #systemFiles = new Map<string, SystemFileGetter>();
  /** Mounted directories, by their path with a trailing `/`. */
  readonly #mounts = new Map<string, MountedDirectory>();
  #fileCount = 0;

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
      this.#files.set(path, { data: textToBase64(data), mimeType, type: 'inlineData' });
    } else {
      this.#files.set(path, { data, mimeType, type: 'text' });
    }
    return path;
  }

  /** Like {@link AgentFileSystem.write}, but always stores text (HTML included). Returns the path. */
  overwrite(name: string, data: string): string {
    const path = namedPath(name, 'txt');
    checkTextLength(path, data.length);
    this.#files.set(path, { data, mimeType: mimeTypeFromFileName(path), type: 'text' });
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
      this.#files.set(normalised, { data, mimeType: 'text/markdown', type: 'text' });
      return;
    }
    if (existing.type !== 'text') {
      throw new AgentError('BAD_REQUEST', `File "${normalised}" already exists and is not a text file`);
    }
    this.#files.set(normalised, { ...existing, data: `${existing.data}\n${data}` });
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
      if (text === undefined) throw new AgentError('NOT_FOUND', `file "${normalised}" not found`);
      return [{ text }];
    }
    const descriptor = this.#files.get(normalised);
    if (!descriptor) throw new AgentError('NOT_FOUND', `file "${normalised}" not found`);
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
        throw new AgentError('BAD_REQUEST', `File at ${path} is not a text file`);
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
    this.#files.set(path, descriptor);
    return path;
  }

  /**
   * Reserves an automatic path for a new file of `mimeType`: `/mnt/{prefix}{n}.{ext}`, where `n`
   * counts every automatic name of this file system (`/mnt/image1.png`, `/mnt/audio2.mp3`).
   */
  create(mimeType: string): string {
    this.#fileCount += 1;
    return `/mnt/${fileNamePrefixFromMimeType(mimeType)}${this.#fileCount}.${extensionFromMimeType(mimeType)}`;
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
    if (original === undefined) throw new AgentError('NOT_FOUND', `Route "${name}" not found`);
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
    for (const { path, ...descriptor } of data.files) fileSystem.#files.set(path, descriptor);
    for (const [name, original] of Object.entries(data.routes)) fileSystem.#routes.set(name, original);
    fileSystem.#fileCount = data.fileCount;
    return fileSystem;
  }

  #mountOf(path: string): { directory: MountedDirectory; name: string } | undefined {
    for (const [prefix, directory] of this.#mounts) {
      if (!path.startsWith(prefix)) continue;
      const rest = path.slice(prefix.length);
      let name = rest;
      try {
        name = decodeURIComponent(rest);
      } catch {
        // Not percent-encoding after all (a lone "%"): the name as written.
      }
      return { directory, name };
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

/** `mnt/x` → `/mnt/x`, `x` → `/mnt/x`; absolute paths stay as they are. */
function normalisePath(path: string): string {
  if (path.startsWith('/')) return path;
  if (path.startsWith('mnt/')) return `/${path}`;
  return `/mnt/${path}`;
}

/**
 * `/mnt/{name}`, with `.{extension}` added when the file name has none. A name the model already
 * wrote as a path (`/mnt/a.md`, `mnt/a.md`) is not nested a second time, and `.` and `..` segments
 * are dropped, so a path never leaves `/mnt/` (a client may save the run's files under their paths).
 */
function namedPath(name: string, extension: string): string {
  let relative = name;
  if (relative.startsWith('/mnt/')) relative = relative.slice('/mnt/'.length);
  else if (relative.startsWith('mnt/')) relative = relative.slice('mnt/'.length);
  else if (relative.startsWith('/')) relative = relative.slice(1);
  if (/(^|[/\\])\.{1,2}([/\\]|$)/.test(relative)) {
    relative = relative
      .split(/[/\\]/)
      .filter((segment) => segment !== '.' && segment !== '..' && segment !== '')
      .join('/');
  }
  const baseName = relative.slice(relative.lastIndexOf('/') + 1);
  return baseName.includes('.') ? `/mnt/${relative}` : `/mnt/${relative}.${extension}`;
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
