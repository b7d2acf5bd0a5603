import { createChatGroup } from './chat-group.js';
import type { FunctionGroup } from './define-function.js';
import { createGenerateGroup } from './generate-group.js';
import { createAudioGroup, createImageGroup, createVideoGroup } from './media-groups.js';
import { createSystemGroup } from './system-group.js';

let cachedDefaultGroups: readonly FunctionGroup[] | undefined;

/**
 * The built-in groups (system, generate, image, video, audio, chat), built once per process:
 * their definitions are stateless, and reusing them keeps each declaration's JSON Schema cached.
 */
export function defaultFunctionGroups(): readonly FunctionGroup[] {
  cachedDefaultGroups ??= [
    createSystemGroup(),
    createGenerateGroup(),
    createImageGroup(),
    createVideoGroup(),
    createAudioGroup(),
    createChatGroup(),
  ];
  return cachedDefaultGroups;
}

/**
 * The groups of a run: the built-in ones unless `includeDefaults` is `false`, with `extra` groups
 * added, or replacing a built-in group of the same name.
 */
export function composeFunctionGroups(extra: readonly FunctionGroup[] = [], includeDefaults = true): FunctionGroup[] {
  const groups: FunctionGroup[] = includeDefaults ? [...defaultFunctionGroups()] : [];
  for (const group of extra) {
    const index = groups.findIndex((candidate) => candidate.name === group.name);
    if (index >= 0) groups[index] = group;
    else groups.push(group);
  }
  return groups;
}
