// Bundled into a test page: renders hostile parts and markdown with the playground's own code and
// reports what reached the DOM.
import { renderMarkdown, renderPart, safeLink } from '../src/playground/render.js';

interface Rendered {
  html: string;
  links: Array<{ href: string | null; target: string | null; rel: string | null }>;
  images: Array<string | null>;
  scripts: number;
  handlers: number;
}

function inspect(node: Node): Rendered {
  const holder = document.createElement('div');
  holder.append(node);
  document.body.append(holder);
  const all = [...holder.querySelectorAll('*')];
  return {
    html: holder.innerHTML,
    links: [...holder.querySelectorAll('a')].map((link) => ({ href: link.getAttribute('href'), target: link.getAttribute('target'), rel: link.getAttribute('rel') })),
    images: [...holder.querySelectorAll('img')].map((image) => image.getAttribute('src')),
    scripts: holder.querySelectorAll('script').length,
    handlers: all.filter((element) => [...element.attributes].some((attribute) => attribute.name.startsWith('on'))).length,
  };
}

const checks = {
  fileData: (fileUri: string) => inspect(renderPart({ fileData: { fileUri, mimeType: 'text/plain' } })),
  source: (uri: string) => inspect(safeLink(uri, 'source')),
  inline: (mimeType: string, data: string) => inspect(renderPart({ inlineData: { mimeType, data } })),
  markdown: (text: string) => inspect(renderMarkdown(text)),
};

(globalThis as unknown as { checks: typeof checks }).checks = checks;
