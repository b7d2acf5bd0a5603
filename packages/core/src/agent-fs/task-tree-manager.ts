import { z } from 'zod';
import { AgentError, formatFirstIssue } from '../errors/index.js';
import { lazy } from '../protocol/lazy.js';
import type { AgentFileSystem } from './agent-file-system.js';

/** Where the task tree is saved in the agent file system. */
export const TASK_TREE_PATH = '/mnt/task_tree.json';
const TASK_TREE_FILE = 'task_tree.json';

/** One task of a task tree: an id like `task_001`, what to do, and its progress. */
export interface TaskNode {
  task_id: string;
  description: string;
  execution_mode: 'serial' | 'concurrent';
  status: 'not_started' | 'in_progress' | 'complete';
  subtasks?: TaskNode[];
}

/**
 * The task node schema; the model sends it as `system_create_task_tree`'s `task_tree`. Built on
 * first use (the system group's declaration, or a snapshot with a tree to check).
 */
export const taskNodeSchema = lazy(
  (): z.ZodType<TaskNode> =>
    z
      .object({
        task_id: z.string().describe('The id of the task, like "task_001".'),
        description: z.string().describe('What the task does.'),
        execution_mode: z.enum(['serial', 'concurrent']).describe('Whether the subtasks run one after another or together.'),
        status: z.enum(['not_started', 'in_progress', 'complete']),
        get subtasks() {
          return z.array(taskNodeSchema()).optional().describe('The tasks this task breaks down into.');
        },
        // Named so a declaration refers to the recursive node as `#/$defs/TaskNode`.
      })
      .meta({ id: 'TaskNode' }),
);

/**
 * The most tasks a tree may hold (1000), how deep subtasks may nest (32), and the longest task id
 * (200) and description (10 000 characters). Far beyond any real plan; they keep the tree cheap to
 * save after every change and stop a tree deep enough to overflow the stack of whoever walks it.
 */
const MAX_TASKS = 1000;
const MAX_TASK_DEPTH = 32;
const MAX_TASK_ID_LENGTH = 200;
const MAX_DESCRIPTION_LENGTH = 10_000;

/** What is wrong with a task tree: where (`subtasks[0].description`, `''` for the root) and why. */
export interface TaskTreeProblem {
  path: string;
  message: string;
}

/**
 * Checks the limits of a task tree that the schema cannot: size, depth, a task that contains
 * itself, and the length of ids and descriptions. Walks the tree without recursion, so any depth is
 * safe to check; leaves type errors to the schema. `undefined` when the tree is within them.
 */
export function checkTaskTree(tree: unknown): TaskTreeProblem | undefined {
  const stack: Array<{ node: unknown; path: string; depth: number }> = [{ node: tree, path: '', depth: 1 }];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const { node, path, depth } = stack.pop() as { node: unknown; path: string; depth: number };
    if (typeof node !== 'object' || node === null) continue;
    if (seen.has(node)) return { path, message: 'this task contains itself' };
    seen.add(node);
    if (seen.size > MAX_TASKS) return { path, message: `the tree has more than ${MAX_TASKS} tasks` };
    if (depth > MAX_TASK_DEPTH) return { path, message: `subtasks are nested more than ${MAX_TASK_DEPTH} levels deep` };
    const { task_id: taskId, description, subtasks } = node as Partial<Record<keyof TaskNode, unknown>>;
    if (typeof taskId === 'string' && taskId.length > MAX_TASK_ID_LENGTH) {
      return { path: join(path, 'task_id'), message: `longer than ${MAX_TASK_ID_LENGTH} characters` };
    }
    if (typeof description === 'string' && description.length > MAX_DESCRIPTION_LENGTH) {
      return { path: join(path, 'description'), message: `longer than ${MAX_DESCRIPTION_LENGTH} characters` };
    }
    if (Array.isArray(subtasks)) {
      for (let index = subtasks.length - 1; index >= 0; index -= 1) {
        stack.push({ node: subtasks[index], path: `${join(path, 'subtasks')}[${index}]`, depth: depth + 1 });
      }
    }
  }
  return undefined;
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

/** The saved form of a {@link TaskTreeManager}: plain JSON. */
const taskTreeSnapshotSchema = lazy(() => z.object({ tree: taskNodeSchema().nullable() }));

/** The saved form of a {@link TaskTreeManager}, see {@link taskTreeSnapshotSchema}. */
export type TaskTreeSnapshot = z.infer<ReturnType<typeof taskTreeSnapshotSchema>>;

/**
 * Keeps the agent's plan (a tree of tasks) and its progress, saving it to `/mnt/task_tree.json`
 * after every change so the model can read it back and it ends up among the run's files.
 *
 * @example
 * ```ts
 * const taskTree = new TaskTreeManager(fs);
 * taskTree.set({ task_id: 'task_001', description: 'Draft', execution_mode: 'serial', status: 'not_started' });
 * taskTree.setInProgress('task_001', 'Drafting');
 * taskTree.setComplete(['task_001']);
 * ```
 */
