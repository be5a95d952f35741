/**
 * Jupyter Server's contents model (what @jupyterlab/services validates): name, path, type
 * (directory, notebook or file), times, mimetype, format and content, the last three null
 * when the content was not asked for. A notebook is a `.ipynb` file read as JSON; a file is
 * text when it is UTF-8, else base64, unless the client asked for one.
 */
import type { Entry } from "./contents-fs.ts";

export type ContentType = "directory" | "notebook" | "file";
export type FileFormat = "text" | "base64";

export interface ContentsModel {
  readonly name: string;
  readonly path: string;
  readonly type: ContentType;
  readonly writable: boolean;
  readonly created: string;
  readonly last_modified: string;
  readonly size: number | null;
  readonly mimetype: string | null;
  readonly content: unknown;
  readonly format: string | null;
}

/** By extension, the types JupyterLab opens in a viewer of their own; else text or bytes. */
const MIMETYPES: Readonly<Record<string, string>> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  svg: "image/svg+xml",
  pdf: "application/pdf",
  csv: "text/csv",
  json: "application/json",
  html: "text/html",
  md: "text/markdown",
  py: "text/x-python",
  txt: "text/plain",
};

export function mimetypeOf(name: string, format: FileFormat): string {
  const dot = name.lastIndexOf(".");
  const known = dot > 0 ? MIMETYPES[name.slice(dot + 1).toLowerCase()] : undefined;
  return known ?? (format === "text" ? "text/plain" : "application/octet-stream");
}

export function typeOf(entry: Entry, asked: ContentType | undefined): ContentType {
  if (entry.kind === "directory") return "directory";
  if (asked === "file") return "file";
  return entry.name.endsWith(".ipynb") ? "notebook" : "file";
}

/** The model without content (a listing's items, a save's answer). */
export function bareModel(path: string, entry: Entry, type: ContentType): ContentsModel {
  return {
    name: entry.name,
    path,
    type,
    writable: true,
    created: new Date(entry.createdMs).toISOString(),
    last_modified: new Date(entry.modifiedMs).toISOString(),
    size: entry.kind === "file" ? entry.sizeBytes : null,
    mimetype: type === "file" ? mimetypeOf(entry.name, "text") : null,
    content: null,
    format: null,
  };
}

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });

/** A file's bytes as Jupyter sends them: the asked format, or text when they are UTF-8. */
export function fileContent(
  bytes: Buffer,
  asked: FileFormat | undefined,
): { readonly format: FileFormat; readonly content: string } | null {
  if (asked !== "base64") {
    try {
      return { format: "text", content: STRICT_UTF8.decode(bytes) };
    } catch {
      if (asked === "text") return null;
    }
  }
  return { format: "base64", content: bytes.toString("base64") };
}

/** Jupyter's own notebook spelling: one space of indent, a final newline. */
export function notebookBytes(content: unknown): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(content, null, 1)}\n`);
}

/** Untitled names as Jupyter Server makes them: Untitled.ipynb, Untitled1.ipynb... */
export function untitledName(type: ContentType, ext: string | undefined, n: number): string {
  const suffix = n === 0 ? "" : String(n);
  if (type === "directory") return `Untitled Folder${n === 0 ? "" : ` ${n}`}`;
  if (type === "notebook") return `Untitled${suffix}.ipynb`;
  return `untitled${suffix}${ext ?? ".txt"}`;
}

/** A copy's name: `a.ipynb` → `a-Copy1.ipynb`, `a-Copy2.ipynb`... */
export function copyName(name: string, n: number): string {
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  return `${stem.replace(/-Copy\d+$/, "")}-Copy${n}${ext}`;
}

/** Where a file's one checkpoint lives, as Jupyter Server keeps it: `.ipynb_checkpoints/`. */
export function checkpointParts(parts: readonly string[]): readonly string[] {
  const name = parts[parts.length - 1] as string;
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  return [...parts.slice(0, -1), ".ipynb_checkpoints", `${stem}-checkpoint${ext}`];
}
