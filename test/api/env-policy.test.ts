import { afterEach, describe, expect, test } from "bun:test";
import { type Harness, harness, problemOf } from "./support.ts";

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
