import { z } from 'zod';
import { contentToPidginString, fromPidginString } from '../agent-fs/index.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import { defineFunction, type FunctionGroup } from './define-function.js';
import { commonParameters, oneOf } from './parameters.js';
import { Suspend } from './suspend.js';

const INSTRUCTION = `## Talking with the user

When the user has to pick from a known set of options, use chat_present_choices: picking is easier for them than typing. Use chat_request_user_input for free-form text or for files the user uploads. Whenever the possible answers are limited, prefer choices.

Ask one thing per call. If you need several answers, ask for them over several turns, one question each, not all in one message.

The conversation is logged for you automatically in /mnt/system/chat_log.json: your questions and the user's answers, oldest first, including those of earlier sessions when there are any. Read it whenever you need what was said before; never try to save the conversation yourself.`;

/** The model's input types and the icon names the client expects for them (decision W5). */
const INPUT_ICONS = { any: 'asterisk', text: 'edit_note', 'file-upload': 'upload' } as const;

/** The text the client sends when the user skips a question. */
export const SKIPPED_INPUT = '__skipped__';

/** Asking the user: free input and choices, both suspending the run until the user answers. */
export function createChatGroup(): FunctionGroup {
  const { responseError, taskId } = commonParameters();
  return {
    name: 'chat',
    instruction: INSTRUCTION,
    functions: [
      defineFunction({
        name: 'chat_request_user_input',
        description: 'Asks the user for input and waits for the answer: one turn of a conversation. Use it only when the objective needs something from the user.',
        strictDeclaration: true,
        parameters: z.object({
          user_message: z.string().describe('The question or message shown to the user; may reference files as <file src="/mnt/name.ext" />.'),
          input_type: oneOf(['any', 'text', 'file-upload'], 'any', { declaredDefault: true }).describe(
            'What the input box accepts: "any" (text or files), "text" (text only) or "file-upload" (files only). Use "any" unless the objective asks for a particular kind of input.',
          ),
          skip_label: z.string().optional().describe('When set, shows a button with this label (e.g. "Not now") that skips the question; the result is then {"skipped": true}.'),
          task_id: taskId,
        }),
        response: z.object({
          user_input: z.string().optional().describe("The user's answer."),
          skipped: z.boolean().optional().describe('True when the user skipped the question.'),
          error: responseError,
        }),
        icon: 'chat_bubble',
        title: 'Asking the user',
        async handler({ user_message, input_type, skip_label, task_id }, context) {
          if (task_id) context.taskTree.setInProgress(task_id, '');
          const prompt = await fromPidginString(user_message, context.fs);
          const event = { type: 'waitForInput' as const, requestId: crypto.randomUUID(), prompt, inputType: INPUT_ICONS[input_type] };
          throw new Suspend(skip_label === undefined ? event : { ...event, skipLabel: skip_label });
        },
        async resume(response, context) {
          const input = response.input;
          if (typeof input !== 'object' || input === null || Array.isArray(input)) return response;
          const content = input as LLMContent;
          if (content.parts?.[0]?.text === SKIPPED_INPUT) return { skipped: true };
          return { user_input: contentToPidginString(content, context.fs) };
        },
      }),
      defineFunction({
        name: 'chat_present_choices',
        description: 'Shows the user a set of options and waits for the selection. Use it when the user has to decide between known options.',
        strictDeclaration: true,
        parameters: z.object({
          user_message: z.string().describe('What the user is choosing, shown above the options; may reference files as <file src="/mnt/name.ext" />.'),
          choices: z
            .array(
              z.object({
                id: z.string().describe('An id for the option, unique among the options.'),
                label: z.string().describe('The text of the option; may reference files as <file src="/mnt/name.ext" />.'),
              }),
            )
            .describe('The options.'),
          selection_mode: oneOf(['single', 'multiple'], 'single').describe('"single" lets the user pick one option, "multiple" any number of them.'),
          layout: oneOf(['list', 'row', 'grid'], 'list', { declaredDefault: true }).describe(
            'How the options are laid out: "list" stacks them (good for long labels), "row" puts them side by side (short labels such as Yes/No, or images to compare), "grid" wraps them to the space available.',
          ),
          none_of_the_above_label: z
            .string()
            .optional()
            .describe('When set, adds a separate escape option with this label (e.g. "None of these"); picking it returns the id "__none_of_the_above__". Best with "single".'),
          task_id: taskId,
        }),
        response: z.object({
          selected: z.array(z.string()).optional().describe('The ids of the selected options (exactly one with "single").'),
          error: responseError,
        }),
        icon: 'list',
        title: 'Presenting Choices to the User',
        async handler(args, context) {
          // Told to the model rather than shown to the user: a choice with nothing to pick, or two
          // options the answer could not tell apart, would leave the user stuck.
          if (args.choices.length === 0) return { error: 'choices is empty: give the user at least one option to pick.' };
          const ids = new Set<string>();
          for (const { id } of args.choices) {
            if (ids.has(id)) return { error: `choices: the id ${JSON.stringify(id)} is used twice; give every option its own id.` };
            ids.add(id);
          }
          if (args.task_id) context.taskTree.setInProgress(args.task_id, '');
          const prompt = await fromPidginString(args.user_message, context.fs);
          const choices = await Promise.all(
            args.choices.map(async (choice) => ({ id: choice.id, content: await fromPidginString(choice.label, context.fs) })),
          );
          const event = {
            type: 'waitForChoice' as const,
            requestId: crypto.randomUUID(),
            prompt,
            choices,
            selectionMode: args.selection_mode,
            layout: args.layout,
          };
          throw new Suspend(
            args.none_of_the_above_label === undefined ? event : { ...event, noneOfTheAboveLabel: args.none_of_the_above_label },
          );
        },
        // Decision W4: the model sees the selected ids as a list.
        async resume(response): Promise<JsonObject> {
          const selected = response.selected;
          if (selected && typeof selected === 'object' && Array.isArray((selected as { ids?: unknown }).ids)) {
            return { selected: (selected as { ids: unknown[] }).ids };
          }
          return response;
        },
      }),
    ],
  };
}
