/**
 * The site's client settings (issue 32): where the site's daemon is and how its users prove
 * who they are, in one system-wide file the admin installs next to the daemon's unit
 * (`/etc/openai4s/client.toml`; `$OPENAI4S_CLIENT_CONFIG` names another, for tests and
 * for sites that keep it elsewhere). Every key is optional; an unknown key or a value of
 * the wrong type is refused naming the file and the key, never guessed around.
 *
 *   admin_socket = "/var/lib/openai4s/api.sock"   # the admin's socket (0600, the unit's)
 *   socket = "/run/openai4s/users.sock"           # the users' socket (serve --users-socket)
 *   server = "https://login1.example.org:8470"     # the daemon over TCP
 *   munge = true                                    # prove the user with MUNGE, no token
 *   munge_socket = "/run/munge/munge.socket.2"     # munged's socket, if not the default
 */
import { UsageError } from "../../lib/command/command.ts";

export const CLIENT_CONFIG_ENV = "OPENAI4S_CLIENT_CONFIG";
export const DEFAULT_CLIENT_CONFIG = "/etc/openai4s/client.toml";

export interface ClientConfig {
  readonly adminSocket: string | null;
  readonly socket: string | null;
  readonly server: string | null;
  readonly munge: boolean;
  readonly mungeSocket: string | null;
}

export const NO_CLIENT_CONFIG: ClientConfig = Object.freeze({
  adminSocket: null,
  socket: null,
  server: null,
  munge: false,
  mungeSocket: null,
});

const KEYS = ["admin_socket", "socket", "server", "munge", "munge_socket"] as const;

/** How the settings file is read (the client's runtime; a test's own files). */
export interface ConfigFiles {
  /** The file's text; rejects as the file system does (ENOENT, EACCES, EISDIR...). */
  readonly readFile: (path: string) => Promise<string>;
  /** Whether a file is there: a read that fails costs an error object, 1–3 ms of a command. */
  readonly fileExists: (path: string) => Promise<boolean>;
}

/** The file's settings; a missing file is no settings (the personal daemon's socket). */
export async function readClientConfig(
  env: Readonly<Record<string, string | undefined>>,
  files: ConfigFiles,
): Promise<ClientConfig> {
  const given = env[CLIENT_CONFIG_ENV];
  const path = given === undefined || given === "" ? DEFAULT_CLIENT_CONFIG : given;
  // Every command of a machine without a site daemon asks: the cheap question first.
  if (path === DEFAULT_CLIENT_CONFIG && !(await files.fileExists(path))) return NO_CLIENT_CONFIG;
  let text: string;
  try {
    text = await files.readFile(path);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    // The default file is absent on a machine with no site daemon; one named is required.
    if (code === "ENOENT" && path === DEFAULT_CLIENT_CONFIG) return NO_CLIENT_CONFIG;
    throw new UsageError(`cannot read ${path}: ${(error as Error).message}`);
  }
  // Loaded only where a site has the file: the parser is most of a short command's code.
  const { parse } = await import("smol-toml");
  let table: Record<string, unknown>;
  try {
    table = parse(text) as Record<string, unknown>;
  } catch (error) {
    throw new UsageError(`${path}: ${(error as Error).message.split("\n")[0]}`);
  }
  for (const key of Object.keys(table)) {
    if (!(KEYS as readonly string[]).includes(key)) {
      throw new UsageError(`${path}: unknown key "${key}" (known: ${KEYS.join(", ")})`);
    }
  }
  const str = (key: string): string | null => {
    const value = table[key];
    if (value === undefined) return null;
    if (typeof value !== "string" || value === "") {
      throw new UsageError(`${path}: ${key} must be a non-empty string`);
    }
    return value;
  };
  const socketPath = (key: string): string | null => {
    const value = str(key);
    if (value !== null && !value.startsWith("/")) {
      throw new UsageError(`${path}: ${key} must be an absolute path`);
    }
    return value;
  };
  const munge = table.munge ?? false;
  if (typeof munge !== "boolean") throw new UsageError(`${path}: munge must be true or false`);
  const server = str("server");
  if (server !== null && !/^https?:\/\/[^/]+/.test(server)) {
    throw new UsageError(`${path}: server must be http://HOST:PORT or https://HOST:PORT`);
  }
  return {
    adminSocket: socketPath("admin_socket"),
    socket: socketPath("socket"),
    server,
    munge,
    mungeSocket: socketPath("munge_socket"),
  };
}
