/**
 * The shapes of exec and interrupt answers, as valibot schemas (the source of the OpenAPI
 * document and of the CLI's reading of them). Outputs are Jupyter's message contents (see
 * docs/sessions.md for the mapping).
 */
import * as v from "valibot";

export const MimeBundleSchema = v.record(v.string(), v.string());

export const ExecOutputSchema = v.variant("type", [
  v.object({ type: v.literal("stream"), name: v.picklist(["stdout", "stderr"]), text: v.string() }),
  v.object({ type: v.literal("display_data"), data: MimeBundleSchema }),
  v.object({ type: v.literal("execute_result"), data: MimeBundleSchema }),
  v.object({
    type: v.literal("error"),
    ename: v.string(),
    evalue: v.string(),
    traceback: v.string(),
  }),
]);

/** The plain JSON answer of POST /v1/workloads/{id}/exec. */
export const ExecResponseSchema = v.object({
  status: v.picklist(["OK", "ERROR"]),
  /** stdout, stderr, displays' and the last value's text/plain, joined. */
  output: v.string(),
  /** The traceback when status is ERROR. */
  error: v.nullable(v.string()),
  outputs: v.array(ExecOutputSchema),
  kernelRestarted: v.boolean(),
  /** The cell's id, for GET /v1/workloads/{id}/cells/{cell}/events. */
  cell: v.string(),
});
export type ExecResponseBody = v.InferOutput<typeof ExecResponseSchema>;

/** Server-sent events of a streaming exec: `event:` name → `data:` JSON. */
export const ExecStreamEventSchemas = {
  stdout: v.object({ text: v.string() }),
  stderr: v.object({ text: v.string() }),
  display: v.object({ data: MimeBundleSchema }),
  /** The buffer for a slow client overflowed: this many outputs were left out here. */
  dropped: v.object({ outputs: v.number(), bytes: v.number(), message: v.string() }),
  /** The kernel running the cell is being restarted: an interrupt did not stop it. */
  kernel: v.object({ state: v.literal("restarting"), message: v.string() }),
  /** Final, when the cell completed: the last expression's bundle, or null. */
  result: v.object({
    status: v.literal("OK"),
    data: v.nullable(MimeBundleSchema),
    kernelRestarted: v.boolean(),
  }),
  /** Final, when the cell raised, or the daemon got no answer (ename "SessionNotReady"). */
  error: v.object({
    status: v.literal("ERROR"),
    ename: v.string(),
    evalue: v.string(),
    traceback: v.string(),
    kernelRestarted: v.boolean(),
  }),
} as const;

/** The answer of POST /v1/workloads/{id}/restart. */
export const RestartResponseSchema = v.object({
  running: v.boolean(),
  message: v.string(),
});

/** The answer of POST /v1/workloads/{id}/interrupt. */
export const InterruptResponseSchema = v.object({
  /** False when no cell was running: there was nothing to interrupt. */
  interrupted: v.boolean(),
});
