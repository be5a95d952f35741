import { describe, expect, test } from "bun:test";
import { dropArgv, envArgv, plainWrapper } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import {
  chooseRunAs,
  identityDatabaseAccounts,
  resolveRunAs,
} from "../../src/adapters/isolation-bwrap/run-as.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";

function run(argv: readonly string[], env: Record<string, string>): string {
  const result = Bun.spawnSync([...argv], { env, stdout: "pipe", stderr: "pipe" });
  return result.stdout.toString() + result.stderr.toString();
}

describe("envArgv: the job's environment, applied last", () => {
  test("exactly the given variables reach the program; the launcher's do not", () => {
    const argv = envArgv(["/bin/sh", "-c", "env | sort"], {
      vars: { A: "1", PATH: "/usr/bin:/bin" },
    });
    const out = run(argv, { LAUNCHER_SECRET: "x", PATH: "/usr/bin:/bin" });
    expect(out.split("\n").filter((l) => !/^(PWD|SHLVL|_)=/.test(l) && l !== "")).toEqual([
      "A=1",
      "PATH=/usr/bin:/bin",
    ]);
  });

  test("an inherited name (a task launcher's rank) is copied from the launcher, nothing else", () => {
    const argv = envArgv(["/bin/sh", "-c", `echo "$RANK/$A/\${OTHER:-unset}"`, "--rank-env"], {
      vars: { A: "1", PATH: "/usr/bin:/bin" },
      inherit: ["RANK"],
    });
    expect(run(argv, { RANK: "3", OTHER: "leak", PATH: "/usr/bin:/bin" }).trim()).toBe("3/1/unset");
  });

  test("an inherited name the launcher did not set stays unset, not empty; a value with spaces stays whole", () => {
    const argv = envArgv(["/bin/sh", "-c", `echo "\${DEADLINE-unset}/$RANK"`], {
      vars: { PATH: "/usr/bin:/bin" },
      inherit: ["RANK", "DEADLINE"],
    });
    expect(run(argv, { RANK: "a b", PATH: "/usr/bin:/bin" }).trim()).toBe("unset/a b");
    expect(run(argv, { RANK: "0", DEADLINE: "1700000000", PATH: "/usr/bin:/bin" }).trim()).toBe(
      "1700000000/0",
    );
  });

  test("names that are not identifiers are a caller bug", () => {
    expect(() => envArgv(["true"], { vars: { "A=B": "1" } })).toThrow();
    expect(() => envArgv(["true"], { vars: {}, inherit: ["$(x)"] })).toThrow();
  });
});

describe("plainWrapper: no sandbox, still never root", () => {
  const nobody = { uid: 65534, gid: 65534, label: "nobody" };

  test.if(process.getuid?.() === 0)(
    "as root the job runs as the RunAs uid, no capability, no_new_privs",
    () => {
      const argv = plainWrapper(fixedIdentities(nobody)).wrap(
        ["/bin/sh", "-c", "id -u; id -g; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status"],
        { writable: [], readOnly: [] },
        { vars: { PATH: "/usr/bin:/bin" } },
        nobody,
      );
      expect(run(argv, { PATH: "/usr/bin:/bin" }).split(/\s+/).filter(Boolean)).toEqual([
        "65534",
        "65534",
        "CapEff:",
        "0000000000000000",
        "CapBnd:",
        "0000000000000000",
        "NoNewPrivs:",
        "1",
      ]);
    },
  );

  test("the drop comes first, env -i last", () => {
    const argv = dropArgv(nobody, envArgv(["prog"], { vars: { X: "1" } }));
    expect(argv.indexOf("/usr/bin/setpriv")).toBe(0);
    expect(argv.slice(-5)).toEqual(["/usr/bin/env", "-i", "--", "X=1", "prog"]);
  });
});

describe("run-as", () => {
  const db = identityDatabaseAccounts({
    passwd:
      "root:x:0:0::/root:/bin/sh\nsvc:x:900:901::/srv:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
    group: "root:x:0:\nsvcgrp:x:902:\nnogroup:x:65534:\n",
  });

  test("names and numbers resolve; a user's primary group by default", () => {
    expect(resolveRunAs("svc", db)).toEqual({
      kind: "Resolved",
      runAs: { uid: 900, gid: 901, label: "svc" },
    });
    expect(resolveRunAs("svc:svcgrp", db)).toMatchObject({ runAs: { uid: 900, gid: 902 } });
    expect(resolveRunAs("1234", db)).toMatchObject({ runAs: { uid: 1234, gid: 1234 } });
    expect(
      resolveRunAs("nobody", identityDatabaseAccounts({ passwd: null, group: null })),
    ).toMatchObject({
      runAs: { uid: 65534, gid: 65534 },
    });
  });

  test("uid 0 and gid 0 are refused however they are spelled", () => {
    for (const spec of ["root", "0", "svc:root", "svc:0", "0:901"]) {
      expect(resolveRunAs(spec, db).kind).toBe("Invalid");
    }
  });

  test("a daemon that is not root keeps its uid; naming another is an error", () => {
    expect(chooseRunAs(undefined, 1000, db)).toEqual({ kind: "Chosen", runAs: null });
    expect(chooseRunAs("svc", 900, db)).toEqual({ kind: "Chosen", runAs: null });
    expect(chooseRunAs("svc", 1000, db).kind).toBe("Invalid");
    expect(chooseRunAs(undefined, 0, db)).toMatchObject({ runAs: { uid: 65534 } });
  });
});
