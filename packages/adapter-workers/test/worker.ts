import { createHandler, InteractionStoreObject } from '../src/index.js';

/** The same object class, bound in test/wrangler.jsonc as a key-value-backed (non-SQLite) class. */
export class KeyValueBackedInteractionStoreObject extends InteractionStoreObject {}

export { InteractionStoreObject };

/** The Worker exactly as the README shows it: default ports from env. */
export default createHandler();
