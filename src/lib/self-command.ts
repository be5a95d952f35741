/**
 * How this program re-invokes itself (for hidden internal modes started as separate
 * processes). A compiled binary is one file: its modules live under Bun's virtual
 * `/$bunfs/` root, and the binary itself is `process.execPath`. From source, the runtime is
 * `process.execPath` and the entry point is `src/main.ts`, found relative to this module
 * rather than through `Bun.main`, which under `bun test` names the test file.
 */
import { fileURLToPath } from "node:url";

export interface SelfCommandSources {
  /** The running executable (`process.execPath`). */
  readonly execPath: string;
  /** This module's own path (`import.meta.path`); `/$bunfs/...` inside a compiled binary. */
  readonly modulePath: string;
  /** Absolute path of `src/main.ts` when running from source. */
  readonly sourceEntry: string;
}

const COMPILED_ROOT = "/$bunfs/";

export function isCompiled(modulePath: string): boolean {
  return modulePath.startsWith(COMPILED_ROOT);
}

/** The argv prefix that starts this program: `[binary]` compiled, `[bun, main.ts]` from source. */
export function selfCommand(sources: SelfCommandSources = currentSources()): readonly string[] {
  if (isCompiled(sources.modulePath)) return [sources.execPath];
  return [sources.execPath, sources.sourceEntry];
}

function currentSources(): SelfCommandSources {
  return {
    execPath: process.execPath,
    modulePath: import.meta.path,
    sourceEntry: fileURLToPath(new URL("../main.ts", import.meta.url)),
  };
}
