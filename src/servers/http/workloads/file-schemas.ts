/**
 * The files API's response bodies (`GET|PUT /v1/workloads/{id}/files`) as valibot schemas,
 * for the OpenAPI document and the contract test, beside the other views' (view-schemas.ts).
 */
import * as v from "valibot";
import { d, nullableText, text } from "../schema-fields.ts";

export const FileEntrySchema = v.strictObject({
  path: text("The entry's path inside the workspace."),
  type: v.pipe(
    v.picklist(["file", "directory", "symlink", "other"]),
    d("What it is (a link is listed, never followed)."),
  ),
  sizeBytes: v.pipe(v.number(), d("Its size in bytes (lstat).")),
  mode: text("Its permission bits in octal, e.g. 0600."),
  modifiedAt: text("When its content last changed (ISO 8601)."),
});

export const FileListSchema = v.strictObject({
  items: v.pipe(
    v.array(FileEntrySchema),
    d("Depth first, names sorted; a directory before its entries."),
  ),
  nextCursor: nullableText("Pass as `cursor` for the next page; null on the last page."),
});

export const UploadedFileSchema = v.strictObject({
  path: text("The file's path inside the workspace."),
  sizeBytes: v.pipe(v.number(), d("Bytes written.")),
  mode: text("Its permission bits in octal."),
});
