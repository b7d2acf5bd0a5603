import { bytesToBase64 } from '../protocol/base64.js';
import type { ExecuteStepRequest, ExecuteStepResponse } from '../ports/index.js';

/** A small generated picture (a sunset over the sea), the simulated image model's only work. */
export const SIMULATED_IMAGE_PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAKAAAABgCAIAAAAVRe7OAAADdklEQVR42u3RZ3NVVRjF8fUh9sfZHwILkN4IJZTQ4d6Em9tzUwARGV+DClaqymdAIUpREYwlFopYQAWVN3JmDnPneM4ZZ3Age9bDmvlN5tz9f5Vn4f7LS8Qw/H1giRiGv156RgzDn/ufFcNw78XnxDDc3fe8GIa7LywVw/DH3mViGH7fs1wMw2+7O8Qw3JntFMNwe6ZLDMPt6W4xDL9O9Yhh+KXVK4bh58k+MQw/NfvFMNxq9IthuFUfEMPwY21QDMPN6pAYhhuVFWIYrpeHxTBcm1gphuFaaZUYhh/GV4th+H5sjRiG74ojYhi+LawVw7Cwc50YhoUd68UwfLN9w1Pin/lC0lPyX+PrbaNWpRb9b1aPgK+2jtrzSNMm2TsFvtyy0ZL/PW2SpYNgfvMmMx7LujEzN8H8ps0GPMZp/zUz/2XwxcYt7J7QujH24+Dq6FZqT3TdGPV9cGXDNl6LsG6M90T4fP12Xos2MO+JcHndDlKLtm6M9Eq4vHYno0Ve9+HGhIfCZyMFRkEGZjwUPl1TpBNk3RjdrfDJ6jE6AQemuxUurRqnE3Bgulvh4spdXAKuG+M6Fy4Ol7iEH5jqXLgwVOISfGCuc+H84ASX4ANznQsfD5S5BB+Y61z4qL/CJfjAXOfCXF+VS/CBuc6Fud4al/ADU50L53rqXIIPzHUunO1ucAk+MNe58GFXk0vwgbnOhQ86J7kEH5jrXDjT0eISfGCuc8Et3RvzpdPt7xQl3hQNvCfiS+/HH1lK1Am6gu0EP/GeW7Y7l5KBBF3BdoJbPpvly+/mvivRpWjgmRRfPpV9VCJN0BVsJ7iO6TZfOZn8qWQgRQNPxXzlRPs7RYk3wXVORXz1RPyRpUSdooFbvno8+ptLiT3B1467rlYuJQMJrmsyl68dUzKQooGbWb52NPddiS7BdTdTfP1o9lGJNEUDN5J8/Z3UixJ1guupt/nG28mfSgYSdAXbKRq4FvGNt+KPLCXqBNdb9c03o7+5lNgTdAXbCa6vkstPvqFkIEFXsJ3g+sspvvV69lGJNEUDTyT51pHUixJ1gq5gO8ENlGJ+6nD7O0WJN0FXsJ3gBnf56deiv7mU2BP89KtucDyXkoEEXcF2ghsay/Izr+S+K9GlaOBiip85lH1UIk1wK4pJfvZQ6kWJOkUDF9r87MHkTyUD6QEhsChu5AdYwQAAAABJRU5ErkJggg==';

/**
 * Answers an `executeStep` request like the media backend would: a picture for the image tool, a
 * short tone for speech and music, and a clear refusal for anything else (video included).
 *
 * @example
 * ```ts
 * simulatedExecuteStep({ planStep: { modelApi: 'ai_image_tool', output: 'generated_image', ... }, execution_inputs: {} });
 * // { executionOutputs: { generated_image: { chunks: [{ mimetype: 'image/png', data: 'iVBOR...' }] } } }
 * ```
 */
export function simulatedExecuteStep(request: ExecuteStepRequest): ExecuteStepResponse {
  const output = request.planStep?.output ?? 'output';
  const chunk = (mimetype: string, data: string): ExecuteStepResponse => ({ executionOutputs: { [output]: { chunks: [{ mimetype, data }] } } });
  switch (request.planStep?.modelApi) {
    case 'ai_image_tool':
      return chunk('image/png', SIMULATED_IMAGE_PNG);
    case 'tts':
    case 'generate_music':
      return chunk('audio/wav', toneWav());
    default:
      return {
        errorMessage: `The simulated backend cannot run ${request.planStep?.modelApi ?? 'this step'}; set GEMINI_API_KEY and UPSTREAM_URL for real media.`,
      };
  }
}

/** Half a second of a 440 Hz tone as a base64 WAV file (8 kHz, 8-bit mono). */
export function toneWav(): string {
  const samples = 4000;
  const bytes = new Uint8Array(44 + samples);
  const view = new DataView(bytes.buffer);
  const ascii = (offset: number, text: string) => {
    for (let index = 0; index < text.length; index += 1) bytes[offset + index] = text.charCodeAt(index);
  };
  ascii(0, 'RIFF');
  view.setUint32(4, 36 + samples, true);
  ascii(8, 'WAVEfmt ');
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true);
  view.setUint16(22, 1, true);
  view.setUint32(24, 8000, true);
  view.setUint32(28, 8000, true);
  view.setUint16(32, 1, true);
  view.setUint16(34, 8, true);
  ascii(36, 'data');
  view.setUint32(40, samples, true);
  for (let index = 0; index < samples; index += 1) bytes[44 + index] = 128 + Math.round(60 * Math.sin((2 * Math.PI * 440 * index) / 8000));
  return bytesToBase64(bytes);
}
