/**
 * What each cell of a session said, kept so a client can come back to it: a cell keeps
 * running when its client goes away (as Jupyter's do), and a client re-attaches by the cell's
 * id, resuming after the last event id it saw. Every event carries the cell's id and its own
 * number (1, 2, ... within the cell), so "after 17" is exact, across reconnects.
 *
 * Bounded, because anything a session's code prints is hostile input to the daemon: per cell
 * at most MAX_CELL_LOG_CHARS of event data are kept (later output events are counted, and one
 * `dropped` event says how many; final events are always kept); per session at most
 * MAX_FINISHED_CELLS finished cells, each for FINISHED_CELL_TTL_MS after it finished. Running
 * cells are kept while they run (one at a time runs per kernel; the others wait in its queue).
 */

/** One event of a cell, as the streaming exec sends it (`event:` name, `data:` object). */
export interface CellLogEvent {
  /** 1, 2, ... within the cell. */
  readonly id: number;
  readonly event: string;
  readonly data: Readonly<Record<string, unknown>>;
}

export const MAX_CELL_LOG_CHARS = 16 * 1024 * 1024;
export const MAX_FINISHED_CELLS = 16;
export const FINISHED_CELL_TTL_MS = 15 * 60 * 1000;

export type CellFollower = (event: CellLogEvent, final: boolean) => void;

export type AttachOutcome =
  /** Events after the asked id; `follow` got the rest unless the cell had finished. */
  | {
      readonly kind: "Attached";
      readonly replay: readonly CellLogEvent[];
      readonly finished: boolean;
      readonly detach: () => void;
    }
  /** No such cell in this session: never was, or finished and forgotten (see the bounds). */
  | { readonly kind: "Unknown" };

export interface CellLog {
  /** A new cell of `workloadId`; forgets finished cells past the bounds. */
  open(workloadId: string, cell: string): void;
  /** Appends one event; `final` ends the cell (exactly one final event per cell). */
  append(cell: string, event: string, data: Record<string, unknown>, final?: boolean): void;
  /** What the cell said after event `afterId`, then (unless finished) each new one. */
  attach(workloadId: string, cell: string, afterId: number, follow: CellFollower): AttachOutcome;
}

interface Entry {
  readonly workloadId: string;
  readonly events: CellLogEvent[];
  chars: number;
  dropped: number;
  finishedAt: number | null;
  readonly followers: Set<CellFollower>;
}

export function createCellLog(clock: { now(): number }): CellLog {
  const cells = new Map<string, Entry>();

  function forget(workloadId: string): void {
    const finished = [...cells.entries()].filter(
      ([, e]) => e.workloadId === workloadId && e.finishedAt !== null,
    );
    const now = clock.now();
    // Oldest first (Map order is insertion order): the newest MAX_FINISHED_CELLS stay.
    finished.forEach(([cell, e], index) => {
      const expired = now - (e.finishedAt ?? now) >= FINISHED_CELL_TTL_MS;
      if (expired || finished.length - index > MAX_FINISHED_CELLS) cells.delete(cell);
    });
  }

  function push(entry: Entry, event: string, data: Record<string, unknown>, final: boolean) {
    const logged: CellLogEvent = { id: entry.events.length + 1, event, data };
    entry.events.push(logged);
    for (const follow of entry.followers) follow(logged, final);
  }

  return {
    open(workloadId, cell) {
      forget(workloadId);
      cells.set(cell, {
        workloadId,
        events: [],
        chars: 0,
        dropped: 0,
        finishedAt: null,
        followers: new Set(),
      });
    },

    append(cell, event, data, final = false) {
      const entry = cells.get(cell);
      if (!entry || entry.finishedAt !== null) return;
      const chars = event.length + JSON.stringify(data).length;
      if (!final && entry.chars + chars > MAX_CELL_LOG_CHARS) {
        entry.dropped += 1;
        return;
      }
      if (entry.dropped > 0) {
        const outputs = entry.dropped;
        entry.dropped = 0;
        push(
          entry,
          "dropped",
          {
            cell,
            outputs,
            bytes: 0,
            message: `[... ${outputs} outputs not kept: a cell keeps at most ${MAX_CELL_LOG_CHARS} characters of events]`,
          },
          false,
        );
      }
      entry.chars += chars;
      if (final) entry.finishedAt = clock.now();
      push(entry, event, { ...data, cell }, final);
      if (final) entry.followers.clear();
    },

    attach(workloadId, cell, afterId, follow) {
      const entry = cells.get(cell);
      if (!entry || entry.workloadId !== workloadId) return { kind: "Unknown" };
      const replay = entry.events.filter((e) => e.id > afterId);
      const finished = entry.finishedAt !== null;
      if (!finished) entry.followers.add(follow);
      return {
        kind: "Attached",
        replay,
        finished,
        detach: () => entry.followers.delete(follow),
      };
    },
  };
}
