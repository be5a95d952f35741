/**
 * `openai4s cp SRC DST`: a file into or out of a workload's workspace, `ID:path` naming the
 * workspace side (as scp names the remote one). Both directions stream: the upload body is
 * the file itself, read by the runtime as it sends; the download is written chunk by chunk
 * to a temporary file beside the destination and renamed over it only once complete, so a
 * lost connection never leaves half a result under the name a script reads.
 */
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  openSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseUploadMode } from "../../core/file-mode.ts";
import { type Command, UsageError } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  encodeId,
  printJson,
  reportFailure,
  systemRuntime,
} from "./client.ts";

const HELP = `Usage: openai4s cp [--mode MODE] SRC DST

Copy a file into or out of a workload's workspace. One side is ID:PATH, PATH relative to
the workspace (the job's working directory); the other is a local file.

  openai4s cp data.csv ID:data/in.csv         upload (parent directories are made)
  openai4s cp --mode 0600 token ID:.token     a secret only the job can read
  openai4s cp ID:results/out.csv .            download into a directory (or to a file name)

An upload into ID: or ID:dir/ keeps the local file's name. An upload replaces the file
atomically, and belongs to the uid the workload's job runs as. Paths leaving the workspace
(.., absolute) or passing through a symbolic link are refused. A local name that holds a
colon is written ./name:with-colon.

Options:
  --mode MODE   The file's permission bits in octal. Upload: default 0644; 0600 for
                secrets, uploaded before the job starts. Download: default 0600.
                Setuid, setgid, sticky and world-writable modes are refused.
${CLIENT_OPTIONS_HELP}`;

interface Remote {
  readonly id: string;
  readonly path: string;
}

/** `ID:path` (no slash before the colon, as scp has it), else null: a local path. */
function remoteOf(arg: string): Remote | null {
  const colon = arg.indexOf(":");
  if (colon <= 0 || arg.slice(0, colon).includes("/")) return null;
  return { id: arg.slice(0, colon), path: arg.slice(colon + 1) };
}

function encodePath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

export function createCpCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "cp",
    summary: "Copy a file into or out of a workload's workspace (ID:path)",
    help: HELP,
    options: { mode: { type: "string" } },
    async run({ values, positionals, io, json, connect }) {
      if (positionals.length !== 2)
        throw new UsageError("cp: give SRC and DST (one of them ID:PATH)");
      const [src, dst] = positionals as [string, string];
      const from = remoteOf(src);
      const to = remoteOf(dst);
      if ((from === null) === (to === null)) {
        throw new UsageError("cp: exactly one of SRC and DST must be ID:PATH (a workspace)");
      }
      // Checked here by the daemon's own rule: a download must not quietly ignore it either.
      const mode = values.mode === undefined ? null : parseUploadMode(values.mode);
      if (mode?.kind === "Refused") throw new UsageError(`cp: --mode ${mode.message}`);
      if (to !== null) {
        if (isDirectory(src))
          throw new UsageError(`cp: ${src} is a directory; copy files one at a time`);
        const path =
          to.path === "" || to.path.endsWith("/") ? `${to.path}${basename(src)}` : to.path;
        const query = values.mode === undefined ? "" : `?mode=${values.mode}`;
        const result = await (await connect()).send<{
          path: string;
          sizeBytes: number;
          mode: string;
        }>(
          "PUT",
          `/v1/workloads/${encodeId(to.id)}/files/${encodePath(path)}${query}`,
          Bun.file(src),
        );
        if (result.kind !== "Ok") return reportFailure("cp", result, io, json);
        if (json) printJson(io, result.body);
        else
          io.stdout(
            `${to.id}:${result.body.path} (${result.body.sizeBytes} bytes, ${result.body.mode})\n`,
          );
        return 0;
      }
      const remote = from as Remote;
      if (remote.path === "") throw new UsageError("cp: name a file after ID: to download");
      const target = isDirectory(dst) || dst.endsWith("/") ? join(dst, basename(remote.path)) : dst;
      const result = await (await connect()).stream(
        `/v1/workloads/${encodeId(remote.id)}/files/${encodePath(remote.path)}`,
      );
      if (result.kind !== "Ok") return reportFailure("cp", result, io, json);
      const temp = join(dirname(target), `.${basename(target)}.openai4s-cp-${process.pid}`);
      const fd = openSync(temp, "wx", 0o600);
      let sizeBytes = 0;
      try {
        // The mode asked, exactly (the umask would narrow a mode given to open).
        if (mode !== null) fchmodSync(fd, mode.bits);
        for await (const chunk of result.body) {
          for (let off = 0; off < chunk.byteLength; ) off += writeSync(fd, chunk, off);
          sizeBytes += chunk.byteLength;
        }
        fsyncSync(fd);
        closeSync(fd);
        renameSync(temp, target);
      } catch (error) {
        try {
          closeSync(fd);
        } catch {}
        unlinkSync(temp);
        throw error;
      }
      if (json) printJson(io, { path: target, sizeBytes });
      else io.stdout(`${target} (${sizeBytes} bytes)\n`);
      return 0;
    },
  });
}

export const cpCommand = createCpCommand();
