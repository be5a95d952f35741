/**
 * The cell log behind re-attaching to a cell (issue 23): replay after an event id, then live
 * events to the end; and its bounds, since a session's output is hostile input to the daemon.
 */
import { describe, expect, test } from "bun:test";
import {
  type CellLogEvent,
  createCellLog,
  FINISHED_CELL_TTL_MS,
  MAX_CELL_LOG_CHARS,
  MAX_FINISHED_CELLS,
} from "../../src/core/session/cell-log.ts";
import { manualClock } from "../../src/lib/clock.ts";

describe("the cell log", () => {
  test("replays after an event id, follows to the final event, then stops following", () => {
    const log = createCellLog(manualClock());
    log.open("w1", "c1");
    log.append("c1", "stdout", { text: "a" });
    log.append("c1", "stdout", { text: "b" });
    const live: [CellLogEvent, boolean][] = [];
    const attached = log.attach("w1", "c1", 1, (e, final) => live.push([e, final]));
    if (attached.kind !== "Attached") throw new Error("not attached");
    expect(attached.replay).toEqual([{ id: 2, event: "stdout", data: { text: "b", cell: "c1" } }]);
    expect(attached.finished).toBe(false);
    log.append("c1", "result", { status: "OK" }, true);
    log.append("c1", "stdout", { text: "after the end" });
    expect(live).toEqual([[{ id: 3, event: "result", data: { status: "OK", cell: "c1" } }, true]]);
    // Another session cannot read it by guessing the id.
    expect(log.attach("w2", "c1", 0, () => {}).kind).toBe("Unknown");
    const late = log.attach("w1", "c1", 0, () => {});
    expect(late).toMatchObject({ kind: "Attached", finished: true });
  });

  test(`keeps ${MAX_FINISHED_CELLS} finished cells per session, each for ${FINISHED_CELL_TTL_MS / 60_000} min`, () => {
    const clock = manualClock();
    const log = createCellLog(clock);
    const ids = Array.from({ length: MAX_FINISHED_CELLS + 1 }, (_, i) => `c${i}`);
    for (const id of ids) {
      log.open("w1", id);
      log.append(id, "result", { status: "OK" }, true);
    }
    log.open("w1", "running"); // the bounds apply when a cell opens
    expect(log.attach("w1", "c0", 0, () => {}).kind).toBe("Unknown");
    expect(log.attach("w1", "c1", 0, () => {}).kind).toBe("Attached");
    clock.advance(FINISHED_CELL_TTL_MS);
    log.open("w1", "next");
    expect(log.attach("w1", ids.at(-1)!, 0, () => {}).kind).toBe("Unknown");
    // A running cell is never forgotten, however long it runs.
    expect(log.attach("w1", "running", 0, () => {}).kind).toBe("Attached");
  });

  test("a cell keeps at most its cap of events, says what it left out, and always its end", () => {
    const log = createCellLog(manualClock());
    log.open("w1", "c1");
    const big = "x".repeat(MAX_CELL_LOG_CHARS / 4);
    for (let i = 0; i < 6; i++) log.append("c1", "stdout", { text: big });
    log.append("c1", "result", { status: "OK" }, true);
    const attached = log.attach("w1", "c1", 0, () => {});
    if (attached.kind !== "Attached") throw new Error("not attached");
    const names = attached.replay.map((e) => e.event);
    expect(names).toEqual(["stdout", "stdout", "stdout", "dropped", "result"]);
    expect(attached.replay[3]?.data).toMatchObject({ outputs: 3 });
  });
});
