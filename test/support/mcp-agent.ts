/**
 * An agent's session of work through MCP, with the SDK's own client, as the e2e tests play
 * it on each backend and transport (issue 31): start a session, upload a CSV, pandas and a
 * matplotlib PNG, a 5-element job array and each element's log, a long cell cancelled
 * through notifications/cancelled. Returns what it measured; throws naming the step.
 */
import { expect } from "bun:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { eventually } from "./eventually.ts";

type Content = CallToolResult["content"][number];

export function textOf(result: unknown): string {
  return ((result as CallToolResult).content ?? [])
    .map((c: Content) => (c.type === "text" ? c.text : ""))
    .join("\n");
}

export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  options: {
    signal?: AbortSignal;
    onprogress?: (p: { progress: number; message?: string | undefined }) => void;
  } = {},
): Promise<CallToolResult> {
  const result = (await client.callTool({ name, arguments: args }, undefined, {
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.onprogress ? { onprogress: options.onprogress, resetTimeoutOnProgress: true } : {}),
    timeout: 600_000,
  })) as CallToolResult;
  return result;
}

export interface AgentRun {
  readonly sessionId: string;
  readonly startProgress: number;
  readonly cancelToIdleMs: number;
}

export async function playAgent(
  client: Client,
  profiles: { readonly session: string; readonly batch: string },
  label: string,
): Promise<AgentRun> {
  let startProgress = 0;
  const started = await call(
    client,
    "start_session",
    { profile: profiles.session, waitSeconds: 120, idempotency_key: `${label}-session` },
    { onprogress: () => (startProgress += 1) },
  );
  expect(started.isError, textOf(started)).toBeUndefined();
  const { session, ready } = JSON.parse(textOf(started)) as { session: string; ready: boolean };
  expect(ready).toBe(true);

  const csv = "x,y\n1,2\n2,4\n3,6\n4,8\n";
  const written = await call(client, "write_file", {
    workload: session,
    path: "data/points.csv",
    content: csv,
  });
  expect(written.isError, textOf(written)).toBeUndefined();
  const listed = await call(client, "list_files", { workload: session, prefix: "data/" });
  expect(textOf(listed)).toContain("data/points.csv");

  const pandas = await call(client, "run_code", {
    session,
    code: "import pandas as pd\ndf = pd.read_csv('data/points.csv')\nprint('slope', (df.y / df.x).mean())\ndf.describe()",
  });
  expect(pandas.isError, textOf(pandas)).toBeUndefined();
  expect(textOf(pandas)).toContain("slope 2.0");
  expect(textOf(pandas)).toContain("<table"); // the DataFrame's text/html

  const plot = await call(client, "run_code", {
    session,
    code: "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot(df.x, df.y)\nplt.show()\ndisplay(fig)",
  });
  expect(plot.isError, textOf(plot)).toBeUndefined();
  const image = plot.content.find((c) => c.type === "image");
  expect(image?.type === "image" && image.mimeType).toBe("image/png");
  const png = Buffer.from(image?.type === "image" ? image.data : "", "base64");
  expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");

  const failing = await call(client, "run_code", { session, code: "1/0" });
  expect(failing.isError).toBe(true);
  expect(textOf(failing)).toContain("ZeroDivisionError");

  const submitted = await call(client, "submit_batch", {
    command: ["bash", "-c", 'echo "element $OPENAI4S_ARRAY_INDEX of five"'],
    profile: profiles.batch,
    array: 5,
    idempotency_key: `${label}-array`,
  });
  expect(submitted.isError, textOf(submitted)).toBeUndefined();
  const batchId = (JSON.parse(textOf(submitted)) as { workload: string }).workload;
  const retried = await call(client, "submit_batch", {
    command: ["bash", "-c", 'echo "element $OPENAI4S_ARRAY_INDEX of five"'],
    profile: profiles.batch,
    array: 5,
    idempotency_key: `${label}-array`,
  });
  expect(JSON.parse(textOf(retried))).toMatchObject({ workload: batchId, replayed: true });
  await eventually(
    async () => {
      const status = JSON.parse(
        textOf(await call(client, "job_status", { workload: batchId })),
      ) as { phase: string };
      if (status.phase === "FAILED" || status.phase === "CANCELLED")
        throw new Error(`array ${status.phase}`);
      return status.phase === "COMPLETED" ? true : null;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  for (let index = 0; index < 5; index++) {
    const log = await call(client, "job_logs", { workload: batchId, index });
    expect(log.isError, textOf(log)).toBeUndefined();
    expect(textOf(log)).toContain(`element ${index} of five`);
  }
  const resource = await client.readResource({
    uri: `openai4s://workloads/${batchId}/elements/3/logs/stdout`,
  });
  expect(JSON.stringify(resource.contents)).toContain("element 3 of five");

  // A long cell, cancelled by the client once it is running: the kernel is interrupted and
  // free again, its variables kept.
  const cancel = new AbortController();
  const long = call(
    client,
    "run_code",
    { session, code: "import time\nprint('working', flush=True)\ntime.sleep(600)" },
    {
      signal: cancel.signal,
      onprogress: (p) => {
        if ((p.message ?? "").includes("working")) cancel.abort("the user changed their mind");
      },
    },
  );
  const cancelledAt = await long.then(
    () => {
      throw new Error("the long cell answered instead of being cancelled");
    },
    () => performance.now(),
  );
  const after = await call(client, "run_code", { session, code: "print(len(df))" });
  const cancelToIdleMs = performance.now() - cancelledAt;
  expect(textOf(after)).toContain("4");

  const stopped = await call(client, "stop_session", { session });
  expect(stopped.isError, textOf(stopped)).toBeUndefined();
  return { sessionId: session, startProgress, cancelToIdleMs };
}
