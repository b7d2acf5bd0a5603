/** Base64 of `bytes`, with Web-standard APIs only (no `Buffer`). */
export function bytesToBase64(bytes: Uint8Array): string {
  const chunkSize = 0x8000;
  let binary = '';
  for (let offset = 0; offset < bytes.length; offset += chunkSize) {
    binary += String.fromCharCode(...bytes.subarray(offset, offset + chunkSize));
  }
  return btoa(binary);
}

/** The bytes of base64 `data`. Throws a `DOMException` (`InvalidCharacterError`) on malformed input. */
export function base64ToBytes(data: string): Uint8Array {
  const binary = atob(data);
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
