import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentError, type InteractionStore } from '@org/core';

/** Options of {@link createFileInteractionStore}. */
export interface FileInteractionStoreOptions {
  /** Folder for the files; created when missing. Several processes may share it. */
  directory: string;
}

const SAFE_ID = /^[A-Za-z0-9._-]{1,200}$/;

/**
 * An `InteractionStore` with one JSON file per interaction. Writes go to a temporary file that is
 * renamed into place, so a reader never sees half a value; `take` first renames the file to a
 * claim name that only one caller can win, so an interaction is taken once even when several
 * processes race for it.
 *
 * @example
 * ```ts
 * const store = createFileInteractionStore({ directory: '.data/interactions' });
 * ```
 */
export function createFileInteractionStore(options: FileInteractionStoreOptions): InteractionStore {
  const directory = path.resolve(options.directory);
  let ready: Promise<unknown> | undefined;
  const ensureDirectory = () => (ready ??= mkdir(directory, { recursive: true }));
  const fileOf = (id: string): string => {
    if (!SAFE_ID.test(id) || id === '.' || id === '..') {
      throw new AgentError('BAD_REQUEST', `Interaction id "${id.slice(0, 80)}" may only hold letters, digits, ".", "_" and "-"`);
    }
    return path.join(directory, `${id}.json`);
  };
  // The message names the operation and the system's error code, never the folder: it can reach
  // callers in error events. The cause keeps the full error for the server's own logs.
  const failure = (id: string, action: string, error: unknown) =>
    new AgentError('STORE_ERROR', `Could not ${action} interaction ${id} in the file store: ${reasonOf(error)}`, { cause: error });
  return {
    async save(id, value) {
      const file = fileOf(id);
      const json = JSON.stringify(value);
      if (json === undefined) throw new AgentError('BAD_REQUEST', `Interaction ${id}: value is not JSON-serialisable`);
      const temporary = `${file}.${randomUUID()}.tmp`;
      try {
        await ensureDirectory();
        await writeFile(temporary, json, 'utf8');
        await rename(temporary, file);
      } catch (error) {
        await rm(temporary, { force: true }).catch(() => undefined);
        throw failure(id, 'save', error);
      }
    },
    async take(id) {
      const file = fileOf(id);
      const claim = `${file}.${randomUUID()}.claimed`;
      try {
        await rename(file, claim);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw failure(id, 'take', error);
      }
      try {
        return JSON.parse(await readFile(claim, 'utf8')) as unknown;
      } catch (error) {
        throw failure(id, 'read', error);
      } finally {
        await rm(claim, { force: true });
      }
    },
    async has(id) {
      try {
        return (await stat(fileOf(id))).isFile();
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw failure(id, 'check', error);
      }
    },
    async delete(id) {
      try {
        await rm(fileOf(id), { force: true });
      } catch (error) {
        throw failure(id, 'delete', error);
      }
    },
  };
}

/** `EACCES (permission denied)` from a Node file-system error, without the path it names. */
function reasonOf(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const description = (error as NodeJS.ErrnoException | undefined)?.message?.match(/^[A-Z]+: ([^,]+)/)?.[1];
  if (typeof code === 'string') return description ? `${code} (${description})` : code;
  return error instanceof SyntaxError ? 'the stored file is not valid JSON' : 'unexpected failure';
}
