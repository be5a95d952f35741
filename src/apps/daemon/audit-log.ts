/**
 * The audit log (issue 22): every state-changing API request as one JSON line in
 * STATE_DIR/audit.log (0600), appended with O_APPEND and rotated by size to audit.log.1 ...
 * audit.log.N (the oldest dropped), so it can neither fill the disk nor be rewritten by
 * the API. Never holds a token: a principal's token is named by its id.
 */
import {
  appendFileSync,
  existsSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
} from "node:fs";
import type { AuditEntry, AuditLog, AuditQuery } from "../../servers/http/deps.ts";

export interface AuditLogOptions {
  readonly path: string;
  /** Rotate once the current file reaches this size (default 16 MiB). */
  readonly maxBytes?: number;
  /** Rotated files kept besides the current one (default 4). */
  readonly keep?: number;
}

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;
const DEFAULT_KEEP = 4;

export function fileAuditLog(options: AuditLogOptions): AuditLog {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const keep = options.keep ?? DEFAULT_KEEP;
  const path = options.path;
  let size = existsSync(path) ? statSync(path).size : 0;
  const rotated = (n: number) => `${path}.${n}`;

  function rotate(): void {
    rmSync(rotated(keep), { force: true });
    for (let n = keep - 1; n >= 1; n--) {
      if (existsSync(rotated(n))) renameSync(rotated(n), rotated(n + 1));
    }
    if (existsSync(path)) renameSync(path, rotated(1));
    size = 0;
  }

  return {
    append(entry) {
      const line = `${JSON.stringify(entry)}\n`;
      if (size > 0 && size + line.length > maxBytes) rotate();
      // Its length now, from the file itself: what a failed append is cut back to.
      const before = existsSync(path) ? statSync(path).size : 0;
      try {
        appendFileSync(path, line, { mode: 0o600 });
      } catch (error) {
        // A write that fails for want of space can land in part (the rest of the file's
        // last page): the torn line then ran into the next entry and every later read of
        // the log threw, so GET /v1/audit answered 500 after a full state dir (issue 33).
        // Cut it back to the last whole line; the error names the file.
        try {
          truncateSync(path, before);
        } catch {
          // Nothing more to undo here; the read below would still refuse a torn line.
        }
        throw Object.assign(new Error(`cannot append to the audit log ${path}: ${String(error)}`), {
          code: (error as { readonly code?: unknown }).code,
        });
      }
      size += Buffer.byteLength(line);
    },
    read(query) {
      const files = [...Array.from({ length: keep }, (_, i) => rotated(keep - i)), path];
      const out: AuditEntry[] = [];
      for (const file of files) {
        if (!existsSync(file)) continue;
        for (const line of readFileSync(file, "utf8").split("\n")) {
          if (line === "") continue;
          const entry = JSON.parse(line) as AuditEntry;
          if (matches(entry, query)) out.push(entry);
        }
      }
      return out.slice(-query.limit);
    },
  };
}

function matches(entry: AuditEntry, query: AuditQuery): boolean {
  if (query.principal !== undefined && entry.principal !== query.principal) return false;
  if (query.sinceMs !== undefined && Date.parse(entry.at) < query.sinceMs) return false;
  return true;
}
