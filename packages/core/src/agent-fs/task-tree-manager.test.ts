import { describe, expect, it } from 'vitest';
import { AgentFileSystem } from './agent-file-system.js';
import { checkTaskTree, taskNodeSchema, TaskTreeManager, type TaskNode, type TaskTreeSnapshot } from './task-tree-manager.js';

function sampleTree(): TaskNode {
  return {
    task_id: 'task_001',
    description: 'Write a report',
    execution_mode: 'serial',
    status: 'not_started',
    subtasks: [
      { task_id: 'task_002', description: 'Research', execution_mode: 'concurrent', status: 'not_started' },
      { task_id: 'task_003', description: 'Draft', execution_mode: 'serial', status: 'not_started' },
    ],
  };
}

function statuses(manager: TaskTreeManager): Record<string, string> {
  const result: Record<string, string> = {};
  const visit = (node: TaskNode): void => {
    result[node.task_id] = node.status;
    node.subtasks?.forEach(visit);
  };
  const tree = manager.snapshot().tree;
  if (tree) visit(tree);
  return result;
}

describe('TaskTreeManager', () => {
  it('has no tree at first', () => {
    const manager = new TaskTreeManager(new AgentFileSystem());
    expect(manager.get()).toBe('');
    expect(manager.snapshot()).toEqual({ tree: null });
  });

  it('saves a new tree to /mnt/task_tree.json as JSON text', async () => {
    const fs = new AgentFileSystem();
    const manager = new TaskTreeManager(fs);
    expect(manager.set(sampleTree())).toBe('/mnt/task_tree.json');
    expect(JSON.parse(manager.get())).toEqual(sampleTree());
    expect(JSON.parse(await fs.readText('/mnt/task_tree.json'))).toEqual(sampleTree());
    expect(fs.snapshot().files[0]).toMatchObject({ mimeType: 'application/json', type: 'text' });
  });

  it('keeps its own copy of the tree', () => {
    const manager = new TaskTreeManager(new AgentFileSystem());
    const tree = sampleTree();
    manager.set(tree);
    tree.status = 'complete';
    expect(statuses(manager).task_001).toBe('not_started');
  });

  it('marks a task in progress, trimming subtask ids, and saves', async () => {
    const fs = new AgentFileSystem();
    const manager = new TaskTreeManager(fs);
    manager.set(sampleTree());
    manager.setInProgress('task_002_3', 'Searching the web');
    expect(statuses(manager)).toEqual({ task_001: 'not_started', task_002: 'in_progress', task_003: 'not_started' });
    expect(manager.progressOf('task_002')).toBe('Searching the web');
    expect(JSON.parse(await fs.readText('/mnt/task_tree.json')).subtasks[0].status).toBe('in_progress');
  });

  it('ignores empty and unknown ids', async () => {
    const fs = new AgentFileSystem();
    const manager = new TaskTreeManager(fs);
    manager.setInProgress('task_001', 'no tree yet');
    expect(fs.listFiles()).toBe('');
    manager.set(sampleTree());
    manager.setInProgress('', 'x');
    manager.setInProgress(undefined, 'x');
    manager.setInProgress('task_999', 'x');
    expect(Object.values(statuses(manager))).toEqual(['not_started', 'not_started', 'not_started']);
  });

  it('marks known tasks complete and returns the path', async () => {
    const fs = new AgentFileSystem();
    const manager = new TaskTreeManager(fs);
    manager.set(sampleTree());
    expect(manager.setComplete(['task_002', 'task_003_1', 'task_404'])).toBe('/mnt/task_tree.json');
    expect(statuses(manager)).toEqual({ task_001: 'not_started', task_002: 'complete', task_003: 'complete' });
    expect(JSON.parse(await fs.readText('/mnt/task_tree.json')).subtasks[1].status).toBe('complete');
  });

  it('replacing the tree forgets the old one', () => {
    const manager = new TaskTreeManager(new AgentFileSystem());
    manager.set(sampleTree());
    manager.set({ task_id: 'task_010', description: 'New', execution_mode: 'serial', status: 'not_started' });
    manager.setComplete(['task_002']);
    expect(statuses(manager)).toEqual({ task_010: 'not_started' });
  });

  it('round-trips through a JSON snapshot and keeps updating the restored file system', async () => {
    const fs = new AgentFileSystem();
    const manager = new TaskTreeManager(fs);
    manager.set(sampleTree());
    manager.setInProgress('task_002', 'Researching');
    const snapshot = manager.snapshot();
    expect(JSON.parse(JSON.stringify(snapshot))).toStrictEqual(snapshot);

    const restoredFs = AgentFileSystem.fromSnapshot(JSON.parse(JSON.stringify(fs.snapshot())));
    const restored = TaskTreeManager.fromSnapshot(JSON.parse(JSON.stringify(snapshot)) as TaskTreeSnapshot, restoredFs);
    expect(restored.get()).toBe(manager.get());
    restored.setComplete(['task_002']);
    expect(JSON.parse(await restoredFs.readText('/mnt/task_tree.json')).subtasks[0].status).toBe('complete');
    expect(statuses(manager).task_002).toBe('in_progress');
  });

  it('refuses a broken snapshot, naming the field', () => {
    const broken = { tree: { task_id: 'task_001', description: 'x', execution_mode: 'sideways', status: 'complete' } };
    expect(() => TaskTreeManager.fromSnapshot(broken as unknown as TaskTreeSnapshot, new AgentFileSystem())).toThrow(
      /^Invalid task tree snapshot: tree\.execution_mode: /,
    );
  });

  it('validates nested task trees with its schema', () => {
    expect(taskNodeSchema().safeParse(sampleTree()).success).toBe(true);
    const bad = { ...sampleTree(), subtasks: [{ task_id: 'task_002', description: 'x', execution_mode: 'serial' }] };
    expect(taskNodeSchema().safeParse(bad).success).toBe(false);
  });
});

