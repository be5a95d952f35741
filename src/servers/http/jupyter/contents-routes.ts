/**
 * `/api/contents`: Jupyter Server's contents API over the caller's live sessions'
 * workspaces (contents-locate.ts says how paths map), so JupyterLab's file browser and
 * VS Code see the files the kernel sees. Get, save, create untitled, copy, rename, delete,
 * and one checkpoint per file kept in `.ipynb_checkpoints/` as Jupyter Server keeps them.
 * Every file operation goes through contents-fs.ts: no link in a workspace is followed.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError, notFound, validationFailed } from "../problem.ts";
import { parseWith, readJson } from "../validation.ts";
import { fileNotFound, pathRefused } from "../workloads/workspace-files.ts";
import { readContentsBody } from "./contents-body.ts";
import {
  deleteEntry,
  listDir,
  makeDir,
  readWhole,
  renameEntry,
  statEntry,
  statIfDirExists,
  type Workspace,
  workspaceEntry,
  writeWhole,
} from "./contents-fs.ts";
import { type Located, locate, visibleSessions } from "./contents-locate.ts";
import {
  bareModel,
  type ContentsModel,
  type ContentType,
  checkpointParts,
  copyName,
  type FileFormat,
  fileContent,
  notebookBytes,
  typeOf,
  untitledName,
} from "./contents-model.ts";
import {
  ContentsCreateBody,
  ContentsQuery,
  ContentsRenameBody,
  ContentsSaveBody,
} from "./direct-schemas.ts";

const CHECKPOINT_ID = "checkpoint";
const MAX_UNTITLED = 1000;

type InSession = Extract<Located, { kind: "InSession" }>;

function notFromRoot(where: Located, what: string): InSession {
  if (where.kind === "Root") {
    throw pathRefused(
      `the contents root holds one directory per live session and cannot be changed: ${what} inside a session's directory`,
    );
  }
  return where;
}

/** The session's directory itself is the workspace: stopping the session ends it, not this API. */
function notTheWorkspace(where: InSession, what: string): InSession {
  if (where.inner.length === 0) {
    throw pathRefused(`${where.path} is a session's workspace: ${what} the files inside it`);
  }
  return where;
}

function readNotebook(ws: Workspace, inner: readonly string[], path: string): unknown {
  const text = readWhole(ws, inner, path).toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    throw validationFailed([{ path, message: "is not a notebook (not JSON): open it as a file" }]);
  }
}

