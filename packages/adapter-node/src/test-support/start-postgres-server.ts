import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { startGuardedProcess, startOnFreePort, type ThrowawayServer } from './guarded-process.js';

/** A throwaway PostgreSQL server for tests. */
export interface TestPostgresServer extends ThrowawayServer {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres`. */
  url: string;
}

const INSTALL_HINT = 'install it with `apt-get install postgresql` (.ci/run does), or set POSTGRES_BIN_DIR to the folder holding initdb and postgres';

/** The folder with `initdb` and `postgres`: POSTGRES_BIN_DIR, else the newest Debian install, else the usual places. */
function findPostgresBinaries(): string {
  const candidates: string[] = [];
  if (process.env.POSTGRES_BIN_DIR) candidates.push(process.env.POSTGRES_BIN_DIR);
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((name) => /^\d+$/.test(name))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((version) => path.join(debian, version, 'bin')));
  }
  candidates.push('/usr/local/pgsql/bin', '/opt/homebrew/bin', '/usr/local/bin', '/usr/bin');
  const found = candidates.find((folder) => existsSync(path.join(folder, 'initdb')) && existsSync(path.join(folder, 'postgres')));
  if (!found) throw new Error(`The PostgreSQL tests start their own server, and no initdb/postgres was found: ${INSTALL_HINT}.`);
  return found;
}

/**
 * PostgreSQL refuses to run as root. When the tests run as root (CI does), the server runs as
 * POSTGRES_TEST_USER, default `nobody`, which every Linux system has.
 */
function serverUser(): { uid: number; gid: number; name: string } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const name = process.env.POSTGRES_TEST_USER ?? 'nobody';
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
    if (!Number.isInteger(uid) || uid === 0) throw new Error(`${name} is root`);
    return { uid, gid, name };
  } catch (error) {
    throw new Error(
      `The tests run as root, and PostgreSQL will not: the server runs as user "${name}", which is not usable (${(error as Error).message}). Set POSTGRES_TEST_USER to a non-root user.`,
    );
  }
}

/** The temporary folder, or /tmp when another user could not reach into it (a root-only TMPDIR). */
function baseFolder(forOthers: boolean): string {
  const temporary = os.tmpdir();
  if (!forOthers) return temporary;
  for (let folder = path.resolve(temporary); ; folder = path.dirname(folder)) {
    if ((statSync(folder).mode & 0o001) === 0) return '/tmp';
    if (folder === path.dirname(folder)) return temporary;
  }
}

/**
 * Starts a PostgreSQL server on a free loopback port with a throwaway data folder (initdb with a
 * random password, fsync off), as a non-root user when the tests run as root; it stops with the
 * test process even if that one is killed.
 */
export async function startPostgresServer(): Promise<TestPostgresServer> {
  const binaries = findPostgresBinaries();
  const user = serverUser();
  const directory = await mkdtemp(path.join(baseFolder(user !== undefined), 'org-postgres-test-'));
  const data = path.join(directory, 'data');
  const password = randomUUID();
  const passwordFile = path.join(directory, 'password');
  await writeFile(passwordFile, password, { mode: 0o600 });
  if (user) {
    await chmod(directory, 0o700);
    await chown(directory, user.uid, user.gid);
    await chown(passwordFile, user.uid, user.gid);
  }
  const as = user ? { uid: user.uid, gid: user.gid } : {};
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C', HOME: directory };
  try {
    await promisify(execFile)(
      path.join(binaries, 'initdb'),
      ['-D', data, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${passwordFile}`, '-E', 'UTF8', '--no-locale', '--no-sync'],
      { ...as, env, cwd: directory },
    );
  } catch (error) {
    await rm(directory, { recursive: true, force: true });
    const output = `${(error as { stdout?: string }).stdout ?? ''}${(error as { stderr?: string }).stderr ?? ''}`;
    throw new Error(`initdb failed${user ? ` (as user ${user.name})` : ''}: ${(error as Error).message}\n${output}`);
  }
  return startOnFreePort({
    directory,
    password,
    what: `postgres${user ? ` (as user ${user.name})` : ''}`,
    launch: (port) => ({
      server: startGuardedProcess(
        path.join(binaries, 'postgres'),
        [
          '-D', data,
          '-p', String(port),
          '-c', 'listen_addresses=127.0.0.1',
          '-c', 'unix_socket_directories=',
          '-c', 'fsync=off',
          '-c', 'synchronous_commit=off',
          '-c', 'full_page_writes=off',
          '-c', 'max_connections=200',
        ],
        // Smart shutdown: sessions a test just ended finish their goodbye instead of being told
        // the server is going away (which `pg` reports as an error on a client it already let go).
        { ...as, env, cwd: directory, stopSignal: 'TERM' },
      ),
      url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    }),
    probe: async (url) => {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
      client.on('error', () => undefined);
      await client.connect();
      try {
        await client.query('SELECT 1');
      } finally {
        await client.end();
      }
    },
  });
}
