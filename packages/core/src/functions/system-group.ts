import { z } from 'zod';
import { fromPidginString, TaskNodeSchema, type TaskNode } from '../agent-fs/index.js';
import { defineFunction, type FunctionGroup } from './define-function.js';

const INSTRUCTION = `You work toward the objective given in the <objective> tag by calling functions. Every turn must be a function call.

Files: you have a file system under /mnt. Write intermediate results with system_write_file and read them back with system_read_text_from_file; system_list_files shows what exists. To refer to a file in any text you produce (an outcome, a message to the user, a file's content), write <file src="/mnt/name.ext" /> and the runtime puts the file in its place.

Planning: for work with several steps, record a plan with system_create_task_tree and tick off tasks with system_mark_completed_tasks as you finish them.

Finishing: when the objective is met, call system_objective_fulfilled with the outcome the user should see, referencing files with <file> tags instead of repeating their content. If the objective cannot be met, call system_failed_to_fulfill_objective with a short explanation for the user. Either call ends the run.`;

/** The termination, file and task-tree functions. */
export function createSystemGroup(): FunctionGroup {
  return {
    name: 'system',
    instruction: INSTRUCTION,
    functions: [
      defineFunction({
        name: 'system_objective_fulfilled',
        description: 'Call when the objective is met. Ends the run with the outcome the user will see.',
        parameters: z.object({
          objective_outcome: z.string().describe('The outcome for the user; reference files as <file src="/mnt/..." />.'),
          href: z.string().default('/').describe('Where to go next; "/" when nowhere in particular.'),
        }),
        icon: 'check_circle',
        title: 'Returning final outcome',
        async handler({ objective_outcome, href }, context) {
          const resolvedHref = href === '/' ? '/' : context.fs.getOriginalRoute(href);
          const outcomes = objective_outcome.length === 0 ? { parts: [{ text: '' }] } : await fromPidginString(objective_outcome, context.fs);
          context.terminate(resolvedHref === '/' ? { success: true, outcomes } : { success: true, href: resolvedHref, outcomes });
          return {};
        },
      }),
      defineFunction({
        name: 'system_failed_to_fulfill_objective',
        description: 'Call when the objective cannot be met. Ends the run and tells the user why.',
        parameters: z.object({
          user_message: z.string().describe('Why the objective could not be met, for the user.'),
          href: z.string().default('/'),
        }),
        icon: 'error',
        title: 'Explaining failure',
        async handler({ user_message, href }, context) {
          const outcomes = { parts: [{ text: user_message }] };
          context.terminate(href === '/' ? { success: false, outcomes } : { success: false, href, outcomes });
          return {};
        },
      }),
      defineFunction({
        name: 'system_list_files',
        description: 'Lists every file in the file system.',
        parameters: z.object({ status_update: z.string().describe('A short status shown to the user.') }),
        icon: 'folder',
        title: 'Listing files',
        async handler({ status_update }, context) {
          context.update(status_update || 'Getting a list of files');
          return { list: context.fs.listFiles() };
        },
      }),
      defineFunction({
        name: 'system_write_file',
        description: 'Writes text to a file under /mnt and returns its path.',
        parameters: z.object({
          file_name: z.string().describe('File name, e.g. "notes.md".'),
          content: z.string().describe('The text to write; may reference other files with <file> tags.'),
        }),
        icon: 'edit',
        title: 'Writing to file',
        async handler({ file_name, content }, context) {
          const resolved = await fromPidginString(content, context.fs);
          const texts = resolved.parts.flatMap((part) => (typeof part.text === 'string' ? [part.text] : []));
          return { file_path: context.fs.write(file_name, texts.length > 0 ? texts.join('\n') : content) };
        },
      }),
      defineFunction({
        name: 'system_read_text_from_file',
        description: 'Reads a text file from the file system.',
        parameters: z.object({ file_path: z.string().describe('Path such as "/mnt/notes.md".') }),
        icon: 'description',
        title: 'Reading file',
        async handler({ file_path }, context) {
          return { text: await context.fs.readText(file_path) };
        },
      }),
      defineFunction({
        name: 'system_create_task_tree',
        description: 'Records the plan as a tree of tasks, saved to /mnt/task_tree.json.',
        parameters: z.object({ task_tree: TaskNodeSchema.optional().describe('The root task.') }),
        icon: 'account_tree',
        title: 'Planning tasks',
        async handler({ task_tree }, context) {
          if (!task_tree) return { error: 'task_tree is required' };
          return { file_path: context.taskTree.set(task_tree as TaskNode) };
        },
      }),
      defineFunction({
        name: 'system_mark_completed_tasks',
        description: 'Marks tasks of the task tree as complete.',
        parameters: z.object({ task_ids: z.array(z.string()).describe('Ids of the completed tasks.') }),
        icon: 'task_alt',
        title: 'Updating tasks',
        async handler({ task_ids }, context) {
          return { file_path: context.taskTree.setComplete(task_ids) };
        },
      }),
    ],
  };
}
