/** The lowest zod `@org/core` supports: the bottom of its peer range, tested end to end. */
export const LOWEST_ZOD = '4.0.0';
/** The newest zod tested (pinned, so a zod release never changes a test run by itself). */
export const NEWEST_ZOD = '4.6.7';
/** A zod 3 release, for the clear refusal. */
export const ZOD_3 = '3.25.76';
