import { randomUUID } from 'node:crypto';
import { closeSync, linkSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import os from 'node:os';

/** A lock file held by this process; see {@link acquireFileLock}. */
export interface FileLock {
  /** Removes the lock file (unless {@link FileLock.forget} was called); never throws. */
  release(): void;
  /** The lock file went away with its folder: `release` has nothing left to remove. */
  forget(): void;
}

/** Options of {@link acquireFileLock}. */
export interface FileLockOptions {
  /** How long to wait for another holder before failing with `ELOCKED`. Default 5 s. */
  waitMs?: number;
  /** A lock this old is taken over even when its holder may be alive. Default 30 s. */
  staleMs?: number;
}

const DEFAULT_WAIT_MS = 5_000;
const DEFAULT_STALE_MS = 30_000;
const UNNAMED_STALE_MS = 1_000;

let hostname: string | undefined;
const hostnameOf = () => (hostname ??= os.hostname());

/**
 * Takes a lock shared by every process on the machine: a file created exclusively (`O_EXCL`)
 * holding the host name, the process id and a random token. A lock whose holder is a process of
 * this host that no longer exists is taken over at once; any other lock once it is older than
 * `staleMs` (a holder on another host, or a process id reused since). Rejects with the system
 * error when the lock's folder cannot be written (`ENOENT` when it does not exist), or with an
 * error of code `ELOCKED` after `waitMs`.
 *
 * The file operations are synchronous: each is a few microseconds on a local disk, far less than
 * a round trip through the thread pool, and only the waiting is asynchronous.
 */
export async function acquireFileLock(file: string, options: FileLockOptions = {}): Promise<FileLock> {
  const waitMs = options.waitMs ?? DEFAULT_WAIT_MS;
  const staleMs = options.staleMs ?? DEFAULT_STALE_MS;
  const content = `${hostnameOf()}\n${process.pid}\n${randomUUID()}\n`;
  const deadline = Date.now() + waitMs;
  for (let attempt = 0; ; attempt += 1) {
    if (tryCreate(file, content)) return heldLock(file, content, staleMs);
    if (breakIfAbandoned(file, staleMs)) continue;
    if (Date.now() > deadline) throw Object.assign(new Error('The lock stayed held by another process'), { code: 'ELOCKED' });
    // Short waits first: a lock is normally held for well under a millisecond.
    const delay = Math.min(2 ** attempt, 16) * (0.25 + Math.random() / 2);
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

function tryCreate(file: string, content: string): boolean {
  let descriptor: number;
  try {
    descriptor = openSync(file, 'wx');
  } catch (error) {
    if (codeOf(error) === 'EEXIST') return false;
    throw error;
  }
  try {
    writeSync(descriptor, content);
  } catch (error) {
    closeSync(descriptor);
    ignoreFailure(() => unlinkSync(file));
    throw error;
  }
  closeSync(descriptor);
  return true;
}

function heldLock(file: string, content: string, staleMs: number): FileLock {
  const since = Date.now();
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      if (Date.now() - since < staleMs / 2) ignoreFailure(() => unlinkSync(file));
      // Held long enough that another process may have taken it over: remove it only if it is ours.
      else removeIfSame(file, content);
    },
    forget() {
      held = false;
    },
  };
}

/** Takes an abandoned lock away; `true` when the caller should try to create it again at once. */
function breakIfAbandoned(file: string, staleMs: number): boolean {
  let content: string;
  let modified: number;
  try {
    content = readFileSync(file, 'utf8');
    modified = statSync(file).mtimeMs;
  } catch (error) {
    return codeOf(error) === 'ENOENT';
  }
  const age = Date.now() - modified;
  const [host, pid] = content.split('\n');
  const holderGone = content.endsWith('\n') && host === hostnameOf() && /^\d{1,10}$/.test(pid ?? '') && !isRunning(Number(pid));
  // The holder writes its name right after creating the file, in the same synchronous step: an
  // empty lock that is not brand new belongs to a process that died in between.
  const neverNamed = content === '' && age > UNNAMED_STALE_MS;
  if (!holderGone && !neverNamed && age < staleMs) return false;
  removeIfSame(file, content);
  return true;
}

/**
 * Removes `file` if it still holds `content`. The file is first renamed aside, so of several
 * processes doing this at once only one moves it; one that moved a newer holder's lock puts it
 * back (unless the lock was taken again meanwhile).
 */
function removeIfSame(file: string, content: string): void {
  const aside = `${file}.${randomUUID()}.stale`;
  try {
    renameSync(file, aside);
  } catch {
    return;
  }
  let moved = content;
  ignoreFailure(() => {
    moved = readFileSync(aside, 'utf8');
  });
  if (moved !== content) ignoreFailure(() => linkSync(aside, file));
  ignoreFailure(() => unlinkSync(aside));
}

function isRunning(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return codeOf(error) === 'EPERM';
  }
}

function ignoreFailure(action: () => void): void {
  try {
    action();
  } catch {
    // Best effort: what is left is cleaned up by a later sweep or lock breaker.
  }
}

/** The system error code of a failed file operation. */
export function codeOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}
