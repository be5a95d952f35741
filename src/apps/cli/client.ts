/**
 * What every client command shares: where the daemon is (`--server`, `$OPENAI4S_SERVER`,
 * else the default socket of the default state dir), the token (`--token-file`,
 * `$OPENAI4S_TOKEN`), one request function that turns transport failures and problem+json
 * into values, and the rendering of problems for humans.
 */
import type { ParseArgsConfig } from "node:util";
import { type Command, type CommandIo, UsageError } from "../../lib/command/command.ts";
import { parseStrict } from "../../lib/command/parse-args.ts";
import { joinPath, resolveFrom } from "../../lib/posix-path.ts";
import type { ListedProfileView } from "../../servers/http/profiles/profile-view.ts";
import type { EventView, WorkloadView } from "../../servers/http/views.ts";
import { resolveStateDir } from "../daemon/state-dir-path.ts";
import {
  type ApiClient,
  type ApiResult,
  type ClientFetch,
  createClient,
  type Problem,
  SERVER_ENV,
  type ServerAddress,
  type WholeFetch,
} from "./api-client.ts";
import { CLIENT_CONFIG_ENV, DEFAULT_CLIENT_CONFIG, readClientConfig } from "./client-config.ts";
import { http1Fetch } from "./http1-fetch.ts";
import { mungeSigner } from "./munge-sign.ts";
import { fallbackClient } from "./site-daemon.ts";

const TOKEN_ENV = "OPENAI4S_TOKEN";

/** The process-level things a client command touches, injectable for tests. */
export interface ClientRuntime {
  readonly fetch: ClientFetch;
  /** For answers read whole: HTTP/1.1 on Bun.connect, without fetch's start-up (http1-fetch.ts). */
  readonly fetchWhole?: WholeFetch;
  readonly homeDir: () => string;
  readonly cwd: () => string;
  /** A file's text; rejects as the file system does (ENOENT, EACCES...). */
  readonly readFile: (path: string) => Promise<string>;
  /** Whether a file is there, without the cost of a failed read's error. */
  readonly fileExists: (path: string) => Promise<boolean>;
  /** Whether stdout is a terminal (live status lines) . */
  readonly isTty: () => boolean;
  readonly sleep: (ms: number) => Promise<void>;
  /** Epoch milliseconds. */
  readonly now: () => number;
}

// No `node:fs` and no `node:os` on a short command's path: loading node:fs alone cost
// `openai4s list` 2–3 ms of its 12 ms past the runtime's start (issue 34, measured in the
// binary); Bun.file reads the few files a client reads.
export const systemRuntime: ClientRuntime = {
  fetch: (url, init) => fetch(url, init),
  fetchWhole: (url, init) => http1Fetch(url, init),
  homeDir: () => process.getBuiltinModule("node:os").homedir(),
  cwd: () => process.cwd(),
  readFile: (path) => Bun.file(path).text(),
  fileExists: (path) => Bun.file(path).exists(),
  isTty: () => process.stdout.isTTY === true,
  // Loaded when a command first waits (wait, exec's polling): not on every short command's path.
  sleep: async (ms) => (await import("../../lib/clock.ts")).sleep(ms),
  now: () => Date.now(),
};

