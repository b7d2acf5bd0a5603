import type { JsonObject, Part } from '../../protocol/content.js';

/**
 * The part field that carries one provider's opaque data for that part (an OpenAI output item, an
 * Anthropic content block, the reasoning field of a Chat Completions server). It rides on the part
 * the way `thoughtSignature` does: kept by the turn accumulator, saved with the history, and sent
 * back unchanged by the client of the same provider. Clients of other providers ignore it.
 */
export const PROVIDER_DATA_FIELD = 'providerData';

/**
 * What {@link PROVIDER_DATA_FIELD} holds, by provider:
 * - `openai-responses`: the output item exactly as `response.output_item.done` delivered it
 *   (reasoning with `encrypted_content`, message, function call, hosted tool call). An image
 *   generation item keeps its picture in the part's `inlineData` instead of `item.result`.
 * - `anthropic`: the content block exactly as streamed (thinking with `signature`, tool use,
 *   server tool use and results), or the code execution `container` of the turn.
 * - `openai-compatible`: the name of the field the server streamed reasoning in
 *   (`reasoning_content` or `reasoning`), so it goes back under the same name.
 */
export type ProviderPartData =
  | { provider: 'openai-responses'; item: JsonObject }
  | { provider: 'anthropic'; block: JsonObject }
  | { provider: 'anthropic'; container: JsonObject }
  | { provider: 'openai-compatible'; reasoningField: string };

/** The provider data of `part` when it belongs to `provider`. */
export function providerDataOf<P extends ProviderPartData['provider']>(
  part: Part,
  provider: P,
): Extract<ProviderPartData, { provider: P }> | undefined {
  const data = (part as Record<string, unknown>)[PROVIDER_DATA_FIELD];
  if (typeof data !== 'object' || data === null) return undefined;
  return (data as { provider?: unknown }).provider === provider ? (data as Extract<ProviderPartData, { provider: P }>) : undefined;
}

