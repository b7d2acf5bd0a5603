import { AgentError, type BackendClient } from '@org/core';
import {
  createAnthropicBackendClient,
  createGeminiBackendClient,
  createOpenAiCompatibleBackendClient,
  createOpenAiResponsesBackendClient,
} from '@org/core/http';

/** The model providers the dev server can talk to. */
export type ModelProvider = 'gemini' | 'openai' | 'anthropic' | 'openai-compatible';

/** Which model backend the dev server uses, usually read from the environment by `readModelBackendConfig`. */
export interface ModelBackendConfig {
  /** An explicit choice; else the model name decides, and Gemini (simulated without a key) is the default. */
  provider?: ModelProvider;
  /** The model runs use. `claude-*` picks Anthropic, `gpt-*` / `o<n>*` / `codex*` OpenAI, `gemini-*` Gemini. */
  model?: string;
  geminiApiKey?: string;
  /** A Gemini-compatible endpoint (the simulated Gemini, a gateway). */
  geminiBaseUrl?: string;
  /** Extra headers for that endpoint (its basic auth, taken out of the URL). */
  geminiHeaders?: Record<string, string>;
  openaiApiKey?: string;
  /** An OpenAI-compatible Chat Completions server (Ollama, vLLM, LM Studio); selects that provider for non-Claude, non-Gemini models. */
  openaiBaseUrl?: string;
  anthropicApiKey?: string;
  /** The backend that runs media steps and uploads for a caller, when there is one. */
  upstream?: (accessToken: string | undefined) => BackendClient | undefined;
}

/** Models used when a provider is chosen without a model. */
export const DEFAULT_PROVIDER_MODELS: Readonly<Record<Exclude<ModelProvider, 'gemini' | 'openai-compatible'>, string>> = {
  openai: 'gpt-5-mini',
  anthropic: 'claude-sonnet-4-5',
};

/**
 * The provider a configuration selects: the explicit `provider`, else the model name (with an
 * `openaiBaseUrl` turning OpenAI-style and unknown names to Chat Completions), else Gemini.
 */
export function chooseModelProvider(config: ModelBackendConfig): ModelProvider {
  if (config.provider) return config.provider;
  const model = config.model ?? '';
  if (/^claude/i.test(model)) return 'anthropic';
  if (/^gemini/i.test(model)) return 'gemini';
  if (config.openaiBaseUrl) return 'openai-compatible';
  if (/^(?:gpt|o\d|chatgpt|codex)/i.test(model)) return 'openai';
  return 'gemini';
}

/** The model runs should use under `config`: the configured one, or the chosen provider's default. */
export function modelFor(config: ModelBackendConfig): string | undefined {
  if (config.model) return config.model;
  const provider = chooseModelProvider(config);
  return provider === 'openai' || provider === 'anthropic' ? DEFAULT_PROVIDER_MODELS[provider] : undefined;
}

/**
 * Builds the per-caller backend factory of the dev server: every call to the returned function
 * gives a `BackendClient` for one request, with media steps going to `config.upstream(accessToken)`.
 * Throws a `BAD_REQUEST` naming the missing setting (never its value) when the configuration
 * cannot work.
 *
 * @example
 * ```ts
 * const backendFor = createModelBackend(readModelBackendConfig(process.env), fetch);
 * const ports = { backend: backendFor(accessToken), store };
 * ```
 */
export function createModelBackend(config: ModelBackendConfig, fetch: typeof globalThis.fetch): (accessToken?: string) => BackendClient {
  const provider = chooseModelProvider(config);
  const model = modelFor(config);
  const upstreamFor = (accessToken: string | undefined): { upstream?: BackendClient } => {
    const upstream = config.upstream?.(accessToken);
    return upstream ? { upstream } : {};
  };
  switch (provider) {
    case 'openai': {
      const apiKey = required(config.openaiApiKey, 'OPENAI_API_KEY', `the model ${model ?? ''} is an OpenAI model`);
      return (accessToken) => createOpenAiResponsesBackendClient({ apiKey, fetch, ...(model ? { model } : {}), ...upstreamFor(accessToken) });
    }
    case 'anthropic': {
      const apiKey = required(config.anthropicApiKey, 'ANTHROPIC_API_KEY', `the model ${model ?? ''} is an Anthropic model`);
      return (accessToken) => createAnthropicBackendClient({ apiKey, fetch, ...(model ? { model } : {}), ...upstreamFor(accessToken) });
    }
    case 'openai-compatible': {
      const baseUrl = required(config.openaiBaseUrl, 'OPENAI_BASE_URL', 'an OpenAI-compatible server was chosen');
      const named = required(model, 'MODEL', 'an OpenAI-compatible server serves the models it has, so name one (e.g. MODEL=qwen3)');
      return (accessToken) =>
        createOpenAiCompatibleBackendClient({
          baseUrl,
          fetch,
          model: named,
          ...(config.openaiApiKey ? { apiKey: config.openaiApiKey } : {}),
          ...upstreamFor(accessToken),
        });
    }
    case 'gemini':
      return (accessToken) =>
        createGeminiBackendClient({
          // The simulated Gemini takes any key.
          apiKey: config.geminiApiKey ?? 'simulated',
          fetch,
          ...(config.geminiBaseUrl ? { baseUrl: config.geminiBaseUrl } : {}),
          ...(config.geminiHeaders ? { headers: config.geminiHeaders } : {}),
          ...upstreamFor(accessToken),
        });
  }
}

/** One banner line saying which model backend is in use, without any secret. */
export function describeModelBackend(config: ModelBackendConfig): string {
  const provider = chooseModelProvider(config);
  const model = modelFor(config);
  const named = model ? ` (${model})` : '';
  switch (provider) {
    case 'openai':
      return `Model:     OpenAI Responses API${named} (OPENAI_API_KEY)`;
    case 'anthropic':
      return `Model:     Anthropic Messages API${named} (ANTHROPIC_API_KEY)`;
    case 'openai-compatible':
      return `Model:     OpenAI-compatible server at ${withoutCredentials(config.openaiBaseUrl ?? '')}${named}`;
    case 'gemini':
      if (config.geminiBaseUrl) return `Model:     Gemini-compatible endpoint at ${withoutCredentials(config.geminiBaseUrl)}${named}`;
      return config.geminiApiKey ? `Model:     Gemini API${named} (GEMINI_API_KEY)` : 'Model:     SIMULATED Gemini (no model key set)';
  }
}

function required(value: string | undefined, name: string, why: string): string {
  if (value === undefined || value.length === 0) throw new AgentError('BAD_REQUEST', `${name} is not set, but ${why}`, { details: { setting: name } });
  return value;
}

/** A URL fit for the banner: no credentials, and no value of a query parameter named like a secret (gateways take keys there). */
function withoutCredentials(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    for (const name of [...parsed.searchParams.keys()]) {
      if (/key|token|secret|password|sig/i.test(name)) parsed.searchParams.set(name, 'redacted');
    }
    return parsed.toString().replace(/\/$/, '');
  } catch {
    return 'an invalid URL';
  }
}
