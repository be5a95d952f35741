/**
 * The guards' view of the list of backends (src/apps/daemon/composition/backends.ts): which
 * folder each listed plugin lives in (the list's own imports say it) and what it declares.
 * The leak guard's exempt folders and backend packages and the scheduler-calls guard's
 * brokers are computed from this, so a backend added to the list is guarded without an edit
 * here, and one removed from it loses its exemption.
 */
import { dirname, join, relative, sep } from "node:path";
import type { RegisteredBackend } from "../../src/core/ports/backend-plugin.ts";

/** The list, relative to src/. */
export const BACKEND_LIST_FILE = "apps/daemon/composition/backends.ts";

const SRC = join(import.meta.dir, "..", "..", "src");

export interface ListedBackend {
  readonly name: string;
  /** Relative to src/, with a trailing slash: `adapters/backend-local/`. */
  readonly folder: string;
  readonly schedulerBroker: string | null;
}

/** A plugin module's exported plugins: objects that declare a name and how they are created. */
function pluginsOf(module: Record<string, unknown>): RegisteredBackend[] {
  return Object.values(module).filter(
    (value): value is RegisteredBackend =>
      typeof value === "object" &&
      value !== null &&
      typeof (value as { name?: unknown }).name === "string" &&
      typeof (value as { create?: unknown }).create === "function",
  );
}

/**
 * Every plugin the list imports (a `plugin.ts` under adapters/), with its folder. Read from
 * the list's source, so the guards follow the file rather than a copy of its contents.
 */
export async function listedBackends(srcRoot: string): Promise<readonly ListedBackend[]> {
  const source = await Bun.file(join(srcRoot, BACKEND_LIST_FILE)).text();
  const specifiers = new Bun.Transpiler({ loader: "ts" }).scanImports(source).map((i) => i.path);
  const { BACKENDS } = await import(join(srcRoot, BACKEND_LIST_FILE));
  const listed: ListedBackend[] = [];
  for (const specifier of specifiers.filter((s) => s.endsWith("/plugin.ts"))) {
    const path = join(srcRoot, dirname(BACKEND_LIST_FILE), specifier);
    const folder = `${relative(srcRoot, dirname(path)).split(sep).join("/")}/`;
    for (const plugin of pluginsOf(await import(path))) {
      if (!(BACKENDS as readonly RegisteredBackend[]).some((b) => b.name === plugin.name)) continue;
      listed.push({ name: plugin.name, folder, schedulerBroker: plugin.schedulerBroker });
    }
  }
  return listed;
}

export const LISTED_BACKENDS: readonly ListedBackend[] = await listedBackends(SRC);
