import { z } from 'zod';
import { contentToPidginString, fromPidginString } from '../agent-fs/index.js';
import type { JsonObject, LLMContent } from '../protocol/content.js';
import { defineFunction, type FunctionGroup } from './define-function.js';
import { Suspend } from './suspend.js';

const INSTRUCTION = `You can talk with the user while you work. Use chat_request_user_input to ask a question and wait for the answer (text or an uploaded file), and chat_present_choices to let the user pick from options you list. Ask only when you need something you cannot find or decide yourself. The answer comes back as the result of the call.`;

/** The model's input types and the icon names the client expects for them (decision W5). */
const INPUT_ICONS = { any: 'asterisk', text: 'edit_note', 'file-upload': 'upload' } as const;

/** The text the client sends when the user skips a question. */
export const SKIPPED_INPUT = '__skipped__';

/** Asking the user: free input and choices, both suspending the run. */
export function createChatGroup(): FunctionGroup {
  return {
    name: 'chat',
    instruction: INSTRUCTION,
    functions: [
      defineFunction({
        name: 'chat_request_user_input',
        description: 'Asks the user a question and waits for the answer.',
        parameters: z.object({
          user_message: z.string().describe('The question; may reference files with <file> tags.'),
          input_type: z.string().default('any').describe('"any", "text" or "file-upload".'),
          skip_label: z.string().optional().describe('Label of a button that skips the question.'),
          task_id: z.string().optional(),
        }),
        icon: 'chat_bubble',
        title: 'Asking the user',
        async handler({ user_message, input_type, skip_label, task_id }, context) {
          if (task_id) context.taskTree.setInProgress(task_id, '');
          const inputType = INPUT_ICONS[input_type as keyof typeof INPUT_ICONS] ?? INPUT_ICONS.any;
          const prompt = await fromPidginString(user_message, context.fs);
          const event = { type: 'waitForInput' as const, requestId: crypto.randomUUID(), prompt, inputType };
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
        description: 'Shows the user a list of choices and waits for the selection.',
        parameters: z.object({
          user_message: z.string().describe('What the user is choosing.'),
          choices: z.array(z.object({ id: z.string(), label: z.string() })).describe('The options.'),
          selection_mode: z.string().default('single').describe('"single" or "multiple".'),
          layout: z.string().default('list').describe('"list", "row" or "grid".'),
          none_of_the_above_label: z.string().optional(),
          task_id: z.string().optional(),
        }),
        icon: 'list',
        title: 'Presenting choices',
        async handler(args, context) {
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
            selectionMode: args.selection_mode === 'multiple' ? ('multiple' as const) : ('single' as const),
            layout: args.layout === 'row' || args.layout === 'grid' ? args.layout : ('list' as const),
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