export class TaskTreeManager {
  readonly #fs: AgentFileSystem;
  #tree: TaskNode | null = null;
  /** The tasks of each id: a model may give two tasks the same id, and both follow it. */
  readonly #nodes = new Map<string, TaskNode[]>();
  /** Progress messages by task id; shown while a run is live, never saved. */
  readonly #progress = new Map<string, string>();

  constructor(fs: AgentFileSystem) {
    this.#fs = fs;
  }

  /**
   * Replaces the tree (a copy of `tree` is kept), saves it and returns its path. A tree past the
   * limits of {@link checkTaskTree} is refused with `BAD_REQUEST`, and one the file system cannot
   * save with its error; either way the old tree stays.
   */
  set(tree: TaskNode): string {
    const problem = checkTaskTree(tree);
    if (problem) {
      throw new AgentError('BAD_REQUEST', `${join('task_tree', problem.path)}: ${problem.message}`, { details: { field: 'task_tree' } });
    }
    const copy = structuredClone(tree);
    const path = this.#fs.overwrite(TASK_TREE_FILE, JSON.stringify(copy));
    this.#tree = copy;
    this.#progress.clear();
    this.#reindex();
    return path;
  }

  /** The tree as JSON, or `""` when there is none. */
  get(): string {
    return this.#tree === null ? '' : JSON.stringify(this.#tree);
  }

  /**
   * Marks a task in progress with a progress message and saves the tree. Subtask ids are trimmed
   * to their task (`task_001_1` -> `task_001`); an empty or unknown id changes nothing.
   */
  setInProgress(taskId: string | undefined | null, message: string): void {
    if (!taskId) return;
    const id = trimTaskId(taskId);
    const nodes = this.#nodes.get(id);
    if (!nodes) return;
    for (const node of nodes) node.status = 'in_progress';
    this.#progress.set(id, message);
    try {
      this.#save();
    } catch {
      // Progress is a side note of the call that reports it (a generation, say), which must not
      // fail for it: the tree keeps the status and the next save that succeeds writes it.
    }
  }

  /**
   * Marks the known tasks among `taskIds` (trimmed like {@link TaskTreeManager.setInProgress})
   * complete, saves, returns the path. With no tree, nothing is saved.
   */
  setComplete(taskIds: readonly string[]): string {
    if (this.#tree === null) return TASK_TREE_PATH;
    for (const taskId of taskIds) {
      for (const node of this.#nodes.get(trimTaskId(taskId)) ?? []) node.status = 'complete';
    }
    return this.#save();
  }

  /** Whether the tree has a task with this id (trimmed like {@link TaskTreeManager.setInProgress}). */
  has(taskId: string): boolean {
    return this.#nodes.has(trimTaskId(taskId));
  }

  /** The last progress message of a task, while this run is live. */
  progressOf(taskId: string): string | undefined {
    return this.#progress.get(trimTaskId(taskId));
  }

  /** The tree as plain JSON (a copy), to be restored with {@link TaskTreeManager.fromSnapshot}. */
  snapshot(): TaskTreeSnapshot {
    return { tree: this.#tree === null ? null : structuredClone(this.#tree) };
  }

  /** A manager holding the tree of `snapshot`, saving into `fs`. Throws `STORE_ERROR` naming the first invalid field. */
  static fromSnapshot(snapshot: TaskTreeSnapshot, fs: AgentFileSystem): TaskTreeManager {
    // Most runs never plan: no tree, nothing to check.
    if (typeof snapshot === 'object' && snapshot !== null && snapshot.tree === null) return new TaskTreeManager(fs);
    const parsed = taskTreeSnapshotSchema().safeParse(snapshot);
    if (!parsed.success) {
      throw new AgentError('STORE_ERROR', `Invalid task tree snapshot: ${formatFirstIssue('', parsed.error.issues).text}`);
    }
    const manager = new TaskTreeManager(fs);
    manager.#tree = parsed.data.tree;
    manager.#reindex();
    return manager;
  }

  #reindex(): void {
    this.#nodes.clear();
    const stack = this.#tree === null ? [] : [this.#tree];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      const nodes = this.#nodes.get(node.task_id);
      if (nodes) nodes.push(node);
      else this.#nodes.set(node.task_id, [node]);
      if (node.subtasks) for (let index = node.subtasks.length - 1; index >= 0; index -= 1) stack.push(node.subtasks[index] as TaskNode);
    }
  }

  #save(): string {
    return this.#fs.overwrite(TASK_TREE_FILE, JSON.stringify(this.#tree));
  }
}

/** `task_001_1` → `task_001`: progress is tracked per task, not per step. */
function trimTaskId(taskId: string): string {
  return taskId.split('_').slice(0, 2).join('_');
}
