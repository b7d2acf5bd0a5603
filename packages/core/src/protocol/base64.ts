import { AgentError } from '../errors/agent-error.js';

/** Base64 of `bytes`, with Web-standard APIs only (no `Buffer`). */
export function bytesToBase64(bytes: Uint8Array): string {
  const chunkSize = 0x8000;
  let binary = '';
  for (let offset = 0; offset < bytes.length; offset += chunkSize) {
    binary += String.fromCharCode(...bytes.subarray(offset, offset + chunkSize));
  }
  return btoa(binary);
}

/**
 * The bytes of base64 `data` (standard alphabet; padding and ASCII whitespace optional, as `atob`
 * takes them). Data that is not base64 (a caller's `inlineData.data`, say) throws an `AgentError`
 * with code `BAD_REQUEST` rather than the runtime's `DOMException`.
 */
export function base64ToBytes(data: string): Uint8Array {
  let binary: string;
  try {
    binary = atob(data);
  } catch (error) {
    throw new AgentError('BAD_REQUEST', `expected base64 data (A-Z, a-z, 0-9, "+", "/", "=" padding), got ${data.length} characters that are not`, {
      cause: error,
    });
  }
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index += 1) bytes[index] = binary.charCodeAt(index);
  return bytes;
}

/** Base64 of the UTF-8 bytes of `text`. */
export function textToBase64(text: string): string {
  return bytesToBase64(new TextEncoder().encode(text));
}

/** The UTF-8 text of base64 `data`. */
export function base64ToText(data: string): string {
  return new TextDecoder().decode(base64ToBytes(data));
}
