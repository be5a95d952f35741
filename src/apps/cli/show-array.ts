/**
 * `openai4s show`'s block for a job array: how many elements are in each phase, which indices
 * did not complete, and the elements that ended badly with their reason and exit code, so a
 * 1,000-element sweep with two broken inputs names them on one screen.
 */
import { table, type WorkloadBody } from "./client.ts";

type AllocationBody = WorkloadBody["allocations"][number];
type ArrayBody = NonNullable<AllocationBody["array"]>;

/** Rows of ended-but-not-completed elements shown; the rest are counted, --json has more. */
const SHOWN_ENDED_ELEMENTS = 20;
/** An index list longer than this is cut: the counts already say how many. */
const INDICES_CHARS = 60;
const ENDED_BADLY: ReadonlySet<string> = new Set(["FAILED", "LOST", "CANCELLED"]);

function cut(text: string): string {
  return text.length <= INDICES_CHARS ? text : `${text.slice(0, INDICES_CHARS - 1)}…`;
}

/** "998 completed, 2 failed (17,400)": indices for every phase but COMPLETED. */
export function elementsLine(array: ArrayBody): string {
  const byPhase: Readonly<Record<string, string | undefined>> = array.indices;
  return Object.entries(array.counts)
    .map(([phase, count]) => {
      const which = byPhase[phase];
      const indices = phase === "COMPLETED" || which === undefined ? "" : ` (${cut(which)})`;
      return `${count} ${phase.toLowerCase()}${indices}`;
    })
    .join(", ");
}

function endedBadly(array: ArrayBody): string {
  const ended = array.elements.filter((e) => ENDED_BADLY.has(e.phase));
  if (ended.length === 0) return "";
  const shown = ended.slice(0, SHOWN_ENDED_ELEMENTS);
  const more = ended.length - shown.length + array.elementsOmitted;
  const rows = table(
    ["INDEX", "PHASE", "REASON", "EXIT CODE"],
    shown.map((e) => [
      String(e.index),
      e.phase,
      e.reason ?? "",
      e.exitCode === null ? "-" : String(e.exitCode),
    ]),
  );
  // elementsOmitted counts elements past the view's limit, ended or not: "up to".
  return `${rows}${more > 0 ? `(up to ${more} more not shown: show --json lists the first 100)\n` : ""}`;
}

/** The current attempt's array block; "" for one job or an older daemon (no `array`). */
export function renderArray(w: WorkloadBody): string {
  const current = w.allocations.find((a) => a.epoch === w.executionEpoch);
  const array = current?.array;
  if (array === undefined || array === null) return "";
  const cap = array.maxConcurrent === null ? "" : `, at most ${array.maxConcurrent} at once`;
  return `\nArray:       ${array.size} element${array.size === 1 ? "" : "s"}${cap}\nElements:    ${elementsLine(array)}\n${endedBadly(array)}`;
}
