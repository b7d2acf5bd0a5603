/** A schema issue as zod (or any validator shaped like it) reports it. */
export interface SchemaIssue {
  path: ReadonlyArray<PropertyKey>;
  message: string;
}

/** Formats a schema issue path as `start.segments[2].type` (prefix first, indexes in brackets). */
export function formatPath(prefix: string, path: ReadonlyArray<PropertyKey>): string {
  let text = prefix;
  for (const key of path) {
    if (typeof key === 'number') text += `[${key}]`;
    else text += text.length > 0 ? `.${String(key)}` : String(key);
  }
  return text.length > 0 ? text : '(root)';
}

/** The first issue as `path: message`, the path under `prefix`; what error messages show. */
export function formatFirstIssue(prefix: string, issues: ReadonlyArray<SchemaIssue>): { path: string; text: string } {
  const issue = issues[0];
  const path = formatPath(prefix, issue?.path ?? []);
  return { path, text: `${path}: ${issue?.message ?? 'invalid'}` };
}

/** Every issue as `path: message`, joined with `; ` (for a model that should fix all of them). */
export function formatIssues(issues: ReadonlyArray<SchemaIssue>): string {
  return issues
    .map((issue) => (issue.path.length > 0 ? `${formatPath('', issue.path)}: ${issue.message}` : issue.message))
    .join('; ');
}
