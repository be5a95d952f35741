/**
 * A submission the scheduler refuses keeps the scheduler's own words for the admin (a
 * partition the cluster lacks, named) and the hidden form for its principal (issue 35).
 * Before, only the hidden form was stored, so even the admin's `show` said "invalid placement
 * specified: [hidden]" and the words were only in the daemon's log.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { publicMessageRewriter } from "../../src/adapters/backend-slurm/public-messages.ts";
import {
  applyTransition,
  getWorkload,
  listAllocations,
  mintAttempt,
} from "../../src/adapters/store-sqlite/index.ts";
import { mintSubmissionToken, type SubmissionToken } from "../../src/core/models.ts";
import type { SubmitResult } from "../../src/core/ports/allocation-backend.ts";
import { recordSubmitResult } from "../../src/core/reconciler/submit-decisions.ts";
import { messageForms } from "../../src/core/scheduler-words.ts";
import type { Access } from "../../src/servers/http/deps.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const ADMIN_TOKEN = "admin-secret-token";
const TCP: Access = { kind: "Bearer", token: ADMIN_TOKEN };
const SAID = "sbatch: error: Batch job submission failed: Invalid partition name specified: gpuu";
const HIDDEN =
  "sbatch: error: Batch job submission failed: Invalid placement name specified: [hidden]";

/** The Slurm adapter's rewrite of the site's names (public-messages.ts), for "gpuu". */
const hide = publicMessageRewriter({ values: ["gpuu"] });

/** A backend whose scheduler refuses every submission naming the partition, as sbatch does. */
function refusingBackend() {
  return fakeBackend({
    submit: async (requests) =>
      new Map<SubmissionToken, SubmitResult>(
        requests.map((r) => {
          const forms = messageForms(SAID, hide);
          return [
            r.token,
            {
              kind: "Rejected",
              token: r.token,
              message: forms.message,
              ...(forms.messageAdmin === null ? {} : { messageAdmin: forms.messageAdmin }),
            },
          ];
        }),
      ),
  });
}

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

function as(token: string, init: RequestInit = {}): RequestInit {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return { ...init, headers };
}

function json(method: string, body?: unknown): RequestInit {
  return {
    method,
    headers: { "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  };
}

async function principalToken(h: Harness, name: string): Promise<string> {
  expect((await h.request("/v1/principals", json("POST", { name }))).status).toBe(201);
  const issued = await h.request(
    `/v1/principals/${name}/tokens`,
    as(ADMIN_TOKEN, json("POST", {})),
    TCP,
  );
  expect(issued.status).toBe(201);
  return ((await issued.json()) as { token: string }).token;
}

/** The principal's workload, refused by the scheduler as the reconciler records it. */
async function refusedWorkload(
  h: Harness,
  backend: ReturnType<typeof refusingBackend>,
  token: string,
): Promise<string> {
  const res = await h.request(
    "/v1/workloads",
    as(token, json("POST", { kind: "BATCH", profile: "default", command: ["true"] })),
    TCP,
  );
  expect(res.status).toBe(201);
  const id = ((await res.json()) as { id: string }).id;
  const minted = mintAttempt(h.store, {
    workloadId: id,
    allocationId: `a-${id}`,
    token: mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n))),
    expectedEpoch: 0,
    message: "submitting",
  });
  if (minted.kind !== "Minted") throw new Error("not minted");
  const answers = await backend.submit([
    {
      allocationId: minted.allocation.id,
      workloadId: id,
      workloadKind: "BATCH",
      token: minted.allocation.token,
      epoch: 1,
      profile: "default",
      name: "refused",
      launch: { kind: "COMMAND", command: ["true"], env: {} },
      allocationDir: "/nonexistent/allocation",
      workspaceDir: "/nonexistent/workspace",
      timeLimitSeconds: null,
    },
  ]);
  const answer = answers.get(minted.allocation.token);
  if (answer === undefined) throw new Error("no answer");
  const w = getWorkload(h.store, id);
  const a = listAllocations(h.store, id)[0];
  if (w === null || w === undefined || a === undefined) throw new Error("no rows");
  expect(applyTransition(h.store, recordSubmitResult(w, a, answer, h.clock.now()))).toBe(true);
  return id;
}

describe("a workload the scheduler refused", () => {
  test("the admin reads the scheduler's words in show, list and events; the principal the hidden form", async () => {
    const backend = refusingBackend();
    const h = harness({ backend });
    open.push(h);
    const token = await principalToken(h, "alice");
    const id = await refusedWorkload(h, backend, token);

    const adminShow = (await (await h.request(`/v1/workloads/${id}`)).json()) as {
      reason: string;
      message: string;
    };
    expect(adminShow.reason).toBe("SUBMIT_REJECTED");
    expect(adminShow.message).toBe(SAID);
    const adminList = (await (await h.request("/v1/workloads")).json()) as {
      items: { id: string; message: string }[];
    };
    expect(adminList.items.find((i) => i.id === id)?.message).toBe(SAID);
    const adminEvents = (await (await h.request(`/v1/workloads/${id}/events`)).json()) as {
      reason: string | null;
      message: string | null;
    }[];
    expect(adminEvents.find((e) => e.reason === "SUBMIT_REJECTED")?.message).toBe(SAID);
    const adminPage = await (await h.request(`/ui/workloads/${id}`)).text();
    expect(adminPage).toContain("Invalid partition name specified: gpuu");

    for (const path of [`/v1/workloads/${id}`, "/v1/workloads", `/v1/workloads/${id}/events`]) {
      const res = await h.request(path, as(token), TCP);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).not.toContain("gpuu");
      expect(text).toContain(HIDDEN);
    }
  });
});
