/**
 * Files in and out of a workload's workspace (`/v1/workloads/{id}/files`): upload (PUT,
 * streamed to disk, size-capped), download (GET, streamed, one byte range), list (paged),
 * delete. Bodies pass through in chunks, never whole: a 1 GB file costs the daemon a chunk
 * of memory, not a gigabyte. Every path is resolved beneath the workspace (workspace-files.ts).
 */
import { closeSync, read } from "node:fs";
import { Hono } from "hono";
import type * as v from "valibot";
import { getWorkload } from "../../../adapters/store-sqlite/index.ts";
import { parseUploadMode, showMode } from "../../../core/file-mode.ts";
import type { Workload } from "../../../core/models.ts";
import { withDeadline } from "../../../lib/clock.ts";
import { errorCode } from "../../../lib/durable-fs.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError, notFound, validationFailed } from "../problem.ts";
import { DEFAULT_BODY_TIMEOUT_MS, parseWith } from "../validation.ts";
import { parseWorkspacePath } from "./file-path.ts";
import { chooseRange } from "./file-range.ts";
import { FILES_LIST_MAX, FilesListQuery, UploadQuery } from "./schemas.ts";
import {
  beginUpload,
  openForDownload,
  pathRefused,
  removeEntry,
  type WorkspaceFilesDeps,
} from "./workspace-files.ts";
import { type ListPage, listWorkspace } from "./workspace-list.ts";

const CHUNK_BYTES = 256 * 1024;
const DEFAULT_UPLOAD_MODE = 0o644;

export function tooLarge(maxBytes: number): ApiError {
  return new ApiError({
    status: 413,
    slug: "payload-too-large",
    title: "Upload too large",
    detail: `the upload is larger than this daemon accepts (${maxBytes} bytes; serve --max-upload-size)`,
  });
}

/** A full spool or quota is the admin's to fix, not a daemon failure (no 500, no stack). */
export function outOfSpace(error: unknown): ApiError | null {
  const code = errorCode(error);
  if (code !== "ENOSPC" && code !== "EDQUOT") return null;
  return new ApiError({
    status: 503,
    slug: "spool-full",
    title: "No room for the upload",
    detail: `the spool (or the job's quota) ran out of space during the upload (${String(code)}); nothing was written`,
  });
}

/** The bits asked for, or a 400 naming what is refused (never quietly narrowed). */
function uploadMode(asked: string | undefined): number {
  if (asked === undefined) return DEFAULT_UPLOAD_MODE;
  const choice = parseUploadMode(asked);
  if (choice.kind === "Refused")
    throw validationFailed([{ path: "mode", message: choice.message }]);
  return choice.bits;
}

function requireWorkload(deps: ApiDeps, id: string): Workload {
  const workload = getWorkload(deps.store, id);
  if (!workload) throw notFound(`no workload ${JSON.stringify(id)}`);
  return workload;
}

export function pathParts(raw: string): readonly string[] {
  const parsed = parseWorkspacePath(raw);
  if (parsed.kind === "Invalid") throw pathRefused(parsed.message);
  return parsed.parts;
}

/**
 * The request body into `write`, chunk by chunk, refused past `maxBytes`; a body that
 * pauses longer than `idleMs` is cut (a stalled client must not hold an open upload).
 */
async function pumpBody(
  request: Request,
  maxBytes: number,
  idleMs: number,
  write: (chunk: Uint8Array) => void,
): Promise<void> {
  const reader = request.body?.getReader();
  if (reader === undefined) return;
  let total = 0;
  for (;;) {
    const reading = reader.read();
    const outcome = await withDeadline(reading, idleMs, () => "stalled" as const);
    if (outcome === "stalled") {
      reading.catch(() => {});
      reader.cancel().catch(() => {});
      throw new ApiError({
        status: 408,
        slug: "request-timeout",
        title: "Upload stalled",
        detail: `no upload data arrived for ${idleMs} ms; nothing was written`,
      });
    }
    if (outcome.done) return;
    total += outcome.value.byteLength;
    if (total > maxBytes) {
      reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    write(outcome.value);
  }
}

function downloadStream(
  fd: number,
  startByte: number,
  endByte: number,
): ReadableStream<Uint8Array> {
  let position = startByte;
  let open = true;
  const close = () => {
    if (open) closeSync(fd);
    open = false;
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const want = Math.min(CHUNK_BYTES, endByte + 1 - position);
      const buffer = Buffer.allocUnsafe(Math.max(want, 0));
      const bytesRead =
        want > 0
          ? await new Promise<number>((resolve, reject) =>
              read(fd, buffer, 0, want, position, (error, n) =>
                error ? reject(error) : resolve(n),
              ),
            )
          : 0;
      if (bytesRead === 0) {
        close();
        controller.close();
        return;
      }
      position += bytesRead;
      controller.enqueue(new Uint8Array(buffer.buffer, buffer.byteOffset, bytesRead));
    },
    cancel() {
      close();
    },
  });
}

