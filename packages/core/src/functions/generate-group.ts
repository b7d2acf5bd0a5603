import { z } from 'zod';
import { contentToPidginString, fromPidginString } from '../agent-fs/index.js';
import { AgentError } from '../errors/index.js';
import { conformBody } from '../model/conform-body.js';
import { defineFunction, type FunctionContext, type FunctionGroup } from './define-function.js';
import { Suspend } from './suspend.js';
import type { JsonObject, LLMContent, Part } from '../protocol/content.js';
import type { GenerateContentRequest, Tool } from '../protocol/gemini.js';
import { boundError, describeFailure, errorResult, toErrorOrResponse } from './error-classification.js';
import { boundResultText, commonParameters, MAX_RESULT_TEXT_LENGTH, oneOf } from './parameters.js';
import { isPlainObject } from '../protocol/values.js';

/** The consent reading arbitrary web pages needs. */
export const WEBPAGE_CONSENT = 'GET_ANY_WEBPAGE';

/** Models behind `generate_text`'s `model` choice (a call that leaves it out gets `flash`, anything unknown `lite`). */
export const TEXT_MODELS: Readonly<Record<string, string>> = {
  pro: 'gemini-3.1-pro-preview',
  flash: 'gemini-3-flash-preview',
  lite: 'gemini-2.5-flash-lite',
};
/** The model `generate_and_execute_code` always uses. */
export const CODE_MODEL = 'gemini-3-flash-preview';

const OUTPUT_RULES =
  'Your output goes straight to another part of an automated system, not to a person: no chit-chat, no explaining what you do or why, no opening such as "Okay" or "Sure", no closing remarks or offers of more help. Give just the output.';
const TEXT_INSTRUCTION = `You generate exactly what the prompt asks for. ${OUTPUT_RULES}`;
const CODE_INSTRUCTION = `Your job is to write and run code that achieves the objective in the prompt, then give the result. ${OUTPUT_RULES}`;

const INSTRUCTION = `## Generating content

Pick the generator for the job:
- generate_text: long or demanding text (a chapter, a report, the analysis of many or large files), research with Google Search ("search_grounding"), places ("maps_grounding"), and reading web pages whose URLs are in the prompt ("url_context").
- generate_and_execute_code: exact computation, data analysis, charts, and making or converting files such as PDFs or spreadsheets.
- generate_images: new pictures, or edits and combinations of existing ones.
- generate_video: a short video clip from a description, optionally starting from reference images.
- generate_speech_from_text: a recording of a text read aloud.
- generate_music_from_text: instrumental music or a soundscape.

Each generate_text call is one more model call and adds latency. Short text, such as a reply in a conversation, is faster to write yourself; keep generate_text for long or complex output.

A generator sees only the files its prompt references with <file src="/mnt/name.ext" /> tags, of any type (text, images, audio, video, PDF). A path written without the tag is just text to it.

### Prompting the code generator

generate_and_execute_code is a sub-agent: from your plain-language prompt it writes Python, runs it in a sandbox and reports the result. A good prompt says:
1. which Python library to prefer, if it matters ("use reportlab to make the PDF");
2. what the input is, not how to read it; for binary inputs say "use the provided file";
3. the approach, with any algorithm or technique it should use;
4. what to deliver: "return" the value for text ("return the total"), "save" for files ("save the chart as a PNG"). Do not name the files.
The sandbox cannot see your file system. Files go in and out only through <file> tags, which are translated at the sandbox boundary: reference inputs with tags, never with paths; files the code saves come back to you as new <file> tags, with names the sandbox chose.`;

/** What a sub-request streamed, by kind. */
interface StreamedTurn {
  finishReason?: string;
  grounding?: JsonObject;
  urlContext?: JsonObject;
}

/**
 * Streams a sub-request and hands every part to `onPart` as it arrives. Grounding and URL-context
 * metadata are kept (last non-empty value) for the caller to report.
 */
