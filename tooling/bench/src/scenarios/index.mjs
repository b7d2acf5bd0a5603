// @ts-check
// Every scenario, in the order the report shows them. A new scenario is one module here.
import { agentLoop } from './agent-loop.mjs';
import { httpServing } from './http-serving.mjs';
import { prefixCaching } from './prefix-caching.mjs';
import { resumeLatency } from './resume-latency.mjs';
import { sharedSessions } from './shared-sessions.mjs';
import { sseThroughput } from './sse-throughput.mjs';
import { turnScaling } from './turn-scaling.mjs';

/** @type {import('./scenario.mjs').Scenario[]} */
export const SCENARIOS = [agentLoop, turnScaling, httpServing, sseThroughput, prefixCaching, resumeLatency, sharedSessions];
