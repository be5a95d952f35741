/**
 * Output the kernel makes while no cell runs (a thread a cell started prints on, a widget
 * changes): passed on at once, named by the cell it follows (Jupyter's parent), and its
 * streams and displays kept, bounded, for the next plain exec, which gets them first. Nothing
 * printed is lost between cells (issue 23).
 */
import type { Log } from "../../lib/log.ts";
import type { CellEvent } from "../../wire/worker-protocol.ts";

/** Names of this many recent cells are kept, to name the parent of output between cells. */
const RECENT_CELLS = 16;

export interface IdleOutput {
  /** Cell `id` (the interpreter's number) is named `name`. */
  started(id: number, name: string | undefined): void;
  /** A line of output made while no cell ran; `after` is the id of the cell before it. */
  received(event: CellEvent, after: number): void;
  /** What waited since the last cell (and forget it). */
  take(): CellEvent[];
}

export function createIdleOutput(options: {
  /** Most characters kept for the next exec (the interpreter caps what it sends anyway). */
  readonly maxKeptChars: number;
  readonly onIdleEvent: ((event: CellEvent, cell: string | undefined) => void) | undefined;
  readonly log: Log;
}): IdleOutput {
  const names = new Map<number, string | undefined>();
  let kept: CellEvent[] = [];
  let keptChars = 0;
  let dropped = 0;
  return {
    started(id, name) {
      names.set(id, name);
      for (const old of names.keys()) {
        if (names.size <= RECENT_CELLS) break;
        names.delete(old);
      }
    },
    received(event, after) {
      try {
        options.onIdleEvent?.(event, names.get(after));
      } catch (error) {
        options.log.error("kernel: idle event listener failed", { error: String(error) });
      }
      if (event.type !== "stream" && event.type !== "display_data") return;
      const chars = event.type === "stream" ? event.text.length : JSON.stringify(event.data).length;
      // Bounded even when nobody runs a cell for days; what is not kept is counted, and said.
      if (keptChars + chars > options.maxKeptChars) {
        dropped += 1;
        return;
      }
      kept.push(event);
      keptChars += chars;
    },
    take() {
      const taken = kept;
      if (dropped > 0) {
        const text = `\n[... ${dropped} more outputs between cells not kept: over ${options.maxKeptChars} characters]\n`;
        taken.push({ type: "stream", name: "stderr", text });
      }
      kept = [];
      keptChars = 0;
      dropped = 0;
      return taken;
    },
  };
}
