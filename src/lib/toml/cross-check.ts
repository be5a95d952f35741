/**
 * The cross-check: three readers look at every cluster.toml and must agree: the subset
 * parser (subset.ts, which knows where every key is, so every refusal has a line),
 * smol-toml and Bun's built-in reader. Both of those are production paths, so a file one of
 * them reads differently from the other is refused rather than trusted: a divergence is a
 * profile silently landing on the wrong queue. Measured differences this guards against
 * (measured on Bun 1.4.5): dates (refused by the subset anyway) and lenient TOML 1.1 escapes
 * (`\e`, `\x41`), which both accept and TOML 1.0 does not.
 */
import { parse as smolParse, TomlError } from "smol-toml";
import {
  joinKey,
  loneSurrogateIndex,
  parseWithStatements,
  type Statement,
  type SubsetParse,
  type TomlPosition,
  type TomlTableNode,
} from "./subset.ts";

/** The tree as plain data, for comparison with what the other readers return. */
export function toPlain(table: TomlTableNode): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, node] of table.entries) {
    // defineProperty: a key spelt "__proto__" must be data, not a prototype change.
    Object.defineProperty(out, key, {
      value: node.kind === "table" ? toPlain(node) : node.value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

type OtherRead =
  | { readonly kind: "Read"; readonly value: unknown }
  | { readonly kind: "Refused"; readonly message: string; readonly position: TomlPosition | null };

function readWithSmol(text: string): OtherRead {
  try {
    return { kind: "Read", value: smolParse(text) };
  } catch (error) {
    if (error instanceof TomlError) {
      return {
        kind: "Refused",
        message: firstLine(error.message).replace(/^Invalid TOML document: /, ""),
        position: { line: error.line, column: error.column },
      };
    }
    return { kind: "Refused", message: String(error), position: null };
  }
}

function readWithBun(text: string): OtherRead {
  try {
    return { kind: "Read", value: Bun.TOML.parse(text) };
  } catch (error) {
    // Bun's error positions point at the JavaScript caller, not the TOML: the line is found
    // by the caller (see locateBunRefusal).
    const message = error instanceof Error ? error.message : String(error);
    return {
      kind: "Refused",
      message: firstLine(message).replace(/^TOML Parse error: /, ""),
      position: null,
    };
  }
}

function firstLine(text: string): string {
  return (text.split("\n")[0] ?? "").trim();
}

/**
 * Bun refused a file the subset parser accepted: the first statement whose prefix of the
 * file Bun refuses is the culprit. Every such prefix is itself a valid subset document,
 * because statements are only ever cut after their line ends.
 */
function locateBunRefusal(text: string, statements: readonly Statement[]): TomlPosition {
  for (const statement of statements) {
    if (readWithBun(text.slice(0, statement.end)).kind === "Refused") return statement.position;
  }
  return { line: 1, column: 1 };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date)
  );
}

interface Disagreement {
  readonly path: string;
  readonly position: TomlPosition;
  readonly ours: string;
  readonly theirs: string;
}

function describeValue(value: unknown): string {
  if (value === undefined) return "nothing";
  if (isPlainObject(value)) return "a table";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (typeof value === "bigint") return `the big integer ${value}`;
  return `a ${Object.prototype.toString.call(value).slice(8, -1)}`;
}

/** Every place where `theirs` differs from our tree, with the position of our key. */
function disagreements(
  table: TomlTableNode,
  theirs: unknown,
  path: readonly string[],
): Disagreement[] {
  const found: Disagreement[] = [];
  if (!isPlainObject(theirs)) {
    return [
      {
        path: joinKey(path),
        position: table.position,
        ours: "a table",
        theirs: describeValue(theirs),
      },
    ];
  }
  for (const [key, node] of table.entries) {
    const other = Object.hasOwn(theirs, key) ? theirs[key] : undefined;
    const here = [...path, key];
    if (node.kind === "table") {
      found.push(...disagreements(node, other, here));
    } else if (!Object.is(node.value, other)) {
      found.push({
        path: joinKey(here),
        position: node.position,
        ours: describeValue(node.value),
        theirs: describeValue(other),
      });
    }
  }
  for (const key of Object.keys(theirs)) {
    if (!table.entries.has(key)) {
      found.push({
        path: joinKey([...path, key]),
        position: table.position,
        ours: "nothing",
        theirs: describeValue(theirs[key]),
      });
    }
  }
  return found;
}

function firstDisagreement(found: readonly Disagreement[]): Disagreement | undefined {
  return [...found].sort(
    (a, b) => a.position.line - b.position.line || a.position.column - b.position.column,
  )[0];
}

/**
 * Reads a document of the subset, cross-checked: refused when the subset parser, smol-toml or
 * Bun's reader refuses it, or when the readers do not all read the same values.
 */
export function readTomlSubset(source: string): SubsetParse {
  if (!source.isWellFormed()) {
    // A lone surrogate cannot come from UTF-8; the readers would each make something else of it.
    const before = source.slice(0, loneSurrogateIndex(source));
    return {
      kind: "Refused",
      line: before.split("\n").length,
      column: before.length - before.lastIndexOf("\n"),
      key: null,
      message: "the text contains a lone UTF-16 surrogate, which is not Unicode text",
    };
  }
  const statements: Statement[] = [];
  const ours = parseWithStatements(source, statements);
  if (ours.kind === "Refused") return ours;
  const text = source.startsWith("\uFEFF") ? source.slice(1) : source;

  const smol = readWithSmol(source);
  if (smol.kind === "Refused") {
    const at = smol.position ?? { line: 1, column: 1 };
    return {
      kind: "Refused",
      line: at.line,
      column: at.column,
      key: null,
      message: `smol-toml refuses this: ${smol.message}`,
    };
  }
  const bun = readWithBun(source);
  if (bun.kind === "Refused") {
    const at = locateBunRefusal(text, statements);
    return {
      kind: "Refused",
      line: at.line,
      column: at.column,
      key: null,
      message: `Bun's TOML reader refuses this: ${bun.message}`,
    };
  }
  for (const [reader, value] of [
    ["smol-toml", smol.value],
    ["Bun's TOML reader", bun.value],
  ] as const) {
    const first = firstDisagreement(disagreements(ours.root, value, []));
    if (first !== undefined) {
      return {
        kind: "Refused",
        line: first.position.line,
        column: first.position.column,
        key: first.path,
        message: `the TOML readers disagree about ${first.path}: ${first.ours} here, ${first.theirs} for ${reader}`,
      };
    }
  }
  return { kind: "Parsed", root: ours.root };
}
