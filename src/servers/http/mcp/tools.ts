/**
 * The tool table: names (clients and prompts depend on them), descriptions, argument
 * schemas and truthful annotations. readOnlyHint: changes nothing. destructiveHint: may
 * end or overwrite something. idempotentHint: calling twice with the same arguments does
 * no more than once.
 */
import type { ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type * as v from "valibot";
import { cancelTool, jobLogsTool, jobStatusTool, submitBatchTool } from "./batch-tools.ts";
import { listFilesTool, readFileTool, writeFileTool } from "./file-tools.ts";
import { runCodeTool } from "./run-code.ts";
import {
  interruptTool,
  listProfilesTool,
  restartKernelTool,
  startSessionTool,
  stopSessionTool,
} from "./session-tools.ts";
import type { ToolHandler } from "./tool-context.ts";
import {
  JobLogsArgs,
  ListFilesArgs,
  NoArguments,
  ReadFileArgs,
  RunCodeArgs,
  SessionArgs,
  StartSessionArgs,
  SubmitBatchArgs,
  WorkloadArgs,
  WriteFileArgs,
} from "./tool-schemas.ts";

export interface ToolSpec {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly schema: v.GenericSchema;
  readonly annotations: ToolAnnotations;
  readonly handler: ToolHandler;
}

const READ: ToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};
const write = (destructive: boolean, idempotent: boolean): ToolAnnotations => ({
  readOnlyHint: false,
  destructiveHint: destructive,
  idempotentHint: idempotent,
  openWorldHint: false,
});

export const TOOLS: readonly ToolSpec[] = [
  {
    name: "list_profiles",
    title: "List resource profiles",
    description:
      "The resource profiles this server offers (CPUs, memory, GPUs, time limits, which kinds each takes, whether each can be placed now). Pick one for start_session or submit_batch.",
    schema: NoArguments,
    annotations: READ,
    handler: listProfilesTool as ToolHandler,
  },
  {
    name: "start_session",
    title: "Start a Python session",
    description:
      "Starts an interactive Python kernel on a profile's resources and waits until it is READY (progress notifications while it queues and starts), returning its id as `session`. wait=false returns the id at once. The session ends after idleTimeoutSeconds without use, or with stop_session.",
    schema: StartSessionArgs,
    annotations: write(false, false),
    handler: startSessionTool as ToolHandler,
  },
  {
    name: "stop_session",
    title: "Stop a session",
    description:
      "Ends a session: its kernel and every variable in it are gone; its workspace files stay readable.",
    schema: SessionArgs,
    annotations: write(true, true),
    handler: stopSessionTool as ToolHandler,
  },
  {
    name: "interrupt",
    title: "Interrupt the running cell",
    description:
      "KeyboardInterrupt in the session's running cell; the kernel and its variables stay (unless the cell ignores it: then the kernel is restarted).",
    schema: SessionArgs,
    annotations: write(true, false),
    handler: interruptTool as ToolHandler,
  },
  {
    name: "restart_kernel",
    title: "Restart the kernel",
    description:
      "A fresh kernel in the same session: every variable is gone, workspace files stay.",
    schema: SessionArgs,
    annotations: write(true, false),
    handler: restartKernelTool as ToolHandler,
  },
  {
    name: "run_code",
    title: "Run Python code",
    description:
      "Runs code in the session's kernel (state is kept between calls, like notebook cells; the working directory is the workspace). Returns stdout/stderr as text, figures as PNG images, rich values as text/html and text/plain; an exception is an error result with its traceback. Cancelling the call interrupts the cell.",
    schema: RunCodeArgs,
    annotations: write(false, false),
    handler: runCodeTool as ToolHandler,
  },
  {
    name: "write_file",
    title: "Write a workspace file",
    description:
      "Writes a file into a workload's workspace (replacing one of the same name). Text as is, binary with encoding=base64. The answer's size cap applies (larger files: openai4s cp).",
    schema: WriteFileArgs,
    annotations: write(true, true),
    handler: writeFileTool as ToolHandler,
  },
  {
    name: "read_file",
    title: "Read a workspace file",
    description:
      "Reads a file of a workload's workspace: text as text, binary as base64; a file too large for one answer comes back as a resource link.",
    schema: ReadFileArgs,
    annotations: READ,
    handler: readFileTool as ToolHandler,
  },
  {
    name: "list_files",
    title: "List workspace files",
    description: "Lists a workload's workspace (paths, types, sizes), a page at a time.",
    schema: ListFilesArgs,
    annotations: READ,
    handler: listFilesTool as ToolHandler,
  },
  {
    name: "submit_batch",
    title: "Submit a batch job",
    description:
      "Submits a command as a batch job (optionally a job array of `array` elements, each told OPENAI4S_ARRAY_INDEX, or `tasks` MPI ranks). idempotency_key makes it exactly-once: a retry with the same key returns the same job, never a second one.",
    schema: SubmitBatchArgs,
    annotations: write(false, true),
    handler: submitBatchTool as ToolHandler,
  },
  {
    name: "job_status",
    title: "Workload status",
    description:
      "A workload's phase, reason and hint, conditions (READY for a session), attempts and, for an array, its elements' counts.",
    schema: WorkloadArgs,
    annotations: READ,
    handler: jobStatusTool as ToolHandler,
  },
  {
    name: "job_logs",
    title: "Read a job's log",
    description:
      "A workload's stdout or stderr (tail: its last N lines; index: a job array element's). Long logs are cut to their end.",
    schema: JobLogsArgs,
    annotations: READ,
    handler: jobLogsTool as ToolHandler,
  },
  {
    name: "cancel",
    title: "Cancel a workload",
    description:
      "Cancels a batch job (every element of an array) or a session. Calling it again changes nothing.",
    schema: WorkloadArgs,
    annotations: write(true, true),
    handler: cancelTool as ToolHandler,
  },
];