/** Options every client command accepts. */
const CLIENT_OPTIONS = {
  server: { type: "string" },
  "token-file": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies NonNullable<ParseArgsConfig["options"]>;

export const CLIENT_OPTIONS_HELP = `Connection:
  --server ADDR        unix:PATH or http://HOST:PORT (else $OPENAI4S_SERVER, else the
                       socket of the default state dir).
  --token-file FILE    Token for a TCP server: the admin's or a principal's (else
                       $OPENAI4S_TOKEN).
  --json               Print the API's JSON body instead of text.
  -h, --help           Show this help.
Exit codes: 0 success, 1 operation failed, 2 usage or configuration error.
`;

type CommandOptions = NonNullable<ParseArgsConfig["options"]>;

/** parseArgs, strict, with every failure turned into a usage error naming the command. */
function parseCommandArgs<const O extends CommandOptions>(
  command: string,
  args: readonly string[],
  options: O,
) {
  return parseStrict(command, args, { ...CLIENT_OPTIONS, ...options });
}

interface ClientOptionValues {
  readonly server?: string | undefined;
  readonly "token-file"?: string | undefined;
  readonly json?: boolean | undefined;
  readonly help?: boolean | undefined;
}

/** What a client command's body gets: its parsed arguments and a way to reach the daemon. */
export type ClientInvocation<O extends CommandOptions> = ReturnType<typeof parseCommandArgs<O>> & {
  readonly io: CommandIo;
  /** `--json`: print the API's body instead of text. */
  readonly json: boolean;
  /**
   * Resolves `--server` and `--token-file` into a client. Called by the body after its own
   * argument checks, so that a bad argument is reported as such and not as whatever the
   * connection flags happen to get wrong.
   */
  readonly connect: () => Promise<ApiClient>;
};

export interface ClientCommandSpec<O extends CommandOptions> {
  readonly name: string;
  readonly summary: string;
  /** Printed for `-h`/`--help` (exit 0) instead of running the command. */
  readonly help: string;
  /** The command's own options; the connection options are added to them. */
  readonly options: O;
  readonly run: (invocation: ClientInvocation<O>) => Promise<number>;
}

/**
 * A command that talks to the daemon. Every such command parses its arguments the same way
 * (strictly, usage errors naming the command), answers `--help` the same way, and resolves
 * the connection flags the same way: one place, so that no command drifts from the others.
 */
export function createClientCommand<const O extends CommandOptions>(
  runtime: ClientRuntime,
  spec: ClientCommandSpec<O>,
): Command {
  return {
    name: spec.name,
    summary: spec.summary,
    async run(args, io) {
      const parsed = parseCommandArgs(spec.name, args, spec.options);
      // The CLIENT_OPTIONS are in every parse; TypeScript cannot see that through generic O.
      const common = parsed.values as ClientOptionValues;
      if (common.help) {
        io.stdout(spec.help);
        return 0;
      }
      return spec.run({
        ...parsed,
        io,
        json: common.json === true,
        connect: () => connect(common, io, runtime),
      });
    },
  };
}

export function resolveServer(
  flag: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  runtime: Pick<ClientRuntime, "homeDir" | "cwd">,
): ServerAddress {
  const fromFlag = flag !== undefined;
  const raw = flag ?? (env[SERVER_ENV] === "" ? undefined : env[SERVER_ENV]);
  if (raw === undefined) {
    const stateDir = resolveStateDir({
      flag: undefined,
      env,
      // os.homedir() answers $HOME when it is set: asked only without it (node:os costs a
      // short command about a millisecond to load).
      homeDir: env["HOME"] || runtime.homeDir(),
      cwd: runtime.cwd,
    });
    return { kind: "unix", path: joinPath(stateDir.path, "api.sock") };
  }
  const where = fromFlag ? "--server" : `$${SERVER_ENV}`;
  if (raw.startsWith("unix:")) {
    const path = raw.slice("unix:".length);
    if (path === "") throw new UsageError(`${where}: unix: needs a socket path`);
    return { kind: "unix", path: resolveFrom(runtime.cwd, path) };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`${where}: "${raw}" is neither unix:PATH nor http://HOST:PORT`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`${where}: "${raw}" is neither unix:PATH nor http://HOST:PORT`);
  }
  return { kind: "http", baseUrl: url.origin };
}

export async function resolveToken(
  flag: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  runtime: Pick<ClientRuntime, "readFile" | "cwd">,
): Promise<string | null> {
  if (flag !== undefined) {
    let text: string;
    try {
      text = await runtime.readFile(resolveFrom(runtime.cwd, flag));
    } catch (error) {
      throw new UsageError(`--token-file: cannot read ${flag}: ${(error as Error).message}`);
    }
    const token = text.trim();
    if (token === "") throw new UsageError(`--token-file: ${flag} is empty`);
    return token;
  }
  const fromEnv = env[TOKEN_ENV];
  return fromEnv === undefined || fromEnv === "" ? null : fromEnv.trim();
}

/**
 * Connection flags to a client; usage errors name the flag. No `--server` (nor
 * `$OPENAI4S_SERVER`): the user's own daemon, then the site's, as its client settings list
 * them (site-daemon.ts). No token: a MUNGE credential per request where the site says so.
 */
export async function connect(
  values: Pick<ClientOptionValues, "server" | "token-file">,
  io: CommandIo,
  runtime: ClientRuntime,
): Promise<ApiClient> {
  const server = resolveServer(values.server, io.env, runtime);
  const token = await resolveToken(values["token-file"], io.env, runtime);
  const site = await readClientConfig(io.env, runtime);
  const mungeOn = site.munge || /^(1|on|true|yes)$/i.test(io.env[MUNGE_ENV] ?? "");
  const sign = token === null && mungeOn ? mungeSigner(site.mungeSocket) : undefined;
  const explicit = values.server !== undefined || nonEmptyEnv(io.env[SERVER_ENV]);
  if (explicit) return createClient(server, token, runtime, sign);
  const addresses: ServerAddress[] = [server];
  for (const path of [site.adminSocket, site.socket]) {
    if (path !== null && path !== (server.kind === "unix" ? server.path : null)) {
      addresses.push({ kind: "unix", path });
    }
  }
  if (site.server !== null) addresses.push({ kind: "http", baseUrl: new URL(site.server).origin });
  const settingsFile = nonEmptyEnv(io.env[CLIENT_CONFIG_ENV])
    ? (io.env[CLIENT_CONFIG_ENV] as string)
    : DEFAULT_CLIENT_CONFIG;
  return fallbackClient(
    addresses.map((a) => createClient(a, token, runtime, sign)),
    settingsFile,
    addresses.length > 1 || site.munge,
  );
}

/** `$OPENAI4S_MUNGE=1`: prove the user with MUNGE though the site's settings do not say so. */
const MUNGE_ENV = "OPENAI4S_MUNGE";

function nonEmptyEnv(value: string | undefined): boolean {
  return value !== undefined && value !== "";
}

