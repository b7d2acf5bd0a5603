import { z } from 'zod';
import { checkTaskTree, fromPidginString, taskNodeSchema, type TaskNode } from '../agent-fs/index.js';
import type { LLMContent } from '../protocol/content.js';
import { defineFunction, type FunctionGroup } from './define-function.js';
import { boundError, errorResult } from './error-classification.js';
import { boundResultText, commonParameters, MAX_RESULT_TEXT_LENGTH } from './parameters.js';

/** How many unknown task ids an error names before it only counts the rest. */
const MAX_LISTED_TASK_IDS = 10;
/** The longest task id an error quotes. */
const MAX_QUOTED_TASK_ID_LENGTH = 100;

/**
 * A task tree the model sends: checked for size and depth before the schema walks it (the schema
 * recurses, and a tree thousands of levels deep would overflow the stack), so a tree past the
 * limits goes back to the model as an error naming where.
 */
function taskTreeParameter() {
  return z.preprocess((value, context) => {
    const problem = checkTaskTree(value);
    if (problem) context.addIssue({ code: 'custom', message: problem.message, path: problem.path === '' ? [] : pathOf(problem.path), input: value });
    return value;
  }, taskNodeSchema());
}

/** `subtasks[0].description` -> `['subtasks', 0, 'description']`. */
function pathOf(path: string): PropertyKey[] {
  return path.split(/\.|(?=\[)/).map((key) => (key.startsWith('[') ? Number(key.slice(1, -1)) : key));
}

function quoteTaskId(id: string): string {
  return JSON.stringify(id.length > MAX_QUOTED_TASK_ID_LENGTH ? `${id.slice(0, MAX_QUOTED_TASK_ID_LENGTH)}…` : id);
}

const INSTRUCTION = `You are an AI agent running inside an application that chains several agents together. Your job in this session is the objective at the start of the conversation, inside <objective>. The application wrote that objective, and whatever you return goes back to the application, usually as input to the next agent: neither is shown to the user as is.

## What the objective may contain

- <input source-agent="name">...</input> holds the result of an earlier agent called "name". Treat it as material to work with.
- <a href="/route-1">title</a> is a link to another agent. When the objective says to hand over to it, pass that href as the "href" argument of system_objective_fulfilled or system_failed_to_fulfill_objective; your outcome then goes to that agent. Otherwise leave "href" as "/".
- <metadata> carries the current date and time in <current_date>; use it whenever the answer depends on today.

## How to work

Follow these four steps, in order.

### 1. Decide whether the objective can be met

Check that your functions can produce what is asked and that no data is missing, or that you can ask the user for it. Assume nothing. If it cannot be done, call system_failed_to_fulfill_objective right away: failing fast is better than failing after a long effort.

The generators enforce content policies, and a request that breaks them fails after wasting time. Refuse up front, with system_failed_to_fulfill_objective, when the objective asks you to produce:
- images, video or other media showing children;
- images, video or other media showing real, prominent people (celebrities, politicians, public figures);
- violent content;
- dangerous or hateful content;
- sexual content;
- close copies of existing copyrighted work.
In "user_message", say kindly why it cannot be done and suggest what the user could ask for instead.

### 2. Judge how hard the problem is

- Simple: a single, clear task.
- Complicated: needs expertise, planning and several steps.
- Complex: the path depends on things you cannot predict, typically free-form answers from the user or unreliable tool results, so any plan keeps changing. Without functions to talk to the user, this is rare.
When unsure, start by treating it as complicated.

### 3. Do the work

- Simple: just do it, quickly; good enough beats perfect.
- Complicated: think the plan through, then record it with system_create_task_tree. Each task should roughly match one function call. Decide which tasks depend on others and which can run at once; prefer running them at once, by making several function calls in the same turn. Pass the task's id as "task_id" in the calls that work on it; add a suffix for parts of a task ("task_003_1" is part 1 of "task_003"). After each task, check whether the results change the plan and adjust it if they do. Record finished tasks with system_mark_completed_tasks; there is no need to do so at the very end, since finishing the objective marks every task complete.
- Complex: do not plan far ahead. Observe what happened, orient toward the objective, decide the next step, act, and repeat.
A problem may turn out harder than it first looked (simple becomes complicated, complicated becomes complex). Notice when that happens and switch to the approach of the harder kind.

### 4. Return the outcome

Call system_objective_fulfilled only once the objective is completely met: the call ends the session and nothing runs after it. Put the result in "objective_outcome". It is text that may reference files with <file> tags; referenced files become part of the outcome, so to return images or videos you already made, reference them.

Return exactly what the objective asks for, with no commentary, labels, intermediate results or preamble such as "Here is" or "Okay": the next agent would be confused by them. To decide what that is:
1. If the objective says to return something, return that and only that.
2. Otherwise return the main thing the objective produces (for "write a post with a header image", the image reference and the post).
3. If the objective asks for no result (for example it only chooses where to go next), an empty "objective_outcome" is fine: the call itself is the outcome.

If you could not meet the objective, call system_failed_to_fulfill_objective with a "user_message" that explains why.

## Files

You have a virtual file system; every path looks like "/mnt/name.ext". Name files in snake_case. system_write_file saves text, system_read_text_from_file reads a text file back, and system_list_files shows every file, including /mnt/system/chat_log.json (the conversation with the user so far).

To use a file in any text you write (an outcome, a prompt, a message, a file), put <file src="/mnt/name.ext" /> where its content belongs: before the text is used, each tag is replaced by the whole file. Reference only files you know exist (check with system_list_files when unsure): a tag for a file that does not exist breaks the step that reads it. Because the whole file lands where the tag is, give each tag its own line under a heading, not a place inside a sentence. This reads well once the files are in place:

Score the essay against the rubric.

Essay:
<file src="/mnt/essay.md" />

Rubric:
<file src="/mnt/rubric.md" />

This does not: Score <file src="/mnt/essay.md" /> against <file src="/mnt/rubric.md" />.`;

/** The termination, file and task-tree functions. */
export function createSystemGroup(): FunctionGroup {
  const { responseError, cutStatusUpdate } = commonParameters();
  return {
    name: 'system',
    instruction: INSTRUCTION,
    functions: [
      defineFunction({
        name: 'system_objective_fulfilled',
        description: 'Ends the session successfully and hands the outcome over. Call it once, only when the objective is completely met.',
        strictDeclaration: true,
        parameters: z.object({
          objective_outcome: z
            .string()
            .describe('Exactly what the objective asks to return, with files referenced as <file src="/mnt/name.ext" />; may be empty when nothing is to be returned.'),
          href: z.string().default('/').describe('The href of the linked agent to hand over to, or "/" to hand over to none.'),
        }),
        response: z.object({ error: responseError }),
        icon: 'check_circle',
        title: 'Returning final outcome',
        async handler({ objective_outcome, href }, context) {
          let resolvedHref: string;
          let outcomes: LLMContent;
          try {
            resolvedHref = href === '/' ? '/' : context.fs.getOriginalRoute(href);
            outcomes = objective_outcome.length === 0 ? { parts: [{ text: '' }] } : await fromPidginString(objective_outcome, context.fs);
          } catch (error) {
            return errorResult(error, { text: 'objective_outcome' });
          }
          context.terminate(resolvedHref === '/' ? { success: true, outcomes } : { success: true, href: resolvedHref, outcomes });
          return {};
        },
      }),
      defineFunction({
        name: 'system_failed_to_fulfill_objective',
        description: 'Ends the session unsuccessfully: the objective cannot be met (missing capability or data, or a request the content policies forbid).',
        strictDeclaration: true,
        parameters: z.object({
          user_message: z.string().describe('A friendly explanation for the user: why it cannot be done, and what they could try instead.'),
          href: z.string().default('/').describe('The href of the linked agent to hand over to, or "/" to hand over to none.'),
        }),
        icon: 'cancel',
        title: 'Unable to proceed',
        async handler({ user_message, href }, context) {
          const outcomes = { parts: [{ text: user_message }] };
          context.terminate(href === '/' ? { success: false, outcomes } : { success: false, href, outcomes });
          return {};
        },
      }),
      defineFunction({
        name: 'system_list_files',
        description: 'Lists the paths of every file in the file system, one per line.',
        strictDeclaration: true,
        parameters: z.object({ status_update: cutStatusUpdate }),
        response: z.object({ list: z.string().describe('Every file path, one per line.'), error: responseError }),
        icon: 'folder',
        async handler({ status_update }, context) {
          context.update(status_update || 'Getting a list of files');
          const list = await context.fs.listAllFiles();
          if (list.length <= MAX_RESULT_TEXT_LENGTH) return { list };
          // Cut at a line, so no path is shown half.
          const shown = list.slice(0, list.lastIndexOf('\n', MAX_RESULT_TEXT_LENGTH));
          const more = list.length === shown.length ? 0 : list.slice(shown.length + 1).split('\n').length;
          return { list: `${shown}\n[… and ${more} more files]` };
        },
      }),
      defineFunction({
        name: 'system_write_file',
        description: 'Saves text to a file and returns its path. <file> tags in the text are replaced by the text of the files they name.',
        strictDeclaration: true,
        parameters: z.object({
          file_name: z.string().describe('The file name, snake_case, e.g. "meeting_notes.md"; ".txt" is added when it has no extension.'),
          content: z.string().describe('The text to save.'),
        }),
        response: z.object({ file_path: z.string().optional().describe('Where the file was saved.'), error: responseError }),
        icon: 'edit',
        title: 'Writing to file',
        async handler({ file_name, content }, context) {
          try {
            const resolved = await fromPidginString(content, context.fs);
            const texts = resolved.parts.flatMap((part) => (typeof part.text === 'string' ? [part.text] : []));
            return { file_path: context.fs.write(file_name, texts.length > 0 ? texts.join('\n') : content) };
          } catch (error) {
            return errorResult(error, { name: 'file_name', data: 'content', text: 'content' });
          }
        },
      }),
      defineFunction({
        name: 'system_read_text_from_file',
        description: 'Returns the text of a text file.',
        strictDeclaration: true,
        parameters: z.object({ file_path: z.string().describe('The path, e.g. "/mnt/meeting_notes.md".') }),
        response: z.object({ text: z.string().optional().describe('The text of the file.'), error: responseError }),
        icon: 'description',
        title: 'Reading from file',
        async handler({ file_path }, context) {
          const text = await context.fs.readText(file_path);
          return {
            text: boundResultText(text, `Reference the file as <file src="${file_path}" /> in a generate_text prompt to work with all of it.`),
          };
        },
      }),
      defineFunction({
        name: 'system_create_task_tree',
        description: 'Records the plan as a tree of tasks (saved to /mnt/task_tree.json) that shows which tasks run one after another and which run at once.',
        strictDeclaration: true,
        parameters: z.object({ task_tree: taskTreeParameter().optional().describe('The root task; its subtasks form the tree.') }),
        response: z.object({ file_path: z.string().optional().describe('Where the task tree was saved.'), error: responseError }),
        icon: 'task',
        title: 'Creating task tree',
        async handler({ task_tree }, context) {
          if (!task_tree) return { error: 'task_tree is required' };
          try {
            return { file_path: context.taskTree.set(task_tree as TaskNode) };
          } catch (error) {
            // The tree's own limits were checked with the arguments; what is left is the file system's.
            return errorResult(error, { data: 'task_tree', name: 'task_tree' });
          }
        },
      }),
      defineFunction({
        name: 'system_mark_completed_tasks',
        description: 'Marks tasks of the task tree as complete.',
        strictDeclaration: true,
        parameters: z.object({ task_ids: z.array(z.string()).describe('The ids of the finished tasks.') }),
        response: z.object({ file_path: z.string().describe('Where the updated task tree was saved.'), error: responseError }),
        icon: 'task',
        title: 'Marking tasks complete',
        async handler({ task_ids }, context) {
          const noTree = context.taskTree.get() === '';
          const unknown = [...new Set(task_ids.filter((id) => !context.taskTree.has(id)))];
          let file_path: string;
          try {
            file_path = context.taskTree.setComplete(task_ids);
          } catch (error) {
            return errorResult(error);
          }
          // The path comes back whatever happened, as the protocol's response has it; what could not be marked is said beside it.
          if (noTree) return { file_path, error: 'task_ids: there is no task tree yet; make one with system_create_task_tree first' };
          if (unknown.length === 0) return { file_path };
          const listed = unknown.slice(0, MAX_LISTED_TASK_IDS).map(quoteTaskId).join(', ');
          const more = unknown.length > MAX_LISTED_TASK_IDS ? ` and ${unknown.length - MAX_LISTED_TASK_IDS} more` : '';
          const others = unknown.length < task_ids.length ? '; the other tasks were marked complete' : '';
          return { file_path, error: boundError(`task_ids: the task tree has no task ${listed}${more}${others}`) };
        },
      }),
    ],
  };
}