async function streamParts(
  context: FunctionContext,
  model: string,
  body: GenerateContentRequest,
  onPart: (part: Part) => void | Promise<void>,
): Promise<StreamedTurn> {
  const turn: StreamedTurn = {};
  for await (const chunk of context.ports.backend.streamGenerateContent(model, body, context.signal)) {
    // A backend that answers with something other than a chunk (a bug, a proxy's error page) gives
    // nothing rather than a TypeError the model could make nothing of.
    if (!isPlainObject(chunk)) continue;
    const blocked = isPlainObject(chunk.promptFeedback) ? chunk.promptFeedback.blockReason : undefined;
    if (blocked) throw new AgentError('MODEL_ERROR', `The prompt was blocked (blockReason ${String(blocked)}${blocked === 'SAFETY' ? '' : ', a safety block'})`);
    const candidate: unknown = Array.isArray(chunk.candidates) ? chunk.candidates[0] : undefined;
    if (!isPlainObject(candidate)) continue;
    if (typeof candidate.finishReason === 'string') turn.finishReason = candidate.finishReason;
    if (isNonEmpty(candidate.groundingMetadata)) turn.grounding = candidate.groundingMetadata;
    if (isNonEmpty(candidate.urlContextMetadata)) turn.urlContext = candidate.urlContextMetadata;
    const parts: unknown = isPlainObject(candidate.content) ? candidate.content.parts : undefined;
    if (!Array.isArray(parts)) continue;
    for (const part of parts) if (isPlainObject(part)) await onPart(part as Part);
  }
  return turn;
}

function isNonEmpty(value: unknown): value is JsonObject {
  return isPlainObject(value) && Object.keys(value).length > 0;
}

const BLOCKING_FINISH_REASONS = new Set(['SAFETY', 'PROHIBITED_CONTENT', 'BLOCKLIST', 'SPII', 'IMAGE_SAFETY']);

function blockedMessage(finishReason: string | undefined): string | undefined {
  if (finishReason === undefined) return undefined;
  if (BLOCKING_FINISH_REASONS.has(finishReason)) return `The response was blocked by safety filters (finishReason ${finishReason})`;
  if (finishReason === 'RECITATION') return 'The response was blocked for recitation (finishReason RECITATION)';
  return undefined;
}

/** Reports grounding sources and URL retrievals: a status line and the result's metadata. */
function reportSources(context: FunctionContext, turn: StreamedTurn): void {
  const metadata: JsonObject = {};
  if (turn.grounding) {
    const chunks = Array.isArray(turn.grounding.groundingChunks) ? turn.grounding.groundingChunks.filter(isPlainObject) : [];
    const sources = chunks
      .map((chunk) => chunk.web ?? chunk.maps ?? chunk.retrievedContext)
      .filter(isPlainObject)
      .map((source) => ({ uri: String(source.uri ?? ''), title: String(source.title ?? source.uri ?? '') }));
    const queries = Array.isArray(turn.grounding.webSearchQueries) ? turn.grounding.webSearchQueries : [];
    metadata.grounding = { sources, queries };
    if (sources.length > 0) {
      context.update(`Sources: ${sources.map((source) => source.title).join(', ')}`, { isThought: true });
    }
  }
  if (turn.urlContext) {
    const urls = Array.isArray(turn.urlContext.urlMetadata) ? turn.urlContext.urlMetadata.filter(isPlainObject) : [];
    const retrieved = urls.map((entry) => ({ url: String(entry.retrievedUrl ?? ''), status: String(entry.urlRetrievalStatus ?? '') }));
    metadata.urlContext = retrieved;
    if (retrieved.length > 0) context.update(`Read ${retrieved.map((entry) => entry.url).join(', ')}`, { isThought: true });
  }
  if (Object.keys(metadata).length > 0) context.reportMetadata(metadata);
}

