/**
 * Suspended and running runs in an `InteractionStore`: the one encoding every store receives,
 * claims with leases bound to an owner, checkpoints, commit and release.
 */
export {
  claimInteraction,
  createClaimedInteraction,
  DEFAULT_LEASE_MS,
  encodeState,
  InteractionClaim,
  readInteractionLabel,
  saveInteraction,
  type ClaimOptions,
  type CheckpointRetry,
  type ClaimResult,
  type InteractionLabel,
} from './interaction-claims.js';
export { DEFAULT_INTERACTION_TTL_MS, DEFAULT_MAX_STATE_BYTES, MAX_STATE_DEPTH, toJsonText, type JsonTextOptions } from './json-text.js';
export { checkRecordId, MAX_RECORD_ID_LENGTH } from './record-id.js';
