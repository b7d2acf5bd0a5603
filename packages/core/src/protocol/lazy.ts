/**
 * A function that builds its value on first call and returns that same value ever after. Core
 * builds its internal zod schemas this way: constructing a zod schema runs zod's constructors,
 * which used to be most of what importing `@org/core` cost, so a schema is built when first used
 * instead of when its module loads.
 *
 * @example
 * ```ts
 * const resumeRequestSchema = lazy(() => z.object({ interactionId: z.string() }));
 * resumeRequestSchema().parse(body);
 * ```
 */
export function lazy<T>(build: () => T): () => T {
  let built = false;
  let value: T;
  return () => {
    if (!built) {
      value = build();
      built = true;
    }
    return value;
  };
}
