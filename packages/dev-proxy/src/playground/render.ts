// How the playground shows what a run sends: text, sanitised markdown, media, and links that only
// ever open http(s) pages. Everything here comes from a model or a server and is treated as hostile.
import type { LLMContent, Part } from '@org/core/client';
import DOMPurify from 'dompurify';
import { marked } from 'marked';

/** Creates an element with attributes and children (text is always set as text, never as HTML). */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
  ...children: Array<Node | string | undefined>
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  for (const child of children) if (child !== undefined) element.append(child);
  return element;
}

/** `url` when it is an `http:` or `https:` URL a link may open, else `undefined`. */
export function webUrl(url: string): string | undefined {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : undefined;
  } catch {
    return undefined;
  }
}

/** A link that opens a web URL in a new tab; anything else (`javascript:`, `data:`, ...) stays text. */
export function safeLink(url: string, label: string): Node {
  const href = webUrl(url);
  return href ? el('a', { href, target: '_blank', rel: 'noopener noreferrer' }, label) : el('span', { class: 'unsafe-link', title: 'not an http(s) link' }, label);
}

/** Only media types a data: URL may carry into the page. */
const MEDIA_TYPE = /^(image|audio|video)\/[a-z0-9.+-]+$/i;

let hooked = false;

/**
 * Markdown from the model may hold HTML: only what DOMPurify keeps reaches the page, every link it
 * keeps opens http(s) in a new tab, and an image loads only from http(s).
 */
function sanitize(html: string): DocumentFragment {
  if (!hooked) {
    DOMPurify.addHook('afterSanitizeAttributes', restrictUrls);
    hooked = true;
  }
  return DOMPurify.sanitize(html, { RETURN_DOM_FRAGMENT: true, FORBID_TAGS: ['style', 'form', 'input', 'button', 'iframe'] });
}

function restrictUrls(node: Element): void {
  if (node.tagName === 'A') {
    const href = webUrl(node.getAttribute('href') ?? '');
    if (href) {
      node.setAttribute('href', href);
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    } else {
      node.removeAttribute('href');
    }
  }
  if (node.tagName === 'IMG' && !webUrl(node.getAttribute('src') ?? '')) node.removeAttribute('src');
}

/** Markdown as sanitised HTML, for thoughts and outcomes. */
export function renderMarkdown(text: string): HTMLElement {
  const box = el('div', { class: 'markdown' });
  const html = marked.parse(text, { async: false, gfm: true });
  box.append(sanitize(html));
  return box;
}

/** Renders LLM content: text as text (or markdown), images inline, other data as download links. */
export function renderContent(content: LLMContent | undefined, options: { markdown?: boolean } = {}): HTMLElement {
  const box = el('div', { class: 'content' });
  for (const part of content?.parts ?? []) box.append(renderPart(part, options));
  return box;
}

export function renderPart(part: Part, options: { markdown?: boolean } = {}): Node {
  if (typeof part.text === 'string') return options.markdown ? renderMarkdown(part.text) : el('div', { class: 'text' }, part.text);
  const inline = part.inlineData;
  if (inline) {
    if (MEDIA_TYPE.test(inline.mimeType)) {
      const url = `data:${inline.mimeType};base64,${inline.data}`;
      if (inline.mimeType.startsWith('image/')) return el('img', { src: url, alt: inline.mimeType });
      if (inline.mimeType.startsWith('audio/')) return el('audio', { src: url, controls: '' });
      return el('video', { src: url, controls: '' });
    }
    // Anything else is offered as bytes to save, never as a page the browser would open.
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = Uint8Array.from(atob(inline.data), (character) => character.charCodeAt(0));
    } catch {
      return el('pre', {}, `(inline ${inline.mimeType.slice(0, 60)} data that is not base64)`);
    }
    const href = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
    return el('a', { href, download: 'file' }, `Download (${inline.mimeType.slice(0, 60)})`);
  }
  if (part.fileData) return safeLink(part.fileData.fileUri, part.fileData.fileUri);
  return el('pre', {}, JSON.stringify(part, null, 2));
}
