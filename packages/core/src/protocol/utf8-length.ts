/**
 * How many bytes `text` takes as UTF-8, counted without encoding it: a surrogate pair is four, a
 * lone surrogate three (`TextEncoder` writes it as U+FFFD).
 */
export function utf8Length(text: string): number {
  let size = 0;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code < 0x80) size += 1;
    else if (code < 0x800) size += 2;
    else if (code >= 0xd800 && code <= 0xdbff && isLowSurrogate(text.charCodeAt(index + 1))) {
      size += 4;
      index += 1;
    } else size += 3;
  }
  return size;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
