import { createChatGroup } from './chat-group.js';
import type { FunctionGroup } from './define-function.js';
import { createGenerateGroup } from './generate-group.js';
import { createGoogleDriveGroup } from './google-drive-group.js';
import { createAudioGroup, createImageGroup, createVideoGroup } from './media-groups.js';
import { createMemoryGroup } from './memory-group.js';
import { createSystemGroup } from './system-group.js';

let cachedDefaultGroups: readonly FunctionGroup[] | undefined;
let cachedMemoryGroup: FunctionGroup | undefined;
let cachedGoogleDriveGroup: FunctionGroup | undefined;

/** The built-in groups a run turns on from its request, after the default ones. */
export interface OptionalGroups {
  /** The memory functions (a memory tool segment, with a Drive client). */
  memory?: boolean;
  /** The Google Drive functions (the `enableGoogleDriveTools` flag, with a Drive client). */
  googleDrive?: boolean;
}

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
 * The groups of a run: the built-in ones unless `includeDefaults` is `false` (then with the
 * `optional` ones it turns on), with `extra` groups added, or replacing a built-in group of the same name.
 */
export function composeFunctionGroups(extra: readonly FunctionGroup[] = [], includeDefaults = true, optional: OptionalGroups = {}): FunctionGroup[] {
  const groups: FunctionGroup[] = includeDefaults ? [...defaultFunctionGroups()] : [];
  if (includeDefaults && optional.memory) groups.push((cachedMemoryGroup ??= createMemoryGroup()));
  if (includeDefaults && optional.googleDrive) groups.push((cachedGoogleDriveGroup ??= createGoogleDriveGroup()));
  for (const group of extra) {
    const index = groups.findIndex((candidate) => candidate.name === group.name);
    if (index >= 0) groups[index] = group;
    else groups.push(group);
  }
  return groups;
}