export function createContentsRoutes(deps: ApiDeps): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const where = (c: Context<ApiEnv>, raw: string | undefined): Located =>
    locate(deps.store, deps.files, c.get("caller"), raw ?? "");

  function rootModel(c: Context<ApiEnv>, withContent: boolean): ContentsModel {
    const now = deps.clock.now();
    const sessions = visibleSessions(deps.store, c.get("caller"));
    const items = sessions.map((w) => {
      const ws = {
        files: deps.files,
        workloadId: w.id,
        subject: { profile: w.profile, owner: w.owner ?? null },
      };
      return bareModel(w.id, workspaceEntry(ws, now), "directory");
    });
    const stamp = new Date(now).toISOString();
    return {
      name: "",
      path: "",
      type: "directory",
      writable: false,
      created: stamp,
      last_modified: stamp,
      size: null,
      mimetype: null,
      content: withContent ? items : null,
      format: withContent ? "json" : null,
    };
  }

  function dirModel(at: InSession, withContent: boolean): ContentsModel {
    const entry =
      at.inner.length === 0
        ? workspaceEntry(at.ws, deps.clock.now())
        : statEntry(at.ws, at.inner, at.path);
    if (entry === null) throw fileNotFound(`${at.path} does not exist`);
    const model = bareModel(at.path, entry, "directory");
    if (!withContent) return model;
    const items = at.inner.length === 0 ? safeList(at) : listDir(at.ws, at.inner, at.path);
    const content = items.map((e) => bareModel(`${at.path}/${e.name}`, e, typeOf(e, undefined)));
    return { ...model, content, format: "json" };
  }

  /** A session's workspace not made yet lists as empty. */
  function safeList(at: InSession) {
    try {
      return listDir(at.ws, at.inner, at.path);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return [];
      throw error;
    }
  }

  function getModel(
    at: InSession,
    query: {
      type?: ContentType | undefined;
      format?: FileFormat | undefined;
      content?: "0" | "1" | undefined;
    },
  ): ContentsModel {
    const withContent = query.content !== "0";
    if (at.inner.length === 0) return dirModel(at, withContent);
    const entry = statEntry(at.ws, at.inner, at.path);
    if (entry === null) throw fileNotFound(`${at.path} does not exist`);
    const type = typeOf(entry, query.type);
    if (query.type === "directory" && type !== "directory") {
      throw validationFailed([{ path: "type", message: `${at.path} is not a directory` }]);
    }
    if (type === "directory") return dirModel(at, withContent);
    const model = bareModel(at.path, entry, type);
    if (!withContent) return model;
    if (type === "notebook") {
      return { ...model, content: readNotebook(at.ws, at.inner, at.path), format: "json" };
    }
    const file = fileContent(readWhole(at.ws, at.inner, at.path), query.format);
    if (file === null) {
      throw validationFailed([
        { path: "format", message: `${at.path} is not UTF-8 text: ask for base64` },
      ]);
    }
    return { ...model, ...file, mimetype: bareModel(at.path, entry, "file").mimetype };
  }

  function modelAfterWrite(at: InSession, type: ContentType): ContentsModel {
    const entry =
      at.inner.length === 0
        ? workspaceEntry(at.ws, deps.clock.now())
        : statEntry(at.ws, at.inner, at.path);
    if (entry === null) throw fileNotFound(`${at.path} vanished after it was written`);
    return bareModel(at.path, entry, entry.kind === "directory" ? "directory" : type);
  }

  const get = (c: Context<ApiEnv>, raw: string | undefined) => {
    const query = parseWith(ContentsQuery, c.req.query());
    const at = where(c, raw ?? "");
    if (at.kind === "Root") return c.json(rootModel(c, query.content !== "0"));
    return c.json(getModel(at, query));
  };
  app.get("/api/contents", (c) => get(c, ""));
  app.get("/api/contents/", (c) => get(c, ""));
  app.post("/api/contents", (c) => {
    notFromRoot(where(c, ""), "create files");
    return c.body(null, 204); // never reached: notFromRoot throws for the root
  });

  app.get("/api/contents/:path{.+?}/checkpoints", (c) => {
    const at = notTheWorkspace(
      notFromRoot(where(c, c.req.param("path")), "checkpoints are of files"),
      "checkpoint",
    );
    if (statEntry(at.ws, at.inner, at.path)?.kind !== "file")
      throw fileNotFound(`${at.path} is not a file`);
    const saved = statIfDirExists(at.ws, checkpointParts(at.inner), at.path);
    return c.json(
      saved === null
        ? []
        : [{ id: CHECKPOINT_ID, last_modified: new Date(saved.modifiedMs).toISOString() }],
    );
  });

  app.post("/api/contents/:path{.+?}/checkpoints", (c) => {
    const at = notTheWorkspace(
      notFromRoot(where(c, c.req.param("path")), "checkpoint files"),
      "checkpoint",
    );
    const cp = checkpointParts(at.inner);
    writeWhole(at.ws, cp, readWhole(at.ws, at.inner, at.path), at.path);
    const saved = statIfDirExists(at.ws, cp, at.path);
    const stamp = new Date(saved?.modifiedMs ?? deps.clock.now()).toISOString();
    return c.json({ id: CHECKPOINT_ID, last_modified: stamp }, 201);
  });

  const checkpointOf = (c: Context<ApiEnv>) => {
    const at = notTheWorkspace(
      notFromRoot(where(c, c.req.param("path")), "checkpoint files"),
      "checkpoint",
    );
    if (c.req.param("cid") !== CHECKPOINT_ID)
      throw notFound(`no checkpoint ${JSON.stringify(c.req.param("cid"))}`);
    return { at, cp: checkpointParts(at.inner) };
  };

  app.post("/api/contents/:path{.+?}/checkpoints/:cid", (c) => {
    const { at, cp } = checkpointOf(c);
    writeWhole(at.ws, at.inner, readWhole(at.ws, cp, `${at.path} (its checkpoint)`), at.path);
    return c.body(null, 204);
  });

  app.delete("/api/contents/:path{.+?}/checkpoints/:cid", (c) => {
    const { at, cp } = checkpointOf(c);
    deleteEntry(at.ws, cp, `${at.path} (its checkpoint)`);
    return c.body(null, 204);
  });

  app.get("/api/contents/:path{.+}", (c) => get(c, c.req.param("path")));

  app.put("/api/contents/:path{.+}", async function save(c) {
    const at = notFromRoot(where(c, c.req.param("path")), "save");
    const body = parseWith(ContentsSaveBody, await readContentsBody(c, deps.files.maxUploadBytes));
    if (body.chunk !== undefined) {
      throw validationFailed([
        {
          path: "chunk",
          message:
            "chunked uploads are not taken here: upload large files with the files API or openai4s cp",
        },
      ]);
    }
    if (body.type === "directory") {
      const made = at.inner.length === 0 ? false : makeDir(at.ws, at.inner, at.path);
      return c.json(modelAfterWrite(at, "directory"), made ? 201 : 200);
    }
    notTheWorkspace(at, "save");
    const bytes = bytesToSave(body, at.path);
    const created = writeWhole(at.ws, at.inner, bytes, at.path);
    return c.json(modelAfterWrite(at, body.type), created ? 201 : 200);
  });

  app.post("/api/contents/:path{.+}", async function create(c) {
    const at = notFromRoot(where(c, c.req.param("path")), "create files");
    const body = parseWith(ContentsCreateBody, await readJson(c, { emptyIsNone: true }));
    const dir =
      at.inner.length === 0
        ? workspaceEntry(at.ws, deps.clock.now())
        : statEntry(at.ws, at.inner, at.path);
    if (dir?.kind !== "directory") throw fileNotFound(`${at.path} is not a directory`);
    if (body.copy_from !== undefined) return c.json(copyInto(c, at, body.copy_from), 201);
    const type = body.type ?? "file";
    for (let n = 0; n < MAX_UNTITLED; n++) {
      const name = untitledName(type, body.ext, n);
      const target: InSession = { ...at, path: `${at.path}/${name}`, inner: [...at.inner, name] };
      if (statIfDirExists(target.ws, target.inner, target.path) !== null) continue;
      if (type === "directory") makeDir(at.ws, target.inner, target.path);
      else
        writeWhole(
          at.ws,
          target.inner,
          type === "notebook" ? notebookBytes(EMPTY_NOTEBOOK) : new Uint8Array(),
          target.path,
        );
      return c.json(modelAfterWrite(target, type), 201);
    }
    throw pathRefused(`${at.path} already holds ${MAX_UNTITLED} untitled entries`);
  });

  function copyInto(c: Context<ApiEnv>, dir: InSession, from: string): ContentsModel {
    const source = notTheWorkspace(notFromRoot(where(c, from), "copy files"), "copy");
    const entry = statEntry(source.ws, source.inner, source.path);
    if (entry?.kind !== "file") throw fileNotFound(`${source.path} is not a file`);
    const bytes = readWhole(source.ws, source.inner, source.path);
    for (let n = 1; n < MAX_UNTITLED; n++) {
      const name = copyName(entry.name, n);
      const target: InSession = {
        ...dir,
        path: `${dir.path}/${name}`,
        inner: [...dir.inner, name],
      };
      if (statIfDirExists(target.ws, target.inner, target.path) !== null) continue;
      writeWhole(dir.ws, target.inner, bytes, target.path);
      return modelAfterWrite(target, typeOf(entry, undefined));
    }
    throw pathRefused(`${dir.path} already holds ${MAX_UNTITLED} copies of ${entry.name}`);
  }

  app.patch("/api/contents/:path{.+}", async function rename(c) {
    const from = notTheWorkspace(notFromRoot(where(c, c.req.param("path")), "rename"), "rename");
    const body = parseWith(ContentsRenameBody, await readJson(c));
    const to = notTheWorkspace(notFromRoot(where(c, body.path), "rename"), "rename");
    if (to.ws.workloadId !== from.ws.workloadId) {
      throw pathRefused(
        `${from.path} -> ${to.path}: a rename stays inside one session's directory`,
      );
    }
    renameEntry(from.ws, from.inner, to.inner, { from: from.path, to: to.path });
    const entry = statEntry(to.ws, to.inner, to.path);
    if (entry === null) throw fileNotFound(`${to.path} vanished after the rename`);
    return c.json(bareModel(to.path, entry, typeOf(entry, undefined)));
  });

  app.delete("/api/contents/:path{.+}", (c) => {
    const at = notTheWorkspace(
      notFromRoot(where(c, c.req.param("path")), "delete"),
      "stop the session to end it, or delete",
    );
    deleteEntry(at.ws, at.inner, at.path);
    // Its checkpoint goes with it, as in Jupyter Server.
    if (statIfDirExists(at.ws, checkpointParts(at.inner), at.path) !== null) {
      deleteEntry(at.ws, checkpointParts(at.inner), at.path);
    }
    return c.body(null, 204);
  });

  return app;
}

const EMPTY_NOTEBOOK = {
  cells: [],
  metadata: {},
  nbformat: 4,
  nbformat_minor: 5,
};

function bytesToSave(
  body: {
    readonly type: ContentType;
    readonly format?: string | null | undefined;
    readonly content?: unknown;
  },
  path: string,
): Uint8Array {
  if (body.type === "notebook") {
    if (typeof body.content !== "object" || body.content === null || Array.isArray(body.content)) {
      throw validationFailed([
        { path: "content", message: "a notebook's content is its JSON object" },
      ]);
    }
    return notebookBytes(body.content);
  }
  if (typeof body.content !== "string") {
    throw validationFailed([{ path: "content", message: `${path}: a file's content is a string` }]);
  }
  if (body.format === "base64") {
    const compact = body.content.replace(/\s+/g, "");
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) {
      throw validationFailed([{ path: "content", message: "is not base64" }]);
    }
    return Buffer.from(compact, "base64");
  }
  return new TextEncoder().encode(body.content);
}
