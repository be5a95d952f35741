import { describe, expect, test } from "bun:test";
import { parseDependencyFlags } from "../../src/apps/cli/dependency-flags.ts";

describe("submit's dependency flags", () => {
  test("--after-ok, --after and sbatch's --dependency all land in afterOk / afterAny", () => {
    expect(parseDependencyFlags(["a"], ["b"], ["afterok:c:d,afterany:e"])).toEqual({
      afterOk: ["a", "c", "d"],
      afterAny: ["b", "e"],
    });
  });

  test("Slurm's other types and forms are refused by name, not misread", () => {
    expect(() => parseDependencyFlags(undefined, undefined, ["afternotok:1"])).toThrow(
      'type "afternotok" is not supported',
    );
    expect(() => parseDependencyFlags(undefined, undefined, ["afterok:1?afterany:2"])).toThrow(
      "only all-must-hold",
    );
    expect(() => parseDependencyFlags(undefined, undefined, ["afterok"])).toThrow("is not TYPE:ID");
    expect(() => parseDependencyFlags(undefined, undefined, ["afterok:1:"])).toThrow(
      "is not TYPE:ID",
    );
  });
});
