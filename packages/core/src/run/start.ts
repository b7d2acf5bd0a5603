import { AgentFileSystem, TaskTreeManager, toPidgin } from '../agent-fs/index.js';
import { toAgentError } from '../errors/index.js';
import type { LoopSession } from '../loop/agent-loop.js';
import type { AgentPorts } from '../ports/index.js';
import type { LLMContent } from '../protocol/content.js';
import type { StartRequest } from '../protocol/requests.js';
import { createClaimedInteraction } from '../interactions/index.js';
import { runSegment, toolboxFor } from './finish-run.js';
import { toSavedState } from './persistence.js';
import { driveRun } from './run-environment.js';
import { openRunMemory, optionalGroupsOf } from './run-memory.js';
import type { RunEvent } from '../protocol/run-events.js';
import { DEFAULT_MAX_TURNS, DEFAULT_MODEL, type RunOptions } from './run-options.js';

/**
 * Starts an agent run for `request` and yields its events in the protocol's order: `start`, then
 * per turn `sendRequest`, `thought`, `functionCall`, `functionCallUpdate`, `usageMetadata`,
 * `functionResult`, `turnComplete`, and finally `finish` + `complete`, an `error`, or a suspend
 * event carrying the `interactionId` to resume with.
 *
 * @example
 * ```ts
 * for await (const event of run({ segments: [{ type: 'text', text: 'Say hi' }] }, ports)) {
 *   console.log(event.type);
 * }
 * ```
 */
export function run(request: StartRequest, ports: AgentPorts, options: RunOptions = {}): AsyncGenerator<RunEvent> {
  return driveRun(options, async (environment) => {
    const flags: Record<string, unknown> = { ...(request.flags ?? {}) };
    const fs = new AgentFileSystem();
    const taskTree = new TaskTreeManager(fs);
    let pidgin: ReturnType<typeof toPidgin>;
    try {
      pidgin = toPidgin(request.segments, fs, { useNotebookLM: flags.useNotebookLM === true });
    } catch (error) {
      const agentError = toAgentError(error);
      environment.emit({ type: 'error', message: agentError.message, code: agentError.code });
      return;
    }
    if (pidgin.useMemory) flags.useMemory = true;
    const now = options.now?.() ?? new Date();
    const objective: LLMContent = {
      parts: [
        {
          text: `<metadata>\n<current_date>${formatObjectiveDate(now)}</current_date>\n</metadata>\n<objective>${pidgin.text}</objective>`,
        },
      ],
      role: 'user',
    };
    environment.emit({ type: 'start', objective });
    const session: LoopSession = {
      mode: options.mode ?? 'objective',
      model: options.model ?? DEFAULT_MODEL,
      contents: [objective],
      fs,
      taskTree,
      flags,
      consentsGranted: new Set(),
      turnCount: 0,
      maxTurns: options.maxTurns ?? DEFAULT_MAX_TURNS,
      sessionId: options.sessionId ?? crypto.randomUUID(),
    };
    if (request.graph) session.graph = request.graph;
    const memory = await openRunMemory(session, ports, environment.signal, options, pidgin.useMemory ? 'start' : 'start-flag');
    const claim =
      options.interactionId === undefined
        ? undefined
        : await createClaimedInteraction(ports.store, options.interactionId, toSavedState(session, 'checkpoint', options), {
            ...(options.owner === undefined ? {} : { owner: options.owner }),
            ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
            ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
          });
    const toolbox = toolboxFor(options, optionalGroupsOf(session, ports));
    await runSegment({ session, toolbox, ports, options, environment, ...(claim ? { claim } : {}), ...(memory ? { memory } : {}) });
  });
}

const MONTHS = [
  'January', 'February', 'March', 'April', 'May', 'June',
  'July', 'August', 'September', 'October', 'November', 'December',
] as const;

/** `November 22, 2026 9:41 AM`: the date line at the top of every objective. */
export function formatObjectiveDate(date: Date): string {
  const hours = date.getHours();
  const hour12 = hours % 12 === 0 ? 12 : hours % 12;
  const minutes = String(date.getMinutes()).padStart(2, '0');
  return `${MONTHS[date.getMonth()]} ${date.getDate()}, ${date.getFullYear()} ${hour12}:${minutes} ${hours < 12 ? 'AM' : 'PM'}`;
}
