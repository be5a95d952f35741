import { Database } from "bun:sqlite";
import { closeSync, fsyncSync, openSync, rmSync, writeSync } from "node:fs";
import { resolve } from "node:path";
import { type Command, UsageError } from "../../lib/command/command.ts";
import { errorCode } from "../../lib/durable-fs.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  printJson,
  reportFailure,
  systemRuntime,
} from "./client.ts";

const HELP = `Usage: openai4s backup DEST

Take a consistent copy of the daemon's store (SQLite) while it runs, and write it to DEST.
DEST must not exist: a backup never overwrites anything. The copy is checked with
PRAGMA integrity_check before the command reports success.

The copy carries the backends' owner ids (a restored daemon needs them to recognise its
cluster jobs). It does not carry the files it names: keep them with it. Kept with the
copy: the gateway's TLS certificate (workers pin it) and the audit log (and its rotated
.1, .2 ... files). Secrets, kept only as privately as the copy itself, and only if you
may restore onto a fresh state dir: the admin token, the signing key of worker
credentials and the gateway's TLS key.
Restoring is described in docs/operations.md.

${CLIENT_OPTIONS_HELP}`;

/** `NAME PATH` header values: the files to keep beside the copy, secrets apart. */
const KEEP_BESIDE_HEADER = "Openai4s-Keep-Beside";
const KEEP_SECRET_HEADER = "Openai4s-Keep-Beside-Secret";

function namedFiles(headers: Headers, header: string): { name: string; path: string }[] {
  return (headers.get(header) ?? "")
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v !== "")
    .map((v) => {
      const cut = v.indexOf(" ");
      return { name: v.slice(0, cut), path: v.slice(cut + 1) };
    });
}

function integrity(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db.query("PRAGMA integrity_check").all() as Record<string, string>[];
    return rows.map((r) => Object.values(r)[0]).join("; ");
  } finally {
    db.close();
  }
}

function createBackupCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "backup",
    summary: "Copy the daemon's store while it runs (refuses to overwrite)",
    help: HELP,
    options: {},
    async run({ positionals, io, json, connect }) {
      const [given, ...extra] = positionals;
      if (given === undefined) throw new UsageError("backup: DEST is required");
      if (extra.length > 0) throw new UsageError(`backup: unexpected argument "${extra[0]}"`);
      const dest = resolve(runtime.cwd(), given);
      const client = await connect();
      let fd: number;
      try {
        // O_EXCL: the existence check and the creation are one step; 0600: the store holds
        // every workload's command and environment.
        fd = openSync(dest, "wx", 0o600);
      } catch (error) {
        const code = errorCode(error);
        if (code === "EEXIST") {
          throw new UsageError(`backup: ${given} exists; a backup never overwrites a file`);
        }
        io.stderr(`openai4s backup: cannot create ${given}: ${(error as Error).message}\n`);
        return 1;
      }
      let written = 0;
      let ok = false;
      try {
        const result = await client.stream("/v1/backup", "POST");
        if (result.kind !== "Ok") return reportFailure("backup", result, io, json);
        for await (const chunk of result.body) {
          let offset = 0;
          while (offset < chunk.byteLength) offset += writeSync(fd, chunk, offset);
          written += chunk.byteLength;
        }
        fsyncSync(fd);
        closeSync(fd);
        fd = -1;
        const check = integrity(dest);
        if (check !== "ok") {
          io.stderr(`openai4s backup: the copy failed integrity_check: ${check}\n`);
          return 1;
        }
        ok = true;
        const keep = namedFiles(result.headers, KEEP_BESIDE_HEADER);
        const secrets = namedFiles(result.headers, KEEP_SECRET_HEADER);
        if (json) {
          printJson(io, {
            path: dest,
            bytes: written,
            integrityCheck: check,
            keepBeside: keep,
            keepBesideSecret: secrets,
          });
          return 0;
        }
        const listed = (files: { name: string; path: string }[]) =>
          files.map((k) => `  ${k.name.padEnd(16)} ${k.path}`);
        io.stdout(
          [
            `backup written to ${dest} (${written} bytes, integrity_check ok; owner ids inside)`,
            ...(keep.length === 0 ? [] : ["Keep with it (a restored daemon needs them):"]),
            ...listed(keep),
            ...(secrets.length === 0
              ? []
              : [
                  "Secrets: keep them as privately as the copy, for a restore onto a fresh state dir:",
                ]),
            ...listed(secrets),
            "Restore: docs/operations.md, section Backup and restore.",
            "",
          ].join("\n"),
        );
        return 0;
      } finally {
        if (fd >= 0) closeSync(fd);
        // Never leave a partial or broken copy that looks like a backup.
        if (!ok) rmSync(dest, { force: true });
      }
    },
  });
}

export const backupCommand = createBackupCommand();
