/**
 * The broker validates the change feed's list of names once and keeps the rows of its own
 * copy while the same array is asked again with the parse memo (broker.ts, queueQuery), so a
 * steady tick at 10,000 watched jobs neither checks 10,000 names again nor freezes the list
 * (a frozen array cost Bun 23 ms at 10,000 names, 333 ms at 100,000). The failures this
 * guards: a new list (the watch set changed) answered with the old one's rows, so a job just
 * submitted is never seen; and a name that does not pass the check kept as if it did.
 */
import { describe, expect, test } from "bun:test";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { createSqueueMemo } from "../../src/adapters/backend-slurm/parse-squeue.ts";
import { recordingRunner } from "../support/recording-runner.ts";
import { newToken } from "../support/slurm-fixtures.ts";

const line = (id: string, name: string) =>
  `${id}|${name}|RUNNING|0|1700000000|1700086400|None|/spool/w|${name}.owner\n`;

describe("listQueue's names with a memo", () => {
  const [a, b, c] = [newToken(), newToken(), newToken()];
  const listing = line("7", a) + line("8", b) + line("9", c);

  test("a new array is answered with its own names' rows", async () => {
    const { runner } = recordingRunner(() => listing);
    const broker = createSlurmBroker({ runner, path: "/usr/bin:/bin" });
    const memo = createSqueueMemo();
    const first = [a, b];
    const ids = async (names: readonly string[]) => {
      const answer = await broker.listQueue(names, memo);
      if (answer.kind !== "Answered") throw new Error(answer.error.message);
      return answer.value.map((r) => r.jobId);
    };
    expect(await ids(first)).toEqual(["7", "8"]);
    expect(await ids(first)).toEqual(["7", "8"]);
    expect(await ids([a, b, c])).toEqual(["7", "8", "9"]);
    expect(await ids([c])).toEqual(["9"]);
  });

  test("a name that fails the check is refused, with or without a memo", async () => {
    const { runner, calls } = recordingRunner(() => listing);
    const broker = createSlurmBroker({ runner, path: "/usr/bin:/bin" });
    const memo = createSqueueMemo();
    expect((await broker.listQueue([a, "x|y"], memo)).kind).toBe("Failed");
    expect((await broker.listQueue([a, "x|y"])).kind).toBe("Failed");
    expect(calls.length).toBe(0);
  });
});
