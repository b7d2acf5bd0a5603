import { describe, expect, it } from 'vitest';
import { AgentFileSystem } from './agent-file-system.js';
import { taskNodeSchema, TaskTreeManager, type TaskNode, type TaskTreeSnapshot } from './task-tree-manager.js';

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
