import { z } from 'zod';
import { checkFileName } from '../agent-fs/index.js';
import { isAgentError } from '../errors/index.js';
import { defineFunction, type FunctionContext, type FunctionGroup } from './define-function.js';
import type { JsonObject, Part } from '../protocol/content.js';
import { boundError, describeFailure, errorResult, toErrorOrResponse } from './error-classification.js';
import { commonParameters, oneOf } from './parameters.js';
import { executeMediaStep, partToChunk, textStepChunk, type MediaStep, type StepChunk } from './media-step.js';

/** The parameters every media function takes besides its own. */
function commonMediaParameters() {
  const { fileName, cutStatusUpdate, taskId } = commonParameters();
  return { file_name: fileName, task_id: taskId, status_update: cutStatusUpdate };
}

/** Image models behind `generate_images`' `model` choice. */
export const IMAGE_MODELS: Readonly<Record<string, string>> = {
  pro: 'gemini-3-pro-image-preview',
  flash: 'gemini-2.5-flash-image',
};
export const VIDEO_MODEL = 'veo-3.1-generate-preview';

/** Veo support codes by the reason they stand for. */
const SUPPORT_CODES: Readonly<Record<string, readonly number[]>> = {
  child: [58061214, 17301594],
  celebrity: [29310472, 15236754],
  unsafe: [64151117, 42237218],
  dangerous: [62263041],
  hate: [57734940, 22137204],
  other: [74803281, 29578790, 42876398],
  face: [39322892],
  pii: [92201652],
  prohibited: [89371032, 49114662, 72817394],
  sexual: [90789179, 63429089, 43188360],
  toxic: [78610348],
  violence: [61493863, 56562880],
  vulgar: [32635315],
};
const REASON_BY_CODE = new Map(Object.entries(SUPPORT_CODES).flatMap(([reason, codes]) => codes.map((code) => [code, reason] as const)));

/** Turns a Veo error with `Support codes: ...` into a safety error with the reasons. */
export function expandVeoError(message: string, model: string): { error: string; metadata?: JsonObject } {
  const match = /Support codes:\s*([\d,\s]+)/.exec(message);
  if (!match?.[1]) return { error: message };
  const codes = match[1].split(',').map((code) => Number(code.trim())).filter((code) => Number.isFinite(code) && code > 0);
  const reasons = [...new Set(codes.map((code) => REASON_BY_CODE.get(code) ?? 'other'))].sort();
  if (reasons.length === 0) return { error: message };
  return { error: message, metadata: { origin: 'server', kind: 'safety', reasons, model } };
}

/** Runs a step, turning failures into the model-facing (or fatal) response. */
async function runStep(
  context: FunctionContext,
  step: MediaStep,
  expandError: (message: string) => { error: string; metadata?: JsonObject } = (message) => ({ error: message }),
): Promise<{ parts: Part[] } | { response: JsonObject }> {
  try {
    const result = await executeMediaStep(context.ports.backend, { ...step, useG1Quota: context.flags.googleOne === true }, context.signal);
    if (result.executedModel) context.reportMetadata({ model: result.executedModel });
    return { parts: result.contents.flatMap((content) => content.parts) };
  } catch (error) {
    return { response: toErrorOrResponse(expandError(describeFailure(error))) };
  } finally {
    context.update(null);
  }
}

async function chunksOf(paths: readonly string[], context: FunctionContext): Promise<StepChunk[] | { error: string }> {
  let parts: Part[];
  try {
    parts = await context.fs.getMany(paths);
  } catch (error) {
    return errorResult(error);
  }
  const chunks: StepChunk[] = [];
  for (const part of parts) {
    try {
      chunks.push(await partToChunk(part, context.ports.backend, context.signal));
    } catch (error) {
      return errorResult(error);
    }
  }
  return chunks;
}

/**
 * The error for a `file_name` no file can have, found before the generator runs (and is paid
 * for) rather than when its output is saved.
 */
function fileNameError(fileName: string | undefined): { error: string } | undefined {
  if (fileName === undefined) return undefined;
  try {
    checkFileName(fileName);
    return undefined;
  } catch (error) {
    return errorResult(error, { name: 'file_name' });
  }
}

/** Saves generated parts as files: `name`, or `name_1`, `name_2`, ... when there are several. */
function saveParts(parts: readonly Part[], context: FunctionContext, fileName: string | undefined): { paths: string[]; error?: string } {
  const paths: string[] = [];
  const errors = new Set<string>();
  for (const [index, part] of parts.entries()) {
    const name = fileName === undefined ? undefined : parts.length > 1 ? `${fileName}_${index + 1}` : fileName;
    try {
      paths.push(context.fs.addPart(part, name));
    } catch (error) {
      errors.add(errorResult(error, { name: 'file_name' }).error);
      // A full file system takes none of the rest either: say so once.
      if (isAgentError(error) && error.code === 'PAYLOAD_TOO_LARGE') break;
    }
  }
  if (errors.size === 0) return { paths };
  const saved = paths.length > 0 ? ` (${paths.length} of ${parts.length} saved: ${paths.join(', ')})` : '';
  return { paths, error: boundError(`${[...errors].join(', ')}${saved}`) };
}

