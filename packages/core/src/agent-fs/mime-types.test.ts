import { describe, expect, it } from 'vitest';
import { extensionFromMimeType, fileNamePrefixFromMimeType, mimeTypeFromFileName } from './mime-types.js';

describe('MIME type ↔ extension table', () => {
  it.each([
    ['image/png', 'png'],
    ['image/jpeg', 'jpg'],
    ['audio/mpeg', 'mp3'],
    ['audio/wav', 'wav'],
    ['video/mp4', 'mp4'],
    ['text/plain', 'txt'],
    ['text/markdown', 'md'],
    ['text/csv', 'csv'],
    ['text/html', 'html'],
    ['application/json', 'json'],
    ['application/pdf', 'pdf'],
    ['Text/Plain; charset=utf-8', 'txt'],
    ['application/x-made-up', 'txt'],
    ['', 'txt'],
  ])('%s gets the extension %s', (mimeType, extension) => {
    expect(extensionFromMimeType(mimeType)).toBe(extension);
  });

  it.each([
    ['report.md', 'text/markdown'],
    ['/mnt/data.CSV', 'text/csv'],
    ['data.json', 'application/json'],
    ['page.htm', 'text/html'],
    ['photo.jpeg', 'image/jpeg'],
    ['song.mp3', 'audio/mpeg'],
    ['notes', 'text/plain'],
    ['archive.unknownext', 'text/plain'],
    ['dir.with.dots/file', 'text/plain'],
  ])('%s has the MIME type %s', (fileName, mimeType) => {
    expect(mimeTypeFromFileName(fileName)).toBe(mimeType);
  });

  it('prefixes automatic names with the major type or "file"', () => {
    expect(fileNamePrefixFromMimeType('image/png')).toBe('image');
    expect(fileNamePrefixFromMimeType('audio/mpeg')).toBe('audio');
    expect(fileNamePrefixFromMimeType('video/mp4')).toBe('video');
    expect(fileNamePrefixFromMimeType('text/markdown')).toBe('text');
    expect(fileNamePrefixFromMimeType('application/pdf')).toBe('file');
  });
});
