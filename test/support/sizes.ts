/**
 * The size guard's scan: source files by line count, functions by the lines of their own.
 *
 * A function's own lines are its span minus the spans of the functions written inside it;
 * each of those is measured on its own. The house style builds ports as a factory returning
 * closures (`createX(deps)` with its helpers inside), and a factory whose every helper is
 * short reads like a short module; what grows unreadable is one body doing too much. A
 * function's whole span is capped too (at the file limit), so a factory cannot hide a file
 * in itself. Parsed with the TypeScript compiler, not a brace count, so a brace in a string
 * or a template does not move a function's end.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import * as ts from "typescript";

/** Over this a file must say why in its header. */
export const FILE_NORM_LINES = 400;
/** Over this a file is refused whatever its header says. */
export const FILE_MAX_LINES = 600;
/** A function's own lines (nested functions measured apart). */
export const FUNCTION_MAX_OWN_LINES = 80;
/** A function's whole span, nested functions included. */
export const FUNCTION_MAX_SPAN_LINES = FILE_NORM_LINES;

/**
 * What a file's header must contain, in its leading comment, to be over FILE_NORM_LINES:
 * `Over 400 lines because ...` followed by the reason.
 */
export const SIZE_REASON = /over 400 lines because \S/i;

export interface FileSize {
  /** Relative to the scanned root, with forward slashes. */
  readonly file: string;
  readonly lines: number;
  /** The leading comment says why the file is long. */
  readonly saysWhy: boolean;
}

export interface FunctionSize {
  readonly file: string;
  /** The function's name, or the variable, property or method it is assigned to. */
  readonly name: string;
  readonly line: number;
  readonly spanLines: number;
  readonly ownLines: number;
}

function sourceFiles(root: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(root)) {
    const path = join(root, entry);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (entry.endsWith(".ts") && !entry.endsWith(".d.ts")) out.push(path);
  }
  return out.sort();
}

function lineCount(text: string): number {
  if (text.length === 0) return 0;
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

function leadingComment(text: string): string {
  const ranges = ts.getLeadingCommentRanges(text, 0) ?? [];
  return ranges.map((r) => text.slice(r.pos, r.end)).join("\n");
}

export function fileSizes(root: string): FileSize[] {
  return sourceFiles(root).map((path) => {
    const text = readFileSync(path, "utf8");
    return {
      file: relative(root, path).split("\\").join("/"),
      lines: lineCount(text),
      saysWhy: SIZE_REASON.test(leadingComment(text)),
    };
  });
}

function functionName(node: ts.Node, sf: ts.SourceFile): string {
  const named = (node as { name?: ts.Node }).name;
  if (named !== undefined) return named.getText(sf);
  const parent = node.parent;
  if (
    ts.isVariableDeclaration(parent) ||
    ts.isPropertyAssignment(parent) ||
    ts.isPropertyDeclaration(parent)
  ) {
    return parent.name.getText(sf);
  }
  return "<anonymous>";
}

function hasBody(node: ts.Node): node is ts.FunctionLikeDeclaration {
  return ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body !== undefined;
}

export function functionSizes(root: string): FunctionSize[] {
  const out: FunctionSize[] = [];
  for (const path of sourceFiles(root)) {
    const file = relative(root, path).split("\\").join("/");
    const sf = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest, true);
    const lineOf = (pos: number) => sf.getLineAndCharacterOfPosition(pos).line;
    const span = (node: ts.Node) => lineOf(node.getEnd()) - lineOf(node.getStart(sf)) + 1;
    const visit = (node: ts.Node): void => {
      if (hasBody(node)) {
        let nested = 0;
        const findNested = (inner: ts.Node): void => {
          if (hasBody(inner)) nested += span(inner);
          else ts.forEachChild(inner, findNested);
        };
        ts.forEachChild(node.body as ts.Node, findNested);
        out.push({
          file,
          name: functionName(node, sf),
          line: lineOf(node.getStart(sf)) + 1,
          spanLines: span(node),
          ownLines: span(node) - nested,
        });
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out;
}

/** An allowed excess: a file (over the norm or the maximum) or `file#function`. */
export interface SizeException {
  readonly what: string;
  readonly why: string;
}

export interface SizeViolation {
  readonly what: string;
  readonly detail: string;
}

/** Every excess in the tree that is not named in `allowed`. */
export function findSizeViolations(
  root: string,
  allowed: readonly SizeException[] = [],
): SizeViolation[] {
  const isAllowed = (what: string) => allowed.some((a) => a.what === what);
  const out: SizeViolation[] = [];
  for (const f of fileSizes(root)) {
    if (isAllowed(f.file)) continue;
    if (f.lines > FILE_MAX_LINES) {
      out.push({ what: f.file, detail: `${f.lines} lines, over ${FILE_MAX_LINES}` });
    } else if (f.lines > FILE_NORM_LINES && !f.saysWhy) {
      out.push({
        what: f.file,
        detail: `${f.lines} lines, over ${FILE_NORM_LINES} without "Over 400 lines because" in its header`,
      });
    }
  }
  for (const fn of functionSizes(root)) {
    const what = `${fn.file}#${fn.name}`;
    if (isAllowed(what)) continue;
    if (fn.ownLines > FUNCTION_MAX_OWN_LINES) {
      out.push({
        what,
        detail: `line ${fn.line}: ${fn.ownLines} lines of its own, over ${FUNCTION_MAX_OWN_LINES}`,
      });
    } else if (fn.spanLines > FUNCTION_MAX_SPAN_LINES) {
      out.push({
        what,
        detail: `line ${fn.line}: ${fn.spanLines} lines with its nested functions, over ${FUNCTION_MAX_SPAN_LINES}`,
      });
    }
  }
  return out;
}

/** The allowed excesses that are not excesses any more (so the list shrinks with the code). */
export function staleSizeExceptions(
  root: string,
  allowed: readonly SizeException[],
): SizeException[] {
  const over = new Set(findSizeViolations(root).map((v) => v.what));
  return allowed.filter((a) => !over.has(a.what));
}

export function formatSizeViolations(violations: readonly SizeViolation[]): string {
  return violations.map((v) => `src/${v.what}: ${v.detail}`).join("\n");
}