/** `generate_images`. */
export function createImageGroup(): FunctionGroup {
  const { responseError } = commonParameters();
  const common = commonMediaParameters();
  return {
    name: 'image',
    functions: [
      defineFunction({
        name: 'generate_images',
        description:
          'Generates one or more images from a prompt, optionally from input images: create from text, edit an image, combine several images or carry over a style, render legible text (logos, diagrams, posters). Returns the paths of the new image files.',
        strictDeclaration: true,
        parameters: z.object({
          prompt: z
            .string()
            .describe('A descriptive paragraph of the scene (subject, setting, style, light, composition) rather than a list of keywords; for edits, what to change. Say how many images you want; one call can make a consistent series, such as video keyframes.'),
          model: oneOf(['pro', 'flash'], 'flash', { declaredDefault: true }).describe(
            '"pro" for professional assets, complex instructions and legible text in the image; "flash" for speed and volume.',
          ),
          images: z.array(z.string().describe('The path of an input image.')).prefault([]).describe('Paths of the input images (/mnt/...); an empty list to start from the prompt alone.'),
          aspect_ratio: oneOf(['1:1', '9:16', '16:9', '4:3', '3:4'], '16:9', { declaredDefault: true }).describe('The shape of the images.'),
          ...common,
        }),
        response: z.object({
          images: z.array(z.string().describe('The path of a generated image.')).optional().describe('The generated images.'),
          error: responseError,
        }),
        icon: 'photo_spark',
        title: 'Generating Image(s)',
        async handler(args, context) {
          const badName = fileNameError(args.file_name);
          if (badName) return badName;
          if (args.task_id) context.taskTree.setInProgress(args.task_id, args.status_update || 'Generating images');
          context.update(args.status_update || 'Generating Image(s)');
          const inputs = await chunksOf(args.images, context);
          if (!Array.isArray(inputs)) {
            context.update(null);
            return inputs;
          }
          const step: MediaStep = {
            stepName: 'AI Image Tool',
            modelApi: 'ai_image_tool',
            inputParameters: ['input_instruction', 'input_image'],
            systemPrompt: '',
            options: { modelName: IMAGE_MODELS[args.model] as string, disablePromptRewrite: true },
            output: 'generated_image',
            inputs: {
              input_instruction: [textStepChunk(args.prompt)],
              aspect_ratio_key: [textStepChunk(args.aspect_ratio)],
              ...(inputs.length > 0 ? { input_image: inputs } : {}),
            },
          };
          const outcome = await runStep(context, step);
          if ('response' in outcome) return outcome.response;
          if (outcome.parts.length === 0) return { error: 'No images were generated. Please try again' };
          const { paths, error } = saveParts(outcome.parts, context, args.file_name);
          if (error !== undefined) return { error };
          return { images: paths };
        },
      }),
    ],
  };
}

/** `generate_video`. */
export function createVideoGroup(): FunctionGroup {
  const { responseError } = commonParameters();
  const common = commonMediaParameters();
  return {
    name: 'video',
    functions: [
      defineFunction({
        name: 'generate_video',
        description: 'Generates an 8-second video with sound from a description, optionally starting from reference images. Returns the path of the video file.',
        strictDeclaration: true,
        parameters: z.object({
          prompt: z
            .string()
            .describe('A clear description naming the subject, the action and the style; optionally camera position and motion, framing, focus or lens effects, and the colour and light of the scene.'),
          images: z
            .array(z.string().describe('The path of a reference image.'))
            .optional()
            .describe('Paths of reference images (/mnt/...); use them only when the video must start from a particular image.'),
          aspect_ratio: oneOf(['16:9', '9:16'], '16:9', { declaredDefault: true }).describe('The shape of the video.'),
          ...common,
        }),
        response: z.object({ video: z.string().optional().describe('The path of the generated video.'), error: responseError }),
        icon: 'videocam_auto',
        title: 'Generating Video',
        async handler(args, context) {
          const badName = fileNameError(args.file_name);
          if (badName) return badName;
          if (args.task_id) context.taskTree.setInProgress(args.task_id, args.status_update || 'Generating video');
          context.update(args.status_update || 'Generating Video');
          const references: StepChunk[] = [];
          for (const path of args.images ?? []) {
            try {
              const [first] = await context.fs.get(path);
              if (!first) {
                context.update(null);
                return { error: `Empty file: "${path}"` };
              }
              references.push(await partToChunk(first, context.ports.backend, context.signal));
            } catch (error) {
              context.update(null);
              return errorResult(error);
            }
          }
          const step: MediaStep = {
            stepName: 'GenerateVideo',
            modelApi: 'generate_video',
            inputParameters: references.length > 0 ? ['text_instruction', 'reference_image'] : ['text_instruction'],
            systemPrompt: '',
            options: { modelName: VIDEO_MODEL, disablePromptRewrite: false },
            output: 'generated_video',
            inputs: {
              text_instruction: [textStepChunk(args.prompt)],
              aspect_ratio_key: [textStepChunk(args.aspect_ratio)],
              ...(references.length > 0 ? { reference_image: references } : {}),
            },
          };
          const outcome = await runStep(context, step, (message) => expandVeoError(message, VIDEO_MODEL));
          if ('response' in outcome) return outcome.response;
          const [part] = outcome.parts;
          if (!part) return { error: 'No video was generated. Please try again' };
          const { paths, error } = saveParts([part], context, args.file_name);
          if (error !== undefined) return { error };
          return { video: paths[0] as string };
        },
      }),
    ],
  };
}

