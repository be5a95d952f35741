/**
 * A workload's logs and workspace files as MCP resources, under the tools' ownership rule:
 *   openai4s://workloads/{id}/logs/{stream}                   stdout or stderr
 *   openai4s://workloads/{id}/elements/{index}/logs/{stream}  a job array element's
 *   openai4s://workloads/{id}/files/{path}                    a workspace file
 * resources/list names the logs of the caller's newest workloads (files are found with
 * list_files: a listing of every workspace would be unbounded).
 */
import type {
  ReadResourceResult,
  Resource,
  ResourceTemplate,
} from "@modelcontextprotocol/sdk/types.js";
import { listWorkloads } from "../../../adapters/store-sqlite/index.ts";
import { listScope } from "../../../core/principals.ts";
import { ApiError, notFound } from "../problem.ts";
import { readLog } from "./batch-tools.ts";
import { asText, fileUri, INLINE_READ_MAX_BYTES, readWorkspaceFile } from "./file-tools.ts";
import { ownedWorkload, type ToolContext } from "./tool-context.ts";

/** How many of the caller's newest workloads resources/list names. */
const LISTED_WORKLOADS = 50;

export const RESOURCE_TEMPLATES: readonly ResourceTemplate[] = [
  {
    uriTemplate: "openai4s://workloads/{id}/logs/{stream}",
    name: "workload-log",
    title: "A workload's log",
    description: "stdout or stderr of the workload's latest attempt (its last 256 KiB).",
    mimeType: "text/plain",
  },
  {
    uriTemplate: "openai4s://workloads/{id}/elements/{index}/logs/{stream}",
    name: "array-element-log",
    title: "A job array element's log",
    description: "stdout or stderr of one element (0..array-1) of a job array.",
    mimeType: "text/plain",
  },
  {
    uriTemplate: "openai4s://workloads/{id}/files/{path}",
    name: "workspace-file",
    title: "A file in a workload's workspace",
    description: `A file of the workspace (at most ${INLINE_READ_MAX_BYTES} bytes; larger ones over HTTP).`,
  },
];

export function listResources(ctx: ToolContext): Resource[] {
  const page = listWorkloads(ctx.deps.store, {
    limit: LISTED_WORKLOADS,
    ...listScope(ctx.caller),
  });
  return page.items.flatMap((w) =>
    (["stdout", "stderr"] as const).map((stream) => ({
      uri: `openai4s://workloads/${encodeURIComponent(w.id)}/logs/${stream}`,
      name: `${w.name} ${stream}`,
      mimeType: "text/plain",
      description: `${w.kind} ${w.id} (${w.phase}): its ${stream}`,
    })),
  );
}

type Parsed =
  | {
      readonly kind: "Log";
      readonly id: string;
      readonly stream: "stdout" | "stderr";
      readonly index?: number;
    }
  | { readonly kind: "File"; readonly id: string; readonly path: string };

const LOG_URI =
  /^openai4s:\/\/workloads\/([^/]+)\/(?:elements\/([0-9]{1,8})\/)?logs\/(stdout|stderr)$/;
const FILE_URI = /^openai4s:\/\/workloads\/([^/]+)\/files\/(.+)$/;

function parseUri(uri: string): Parsed | null {
  try {
    const log = LOG_URI.exec(uri);
    if (log) {
      return {
        kind: "Log",
        id: decodeURIComponent(log[1] as string),
        stream: log[3] as "stdout" | "stderr",
        ...(log[2] !== undefined ? { index: Number(log[2]) } : {}),
      };
    }
    const file = FILE_URI.exec(uri);
    if (file) {
      const path = (file[2] as string).split("/").map(decodeURIComponent).join("/");
      return { kind: "File", id: decodeURIComponent(file[1] as string), path };
    }
  } catch {
    // Bad percent-encoding: no resource of ours.
  }
  return null;
}

export async function readResource(ctx: ToolContext, uri: string): Promise<ReadResourceResult> {
  const parsed = parseUri(uri);
  if (parsed === null) throw notFound(`no resource ${JSON.stringify(uri.slice(0, 300))}`);
  const workload = ownedWorkload(ctx, parsed.id);
  if (parsed.kind === "Log") {
    const { text } = await readLog(ctx, {
      workload: workload.id,
      stream: parsed.stream,
      ...(parsed.index !== undefined ? { index: parsed.index } : {}),
    });
    return { contents: [{ uri, mimeType: "text/plain", text }] };
  }
  const read = readWorkspaceFile(ctx, workload.id, parsed.path);
  if (read.kind === "TooLarge") {
    throw new ApiError({
      status: 413,
      slug: "payload-too-large",
      title: "File too large to inline",
      detail: `${parsed.path} is ${read.sizeBytes} bytes, more than a resource read carries (${INLINE_READ_MAX_BYTES}): GET /v1/workloads/${workload.id}/files/${parsed.path} with a Range header`,
    });
  }
  const text = asText(read.bytes);
  const canonical = fileUri(workload.id, parsed.path);
  return {
    contents: [
      text === null
        ? {
            uri: canonical,
            mimeType: "application/octet-stream",
            blob: read.bytes.toString("base64"),
          }
        : { uri: canonical, mimeType: "text/plain", text },
    ],
  };
}
