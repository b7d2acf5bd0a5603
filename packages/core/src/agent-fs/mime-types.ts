/**
 * The fixed MIME type ↔ file extension table of the agent file system.
 *
 * Extensions derived from a platform's MIME database differ between platforms; a fixed table
 * gives every runtime the same file names. The first extension
 * listed for a MIME type is the one new files get.
 */
const EXTENSIONS_BY_MIME_TYPE: ReadonlyArray<readonly [mimeType: string, extensions: readonly string[]]> = [
  ['text/plain', ['txt', 'text', 'log']],
  ['text/markdown', ['md', 'markdown']],
  ['text/csv', ['csv']],
  ['text/tab-separated-values', ['tsv']],
  ['text/html', ['html', 'htm']],
  ['text/css', ['css']],
  ['text/javascript', ['js', 'mjs']],
  ['text/xml', ['xml']],
  ['text/x-python', ['py']],
  ['text/calendar', ['ics']],
  ['application/json', ['json']],
  ['application/pdf', ['pdf']],
  ['application/xml', ['xml']],
  ['application/zip', ['zip']],
  ['application/rtf', ['rtf']],
  ['application/msword', ['doc']],
  ['application/vnd.openxmlformats-officedocument.wordprocessingml.document', ['docx']],
  ['application/vnd.ms-excel', ['xls']],
  ['application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', ['xlsx']],
  ['application/vnd.ms-powerpoint', ['ppt']],
  ['application/vnd.openxmlformats-officedocument.presentationml.presentation', ['pptx']],
  ['image/png', ['png']],
  ['image/jpeg', ['jpg', 'jpeg']],
  ['image/gif', ['gif']],
  ['image/webp', ['webp']],
  ['image/svg+xml', ['svg']],
  ['image/bmp', ['bmp']],
  ['image/heic', ['heic']],
  ['image/heif', ['heif']],
  ['image/tiff', ['tiff', 'tif']],
  ['audio/mpeg', ['mp3']],
  ['audio/mp3', ['mp3']],
  ['audio/wav', ['wav']],
  ['audio/x-wav', ['wav']],
  ['audio/wave', ['wav']],
  ['audio/ogg', ['ogg']],
  ['audio/aac', ['aac']],
  ['audio/flac', ['flac']],
  ['audio/webm', ['weba']],
  ['audio/mp4', ['m4a']],
  ['audio/aiff', ['aiff']],
  ['audio/L16', ['pcm']],
  ['video/mp4', ['mp4']],
  ['video/webm', ['webm']],
  ['video/quicktime', ['mov']],
  ['video/mpeg', ['mpeg', 'mpg']],
  ['video/x-msvideo', ['avi']],
  ['video/3gpp', ['3gp']],
];

const EXTENSION_BY_MIME_TYPE = new Map<string, string>();
const MIME_TYPE_BY_EXTENSION = new Map<string, string>();
for (const [mimeType, extensions] of EXTENSIONS_BY_MIME_TYPE) {
  const [first] = extensions;
  if (first !== undefined) EXTENSION_BY_MIME_TYPE.set(mimeType.toLowerCase(), first);
  for (const extension of extensions) {
    // First MIME type listed for an extension wins (`xml` → `text/xml`, `mp3` → `audio/mpeg`).
    if (!MIME_TYPE_BY_EXTENSION.has(extension)) MIME_TYPE_BY_EXTENSION.set(extension, mimeType);
  }
}

/** The extension new files get when their MIME type is unknown. */
export const DEFAULT_EXTENSION = 'txt';

/** The MIME type of a named file whose extension is unknown or missing. */
export const DEFAULT_MIME_TYPE = 'text/plain';

/** `text/plain; charset=utf-8` → `text/plain`. */
function essence(mimeType: string): string {
  const semicolon = mimeType.indexOf(';');
  return (semicolon === -1 ? mimeType : mimeType.slice(0, semicolon)).trim().toLowerCase();
}

/**
 * The extension (without the dot) a file of this MIME type gets, `txt` when the type is unknown.
 *
 * @example
 * ```ts
 * extensionFromMimeType('image/png'); // 'png'
 * extensionFromMimeType('audio/mpeg'); // 'mp3'
 * ```
 */
export function extensionFromMimeType(mimeType: string): string {
  return EXTENSION_BY_MIME_TYPE.get(essence(mimeType)) ?? DEFAULT_EXTENSION;
}

/**
 * The MIME type implied by a file name's extension, `text/plain` when it has none or an unknown one.
 *
 * @example
 * ```ts
 * mimeTypeFromFileName('/mnt/report.md'); // 'text/markdown'
 * mimeTypeFromFileName('notes'); // 'text/plain'
 * ```
 */
export function mimeTypeFromFileName(fileName: string): string {
  const slash = fileName.lastIndexOf('/');
  const baseName = slash === -1 ? fileName : fileName.slice(slash + 1);
  const dot = baseName.lastIndexOf('.');
  if (dot === -1) return DEFAULT_MIME_TYPE;
  return MIME_TYPE_BY_EXTENSION.get(baseName.slice(dot + 1).toLowerCase()) ?? DEFAULT_MIME_TYPE;
}

/** The auto-name prefix of a MIME type: its major type for audio, video, image and text, else `file`. */
export function fileNamePrefixFromMimeType(mimeType: string): string {
  const major = essence(mimeType).split('/', 1)[0] ?? '';
  return major === 'audio' || major === 'video' || major === 'image' || major === 'text' ? major : 'file';
}
