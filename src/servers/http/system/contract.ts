/**
 * Every route of the API with the valibot schemas that validate its input and describe its
 * output: the one source `/openapi.json` is generated from. The contract test holds the app
 * to it (every registered route is here and the reverse; real responses parse with these
 * schemas) and holds it to itself (every field has a description).
 *
 * Over 400 lines because it is a table: one entry per route with its schemas, the source of /openapi.json.
 */
import type * as v from "valibot";
import { DiagnosticsSchema, HealthSchema } from "../diagnostics-schema.ts";
import {
  JupyterApiSchema,
  JupyterQuery,
  KernelListSchema,
  KernelSchema,
  KernelStartBody,
  KernelspecListSchema,
  KernelspecSchema,
} from "../jupyter/schemas.ts";
import {
  IssuedTokenSchema,
  PrincipalBody,
  PrincipalListSchema,
  PrincipalSchema,
  RevokedTokenSchema,
  TokenBody,
} from "../principals/schemas.ts";
import {
  EventListSchema,
  ExecResultSchema,
  InterruptResultSchema,
  ProfileListSchema,
  RestartResultSchema,
  TaskResultSchema,
  WorkloadListSchema,
  WorkloadSchema,
} from "../view-schemas.ts";
import { FileListSchema, UploadedFileSchema } from "../workloads/file-schemas.ts";
import {
  CellEventsQuery,
  ExecBody,
  ExecQuery,
  FilesListQuery,
  ListQuery,
  LogsQuery,
  SubmitBody,
  TaskBody,
  UploadQuery,
} from "../workloads/schemas.ts";
import { AuditListSchema, AuditQuerySchema } from "./audit.ts";
import { DIRECT_JUPYTER_OPERATIONS } from "./contract-jupyter-direct.ts";

export type Body =
  | { readonly kind: "json"; readonly schema: v.GenericSchema; readonly name: string }
  | { readonly kind: "raw"; readonly contentType: string; readonly description: string };

export interface Operation {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** OpenAPI form: `/v1/workloads/{id}`. */
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly query?: { readonly schema: v.GenericSchema; readonly name: string };
  readonly body?: { readonly schema: v.GenericSchema; readonly name: string };
  /** A body of raw bytes (an upload), streamed, never parsed. */
  readonly rawBody?: { readonly contentType: string; readonly description: string };
  readonly headers?: readonly { readonly name: string; readonly description: string }[];
  /** Success responses by status. */
  readonly ok: Readonly<Record<string, { readonly description: string; readonly body: Body }>>;
  /** Problem responses by status, besides 401 and 500 which every route may answer. */
  readonly problems: Readonly<Record<string, string>>;
}

const json = (schema: v.GenericSchema, name: string): Body => ({ kind: "json", schema, name });
const workload = json(WorkloadSchema, "Workload");
const noSuchWorkload = { "404": "No such workload." };

const jupyterQuery = { schema: JupyterQuery, name: "JupyterQuery" };
const kernel = json(KernelSchema, "Kernel");
const empty: Body = { kind: "raw", contentType: "text/plain", description: "No content." };
const noSuchKernel = { "404": "No such kernel (or another principal's)." };