export function renderProblem(command: string, problem: Problem): string {
  const lines = [`openai4s ${command}: ${problem.detail || problem.title}`];
  if (problem.reason !== undefined) lines.push(`  reason: ${problem.reason}`);
  for (const e of problem.errors ?? []) lines.push(`  ${e.path || "(body)"}: ${e.message}`);
  // The daemon's words name an HTTP header; a person at a shell needs the CLI's own ways.
  if (problem.status === 401) lines.push(TOKEN_HINT);
  return `${lines.join("\n")}\n`;
}

const TOKEN_HINT =
  "  hint: give a token with --token-file FILE or the OPENAI4S_TOKEN variable: the admin's is\n" +
  "        STATE_DIR/admin-token on the daemon's host, a principal's comes from\n" +
  "        `openai4s token issue NAME`";

/**
 * 400 and 401 are the caller's input or configuration (exit 2); everything else the daemon
 * refused or failed is an operation that failed (exit 1).
 */
export function problemExitCode(status: number): 1 | 2 {
  return status === 400 || status === 401 || status === 413 ? 2 : 1;
}

/**
 * Reports a non-Ok result and returns its exit code. With --json the problem body is the
 * output, exactly as the API sent it.
 */
export function reportFailure(
  command: string,
  result: Exclude<ApiResult<unknown>, { kind: "Ok" }>,
  io: CommandIo,
  json: boolean,
): number {
  switch (result.kind) {
    case "Unreachable":
      io.stderr(`openai4s ${command}: ${result.message}\n`);
      return 1;
    case "Problem":
      if (json) io.stdout(`${JSON.stringify(result.problem, null, 2)}\n`);
      else io.stderr(renderProblem(command, result.problem));
      return problemExitCode(result.status);
    default: {
      const never: never = result;
      throw new Error(`unhandled result ${JSON.stringify(never)}`);
    }
  }
}

export function printJson(io: CommandIo, body: unknown): void {
  io.stdout(`${JSON.stringify(body, null, 2)}\n`);
}

/** Fixed-width columns for human output; the last column is not padded. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join("\n")}\n`;
}

/**
 * The shapes of INTERFACE.md the client reads: the daemon's own view types (type-only, so
 * nothing of the server is loaded), one definition of the wire format for both ends.
 */
export type WorkloadBody = WorkloadView;
export type ProfileBody = ListedProfileView;
export type EventBody = EventView;

/** The profile to use when none was named: `default` if it fits, else the first that does. */
async function pickProfile(
  client: ApiClient,
  kind: "BATCH" | "SESSION",
): Promise<ApiResult<string | null>> {
  const result = await client.request<{ profiles: readonly ProfileBody[] }>("GET", "/v1/profiles");
  if (result.kind !== "Ok") return result;
  const fitting = result.body.profiles.filter((p) => p.kinds.includes(kind));
  const chosen = fitting.find((p) => p.name === "default") ?? fitting[0];
  return { kind: "Ok", status: result.status, body: chosen?.name ?? null };
}

export interface NewWorkload {
  /** The command as the user typed it, for messages: `submit`, `session start`. */
  readonly command: string;
  readonly kind: "BATCH" | "SESSION";
  /** Every field of the request body but `kind` and `profile`. */
  readonly fields: Readonly<Record<string, unknown>>;
  /** `--profile`; when absent, `pickProfile` chooses one for `kind`. */
  readonly profile: string | undefined;
  readonly idempotencyKey: string | undefined;
}

/**
 * `POST /v1/workloads` for `submit` and `session start`, which differ only in the body they
 * build: picks the profile when none was named, sends the idempotency key, and prints the
 * new workload's id (its body with --json). Returns the exit code.
 */
export async function createWorkload(
  client: ApiClient,
  workload: NewWorkload,
  io: CommandIo,
  json: boolean,
): Promise<number> {
  const { command, kind } = workload;
  let profile = workload.profile;
  if (profile === undefined) {
    const picked = await pickProfile(client, kind);
    if (picked.kind !== "Ok") return reportFailure(command, picked, io, json);
    if (picked.body === null) {
      io.stderr(`openai4s ${command}: the daemon offers no profile that accepts ${kind}\n`);
      return 1;
    }
    profile = picked.body;
  }
  const key = workload.idempotencyKey;
  const result = await client.request<WorkloadBody>("POST", "/v1/workloads", {
    body: { kind, ...workload.fields, profile },
    ...(key !== undefined ? { headers: { "Idempotency-Key": key } } : {}),
  });
  if (result.kind !== "Ok") return reportFailure(command, result, io, json);
  if (json) printJson(io, result.body);
  else io.stdout(`${result.body.id}\n`);
  return 0;
}

/** Validates a workload id argument's presence (its existence is the daemon's answer). */
export function oneId(command: string, positionals: readonly string[]): string {
  if (positionals.length === 0) throw new UsageError(`${command}: a workload ID is required`);
  if (positionals.length > 1) {
    throw new UsageError(`${command}: unexpected argument "${positionals[1]}"`);
  }
  return positionals[0] as string;
}

export function encodeId(id: string): string {
  return encodeURIComponent(id);
}