const VOICES: Readonly<Record<string, string>> = { 'Male (English)': 'en-US-male', 'Female (English)': 'en-US-female' };

/** `generate_speech_from_text` and `generate_music_from_text`. */
export function createAudioGroup(): FunctionGroup {
  const { responseError } = commonParameters();
  const common = commonMediaParameters();
  return {
    name: 'audio',
    functions: [
      defineFunction({
        name: 'generate_speech_from_text',
        description: 'Turns text into speech read by a synthetic voice. Returns the path of the audio file.',
        strictDeclaration: true,
        parameters: z.object({
          text: z.string().describe('The exact words to speak.'),
          voice: oneOf(['Male (English)', 'Female (English)'], 'Female (English)', { declaredDefault: true }).describe('The voice that reads the text.'),
          ...common,
        }),
        response: z.object({ speech: z.string().optional().describe('The path of the generated audio.'), error: responseError }),
        icon: 'audio_magic_eraser',
        title: 'Generating Speech',
        async handler(args, context) {
          const badName = fileNameError(args.file_name);
          if (badName) return badName;
          if (args.task_id) context.taskTree.setInProgress(args.task_id, args.status_update || 'Generating speech');
          context.update(args.status_update || 'Generating Speech');
          const outcome = await runStep(context, {
            stepName: 'GenerateAudio',
            modelApi: 'tts',
            inputParameters: ['text_to_speak'],
            systemPrompt: '',
            output: 'generated_speech',
            inputs: { text_to_speak: [textStepChunk(args.text)], voice_key: [textStepChunk(VOICES[args.voice] as string)] },
          });
          if ('response' in outcome) return outcome.response;
          const [part] = outcome.parts;
          if (!part) return { error: 'No speech was generated' };
          const { paths, error } = saveParts([part], context, args.file_name);
          if (error !== undefined) return { error };
          return { speech: paths[0] as string };
        },
      }),
      defineFunction({
        name: 'generate_music_from_text',
        description:
          'Generates instrumental music or an audio soundscape from a description. Returns the path of the audio file. Describe the genre and style, the mood, the instruments, and the tempo and rhythm; optionally how the piece builds up, background ambience, and the production sound (for example: a calm ambient piece with layered soft synth pads, slow tempo, wide reverb, starting from a single melody).',
        strictDeclaration: true,
        parameters: z.object({ prompt: z.string().describe('The description of the music.'), ...common }),
        response: z.object({ music: z.string().optional().describe('The path of the generated audio.'), error: responseError }),
        icon: 'audio_magic_eraser',
        title: 'Generating Music',
        async handler(args, context) {
          const badName = fileNameError(args.file_name);
          if (badName) return badName;
          if (args.task_id) context.taskTree.setInProgress(args.task_id, args.status_update || 'Generating music');
          context.update(args.status_update || 'Generating Music');
          const outcome = await runStep(context, {
            stepName: 'GenerateMusic',
            modelApi: 'generate_music',
            inputParameters: ['prompt'],
            systemPrompt: '',
            output: 'generated_music',
            inputs: { prompt: [textStepChunk(args.prompt)] },
          });
          if ('response' in outcome) return outcome.response;
          const [part] = outcome.parts;
          if (!part) return { error: 'No music was generated' };
          const { paths, error } = saveParts([part], context, args.file_name);
          if (error !== undefined) return { error };
          return { music: paths[0] as string };
        },
      }),
    ],
  };
}
