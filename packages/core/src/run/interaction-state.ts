import { z } from 'zod';
import { LLMContentSchema } from '../protocol/content.js';

/** The version of the envelope this runtime writes; older or newer envelopes are refused by name. */
export const INTERACTION_STATE_VERSION = 1;

const JsonObjectSchema = z.record(z.string(), z.unknown());

/** One call of the suspended turn; `response` is set for every call that already finished. */
export const SavedCallSchema = z.object({
  callId: z.string(),
  name: z.string(),
  args: JsonObjectSchema,
  providerId: z.string().optional(),
  response: JsonObjectSchema.optional(),
});

/** What a suspended or paused run needs to continue, as plain JSON. */
export const InteractionStateSchema = z.object({
  /** `suspend`: waiting for the client's answer to a call; `pause`: a model failure to retry. */
  kind: z.enum(['suspend', 'pause']),
  mode: z.enum(['objective', 'chat']),
  model: z.string(),
  contents: z.array(LLMContentSchema),
  /** Every call of the turn that suspended, in call order (empty for a pause). */
  calls: z.array(SavedCallSchema),
  /** The call waiting for the client's answer. */
  pendingCallId: z.string().optional(),
  /** The suspend came from a precondition (consent): the model never sees the round trip. */
  precondition: z.boolean(),
  fileSystem: z.unknown(),
  taskTree: z.unknown(),
  flags: JsonObjectSchema,
  graph: z.object({ url: z.string().optional(), title: z.string().optional() }).optional(),
  consentsGranted: z.array(z.string()),
  turnCount: z.number().int().nonnegative(),
});

/** The versioned envelope saved in an `InteractionStore` (decision W9). */
export const InteractionEnvelopeSchema = z.object({
  version: z.literal(INTERACTION_STATE_VERSION),
  createdAt: z.string(),
  owner: z.string().optional(),
  state: InteractionStateSchema,
});

export type SavedCall = z.infer<typeof SavedCallSchema>;
export type InteractionState = z.infer<typeof InteractionStateSchema>;
export type InteractionEnvelope = z.infer<typeof InteractionEnvelopeSchema>;