/** A chain of `depth` tasks, each the only subtask of the one before. */
function chain(depth: number): TaskNode {
  let node: TaskNode = { task_id: `task_${depth}`, description: 'Leaf', execution_mode: 'serial', status: 'not_started' };
  for (let level = depth - 1; level >= 1; level -= 1) node = { task_id: `task_${level}`, description: 'Step', execution_mode: 'serial', status: 'not_started', subtasks: [node] };
  return node;
}

describe('TaskTreeManager with hostile trees', () => {
  it('refuses a tree past its limits, naming where, and keeps the old tree and its file', async () => {
    const fs = new AgentFileSystem();
    const manager = new TaskTreeManager(fs);
    manager.set(sampleTree());
    const wide: TaskNode = { ...sampleTree(), subtasks: Array.from({ length: 1000 }, (_, index) => ({ task_id: `task_${index}`, description: 'x', execution_mode: 'serial', status: 'not_started' })) };
    const cyclic = sampleTree();
    cyclic.subtasks?.push(cyclic);
    const cases: Array<[TaskNode, string]> = [
      [chain(10_000), `task_tree${'.subtasks[0]'.repeat(32)}: subtasks are nested more than 32 levels deep`],
      [wide, 'task_tree.subtasks[999]: the tree has more than 1000 tasks'],
      [cyclic, 'task_tree.subtasks[2]: this task contains itself'],
      [{ ...sampleTree(), description: 'x'.repeat(10_001) }, 'task_tree.description: longer than 10000 characters'],
      [{ ...sampleTree(), subtasks: [{ ...sampleTree(), task_id: 'x'.repeat(201) }] }, 'task_tree.subtasks[0].task_id: longer than 200 characters'],
    ];
    for (const [tree, message] of cases) {
      expect(() => manager.set(tree)).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', message }));
    }
    expect(JSON.parse(manager.get())).toEqual(sampleTree());
    expect(JSON.parse(await fs.readText('/mnt/task_tree.json'))).toEqual(sampleTree());
    expect(() => manager.set(chain(32))).not.toThrow();
    expect(checkTaskTree(chain(32))).toBeUndefined();
  });

  it('keeps the old tree when the file system cannot save the new one', async () => {
    const fs = new AgentFileSystem();
    const manager = new TaskTreeManager(fs);
    manager.set(sampleTree());
    const big = 'x'.repeat(16 * 1024 * 1024);
    for (let index = 0; index < 7; index += 1) fs.write(`big_${index}.txt`, big);
    fs.write('big_7.txt', big.slice(0, big.length - 1000));
    expect(() => manager.set({ ...sampleTree(), description: 'y'.repeat(5000) })).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
    expect(JSON.parse(manager.get())).toEqual(sampleTree());
    expect(JSON.parse(await fs.readText('/mnt/task_tree.json'))).toEqual(sampleTree());
  });

  it('follows every task that shares an id', () => {
    const manager = new TaskTreeManager(new AgentFileSystem());
    manager.set({ ...sampleTree(), subtasks: [...(sampleTree().subtasks ?? []), { task_id: 'task_002', description: 'Again', execution_mode: 'serial', status: 'not_started' }] });
    manager.setInProgress('task_002', 'Working');
    expect(JSON.parse(manager.get()).subtasks.map((task: TaskNode) => task.status)).toEqual(['in_progress', 'not_started', 'in_progress']);
    manager.setComplete(['task_002']);
    expect(JSON.parse(manager.get()).subtasks.map((task: TaskNode) => task.status)).toEqual(['complete', 'not_started', 'complete']);
  });

  it('writes no task tree file when there is no tree to mark', () => {
    const fs = new AgentFileSystem();
    new TaskTreeManager(fs).setComplete(['task_001']);
    expect(fs.files()).toEqual([]);
  });

  it('knows its task ids, trimmed like progress', () => {
    const manager = new TaskTreeManager(new AgentFileSystem());
    expect(manager.has('task_001')).toBe(false);
    manager.set(sampleTree());
    expect([manager.has('task_001'), manager.has('task_003_2'), manager.has('task_404')]).toEqual([true, true, false]);
  });

  it('keeps marking progress when the file system cannot save the tree any more', () => {
    const fs = new AgentFileSystem();
    const manager = new TaskTreeManager(fs);
    manager.set(sampleTree());
    // The model emptied the tree's file, then filled the file system to the last character.
    fs.write('task_tree.json', '');
    const big = 'x'.repeat(16 * 1024 * 1024);
    for (let index = 0; index < 8; index += 1) fs.write(`big_${index}.txt`, big);
    expect(() => manager.setInProgress('task_002', 'Researching')).not.toThrow();
    expect(manager.progressOf('task_002')).toBe('Researching');
    expect(JSON.parse(manager.get()).subtasks[0].status).toBe('in_progress');
  });
});
