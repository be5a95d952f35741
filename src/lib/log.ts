/**
 * Structured logging, injected. One JSON object per line on stderr by default. Nothing that
 * is a secret (credential signatures, the signing key, the admin token) may be passed here.
 */
export type LogFields = Readonly<Record<string, unknown>>;

export interface Log {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40 };

export function jsonLog(
  write: (line: string) => void,
  options: { readonly level?: LogLevel; readonly now?: () => number } = {},
): Log {
  const min = ORDER[options.level ?? "info"];
  const now = options.now ?? Date.now;
  const emit = (level: LogLevel) => (message: string, fields?: LogFields) => {
    if (ORDER[level] < min) return;
    write(`${JSON.stringify({ at: new Date(now()).toISOString(), level, message, ...fields })}\n`);
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

export const silentLog: Log = { debug() {}, info() {}, warn() {}, error() {} };

/** A log that remembers its lines, for tests that assert on what was (not) logged. */
export function memoryLog(): Log & { readonly lines: string[] } {
  const lines: string[] = [];
  return { ...jsonLog((l) => lines.push(l), { level: "debug" }), lines };
}
