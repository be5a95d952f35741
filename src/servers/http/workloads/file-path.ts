/**
 * A path inside a workload's workspace as a client names it (`PUT .../files/data/in.csv`):
 * relative, made of plain components. Everything else is refused before any file is
 * touched: `..` and `.` (a way out, or a second name for the same file), an absolute path or
 * an empty component, NUL (C truncates there), names longer than the kernel takes.
 */

/** Linux's NAME_MAX and PATH_MAX, in bytes. */
const MAX_COMPONENT_BYTES = 255;
const MAX_PATH_BYTES = 4095;
const utf8 = new TextEncoder();

export type WorkspacePath =
  | { readonly kind: "Valid"; readonly parts: readonly string[] }
  | { readonly kind: "Invalid"; readonly message: string };

export function parseWorkspacePath(raw: string): WorkspacePath {
  const invalid = (message: string): WorkspacePath => ({ kind: "Invalid", message });
  if (raw === "") return invalid("the path is empty");
  if (raw.includes("\0")) return invalid("the path holds a NUL byte");
  if (!raw.isWellFormed()) return invalid("the path is not valid UTF-8");
  if (utf8.encode(raw).byteLength > MAX_PATH_BYTES) {
    return invalid(`the path is longer than ${MAX_PATH_BYTES} bytes`);
  }
  if (raw.startsWith("/")) return invalid("the path is absolute; name it inside the workspace");
  const parts = raw.split("/");
  for (const part of parts) {
    if (part === "") return invalid("the path has an empty component (// or a trailing /)");
    if (part === "." || part === "..") {
      return invalid(`the path has a "${part}" component; name the file inside the workspace`);
    }
    if (utf8.encode(part).byteLength > MAX_COMPONENT_BYTES) {
      return invalid(`a component of the path is longer than ${MAX_COMPONENT_BYTES} bytes`);
    }
  }
  return { kind: "Valid", parts };
}
