/**
 * LANG for local jobs: Python takes its preferred encoding from it, and a daemon started
 * with LANG unset or POSIX (systemd's default) gave jobs ASCII.
 */
import { describe, expect, test } from "bun:test";
import { utf8Lang } from "../../src/adapters/backend-local/backend-options.ts";

describe("a local job's LANG", () => {
  test("is the daemon's when it names a UTF-8 locale", () => {
    for (const lang of ["en_US.UTF-8", "de_DE.utf8", "C.UTF-8", "sr_RS.UTF-8@latin"]) {
      expect(utf8Lang(lang)).toBe(lang);
    }
  });

  test("is C.UTF-8 otherwise", () => {
    for (const lang of [undefined, "", "C", "POSIX", "en_US", "en_US.ISO-8859-1", "UTF-8"]) {
      expect(utf8Lang(lang)).toBe("C.UTF-8");
    }
  });
});
