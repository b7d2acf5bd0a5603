import type { InferUIMessageChunk, UIMessage } from 'ai';
import type { ErrorCode } from '../errors/index.js';
import type { UsageMetadata } from '../protocol/gemini.js';
import type { ResumeResponses } from '../protocol/resume-responses.js';
import type { SuspendEvent } from '../protocol/events.js';

/**
 * The data parts a run adds to its assistant message, by name (`data-<name>` in the message):
 * the progress the Opal protocol reports in events of its own.
 */
export type AgentUIDataTypes = {
  /** The latest status a running function reported (one part per call, updated in place: its id is the call id). */
  'function-update': { callId: string; status: string | null; expectedDurationInSec?: number; isThought?: boolean };
  /** The tokens one model turn used. */
  usage: UsageMetadata;
  /** The file the next `file` part holds: its path in the run's file system (`/mnt/plan.md`). */
  file: { path: string; mediaType: string };
  /**
   * What the run waits for (its id is the tool call's id): the suspend event as the Opal protocol
   * sends it (prompt, choices, consent scope). The tool part of `toolCallId` waits for its output.
   */
  suspend: { toolCallId?: string; event: SuspendEvent };
  /** Why the run stopped: the message, its code, and whether sending the conversation again continues it. */
  error: { code: ErrorCode; message: string; resumable: boolean };
};

/** The arguments the model gives `chat_request_user_input`. */
export interface RequestUserInputArguments {
  user_message: string;
  input_type?: 'any' | 'text' | 'file-upload';
  skip_label?: string;
  task_id?: string;
}

/** The arguments the model gives `chat_present_choices`. */
export interface PresentChoicesArguments {
  user_message: string;
  choices: Array<{ id: string; label: string }>;
  selection_mode?: 'single' | 'multiple';
  layout?: 'list' | 'row' | 'grid';
  none_of_the_above_label?: string;
  task_id?: string;
}

/**
 * The tools of an agent run as the AI SDK's UI sees them. The two that ask the user have typed
 * inputs and outputs: the output an app gives them (`addToolOutput`) is exactly the answer the
 * run resumes with (`ResumeResponses`). Every other function is a tool with untyped input and output.
 */
export type AgentUITools = {
  [name: string]: { input: unknown; output: unknown };
  chat_request_user_input: { input: RequestUserInputArguments; output: ResumeResponses['waitForInput'] };
  chat_present_choices: { input: PresentChoicesArguments; output: ResumeResponses['waitForChoice'] };
};

/**
 * A message of a chat with an agent run, as `useChat<AgentUIMessage>()` holds it: the AI SDK's own
 * `UIMessage` with the run's data parts and tools.
 */
export type AgentUIMessage = UIMessage<unknown, AgentUIDataTypes, AgentUITools>;

/** One chunk of the UI message stream an agent run is served as. */
export type AgentUIMessageChunk = InferUIMessageChunk<AgentUIMessage>;
