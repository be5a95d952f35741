import { type Command, type CommandIo, UsageError } from "../../lib/command/command.ts";
import { resolvePath } from "../../lib/posix-path.ts";
import type { ExecResponseBody } from "../../servers/http/workloads/exec-schemas.ts";
import type { ApiClient } from "./api-client.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  encodeId,
  printJson,
  reportFailure,
  systemRuntime,
} from "./client.ts";
import { parseDurationFlag } from "./duration.ts";

const HELP = `Usage: openai4s exec ID CODE [--timeout DURATION] [--save-images DIR]

Run CODE in the kernel of READY session ID. What the code prints is shown as it happens;
then the value of its last expression. Counts as activity, so it keeps the session from
being reclaimed as idle. Stopping this command (Ctrl-C, a lost connection) leaves the code
running, as a notebook's cell keeps running when its tab closes: \`openai4s interrupt ID\`
stops it, and its output can be read again through the API by its cell id (docs/sessions.md).
A cell has no time limit of its own unless --timeout gives one; the session's lifetime and
its job's time limit still apply.
Exit status 1 when the code raised an error (printed on stderr) or the session is not READY.

  --timeout DURATION   The cell's own limit (seconds as 90, or 15m, 2h, MM:SS, HH:MM:SS): past it the
                       code is interrupted, and its kernel restarted if the interrupt does
                       not stop it; the output until then is printed, then a CellTimeout
                       error (exit 1).

  --save-images DIR    Write each image the code displays (matplotlib figures, objects
                       with _repr_png_) to DIR as a PNG file and print its path. DIR is
                       created when missing; when it cannot be, the code does not run
                       (exit 1). An image that cannot be written makes the exit status 1.

With --json the command waits for the end and prints the API's JSON answer, outputs
included (images as base64).

${CLIENT_OPTIONS_HELP}`;

type Bundle = Readonly<Record<string, string>>;

export function createExecCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "exec",
    summary: "Run code in a READY session's kernel",
    help: HELP,
    options: { "save-images": { type: "string" }, timeout: { type: "string" } },
    async run({ positionals, values, io, json, connect }) {
      if (positionals.length !== 2) {
        throw new UsageError("exec: expected exactly two arguments: ID CODE");
      }
      const [id, code] = positionals as [string, string];
      const timeoutSeconds = parseDurationFlag("exec", "--timeout", values.timeout);
      if (timeoutSeconds === 0) throw new UsageError("exec: --timeout must be at least 1 s");
      const request = { code, ...(timeoutSeconds !== undefined && { timeoutSeconds }) };
      const imagesDir = values["save-images"];
      if (imagesDir === "") throw new UsageError("exec: --save-images needs a directory");
      const images = imagesDir === undefined ? null : imageSaver(imagesDir, runtime);
      // Before the code runs: a missing directory made `exec` print an error, exit 0 and
      // lose the figure (issue 19). Created here, or the command stops with nothing run.
      const unusable = images?.prepare() ?? null;
      if (unusable !== null) {
        io.stderr(`openai4s exec: ${unusable}\n`);
        return 1;
      }
      const client = await connect();
      const exit = json
        ? await runJson(client, id, request, io, images)
        : await runStreaming(client, id, request, io, images);
      // An image that could not be written is lost output: never exit 0 after it.
      return images?.failed() ? 1 : exit;
    },
  });
}

/** The exec request's body. */
interface ExecRequest {
  readonly code: string;
  readonly timeoutSeconds?: number;
}

async function runJson(
  client: ApiClient,
  id: string,
  request: ExecRequest,
  io: CommandIo,
  images: ImageSaver | null,
): Promise<number> {
  const result = await client.request<ExecResponseBody>(
    "POST",
    `/v1/workloads/${encodeId(id)}/exec`,
    { body: request },
  );
  if (result.kind !== "Ok") return reportFailure("exec", result, io, true);
  printJson(io, result.body);
  for (const output of result.body.outputs ?? []) {
    if (output.type === "display_data" || output.type === "execute_result") {
      images?.save(output.data, (line) => io.stderr(line));
    }
  }
  return result.body.status === "OK" ? 0 : 1;
}

