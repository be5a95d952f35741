/**
 * write_file, read_file and list_files in a workload's workspace, through the files API's
 * own operations (workspace-files.ts: every path resolved beneath the workspace, no link
 * followed, uploads renamed into place). Content travels inline: text as is, anything else
 * as base64; a file larger than an answer may carry comes back as a resource link, read
 * through resources/read or GET /v1/workloads/{id}/files/{path}.
 */
import { closeSync, readSync } from "node:fs";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type * as v from "valibot";
import { validationFailed } from "../problem.ts";
import { listFilesPage, outOfSpace, pathParts, tooLarge } from "../workloads/files.ts";
import { beginUpload, openForDownload } from "../workloads/workspace-files.ts";
import { jsonResult, ownedWorkload, type ToolContext } from "./tool-context.ts";
import type { ListFilesArgs, ReadFileArgs, WriteFileArgs } from "./tool-schemas.ts";

/** The largest file read_file (and a resource read) puts into one answer. */
export const INLINE_READ_MAX_BYTES = 1024 * 1024;
const DEFAULT_MODE = 0o644;

export function fileUri(workloadId: string, path: string): string {
  return `openai4s://workloads/${encodeURIComponent(workloadId)}/files/${path.split("/").map(encodeURIComponent).join("/")}`;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Base64 that is not (Buffer.from would drop the bad characters silently) is refused. */
function decodeContent(content: string, encoding: "utf8" | "base64"): Buffer {
  if (encoding === "utf8") return Buffer.from(content, "utf8");
  const compact = content.replace(/\s+/g, "");
  if (!BASE64.test(compact)) {
    throw validationFailed([
      { path: "content", message: "is not valid base64 (encoding is base64)" },
    ]);
  }
  return Buffer.from(compact, "base64");
}

export async function writeFileTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof WriteFileArgs>,
): Promise<CallToolResult> {
  const workload = ownedWorkload(ctx, args.workload);
  const files = ctx.deps.files;
  const parts = pathParts(args.path);
  const bytes = decodeContent(args.content, args.encoding ?? "utf8");
  if (bytes.byteLength > files.maxUploadBytes) throw tooLarge(files.maxUploadBytes);
  const mode = args.mode === undefined ? DEFAULT_MODE : Number.parseInt(args.mode, 8);
  const subject = { profile: workload.profile, owner: workload.owner ?? null };
  const target = beginUpload(files, workload.id, subject, parts, mode, args.path);
  try {
    target.write(bytes);
  } catch (error) {
    target.abandon();
    throw outOfSpace(error) ?? error;
  }
  const { sizeBytes } = target.commit();
  return jsonResult({
    path: parts.join("/"),
    sizeBytes,
    mode: `0${mode.toString(8).padStart(3, "0")}`,
  });
}

/** The file's bytes when it fits an answer; else its size (the fd is closed either way). */
export function readWorkspaceFile(
  ctx: ToolContext,
  workloadId: string,
  path: string,
):
  | { readonly kind: "Inline"; readonly bytes: Buffer }
  | { readonly kind: "TooLarge"; readonly sizeBytes: number } {
  const { fd, sizeBytes } = openForDownload(ctx.deps.files, workloadId, pathParts(path), path);
  try {
    if (sizeBytes > INLINE_READ_MAX_BYTES) return { kind: "TooLarge", sizeBytes };
    const bytes = Buffer.alloc(sizeBytes);
    let offset = 0;
    while (offset < sizeBytes) {
      const n = readSync(fd, bytes, offset, sizeBytes - offset, offset);
      if (n === 0) break;
      offset += n;
    }
    return { kind: "Inline", bytes: bytes.subarray(0, offset) };
  } finally {
    closeSync(fd);
  }
}

/** Text when the bytes are UTF-8 (a CSV, a script, a log), else null: sent as base64. */
export function asText(bytes: Buffer): string | null {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

export async function readFileTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof ReadFileArgs>,
): Promise<CallToolResult> {
  const workload = ownedWorkload(ctx, args.workload);
  const read = readWorkspaceFile(ctx, workload.id, args.path);
  const uri = fileUri(workload.id, args.path);
  if (read.kind === "TooLarge") {
    return {
      content: [
        {
          type: "text",
          text: `${args.path} is ${read.sizeBytes} bytes, more than an answer carries (${INLINE_READ_MAX_BYTES}); read it as the linked resource in ranges over HTTP: GET /v1/workloads/${workload.id}/files/${args.path} with a Range header`,
        },
        {
          type: "resource_link",
          uri,
          name: args.path,
          size: read.sizeBytes,
          mimeType: "application/octet-stream",
        },
      ],
    };
  }
  const text = asText(read.bytes);
  return {
    content: [
      {
        type: "resource",
        resource:
          text === null
            ? { uri, mimeType: "application/octet-stream", blob: read.bytes.toString("base64") }
            : { uri, mimeType: "text/plain", text },
      },
    ],
  };
}

export async function listFilesTool(
  ctx: ToolContext,
  args: v.InferOutput<typeof ListFilesArgs>,
): Promise<CallToolResult> {
  const workload = ownedWorkload(ctx, args.workload);
  const { workload: _id, ...query } = args;
  return jsonResult(listFilesPage(ctx.deps.files, workload.id, query));
}
