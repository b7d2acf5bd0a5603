export { AgentError, ERROR_CODES, HTTP_STATUS_BY_CODE, isAgentError, toAgentError } from './agent-error.js';
export type { AgentErrorOptions, ErrorBody, ErrorCode } from './agent-error.js';
export { formatFirstIssue, formatIssues, formatPath, type SchemaIssue } from './format-issues.js';
export { messageOf } from './message-of.js';