/** Jupyter Server's REST API for gateway clients (servers/http/jupyter/). */
const JUPYTER_OPERATIONS: readonly Operation[] = [
  {
    method: "GET",
    path: "/api",
    operationId: "jupyterApi",
    summary: "Jupyter: the API version",
    query: jupyterQuery,
    ok: { "200": { description: "Version.", body: json(JupyterApiSchema, "JupyterApi") } },
    problems: {},
  },
  {
    method: "GET",
    path: "/api/kernelspecs",
    operationId: "listKernelspecs",
    summary: "Jupyter: one kernelspec per profile that takes sessions",
    query: jupyterQuery,
    ok: {
      "200": { description: "Kernelspecs.", body: json(KernelspecListSchema, "KernelspecList") },
    },
    problems: {},
  },
  {
    method: "GET",
    path: "/api/kernelspecs/{name}",
    operationId: "getKernelspec",
    summary: "Jupyter: one kernelspec",
    query: jupyterQuery,
    ok: { "200": { description: "The kernelspec.", body: json(KernelspecSchema, "Kernelspec") } },
    problems: { "404": "No such kernelspec." },
  },
  {
    method: "POST",
    path: "/api/kernels",
    operationId: "startKernel",
    summary: "Jupyter: start a kernel (a SESSION workload); answers at once, while queued",
    query: jupyterQuery,
    body: { schema: KernelStartBody, name: "KernelStart" },
    ok: { "201": { description: "Started (execution_state starting).", body: kernel } },
    problems: {
      "400": "Invalid profile or env.",
      "409": "Sessions disabled.",
      "429": "Over a limit.",
    },
  },
  {
    method: "GET",
    path: "/api/kernels",
    operationId: "listKernels",
    summary: "Jupyter: the caller's live kernels",
    query: jupyterQuery,
    ok: { "200": { description: "Kernels.", body: json(KernelListSchema, "KernelList") } },
    problems: {},
  },
  {
    method: "GET",
    path: "/api/kernels/{kid}",
    operationId: "getKernel",
    summary: "Jupyter: one kernel",
    query: jupyterQuery,
    ok: { "200": { description: "The kernel.", body: kernel } },
    problems: noSuchKernel,
  },
  {
    method: "DELETE",
    path: "/api/kernels/{kid}",
    operationId: "shutdownKernel",
    summary: "Jupyter: shut the kernel down (cancels the session)",
    query: jupyterQuery,
    ok: { "204": { description: "Cancel requested.", body: empty } },
    problems: noSuchKernel,
  },
  {
    method: "POST",
    path: "/api/kernels/{kid}/interrupt",
    operationId: "interruptKernel",
    summary: "Jupyter: interrupt the running cell",
    query: jupyterQuery,
    ok: { "204": { description: "Delivered, or nothing was running.", body: empty } },
    problems: { ...noSuchKernel, "409": "Not READY." },
  },
  {
    method: "POST",
    path: "/api/kernels/{kid}/restart",
    operationId: "restartKernel",
    summary: "Jupyter: a fresh interpreter in the same allocation, state cleared",
    query: jupyterQuery,
    ok: { "200": { description: "Restarted.", body: kernel } },
    problems: { ...noSuchKernel, "409": "Not READY, or the restart failed." },
  },
  {
    method: "GET",
    path: "/api/kernels/{kid}/channels",
    operationId: "kernelChannels",
    summary: "Jupyter: the kernel's channels (websocket, messaging protocol 5.3)",
    query: jupyterQuery,
    ok: { "101": { description: "Switching to the websocket.", body: empty } },
    problems: { ...noSuchKernel, "400": "Not a websocket request." },
  },
];