/** Reads the server-sent events of a streaming exec and prints each as it comes. */
async function runStreaming(
  client: ApiClient,
  id: string,
  request: ExecRequest,
  io: CommandIo,
  images: ImageSaver | null,
): Promise<number> {
  const opened = await client.open("POST", `/v1/workloads/${encodeId(id)}/exec?stream=1`, {
    body: request,
    headers: { Accept: "text/event-stream" },
  });
  if (opened.kind !== "Ok") return reportFailure("exec", opened, io, false);
  const body = opened.body.body;
  if (!body) {
    io.stderr("openai4s exec: the daemon answered without a body\n");
    return 1;
  }
  // Whether the last thing printed on stdout ended its line: a value comes after output
  // on a line of its own, and the shell prompt never runs into what was printed.
  let stdoutAtLineStart = true;
  const out = (text: string) => {
    if (text === "") return;
    io.stdout(text);
    stdoutAtLineStart = text.endsWith("\n");
  };
  const line = (text: string) => out(`${stdoutAtLineStart ? "" : "\n"}${text}\n`);
  let exit: number | null = null;
  for await (const event of serverSentEvents(body)) {
    const data = event.data as Record<string, unknown>;
    switch (event.event) {
      case "stdout":
        out(String(data["text"] ?? ""));
        break;
      case "stderr":
        io.stderr(String(data["text"] ?? ""));
        break;
      case "dropped":
        io.stderr(`${String(data["message"] ?? "[output dropped]")}\n`);
        break;
      case "display":
        showBundle(data["data"] as Bundle, line, images, io);
        break;
      case "kernel":
        io.stderr(`[${String(data["message"] ?? "the kernel is restarting")}]\n`);
        break;
      case "result":
        restartNote(data, io);
        if (data["data"]) showBundle(data["data"] as Bundle, line, images, io);
        exit = 0;
        break;
      case "error":
        restartNote(data, io);
        io.stderr(String(data["traceback"] ?? data["evalue"] ?? "error").replace(/\n?$/, "\n"));
        exit = 1;
        break;
      default:
        break; // a newer daemon's event: nothing this client knows to show
    }
  }
  if (!stdoutAtLineStart) io.stdout("\n");
  if (exit === null) {
    io.stderr("openai4s exec: the answer ended before the result (the daemon went away?)\n");
    return 1;
  }
  return exit;
}

function restartNote(data: Record<string, unknown>, io: CommandIo): void {
  if (data["kernelRestarted"] === true) {
    io.stderr(
      "openai4s exec: the kernel had died and was restarted for this code; earlier variables are gone\n",
    );
  }
}

/** The text of a bundle; its image saved and its path printed when asked to. */
function showBundle(
  bundle: Bundle,
  line: (text: string) => void,
  images: ImageSaver | null,
  io: CommandIo,
): void {
  const saved = images?.save(bundle, (text) => io.stderr(text)) ?? null;
  if (saved !== null) line(saved);
  else line(bundle["text/plain"] ?? "");
}

interface ImageSaver {
  /** Creates the directory when missing; the reason it cannot be used, or null. */
  prepare(): string | null;
  /** Writes the bundle's image/png, returns its path (null: none, or it failed). */
  save(bundle: Bundle, warn: (text: string) => void): string | null;
  /** Whether any image could not be written. */
  failed(): boolean;
}

function imageSaver(dir: string, runtime: ClientRuntime): ImageSaver {
  const prefix = `exec-${runtime.now()}`;
  const absolute = resolvePath(runtime.cwd(), dir);
  // Loaded here, not imported: node:fs costs every `exec` of an agent 2–3 ms of start-up
  // (issue 34), and only --save-images writes a file.
  const { mkdirSync, writeFileSync } = process.getBuiltinModule("node:fs");
  let count = 0;
  let failures = 0;
  return {
    prepare() {
      try {
        mkdirSync(absolute, { recursive: true, mode: 0o755 });
        return null;
      } catch (error) {
        return `--save-images: cannot create ${absolute}: ${(error as Error).message}`;
      }
    },
    failed: () => failures > 0,
    save(bundle, warn) {
      const png = bundle["image/png"];
      if (png === undefined) return null;
      count += 1;
      const path = resolvePath(absolute, `${prefix}-${count}.png`);
      try {
        // "wx": never overwrite a file that is already there.
        writeFileSync(path, Buffer.from(png, "base64"), { flag: "wx", mode: 0o644 });
        return path;
      } catch (error) {
        failures += 1;
        warn(`openai4s exec: cannot save an image to ${path}: ${(error as Error).message}\n`);
        return null;
      }
    },
  };
}

export interface ServerSentEvent {
  readonly event: string;
  readonly data: unknown;
}

/** Parses `event:`/`data:` blocks; comments (keepalives) and unparseable data are skipped. */
async function* serverSentEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
      let event = "message";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length === 0) continue;
      try {
        yield { event, data: JSON.parse(data.join("\n")) };
      } catch {
        // not JSON: not ours to show
      }
    }
  }
}

export const execCommand = createExecCommand();
