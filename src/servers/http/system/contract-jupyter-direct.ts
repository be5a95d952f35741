/**
 * The direct Jupyter server's routes (jupyter/contents-routes.ts, jupyter/sessions-routes.ts)
 * in the contract, a table of its own beside contract.ts's.
 */
import type * as v from "valibot";
import {
  CheckpointListSchema,
  CheckpointSchema,
  ContentsCreateBody,
  ContentsModelSchema,
  ContentsQuery,
  ContentsRenameBody,
  ContentsSaveBody,
  SessionBody,
  SessionListSchema,
  SessionSchema,
} from "../jupyter/direct-schemas.ts";
import { JupyterQuery } from "../jupyter/schemas.ts";
import type { Body, Operation } from "./contract.ts";

const json = (schema: v.GenericSchema, name: string): Body => ({ kind: "json", schema, name });
const empty: Body = { kind: "raw", contentType: "text/plain", description: "No content." };
const jupyterQuery = { schema: JupyterQuery, name: "JupyterQuery" };
const contentsQuery = { schema: ContentsQuery, name: "ContentsQuery" };
const contents = json(ContentsModelSchema, "ContentsModel");
const session = json(SessionSchema, "JupyterSession");
const noSuchPath = { "404": "No such file, or not a live session of the caller's." };
const refused = { "400": "A path refused (absolute, .., a link), or the root written to." };

const root = (path: string, operationId: string): Operation[] => [
  {
    method: "GET",
    path,
    operationId,
    summary: "Jupyter contents: the root, one directory per live session of the caller's",
    query: contentsQuery,
    ok: { "200": { description: "The root.", body: contents } },
    problems: {},
  },
];

const checkpoint = (
  method: "POST" | "DELETE",
  operationId: string,
  summary: string,
): Operation => ({
  method,
  path: "/api/contents/{path}/checkpoints/{cid}",
  operationId,
  summary,
  query: jupyterQuery,
  ok: { "204": { description: "Done.", body: empty } },
  problems: { ...noSuchPath, ...refused },
});

export const DIRECT_JUPYTER_OPERATIONS: readonly Operation[] = [
  ...root("/api/contents", "contentsRoot"),
  ...root("/api/contents/", "contentsRootSlash"),
  {
    method: "POST",
    path: "/api/contents",
    operationId: "contentsCreateAtRoot",
    summary: "Jupyter contents: refused (the root is the caller's sessions; create inside one)",
    query: jupyterQuery,
    body: { schema: ContentsCreateBody, name: "ContentsCreate" },
    ok: { "201": { description: "Never.", body: contents } },
    problems: refused,
  },
  {
    method: "GET",
    path: "/api/contents/{path}",
    operationId: "contentsGet",
    summary: "Jupyter contents: a directory, notebook or file in a session's workspace",
    query: contentsQuery,
    ok: { "200": { description: "The model.", body: contents } },
    problems: {
      ...noSuchPath,
      ...refused,
      "413": "Larger than the upload cap: use the files API.",
    },
  },
  {
    method: "PUT",
    path: "/api/contents/{path}",
    operationId: "contentsSave",
    summary: "Jupyter contents: save a notebook or file, or make a directory",
    query: jupyterQuery,
    body: { schema: ContentsSaveBody, name: "ContentsSave" },
    ok: {
      "200": { description: "Replaced.", body: contents },
      "201": { description: "Created.", body: contents },
    },
    problems: {
      ...noSuchPath,
      ...refused,
      "409": "A directory is in the way.",
      "413": "Too large.",
    },
  },
  {
    method: "POST",
    path: "/api/contents/{path}",
    operationId: "contentsCreate",
    summary: "Jupyter contents: an untitled notebook, file or directory, or a copy, in a directory",
    query: jupyterQuery,
    body: { schema: ContentsCreateBody, name: "ContentsCreate" },
    ok: { "201": { description: "Created.", body: contents } },
    problems: { ...noSuchPath, ...refused },
  },
  {
    method: "PATCH",
    path: "/api/contents/{path}",
    operationId: "contentsRename",
    summary: "Jupyter contents: rename (inside one session's workspace)",
    query: jupyterQuery,
    body: { schema: ContentsRenameBody, name: "ContentsRename" },
    ok: { "200": { description: "Renamed.", body: contents } },
    problems: { ...noSuchPath, ...refused, "409": "The new path exists." },
  },
  {
    method: "DELETE",
    path: "/api/contents/{path}",
    operationId: "contentsDelete",
    summary: "Jupyter contents: delete a file, a link itself, or an empty directory",
    query: jupyterQuery,
    ok: { "204": { description: "Deleted.", body: empty } },
    problems: { ...noSuchPath, ...refused, "409": "A directory that is not empty." },
  },
  {
    method: "GET",
    path: "/api/contents/{path}/checkpoints",
    operationId: "checkpointsList",
    summary: "Jupyter contents: a file's checkpoint (none or one)",
    query: jupyterQuery,
    ok: {
      "200": { description: "Checkpoints.", body: json(CheckpointListSchema, "CheckpointList") },
    },
    problems: noSuchPath,
  },
  {
    method: "POST",
    path: "/api/contents/{path}/checkpoints",
    operationId: "checkpointCreate",
    summary: "Jupyter contents: copy the file to its checkpoint",
    query: jupyterQuery,
    ok: { "201": { description: "Made.", body: json(CheckpointSchema, "Checkpoint") } },
    problems: { ...noSuchPath, ...refused },
  },
  checkpoint("POST", "checkpointRestore", "Jupyter contents: the file back to its checkpoint"),
  checkpoint("DELETE", "checkpointDelete", "Jupyter contents: drop the file's checkpoint"),
  {
    method: "GET",
    path: "/api/sessions",
    operationId: "listJupyterSessions",
    summary: "Jupyter: the caller's sessions (a notebook path bound to a kernel)",
    query: jupyterQuery,
    ok: {
      "200": { description: "Sessions.", body: json(SessionListSchema, "JupyterSessionList") },
    },
    problems: {},
  },
  {
    method: "POST",
    path: "/api/sessions",
    operationId: "createJupyterSession",
    summary:
      "Jupyter: a session on a kernel by id, the notebook's directory's kernel, or a new one",
    query: jupyterQuery,
    body: { schema: SessionBody, name: "JupyterSessionBody" },
    ok: { "201": { description: "The session.", body: session } },
    problems: {
      "400": "Invalid kernelspec.",
      "404": "No such kernel.",
      "409": "Sessions disabled.",
      "429": "Over a limit.",
    },
  },
  {
    method: "GET",
    path: "/api/sessions/{sid}",
    operationId: "getJupyterSession",
    summary: "Jupyter: one session",
    query: jupyterQuery,
    ok: { "200": { description: "The session.", body: session } },
    problems: { "404": "No such session (or another principal's)." },
  },
  {
    method: "PATCH",
    path: "/api/sessions/{sid}",
    operationId: "updateJupyterSession",
    summary: "Jupyter: rename the session or change its kernel",
    query: jupyterQuery,
    body: { schema: SessionBody, name: "JupyterSessionBody" },
    ok: { "200": { description: "The session.", body: session } },
    problems: { "404": "No such session or kernel." },
  },
  {
    method: "DELETE",
    path: "/api/sessions/{sid}",
    operationId: "deleteJupyterSession",
    summary: "Jupyter: end the session and shut its kernel down",
    query: jupyterQuery,
    ok: { "204": { description: "Cancel requested.", body: empty } },
    problems: { "404": "No such session (or another principal's)." },
  },
];
