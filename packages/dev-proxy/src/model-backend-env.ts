import { AgentError } from '@org/core';
import type { ModelBackendConfig, ModelProvider } from './model-backend.js';

const PROVIDERS: readonly ModelProvider[] = ['gemini', 'openai', 'anthropic', 'openai-compatible'];

/**
 * Reads the model backend settings of the dev server from environment variables: `MODEL_PROVIDER`
 * (`gemini`, `openai`, `anthropic`, `openai-compatible`), `MODEL` (or `GEMINI_MODEL`),
 * `GEMINI_API_KEY`, `GEMINI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`.
 * Empty values count as unset. Throws a `BAD_REQUEST` naming the variable (never echoing a key)
 * for a value it cannot use.
 *
 * @example
 * ```ts
 * const config = readModelBackendConfig(process.env);
 * ```
 */
export function readModelBackendConfig(env: Readonly<Record<string, string | undefined>>): ModelBackendConfig {
  const value = (name: string): string | undefined => {
    const raw = env[name]?.trim();
    return raw ? raw : undefined;
  };
  const config: ModelBackendConfig = {};
  const provider = value('MODEL_PROVIDER');
  if (provider !== undefined) {
    const normalised = provider.toLowerCase() as ModelProvider;
    if (!PROVIDERS.includes(normalised)) {
      throw new AgentError('BAD_REQUEST', `MODEL_PROVIDER must be one of ${PROVIDERS.join(', ')}, got "${provider.slice(0, 40)}"`, {
        details: { setting: 'MODEL_PROVIDER' },
      });
    }
    config.provider = normalised;
  }
  const model = value('MODEL') ?? value('GEMINI_MODEL');
  if (model !== undefined) config.model = model;
  const geminiApiKey = value('GEMINI_API_KEY');
  if (geminiApiKey !== undefined) config.geminiApiKey = geminiApiKey;
  const openaiApiKey = value('OPENAI_API_KEY');
  if (openaiApiKey !== undefined) config.openaiApiKey = openaiApiKey;
  const anthropicApiKey = value('ANTHROPIC_API_KEY');
  if (anthropicApiKey !== undefined) config.anthropicApiKey = anthropicApiKey;
  const geminiBaseUrl = url(value('GEMINI_BASE_URL'), 'GEMINI_BASE_URL');
  if (geminiBaseUrl !== undefined) config.geminiBaseUrl = geminiBaseUrl;
  const openaiBaseUrl = url(value('OPENAI_BASE_URL'), 'OPENAI_BASE_URL');
  if (openaiBaseUrl !== undefined) config.openaiBaseUrl = openaiBaseUrl;
  return config;
}

function url(raw: string | undefined, name: string): string | undefined {
  if (raw === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(raw);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    // The value may hold credentials, so it is not repeated.
    throw new AgentError('BAD_REQUEST', `${name} must be an http(s) URL such as http://localhost:11434/v1`, { details: { setting: name } });
  }
  return raw.replace(/\/+$/, '');
}