/** `generate_text` and `generate_and_execute_code`. */
export function createGenerateGroup(): FunctionGroup {
  const { responseError, cutStatusUpdate, taskId } = commonParameters();
  const common = { task_id: taskId, status_update: cutStatusUpdate };
  return {
    name: 'generate',
    instruction: INSTRUCTION,
    functions: [
      defineFunction({
        name: 'generate_text',
        description:
          'Generates text with a Gemini model from a prompt that may include files of any type: writing, summaries, translation, analysis of long or many documents. Can ground the answer in Google Search or Google Maps and read web pages.',
        strictDeclaration: true,
        parameters: z.object({
          prompt: z
            .string()
            .describe('The full instructions. Include files as <file src="/mnt/name.ext" /> (text, images, audio, video, PDF): without the tag the generator cannot see a file.'),
          // Left out, `flash`; anything unknown, `lite`.
          model: oneOf(['pro', 'flash', 'lite'], 'lite', { whenMissing: 'flash' }).describe(
            'Which model: "pro" only for exceptionally hard problems (deep reasoning in code, maths or science, very long documents); "flash" for almost everything, including work that needs thinking; "lite" when speed matters most.',
          ),
          search_grounding: z.boolean().optional().describe('Ground the answer in current Google Search results, with sources; use for facts after the model\'s knowledge cutoff.'),
          maps_grounding: z.boolean().optional().describe('Ground the answer in Google Maps data about places.'),
          url_context: z
            .boolean()
            .optional()
            .describe('Let the model read the web pages (or PDFs, or code repositories) whose URLs are in the prompt, to extract, compare or summarise them. Asks the user for consent once.'),
          ...common,
        }),
        response: z.object({ text: z.string().optional().describe('The generated text.'), error: responseError }),
        icon: 'text_analysis',
        title: 'Generating Text',
        async precondition(args, context) {
          if (!args.url_context || context.consentsGranted.has(WEBPAGE_CONSENT)) return;
          throw new Suspend(
            { type: 'queryConsent', requestId: crypto.randomUUID(), consentType: WEBPAGE_CONSENT, scope: {}, graphUrl: context.graph?.url ?? '' },
            { precondition: true },
          );
        },
        async handler(args, context) {
          const grounded = args.search_grounding === true || args.maps_grounding === true;
          context.taskTree.setInProgress(args.task_id, args.status_update || 'Generating text');
          if (args.status_update) context.update(args.status_update, { expectedDurationInSec: 20 });
          else if (grounded) context.update('Researching', { expectedDurationInSec: 30 });
          else context.update('Generating Text', { expectedDurationInSec: 20 });

          let prompt: LLMContent;
          try {
            prompt = await fromPidginString(args.prompt, context.fs);
          } catch (error) {
            return errorResult(error, { text: 'prompt' });
          }
          const tools: Tool[] = [];
          if (args.search_grounding) tools.push({ googleSearch: {} });
          if (args.maps_grounding) tools.push({ googleMaps: {} });
          if (args.url_context) tools.push({ urlContext: {} });
          let body: GenerateContentRequest = {
            contents: [prompt],
            systemInstruction: { role: 'user', parts: [{ text: TEXT_INSTRUCTION }] },
            generationConfig: args.model === 'pro' ? { thinkingConfig: { includeThoughts: true, thinkingLevel: 'high' } } : {},
          };
          if (tools.length > 0) body.tools = tools;
          try {
            body = await conformBody(body, context.ports.backend, context.signal);
          } catch (error) {
            return errorResult(new AgentError('BAD_REQUEST', `Failed to resolve data parts: ${describeFailure(error)}`));
          }

          const texts: string[] = [];
          let turn: StreamedTurn;
          try {
            turn = await streamParts(context, TEXT_MODELS[args.model] ?? (TEXT_MODELS.lite as string), body, (part) => {
              if (typeof part.text !== 'string') return;
              if (part.thought === true) {
                if (part.text.length > 0) context.update(part.text, { isThought: true });
              } else {
                texts.push(part.text);
              }
            });
          } catch (error) {
            return toErrorOrResponse({ error: describeFailure(error) });
          } finally {
            context.update(null);
          }
          reportSources(context, turn);
          const text = texts.join('');
          if (text.length === 0) {
            const blocked = blockedMessage(turn.finishReason);
            return blocked ? toErrorOrResponse({ error: blocked }) : { error: 'No text was generated. Please try again' };
          }
          if (text.length <= MAX_RESULT_TEXT_LENGTH) return { text: contentToPidginString({ parts: [{ text }] }, context.fs) };
          // Too long to hand back whole: the file holds it all, the model sees its start.
          let path: string;
          try {
            path = context.fs.addPart({ text });
          } catch (error) {
            return errorResult(error);
          }
          return { text: `<content src="${path}">\n${boundResultText(text, `The whole text is in ${path}.`)}</content>` };
        },
      }),
      defineFunction({
        name: 'generate_and_execute_code',
        description:
          'A sub-agent that writes Python code for a task described in plain language, runs it in a sandbox and returns the result: calculation, data analysis, charts, making or converting files. Files the code saves are returned as <file> tags.',
        strictDeclaration: true,
        parameters: z.object({
          prompt: z
            .string()
            .describe('The task in plain language: preferred library, the inputs (as <file src="/mnt/name.ext" /> tags, never paths), the approach, and what to return or save.'),
          search_grounding: z.boolean().optional().describe('Let the sub-agent search Google before writing the code.'),
          ...common,
        }),
        response: z.object({ result: z.string().optional().describe('What the code produced, with saved files as <file> tags.'), error: responseError }),
        icon: 'code',
        title: 'Generating and Executing Code',
        async handler(args, context) {
          context.taskTree.setInProgress(args.task_id, args.status_update || 'Generating code');
          if (args.status_update) context.update(args.status_update, { expectedDurationInSec: 40 });
          else if (args.search_grounding) context.update('Researching', { expectedDurationInSec: 50 });
          else context.update('Generating Code', { expectedDurationInSec: 40 });

          let prompt: LLMContent;
          try {
            prompt = await fromPidginString(args.prompt, context.fs);
          } catch (error) {
            return errorResult(error, { text: 'prompt' });
          }
          let body: GenerateContentRequest = {
            contents: [prompt],
            systemInstruction: { role: 'user', parts: [{ text: CODE_INSTRUCTION }] },
            tools: [...(args.search_grounding ? [{ googleSearch: {} }] : []), { codeExecution: {} }],
          };
          try {
            body = await conformBody(body, context.ports.backend, context.signal);
          } catch (error) {
            return errorResult(new AgentError('BAD_REQUEST', `Failed to resolve data parts: ${describeFailure(error)}`));
          }

          const texts: string[] = [];
          // Code and its result are paired by order: the n-th result belongs to the n-th code part.
          const executions: Array<{ language: string; code: string; outcome?: string; output?: string }> = [];
          let paired = 0;
          let lastFailure: string | undefined;
          let fileError = false;
          let turn: StreamedTurn;
          try {
            turn = await streamParts(context, CODE_MODEL, body, (part) => {
              if (part.executableCode) {
                const code = part.executableCode.code ?? '';
                executions.push({ language: part.executableCode.language ?? 'PYTHON', code });
                context.update(`Running code:\n${code}`, { isThought: true });
                return;
              }
              if (part.codeExecutionResult) {
                const outcome = part.codeExecutionResult.outcome ?? 'OUTCOME_UNSPECIFIED';
                const output = part.codeExecutionResult.output ?? '';
                const execution = executions[paired];
                paired += 1;
                if (execution) Object.assign(execution, { outcome, output });
                lastFailure = outcome === 'OUTCOME_OK' ? undefined : output;
                context.update(outcome === 'OUTCOME_OK' ? `Code output:\n${output}` : `Code failed (${outcome}):\n${output}`, { isThought: true });
                return;
              }
              if (part.inlineData) {
                try {
                  texts.push(`<file src="${context.fs.addPart({ inlineData: part.inlineData })}" />`);
                } catch {
                  fileError = true;
                }
                return;
              }
              if (typeof part.text !== 'string') return;
              if (part.thought === true) {
                if (part.text.length > 0) context.update(part.text, { isThought: true });
              } else {
                texts.push(part.text);
              }
            });
          } catch (error) {
            return toErrorOrResponse({ error: describeFailure(error) });
          } finally {
            context.update(null);
          }
          if (executions.length > 0) context.reportMetadata({ codeExecution: executions });
          reportSources(context, turn);
          if (fileError) return { error: 'Code generation failed due to invalid file output.' };
          if (lastFailure !== undefined) return { error: boundError(`The code generator tried and failed with the following error:\n\n${lastFailure}`) };
          const text = texts.join('');
          if (text.length === 0) {
            const blocked = blockedMessage(turn.finishReason);
            return blocked ? toErrorOrResponse({ error: blocked }) : { error: 'No text was generated. Please try again' };
          }
          return { result: boundResultText(text, 'Ask for a shorter result, or have the code save it as a file.') };
        },
      }),
    ],
  };
}
