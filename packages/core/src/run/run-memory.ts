import { AgentError } from '../errors/index.js';
import type { OptionalGroups } from '../functions/index.js';
import type { LoopSession } from '../loop/agent-loop.js';
import { createChatLogSheet, createSheetManager, MEMORY_DIRECTORY, type ChatLogSheet, type SheetManager } from '../memory/index.js';
import type { AgentPorts } from '../ports/index.js';
import type { RunOptions } from './run-options.js';

/** The memory of one run segment: the graph's sheets, and the chat log kept in them. */
export interface RunMemory {
  sheets: SheetManager;
  chatLog: ChatLogSheet;
}

/**
 * Opens the memory of a session whose flags ask for it (`useMemory`, which a memory tool segment
 * sets): the graph's spreadsheet behind `context.memory` and `/mnt/memory/`, and the chat log of
 * earlier sessions as the seed of `/mnt/system/chat_log.json`. `undefined` when the run has no
 * memory. Throws `BAD_REQUEST` when memory is asked for and cannot be had (no Drive client, no
 * graph URL), and the Drive client's error when the spreadsheet cannot be read. A start whose
 * client sent the flag without a memory tool segment (`segment: 'start-flag'`) and that has no
 * Drive client or no graph URL goes on without memory, and the flag is dropped from the run's flags.
 */
export async function openRunMemory(
  session: LoopSession,
  ports: AgentPorts,
  signal: AbortSignal,
  options: Pick<RunOptions, 'now'>,
  segment: 'start' | 'start-flag' | 'resume',
): Promise<RunMemory | undefined> {
  if (session.flags.useMemory !== true) return undefined;
  if (segment === 'start-flag' && (!ports.drive || !session.graph?.url)) {
    delete session.flags.useMemory;
    return undefined;
  }
  if (!ports.drive) {
    const field = segment === 'resume' ? 'accessToken' : 'start.segments';
    throw new AgentError(
      'BAD_REQUEST',
      `${field}: the objective has a memory tool (function-group/use-memory), and memory is kept in Google Drive, but this run has no Drive client: ` +
        "send the user's access token (the body's accessToken or Authorization: Bearer) to a server with Google Drive enabled",
      { details: { field } },
    );
  }
  const url = session.graph?.url;
  if (!url) {
    throw new AgentError('BAD_REQUEST', 'start.graph.url: memory keeps one spreadsheet per graph, so a run with a memory tool needs the graph URL', {
      details: { field: 'start.graph.url' },
    });
  }
  const sheets = createSheetManager({ drive: ports.drive, graph: session.graph?.title ? { url, title: session.graph.title } : { url } });
  session.sessionId ??= crypto.randomUUID();
  const chatLog = createChatLogSheet({ sheets, sessionId: session.sessionId, ...(options.now ? { now: options.now } : {}) });
  session.chatLogSeed = await chatLog.recall(signal);
  session.memory = sheets;
  session.fs.mount(MEMORY_DIRECTORY, {
    read: (name) => sheets.readSheetAsText(name, signal),
    list: () => sheets.listSheetNames(signal),
  });
  return { sheets, chatLog };
}

/** The built-in groups a session turns on beyond the default ones. */
export function optionalGroupsOf(session: LoopSession, ports: AgentPorts): OptionalGroups {
  return { memory: session.memory !== undefined, googleDrive: session.flags.enableGoogleDriveTools === true && ports.drive !== undefined };
}
