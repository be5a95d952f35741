/**
 * `resolve`, `join` and `isAbsolute` of POSIX paths, as node:path gives them, for the
 * client's start-up path: evaluating `node:path` costs a short command about a quarter of a
 * millisecond of CPU, and `openai4s list` needs only these three (bench/startup.bench.ts).
 * test/cli/posix-path.test.ts holds them to node:path's answers.
 */

export function isAbsolutePath(path: string): boolean {
  return path.startsWith("/");
}

/** `.` and `..` applied, repeated and trailing slashes dropped; "" stays "." as in node. */
function normalize(path: string): string {
  const absolute = isAbsolutePath(path);
  const parts: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (parts.length > 0 && parts[parts.length - 1] !== "..") parts.pop();
      else if (!absolute) parts.push("..");
      continue;
    }
    parts.push(part);
  }
  const joined = parts.join("/");
  if (absolute) return `/${joined}`;
  return joined === "" ? "." : joined;
}

/** As node's `join`, a trailing slash kept (`resolvePath` drops it, as node's `resolve`). */
export function joinPath(...parts: readonly string[]): string {
  const joined = parts.filter((p) => p !== "").join("/");
  if (joined === "") return ".";
  const normal = normalize(joined);
  return joined.endsWith("/") && normal !== "/" ? `${normal}/` : normal;
}

/** `path` against `base` (an absolute directory, e.g. the working directory). */
export function resolvePath(base: string, path: string): string {
  return resolveFrom(() => base, path);
}

/**
 * As `resolvePath`, the base asked for only when `path` is relative: `process.cwd()` costs
 * a short command 0.2 ms on its first call (issue 34), and most paths given are absolute.
 */
export function resolveFrom(base: () => string, path: string): string {
  return normalize(isAbsolutePath(path) ? path : `${base()}/${path}`);
}
