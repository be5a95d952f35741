import { afterEach, describe, expect, test } from "bun:test";
import { validateEnvName } from "../../src/adapters/backend-slurm/broker-validation.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

describe("credential-shaped environment variable names, on every backend", () => {
  test.each([
    "GITHUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "DB_PASSWORD",
    "ssh_key",
    "X_CREDENTIAL",
    "HF_AUTH",
  ])("%s is refused with a 400 naming it, and nothing is written", async (name) => {
    const h = harness();
    open.push(h);
    const res = await h.post("/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: ["true"],
      env: { [name]: "s3cr3t" },
    });
    expect(res.status).toBe(400);
    const problem = await problemOf(res);
    expect(problem.errors?.map((e) => e.path)).toContain(`env.${name}`);
    expect(JSON.stringify(problem)).not.toContain("s3cr3t");
    expect(h.rows()).toEqual({ workloads: 0, events: 0, allocations: 0 });
  });

  test("an ordinary name still passes", async () => {
    const h = harness();
    open.push(h);
    const res = await h.post("/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: ["true"],
      env: { OMP_NUM_THREADS: "4" },
    });
    expect(res.status).toBe(201);
  });
});

describe("loader- and shell-hijack names, on every backend", () => {
  test.each([
    ["LD_PRELOAD", "loader"],
    ["LD_LIBRARY_PATH", "loader"],
    ["ld_audit", "loader"],
    ["DYLD_INSERT_LIBRARIES", "loader"],
    ["BASH_ENV", "bash"],
    ["ENV", "sh"],
    ["PYTHONSTARTUP", "Python"],
    ["PYTHONPATH", "Python"],
    ["PYTHONHOME", "Python"],
    ["PERL5OPT", "Perl"],
    ["NODE_OPTIONS", "Node"],
    ["BUN_OPTIONS", "Bun"],
    ["GLIBC_TUNABLES", "glibc"],
    ["GCONV_PATH", "glibc"],
    // bash defines a function from any BASH_FUNC_ variable it inherits (Shellshock's
    // successor): `BASH_FUNC_ls` would replace `ls` in every bash script the job's helpers run.
    ["BASH_FUNC_ls", "bash"],
    ["bash_func_true", "bash"],
  ])("%s is refused with a 400 naming the key and why, nothing written", async (name, why) => {
    const h = harness();
    open.push(h);
    const res = await h.post("/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: ["true"],
      env: { [name]: "/tmp/evil.so" },
    });
    expect(res.status).toBe(400);
    const problem = await problemOf(res);
    const issue = problem.errors?.find((e) => e.path === `env.${name}`);
    expect(issue).toBeDefined();
    expect(issue?.message).toContain(name);
    expect(issue?.message).toContain(why);
    expect(h.rows()).toEqual({ workloads: 0, events: 0, allocations: 0 });
    // The scheduler broker refuses the same names at its own boundary.
    expect(validateEnvName(name).kind).toBe("Invalid");
  });

  test.each(["PYTHONUNBUFFERED", "OMP_NUM_THREADS", "PATH", "LANGUAGE", "ENVIRONMENT"])(
    "%s still passes",
    async (name) => {
      const h = harness();
      open.push(h);
      const res = await h.post("/v1/workloads", {
        kind: "BATCH",
        profile: "default",
        command: ["true"],
        env: { [name]: "1" },
      });
      expect(res.status).toBe(201);
      expect(validateEnvName(name).kind).toBe("Valid");
    },
  );
});