/** A page of `GET .../files` (also MCP's list_files): the prefix split, the cursor read. */
export function listFilesPage(
  files: WorkspaceFilesDeps,
  id: string,
  query: v.InferOutput<typeof FilesListQuery>,
): ListPage {
  const prefix = query.prefix ?? "";
  const slash = prefix.lastIndexOf("/");
  const dir = slash < 0 ? "" : prefix.slice(0, slash);
  if (prefix.startsWith("/"))
    throw pathRefused("the prefix is absolute; name it inside the workspace");
  const dirParts = dir === "" ? [] : pathParts(dir);
  const namePrefix = prefix.slice(slash + 1);
  if (namePrefix.includes("\0")) throw pathRefused("the prefix holds a NUL byte");
  let after: readonly string[] | null = null;
  if (query.cursor !== undefined) {
    const parsed = parseWorkspacePath(query.cursor);
    if (parsed.kind === "Invalid") {
      throw validationFailed([{ path: "cursor", message: "is not a cursor this API returned" }]);
    }
    after = parsed.parts;
  }
  return listWorkspace(files, id, {
    dirParts,
    namePrefix,
    after,
    limit: query.limit ?? FILES_LIST_MAX,
  });
}

export function createFileRoutes(deps: ApiDeps) {
  const app = new Hono<ApiEnv>();
  const files: WorkspaceFilesDeps = deps.files;

  app.put("/v1/workloads/:id/files/:path{.+}", async function upload(c) {
    const id = c.req.param("id");
    const query = parseWith(UploadQuery, c.req.query());
    const workload = requireWorkload(deps, id);
    const raw = c.req.param("path");
    const parts = pathParts(raw);
    const mode = uploadMode(query.mode);
    const declared = c.req.header("content-length");
    if (declared !== undefined && Number(declared) > files.maxUploadBytes) {
      throw tooLarge(files.maxUploadBytes);
    }
    // Whose job it is decides who owns the upload: on a run_as = "owner" profile, the owner.
    const subject = { profile: workload.profile, owner: workload.owner ?? null };
    const target = beginUpload(files, id, subject, parts, mode, raw);
    try {
      const idleMs = c.env?.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
      await pumpBody(c.req.raw, files.maxUploadBytes, idleMs, (chunk) => target.write(chunk));
    } catch (error) {
      target.abandon();
      throw outOfSpace(error) ?? error;
    }
    const { sizeBytes } = target.commit();
    return c.json({ path: parts.join("/"), sizeBytes, mode: showMode(mode) }, 201);
  });

  app.get("/v1/workloads/:id/files", function list(c) {
    const id = c.req.param("id");
    const query = parseWith(FilesListQuery, c.req.query());
    requireWorkload(deps, id);
    return c.json(listFilesPage(files, id, query));
  });

  app.get("/v1/workloads/:id/files/:path{.+}", function download(c) {
    const id = c.req.param("id");
    requireWorkload(deps, id);
    const raw = c.req.param("path");
    const { fd, sizeBytes } = openForDownload(files, id, pathParts(raw), raw);
    const range = chooseRange(c.req.header("range"), sizeBytes);
    const headers: Record<string, string> = {
      "Content-Type": "application/octet-stream",
      "X-Content-Type-Options": "nosniff",
      "Cache-Control": "no-store",
      "Accept-Ranges": "bytes",
    };
    if (range.kind === "Unsatisfiable") {
      closeSync(fd);
      const response = new Response(
        JSON.stringify(
          new ApiError({
            status: 416,
            slug: "range-not-satisfiable",
            title: "Range not satisfiable",
            detail: `${raw} is ${sizeBytes} bytes; the range asked for lies outside it`,
          }).body(),
        ),
        { status: 416, headers: { "Content-Type": "application/problem+json" } },
      );
      response.headers.set("Content-Range", `bytes */${sizeBytes}`);
      return response;
    }
    const [startByte, endByte] =
      range.kind === "Part" ? [range.startByte, range.endByte] : [0, sizeBytes - 1];
    headers["Content-Length"] = String(Math.max(endByte + 1 - startByte, 0));
    if (range.kind === "Part")
      headers["Content-Range"] = `bytes ${startByte}-${endByte}/${sizeBytes}`;
    const status = range.kind === "Part" ? 206 : 200;
    if (c.req.method === "HEAD") {
      closeSync(fd);
      return new Response(null, { status, headers });
    }
    return new Response(downloadStream(fd, startByte, endByte), { status, headers });
  });

  app.delete("/v1/workloads/:id/files/:path{.+}", function remove(c) {
    const id = c.req.param("id");
    requireWorkload(deps, id);
    const raw = c.req.param("path");
    removeEntry(files, id, pathParts(raw), raw);
    return c.body(null, 204);
  });

  return app;
}
