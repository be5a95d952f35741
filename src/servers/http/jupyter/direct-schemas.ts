/**
 * Shapes of the direct Jupyter server's routes (`/api/contents`, `/api/sessions`): the
 * bodies stock clients send and the models they read back. Bodies are strict, as every body
 * of this API: each field @jupyterlab/services (JupyterLab, VS Code) sends is named, and
 * one it does not send is refused, never ignored.
 */
import * as v from "valibot";
import { KernelSchema } from "./schemas.ts";

const d = <S extends v.GenericSchema>(schema: S, text: string) =>
  v.pipe(schema, v.description(text));

const contentType = v.picklist(["directory", "notebook", "file"]);

export const ContentsQuery = v.looseObject({
  token: v.optional(d(v.string(), "The token, where a header cannot be set.")),
  type: v.optional(d(contentType, "Read as this type (a notebook as a file, say).")),
  format: v.optional(d(v.picklist(["text", "base64"]), "A file's format.")),
  content: v.optional(d(v.picklist(["0", "1"]), "0: the model without content.")),
  hash: v.optional(d(v.picklist(["0", "1"]), "Not computed (no hash is returned).")),
});

const pathField = v.optional(d(v.string(), "The path again (clients repeat it; not used)."));
const nameField = v.optional(d(v.string(), "The name again (clients repeat it; not used)."));

export const ContentsSaveBody = v.strictObject({
  path: pathField,
  name: nameField,
  type: d(contentType, "What to write: a directory, a notebook (JSON) or a file."),
  format: v.optional(d(v.nullable(v.picklist(["text", "base64", "json"])), "A file's format.")),
  content: v.optional(d(v.unknown(), "The notebook's JSON, or the file's text or base64.")),
  chunk: v.optional(d(v.number(), "Chunked uploads are refused: use the files API.")),
});

export const ContentsCreateBody = v.strictObject({
  path: pathField,
  type: v.optional(d(contentType, "An untitled what (default file).")),
  ext: v.optional(d(v.string(), "A new file's extension (default .txt).")),
  copy_from: v.optional(d(v.string(), "Copy this file into the directory instead.")),
});

export const ContentsRenameBody = v.strictObject({
  path: d(v.string(), "The new path, in the same session's directory."),
});

const SessionKernel = v.strictObject({
  name: v.optional(d(v.nullable(v.string()), "A kernelspec, to start a new kernel.")),
  id: v.optional(d(v.nullable(v.string()), "A live kernel of the caller's, to bind to.")),
});

export const SessionBody = v.strictObject({
  path: v.optional(d(v.string(), "The notebook's (or console's) path in the contents.")),
  name: v.optional(d(v.string(), "The session's name.")),
  type: v.optional(d(v.string(), "notebook, console or file.")),
  kernel: v.optional(d(v.nullable(SessionKernel), "Which kernel: an id or a kernelspec.")),
  notebook: v.optional(
    d(
      v.strictObject({
        path: v.optional(d(v.string(), "The notebook's path.")),
        name: v.optional(d(v.string(), "Its name.")),
      }),
      "Old clients' spelling of path and name.",
    ),
  ),
});

const stamp = (text: string) => d(v.string(), text);

export const ContentsModelSchema: v.GenericSchema = v.object({
  name: d(v.string(), "The entry's name."),
  path: d(v.string(), "SESSION_ID/path inside the session's workspace ('' is the root)."),
  type: d(contentType, "directory, notebook (.ipynb) or file."),
  writable: d(v.boolean(), "Whether it may be written (the root may not)."),
  created: stamp("ISO 8601."),
  last_modified: stamp("ISO 8601."),
  size: d(v.nullable(v.number()), "A file's size in bytes."),
  mimetype: d(v.nullable(v.string()), "A file's MIME type."),
  content: d(v.unknown(), "A directory's models, a notebook's JSON, a file's text or base64."),
  format: d(v.nullable(v.string()), "json, text or base64; null without content."),
});

export const CheckpointSchema = v.object({
  id: d(v.string(), "Always 'checkpoint' (one per file, as Jupyter Server keeps them)."),
  last_modified: stamp("ISO 8601."),
});

export const CheckpointListSchema = v.array(CheckpointSchema);

export const SessionSchema = v.object({
  id: d(v.string(), "The session's id (kept in the daemon's memory)."),
  path: d(v.string(), "The notebook's path."),
  name: d(v.string(), "The session's name."),
  type: d(v.string(), "notebook, console or file."),
  kernel: d(KernelSchema, "The kernel (a SESSION workload)."),
  notebook: d(
    v.object({
      path: d(v.string(), "The notebook's path (legacy clients)."),
      name: d(v.string(), "The session's name (legacy clients)."),
    }),
    "The same, as old clients read it.",
  ),
});

export const SessionListSchema = v.array(SessionSchema);
