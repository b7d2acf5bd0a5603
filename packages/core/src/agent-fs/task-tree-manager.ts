import { z } from 'zod';
import { AgentError, formatFirstIssue } from '../errors/index.js';
import { lazy } from '../protocol/lazy.js';
import type { AgentFileSystem } from './agent-file-system.js';

/** Where the task tree is saved in the agent file system. */
export const TASK_TREE_PATH = '/mnt/task_tree.json';

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
  readonly #nodes = new Map<string, TaskNode>();
  /** Progress messages by task id; shown while a run is live, never saved. */
  readonly #progress = new Map<string, string>();

  constructor(fs: AgentFileSystem) {
    this.#fs = fs;
  }

  /** Replaces the tree (a copy of `tree` is kept), saves it and returns its path. */
  set(tree: TaskNode): string {
    this.#tree = structuredClone(tree);
    this.#progress.clear();
    this.#reindex();
    return this.#save();
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
    const node = this.#nodes.get(id);
    if (!node) return;
    node.status = 'in_progress';
    this.#progress.set(id, message);
    this.#save();
  }

  /** Marks the known tasks among `taskIds` (trimmed like {@link TaskTreeManager.setInProgress}) complete, saves, returns the path. */
  setComplete(taskIds: readonly string[]): string {
    for (const taskId of taskIds) {
      const node = this.#nodes.get(trimTaskId(taskId));
      if (node) node.status = 'complete';
    }
    return this.#save();
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
    const visit = (node: TaskNode): void => {
      this.#nodes.set(node.task_id, node);
      for (const subtask of node.subtasks ?? []) visit(subtask);
    };
    if (this.#tree !== null) visit(this.#tree);
  }

  #save(): string {
    return this.#fs.overwrite('task_tree.json', JSON.stringify(this.#tree));
  }
}

/** `task_001_1` → `task_001`: progress is tracked per task, not per step. */
function trimTaskId(taskId: string): string {
  return taskId.split('_').slice(0, 2).join('_');
}
