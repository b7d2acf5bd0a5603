import { z } from 'zod';
import { mimeTypeFromFileName } from '../agent-fs/index.js';
import { AgentError } from '../errors/index.js';
import type { DriveOperationsClient, DriveUploadMedia } from '../ports/index.js';
import { base64ToBytes } from '../protocol/base64.js';
import type { Part } from '../protocol/content.js';
import { defineFunction, type FunctionContext, type FunctionGroup } from './define-function.js';
import { describeFailure, errorResult } from './error-classification.js';
import { commonParameters } from './parameters.js';

const INSTRUCTION = `## Google Drive

You can save files to the user's Google Drive. google_drive_upload_file uploads a file of your file system (text, a document, an image) and gives back a path for the uploaded copy; with "convert", office files and CSV become Google Docs, Sheets or Slides. google_drive_create_folder creates a folder; pass its id as "parent" to put files in it. Upload only when the objective asks for files in Drive.`;

const FOLDER_MIME_TYPE = 'application/vnd.google-apps.folder';
const DOCUMENT = 'application/vnd.google-apps.document';
const SPREADSHEET = 'application/vnd.google-apps.spreadsheet';
const PRESENTATION = 'application/vnd.google-apps.presentation';
/** The Google Workspace type Drive converts an office or CSV file to. */
const CONVERSIONS: ReadonlyMap<string, string> = new Map([
  ['text/csv', SPREADSHEET],
  ['text/tab-separated-values', SPREADSHEET],
  ['application/vnd.ms-excel', SPREADSHEET],
  ['application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', SPREADSHEET],
  ['application/vnd.oasis.opendocument.spreadsheet', SPREADSHEET],
  ['application/msword', DOCUMENT],
  ['application/vnd.openxmlformats-officedocument.wordprocessingml.document', DOCUMENT],
  ['application/vnd.oasis.opendocument.text', DOCUMENT],
  ['application/rtf', DOCUMENT],
  ['application/vnd.ms-powerpoint', PRESENTATION],
  ['application/vnd.openxmlformats-officedocument.presentationml.presentation', PRESENTATION],
  ['application/vnd.oasis.opendocument.presentation', PRESENTATION],
]);
/** Drive accepts longer names, but nobody reads them. */
const MAX_NAME_LENGTH = 1000;

function driveOf(context: FunctionContext): DriveOperationsClient {
  if (!context.ports.drive) throw new AgentError('BAD_REQUEST', 'Google Drive is not available in this run: there is no Google Drive access');
  return context.ports.drive;
}

function checkName(name: string): void {
  if (name.trim().length === 0 || name.length > MAX_NAME_LENGTH) {
    throw new AgentError('BAD_REQUEST', `name must be 1 to ${MAX_NAME_LENGTH} characters`, { details: { field: 'name' } });
  }
}

/** The id of a file Drive made; a client that answers without one is a failure, not a success without an id. */
function idOf(file: { id?: unknown }): string {
  if (typeof file?.id !== 'string' || file.id.length === 0) throw new AgentError('UPSTREAM_ERROR', 'Google Drive answered without the id of the file it made');
  return file.id;
}

/** The bytes of a file of the agent's file system, with their MIME type. */
function mediaOf(part: Part | undefined, path: string): DriveUploadMedia {
  if (typeof part?.text === 'string') return { data: new TextEncoder().encode(part.text), mimeType: mimeTypeFromFileName(path) };
  if (part?.inlineData) return { data: base64ToBytes(part.inlineData.data), mimeType: part.inlineData.mimeType };
  const reference = part?.storedData?.handle ?? part?.fileData?.fileUri;
  throw new AgentError('BAD_REQUEST', `file_path: ${path} refers to ${reference ?? 'nothing'}, not content this run holds, so it cannot be uploaded`, {
    details: { field: 'file_path' },
  });
}

/**
 * The Google Drive functions: upload a file of the agent's file system (converted to a Google
 * Workspace type on request), and create a folder. Offered when the run's flags set
 * `enableGoogleDriveTools` and a Drive client is present.
 */
export function createGoogleDriveGroup(): FunctionGroup {
  const { responseError, cutStatusUpdate } = commonParameters();
  return {
    name: 'google-drive',
    instruction: INSTRUCTION,
    functions: [
      defineFunction({
        name: 'google_drive_upload_file',
        description: "Uploads a file of the file system to the user's Google Drive and returns the path of the uploaded copy.",
        strictDeclaration: true,
        parameters: z.object({
          name: z.string().describe('The name of the file in Drive, e.g. "Trip plan".'),
          file_path: z.string().describe('The file to upload, e.g. "/mnt/plan.md".'),
          convert: z.boolean().default(true).describe('Convert office files and CSV to Google Docs, Sheets or Slides.'),
          parent: z.string().optional().describe('The id of the Drive folder to put the file in; the root folder when left out.'),
          status_update: cutStatusUpdate,
        }),
        response: z.object({
          file_path: z.string().optional().describe('The path of the uploaded file, usable in <file> tags.'),
          error: responseError,
        }),
        icon: 'cloud_upload',
        title: 'Uploading a File to Google Drive',
        sideEffects: true,
        async handler({ name, file_path, convert, parent, status_update }, context) {
          context.update(status_update || 'Uploading to Google Drive');
          let id: string;
          let mimeType: string;
          try {
            checkName(name);
            const drive = driveOf(context);
            if (!drive.uploadFile) throw new AgentError('NOT_IMPLEMENTED', 'This Google Drive client cannot upload files');
            const [part] = await context.fs.get(file_path);
            const media = mediaOf(part, file_path);
            const target = convert ? CONVERSIONS.get(media.mimeType.split(';', 1)[0]!.trim().toLowerCase()) : undefined;
            const metadata: Record<string, unknown> = { name };
            if (target) metadata.mimeType = target;
            if (parent) metadata.parents = [parent];
            const file = await drive.uploadFile(metadata, media, context.signal);
            id = idOf(file);
            mimeType = typeof file.mimeType === 'string' ? file.mimeType : (target ?? media.mimeType);
          } catch (error) {
            return errorResult(error);
          }
          try {
            return { file_path: context.fs.addPart({ storedData: { handle: `drive:/${id}`, mimeType } }) };
          } catch (error) {
            // The upload is done: say so, or the model would upload the file a second time.
            return errorResult(
              new AgentError('PAYLOAD_TOO_LARGE', `The file was uploaded to Google Drive (id ${id}), but it has no path in the file system: ${describeFailure(error)}`),
            );
          }
        },
      }),
      defineFunction({
        name: 'google_drive_create_folder',
        description: "Creates a folder in the user's Google Drive and returns its id.",
        strictDeclaration: true,
        parameters: z.object({
          name: z.string().describe('The folder name.'),
          parent: z.string().optional().describe('The id of the folder to create it in; the root folder when left out.'),
          status_update: cutStatusUpdate,
        }),
        response: z.object({
          folder_id: z.string().optional().describe('The id of the new folder.'),
          error: responseError,
        }),
        icon: 'folder',
        title: 'Creating a Folder in Google Drive',
        sideEffects: true,
        async handler({ name, parent, status_update }, context) {
          context.update(status_update || 'Creating a folder in Google Drive');
          try {
            checkName(name);
            const folder = await driveOf(context).createFile(
              { name, mimeType: FOLDER_MIME_TYPE, ...(parent ? { parents: [parent] } : {}) },
              context.signal,
            );
            return { folder_id: idOf(folder) };
          } catch (error) {
            return errorResult(error);
          }
        },
      }),
    ],
  };
}
