/**
 * `POST /v1/backup`: a consistent copy of the store from the running daemon, as the
 * response body.
 *
 * Why `VACUUM INTO` in the daemon, and not a copy the client reads itself: it is one
 * read transaction (WAL lets the reconciler keep writing meanwhile), the result is a single
 * self-contained file (no -wal beside it to forget) that SQLite refuses to write over an
 * existing file, and it works for a client on another machine over TCP, which has no access
 * to the state dir. A client opening the database read-only would need the daemon's uid
 * and filesystem, and a plain file copy of a WAL database under load is not consistent.
 */
import { rm } from "node:fs/promises";
import { Hono } from "hono";
import type { DaemonMetrics } from "../../../adapters/metrics/daemon-metrics.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError } from "../problem.ts";
import { fileStream } from "./file-stream.ts";

const BACKUP_CONTENT_TYPE = "application/vnd.sqlite3";
/** One header per file to keep beside the copy: `NAME PATH`; secrets in their own header. */
export const KEEP_BESIDE_HEADER = "Openai4s-Keep-Beside";
export const KEEP_SECRET_HEADER = "Openai4s-Keep-Beside-Secret";

export function createBackupRoutes(deps: ApiDeps, metrics: DaemonMetrics) {
  const app = new Hono<ApiEnv>();

  app.post("/v1/backup", async function backup() {
    let path: string;
    try {
      path = deps.backup.snapshot();
    } catch (error) {
      deps.log.error("backup failed", { error: String(error) });
      throw new ApiError({
        status: 500,
        slug: "backup-failed",
        title: "Backup failed",
        detail: `the daemon could not write a copy of its store: ${String(error)}`,
      });
    }
    deps.log.info("backup taken", { bytes: Bun.file(path).size });
    const headers = new Headers({
      "Content-Type": BACKUP_CONTENT_TYPE,
      "Cache-Control": "no-store",
    });
    for (const keep of deps.backup.keepBeside()) {
      headers.append(
        keep.secret ? KEEP_SECRET_HEADER : KEEP_BESIDE_HEADER,
        `${keep.name} ${keep.path}`,
      );
    }
    // The copy is deleted as soon as it is open: nothing is left behind in the state dir,
    // whether the client reads it all or goes away (or the open itself fails).
    // The backup-age figure counts a copy only once its last byte left (a client that went
    // away half way has no backup).
    let body: ReadableStream<Uint8Array>;
    try {
      body = await fileStream(path, {
        unlinkAfterOpen: true,
        onEnd: () => {
          const at = deps.clock.now();
          metrics.lastBackupAt = at;
          try {
            deps.backup.recordTaken(at);
          } catch (error) {
            // The copy is whole; only its time is not kept for the next start.
            deps.log.error("could not record the backup's time", { error: String(error) });
          }
        },
      });
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
    return new Response(body, { status: 200, headers });
  });

  return app;
}