export const OPERATIONS: readonly Operation[] = [
  {
    method: "GET",
    path: "/healthz",
    operationId: "health",
    summary: "Liveness",
    ok: { "200": { description: "The daemon answers.", body: json(HealthSchema, "Health") } },
    problems: {},
  },
  {
    method: "GET",
    path: "/v1/profiles",
    operationId: "listProfiles",
    summary: "The profiles the backend offers, and what can be placed on each now",
    ok: { "200": { description: "Profiles.", body: json(ProfileListSchema, "ProfileList") } },
    problems: {},
  },
  {
    method: "POST",
    path: "/v1/workloads",
    operationId: "submitWorkload",
    summary: "Submit a SESSION or a BATCH workload",
    body: { schema: SubmitBody, name: "SubmitRequest" },
    headers: [
      {
        name: "Idempotency-Key",
        description: "Retrying with the same key and body returns the same workload (200).",
      },
    ],
    ok: {
      "201": { description: "Accepted; Location names it.", body: workload },
      "200": { description: "Replayed: the key was used with this body before.", body: workload },
    },
    problems: {
      "400": "Invalid body or a limit of the profile exceeded.",
      "409": "Idempotency-Key reused with another body, or a SESSION cannot be placed.",
      "413": "Body too large.",
      "415": "Body is not JSON.",
      "429": "The principal is at a limit (reason LIMIT_EXCEEDED; `limit`, `current`, `max`).",
      "503":
        "The spool (reason SPOOL_FULL) or the state dir (reason STATE_DIR_FULL) is below its low-water mark of free space.",
    },
  },
  {
    method: "GET",
    path: "/v1/workloads",
    operationId: "listWorkloads",
    summary: "Workloads, newest first, a page at a time",
    query: { schema: ListQuery, name: "ListQuery" },
    ok: { "200": { description: "A page.", body: json(WorkloadListSchema, "WorkloadList") } },
    problems: { "400": "Invalid query." },
  },
  {
    method: "GET",
    path: "/v1/workloads/{id}",
    operationId: "getWorkload",
    summary: "One workload with its conditions and attempts",
    ok: { "200": { description: "The workload.", body: workload } },
    problems: noSuchWorkload,
  },
  {
    method: "GET",
    path: "/v1/workloads/{id}/events",
    operationId: "listEvents",
    summary: "The workload's transitions, oldest first",
    ok: { "200": { description: "Events.", body: json(EventListSchema, "EventList") } },
    problems: noSuchWorkload,
  },
  {
    method: "GET",
    path: "/v1/workloads/{id}/logs",
    operationId: "workloadLogs",
    summary: "The job's stdout or stderr; with follow, streamed until the attempt ends",
    query: { schema: LogsQuery, name: "LogsQuery" },
    ok: {
      "200": {
        description: "The log's bytes (chunked transfer when following).",
        body: { kind: "raw", contentType: "text/plain", description: "Job output." },
      },
    },
    problems: {
      "400": "Invalid query.",
      "404": "No such workload, attempt or log (yet), or the log is not a regular file.",
    },
  },
  {
    method: "PUT",
    path: "/v1/workloads/{id}/files/{path}",
    operationId: "uploadFile",
    summary:
      "Write a file into the workspace (streamed; parents made; replaced atomically), owned by the job's identity",
    query: { schema: UploadQuery, name: "UploadQuery" },
    rawBody: { contentType: "application/octet-stream", description: "The file's bytes." },
    ok: {
      "201": { description: "Written.", body: json(UploadedFileSchema, "UploadedFile") },
    },
    problems: {
      "400": "Invalid path (absolute, `..`, NUL, too long, through a link) or mode.",
      "404": "No such workload.",
      "408": "The upload stalled; nothing was written.",
      "409": "The path names a directory or something else that is not a file.",
      "413": "Larger than the daemon accepts (serve --max-upload-size); nothing was written.",
      "503": "The spool ran out of space during the upload; nothing was written.",
    },
  },
  {
    method: "GET",
    path: "/v1/workloads/{id}/files/{path}",
    operationId: "downloadFile",
    summary: "Read a file of the workspace (streamed; one byte range with Range)",
    headers: [
      { name: "Range", description: "One range, `bytes=START-END`, `START-` or `-SUFFIX`." },
    ],
    ok: {
      "200": {
        description: "The whole file.",
        body: { kind: "raw", contentType: "application/octet-stream", description: "The bytes." },
      },
      "206": {
        description: "The range asked for (Content-Range says which).",
        body: { kind: "raw", contentType: "application/octet-stream", description: "The bytes." },
      },
    },
    problems: {
      "400": "Invalid path, or one through a link.",
      "404": "No such workload or file.",
      "409": "Not a regular file of the workspace.",
      "416": "The range lies outside the file.",
    },
  },
  {
    method: "DELETE",
    path: "/v1/workloads/{id}/files/{path}",
    operationId: "deleteFile",
    summary: "Remove a file, a link (never what it points at) or an empty directory",
    ok: {
      "204": {
        description: "Removed.",
        body: { kind: "raw", contentType: "text/plain", description: "Nothing." },
      },
    },
    problems: {
      "400": "Invalid path, or one through a link.",
      "404": "No such workload or file.",
      "409": "A directory that is not empty.",
    },
  },
  {
    method: "GET",
    path: "/v1/workloads/{id}/files",
    operationId: "listFiles",
    summary: "The workspace's entries, depth first, a page at a time",
    query: { schema: FilesListQuery, name: "FilesListQuery" },
    ok: { "200": { description: "Entries.", body: json(FileListSchema, "FileList") } },
    problems: {
      "400": "Invalid prefix, cursor or limit.",
      "404": "No such workload.",
    },
  },
  {
    method: "POST",
    path: "/v1/workloads/{id}/cancel",
    operationId: "cancelWorkload",
    summary: "Cancel; idempotent",
    ok: { "202": { description: "Cancellation requested (or already done).", body: workload } },
    problems: noSuchWorkload,
  },
  {
    method: "POST",
    path: "/v1/workloads/{id}/release",
    operationId: "releaseWorkload",
    summary: "Let a workload created held (`hold`) run; idempotent",
    ok: { "202": { description: "Released (or it was not held).", body: workload } },
    problems: {
      "404": "No such workload (or another principal's).",
      "409": "It ended while held (cancelled): it can no longer run.",
    },
  },
  {
    method: "POST",
    path: "/v1/workloads/{id}/exec",
    operationId: "execInSession",
    summary: "Run code in a READY session's kernel",
    query: { schema: ExecQuery, name: "ExecQuery" },
    body: { schema: ExecBody, name: "ExecRequest" },
    headers: [
      {
        name: "Accept",
        description:
          "text/event-stream (or the query ?stream=1): server-sent events as the code runs: stdout and stderr `{text}`, display `{data}`, dropped `{outputs, bytes, message}` when a slow client's buffer overflowed, kernel `{state: \"restarting\", message}` when an interrupt (or the cell's timeoutSeconds) did not stop the cell and its kernel is being restarted, then result `{status, data, kernelRestarted}` or error `{status, ename, evalue, traceback, kernelRestarted}` (ename CellTimeout past timeoutSeconds, KernelRestarted when the kernel was restarted under the cell). Every event has an `id:` (1, 2, ... within the cell) and the cell's id in its data (`cell`); a client that disconnects leaves the cell running and re-attaches with GET /v1/workloads/{id}/cells/{cell}/events.",
      },
    ],
    ok: {
      "200": {
        description: "The kernel ran it (the JSON answer; see Accept for the stream).",
        body: json(ExecResultSchema, "ExecResult"),
      },
    },
    problems: {
      "400": "Invalid body.",
      "404": "No such workload or session.",
      "409": "Not a session, not READY, ended, or sessions disabled.",
    },
  },
  {
    method: "GET",
    path: "/v1/workloads/{id}/cells/{cell}/events",
    operationId: "cellEvents",
    summary:
      "Re-attach to a running or finished cell: its server-sent events after an event id, then live until its final event",
    query: { schema: CellEventsQuery, name: "CellEventsQuery" },
    headers: [
      {
        name: "Last-Event-ID",
        description:
          "The `id:` of the last event seen, as an EventSource sends it on reconnect (the query's `after` wins).",
      },
    ],
    ok: {
      "200": {
        description:
          "text/event-stream, the events of the streaming exec (each with `id:` and the cell's id in its data). Finished cells are kept 15 minutes, at most 16 per session; each cell keeps at most 16 MiB of events.",
        body: { kind: "raw", contentType: "text/event-stream", description: "Server-sent events." },
      },
    },
    problems: {
      "400": "Invalid query.",
      "404": "No such workload, or no such cell in it (never, or no longer kept).",
      "409": "Sessions disabled.",
    },
  },
  {
    method: "POST",
    path: "/v1/workloads/{id}/interrupt",
    operationId: "interruptSession",
    summary:
      "Interrupt the running cell (KeyboardInterrupt); the kernel's state is kept unless the cell does not stop within the interrupt grace (then the kernel is restarted)",
    ok: {
      "200": {
        description: "Delivered, or nothing was running.",
        body: json(InterruptResultSchema, "InterruptResult"),
      },
    },
    problems: {
      "404": "No such workload or session.",
      "409": "Not a session, not READY, ended, or sessions disabled.",
    },
  },
  {
    method: "POST",
    path: "/v1/workloads/{id}/restart",
    operationId: "restartSessionKernel",
    summary:
      "A fresh kernel in the same allocation: every variable is gone; the running and queued cells are answered ERROR KernelRestarted",
    ok: {
      "200": {
        description: "The kernel was replaced (running false: the fresh one could not start).",
        body: json(RestartResultSchema, "RestartResult"),
      },
    },
    problems: {
      "404": "No such workload or session.",
      "409": "Not a session, not READY, ended, or sessions disabled.",
    },
  },
  {
    method: "POST",
    path: "/v1/workloads/{id}/tasks",
    operationId: "runTask",
    summary: "Run a step inside the workload's live allocation",
    body: { schema: TaskBody, name: "TaskRequest" },
    ok: { "200": { description: "The step ran.", body: json(TaskResultSchema, "TaskResult") } },
    problems: {
      "400": "Invalid body.",
      "404": "No such workload.",
      "409": "No live allocation, the workload is ending, or the backend cannot run steps.",
      "503": "The backend did not answer.",
    },
  },
  {
    method: "POST",
    path: "/v1/backup",
    operationId: "backup",
    summary: "A consistent copy of the store (SQLite VACUUM INTO), as the body",
    ok: {
      "200": {
        description:
          "The copy. One Openai4s-Keep-Beside header (`NAME PATH`) per file to keep with it.",
        body: { kind: "raw", contentType: "application/vnd.sqlite3", description: "SQLite file." },
      },
    },
    problems: {},
  },
  {
    method: "GET",
    path: "/v1/principals",
    operationId: "listPrincipals",
    summary: "Every principal and its limits (admin only)",
    ok: { "200": { description: "Principals.", body: json(PrincipalListSchema, "PrincipalList") } },
    problems: { "403": "Not the admin." },
  },
  {
    method: "POST",
    path: "/v1/principals",
    operationId: "addPrincipal",
    summary: "Add a principal (admin only)",
    body: { schema: PrincipalBody, name: "PrincipalRequest" },
    ok: { "201": { description: "Added.", body: json(PrincipalSchema, "Principal") } },
    problems: {
      "400": "Invalid body.",
      "403": "Not the admin.",
      "409": "The name or unix user is taken.",
    },
  },
  {
    method: "DELETE",
    path: "/v1/principals/{name}",
    operationId: "removePrincipal",
    summary: "Remove a principal and its tokens; its workloads stay, for the admin (admin only)",
    ok: {
      "204": {
        description: "Removed.",
        body: { kind: "raw", contentType: "text/plain", description: "Empty." },
      },
    },
    problems: { "403": "Not the admin.", "404": "No such principal." },
  },
  {
    method: "POST",
    path: "/v1/principals/{name}/tokens",
    operationId: "issueToken",
    summary: "Issue a bearer token for a principal; shown once (admin only)",
    body: { schema: TokenBody, name: "TokenRequest" },
    ok: { "201": { description: "Issued.", body: json(IssuedTokenSchema, "IssuedToken") } },
    problems: { "400": "Invalid body.", "403": "Not the admin.", "404": "No such principal." },
  },
  {
    method: "POST",
    path: "/v1/tokens/{id}/revoke",
    operationId: "revokeToken",
    summary: "Revoke a token; idempotent (admin only)",
    ok: { "200": { description: "Revoked.", body: json(RevokedTokenSchema, "RevokedToken") } },
    problems: { "403": "Not the admin.", "404": "No such token." },
  },
  {
    method: "GET",
    path: "/v1/audit",
    operationId: "audit",
    summary: "The audit log: every state-changing request (admin only)",
    query: { schema: AuditQuerySchema, name: "AuditQuery" },
    ok: { "200": { description: "Entries.", body: json(AuditListSchema, "AuditList") } },
    problems: { "400": "Invalid query.", "403": "Not the admin.", "409": "No audit log kept." },
  },
  {
    method: "GET",
    path: "/v1/diagnostics",
    operationId: "diagnostics",
    summary: "Backend health and the reconciler's last tick",
    ok: { "200": { description: "Diagnostics.", body: json(DiagnosticsSchema, "Diagnostics") } },
    problems: {},
  },
  {
    method: "GET",
    path: "/metrics",
    operationId: "metrics",
    summary: "Prometheus metrics",
    ok: {
      "200": {
        description: "Prometheus text exposition format.",
        body: { kind: "raw", contentType: "text/plain", description: "Metrics." },
      },
    },
    problems: {},
  },
  {
    method: "GET",
    path: "/openapi.json",
    operationId: "openApi",
    summary: "This document",
    ok: {
      "200": {
        description: "OpenAPI 3.1.",
        body: { kind: "raw", contentType: "application/json", description: "OpenAPI 3.1." },
      },
    },
    problems: {},
  },
  ...JUPYTER_OPERATIONS,
  ...DIRECT_JUPYTER_OPERATIONS,
];
