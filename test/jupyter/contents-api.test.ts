/**
 * The direct Jupyter server's contents and sessions routes, in process: the root is one
 * directory per live session of the caller's; notebooks, text and binary files, directories,
 * untitled entries, copies, renames, deletes and checkpoints round trip in the workspace;
 * another principal's session is a 404 byte-identical to a missing one; and the paths a
 * client or the session's own code can play (.., encoded slashes, absolute paths, links
 * planted in the workspace) reach nothing outside it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stateLayout } from "../../src/core/layout.ts";
import type { IsolationVerdict } from "../../src/core/ports/allocation-backend.ts";
import type { Access } from "../../src/servers/http/deps.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { fakeBackend } from "../support/fake-backend.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const ADMIN_TOKEN = "admin-secret-token";
const TCP: Access = { kind: "Bearer", token: ADMIN_TOKEN };

const open: Harness[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
  for (const d of dirs.splice(0)) removeDir(d);
});

function make(): Harness {
  const h = harness({
    backend: fakeBackend({
      capabilities: {
        sessionIsolation: {
          verifySessionIsolation: async (): Promise<IsolationVerdict> => ({
            kind: "Verified",
            mechanism: "test",
          }),
        },
      },
    }),
  });
  mkdirSync(join(stateLayout(h.dir).spool, "workloads"), { recursive: true });
  open.push(h);
  return h;
}

/** A request over TCP with `token`, under /api/ as Jupyter clients send it. */
function as(h: Harness, token: string, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("Authorization", path.startsWith("/api") ? `token ${token}` : `Bearer ${token}`);
  if (init.body !== undefined) headers.set("Content-Type", "application/json");
  return h.request(path, { ...init, headers }, TCP);
}

const body = (method: string, value: unknown): RequestInit => ({
  method,
  body: JSON.stringify(value),
});

async function principal(h: Harness, name: string): Promise<string> {
  const added = await h.post("/v1/principals", { name });
  expect(added.status).toBe(201);
  const issued = await as(h, ADMIN_TOKEN, `/v1/principals/${name}/tokens`, body("POST", {}));
  expect(issued.status).toBe(201);
  return ((await issued.json()) as { token: string }).token;
}

async function session(h: Harness, token: string): Promise<string> {
  const res = await as(
    h,
    token,
    "/v1/workloads",
    body("POST", { kind: "SESSION", profile: "interactive" }),
  );
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

function workspace(h: Harness, id: string): string {
  return stateLayout(h.dir).workspaceDir(id);
}

interface Model {
  name: string;
  path: string;
  type: string;
  format: string | null;
  mimetype: string | null;
  content: unknown;
}

async function model(res: Response): Promise<Model> {
  return (await res.json()) as Model;
}

const NOTEBOOK = {
  cells: [
    { cell_type: "code", source: "print(1)", metadata: {}, outputs: [], execution_count: null },
  ],
  metadata: {},
  nbformat: 4,
  nbformat_minor: 5,
};

describe("contents: the root and a session's workspace", () => {
  test("the root lists the caller's live sessions only; files round trip", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const mine = await session(h, alice);
    const theirs = await session(h, bob);

    const root = await model(await as(h, alice, "/api/contents"));
    expect(root.type).toBe("directory");
    expect((root.content as Model[]).map((m) => m.path)).toEqual([mine]);
    const admin = await model(await as(h, ADMIN_TOKEN, "/api/contents"));
    expect((admin.content as Model[]).map((m) => m.path).sort()).toEqual([mine, theirs].sort());

    // Before the first attempt the workspace is an empty directory.
    const empty = await model(await as(h, alice, `/api/contents/${mine}`));
    expect(empty).toMatchObject({ type: "directory", content: [] });

    const saved = await as(
      h,
      alice,
      `/api/contents/${mine}/nb.ipynb`,
      body("PUT", { type: "notebook", content: NOTEBOOK }),
    );
    expect(saved.status).toBe(201);
    expect(await model(saved)).toMatchObject({
      name: "nb.ipynb",
      path: `${mine}/nb.ipynb`,
      type: "notebook",
      content: null,
    });
    expect(JSON.parse(readFileSync(join(workspace(h, mine), "nb.ipynb"), "utf8"))).toEqual(
      NOTEBOOK,
    );
    const again = await as(
      h,
      alice,
      `/api/contents/${mine}/nb.ipynb`,
      body("PUT", { type: "notebook", content: NOTEBOOK }),
    );
    expect(again.status).toBe(200);
    const nb = await model(await as(h, alice, `/api/contents/${mine}/nb.ipynb?content=1`));
    expect(nb).toMatchObject({ type: "notebook", format: "json", content: NOTEBOOK });

    await as(h, alice, `/api/contents/${mine}/data`, body("PUT", { type: "directory" }));
    const text = await as(
      h,
      alice,
      `/api/contents/${mine}/data/in.csv`,
      body("PUT", { type: "file", format: "text", content: "a,b\n1,2\n" }),
    );
    expect(text.status).toBe(201);
    const bytes = Buffer.from([0, 255, 1, 254]);
    await as(
      h,
      alice,
      `/api/contents/${mine}/data/raw.bin`,
      body("PUT", { type: "file", format: "base64", content: bytes.toString("base64") }),
    );
    expect(readFileSync(join(workspace(h, mine), "data", "raw.bin"))).toEqual(bytes);
    expect(await model(await as(h, alice, `/api/contents/${mine}/data/in.csv`))).toMatchObject({
      format: "text",
      content: "a,b\n1,2\n",
      mimetype: "text/csv",
    });
    expect(await model(await as(h, alice, `/api/contents/${mine}/data/raw.bin`))).toMatchObject({
      format: "base64",
      content: bytes.toString("base64"),
    });

    const listing = await model(await as(h, alice, `/api/contents/${mine}`));
    expect((listing.content as Model[]).map((m) => `${m.type} ${m.path}`)).toEqual([
      `directory ${mine}/data`,
      `notebook ${mine}/nb.ipynb`,
    ]);

    const untitled = await model(
      await as(h, alice, `/api/contents/${mine}`, body("POST", { type: "notebook" })),
    );
    expect(untitled.path).toBe(`${mine}/Untitled.ipynb`);
    const second = await model(
      await as(h, alice, `/api/contents/${mine}`, body("POST", { type: "notebook" })),
    );
    expect(second.path).toBe(`${mine}/Untitled1.ipynb`);
    const copy = await model(
      await as(
        h,
        alice,
        `/api/contents/${mine}/data`,
        body("POST", { copy_from: `${mine}/data/in.csv` }),
      ),
    );
    expect(copy.path).toBe(`${mine}/data/in-Copy1.csv`);

    const renamed = await as(
      h,
      alice,
      `/api/contents/${mine}/Untitled.ipynb`,
      body("PATCH", { path: `${mine}/data/moved.ipynb` }),
    );
    expect(renamed.status).toBe(200);
    expect(existsSync(join(workspace(h, mine), "data", "moved.ipynb"))).toBe(true);
    const clash = await as(
      h,
      alice,
      `/api/contents/${mine}/Untitled1.ipynb`,
      body("PATCH", { path: `${mine}/nb.ipynb` }),
    );
    expect(clash.status).toBe(409);
    const across = await as(
      h,
      ADMIN_TOKEN,
      `/api/contents/${mine}/nb.ipynb`,
      body("PATCH", { path: `${theirs}/nb.ipynb` }),
    );
    expect(across.status).toBe(400);

    expect(
      (await as(h, alice, `/api/contents/${mine}/Untitled1.ipynb`, { method: "DELETE" })).status,
    ).toBe(204);
    expect((await as(h, alice, `/api/contents/${mine}/Untitled1.ipynb`)).status).toBe(404);
    // The workspace itself and the root are not this API's to remove or write.
    expect((await as(h, alice, `/api/contents/${mine}`, { method: "DELETE" })).status).toBe(400);
    expect((await as(h, alice, "/api/contents", body("POST", { type: "notebook" }))).status).toBe(
      400,
    );
    expect(existsSync(workspace(h, mine))).toBe(true);
  });

  test("a checkpoint is a real copy that a restore brings back", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const mine = await session(h, alice);
    const url = `/api/contents/${mine}/nb.ipynb`;
    await as(h, alice, url, body("PUT", { type: "notebook", content: NOTEBOOK }));
    expect(await (await as(h, alice, `${url}/checkpoints`)).json()).toEqual([]);
    const made = await as(h, alice, `${url}/checkpoints`, { method: "POST" });
    expect(made.status).toBe(201);
    expect(((await made.json()) as { id: string }).id).toBe("checkpoint");
    const changed = { ...NOTEBOOK, cells: [] };
    await as(h, alice, url, body("PUT", { type: "notebook", content: changed }));
    expect((await model(await as(h, alice, url))).content).toEqual(changed);
    expect((await as(h, alice, `${url}/checkpoints/checkpoint`, { method: "POST" })).status).toBe(
      204,
    );
    expect((await model(await as(h, alice, url))).content).toEqual(NOTEBOOK);
    expect((await as(h, alice, `${url}/checkpoints/checkpoint`, { method: "DELETE" })).status).toBe(
      204,
    );
    expect(await (await as(h, alice, `${url}/checkpoints`)).json()).toEqual([]);
  });
});

describe("contents: ownership", () => {
  test("another principal's session is the same 404 as one that does not exist", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const bob = await principal(h, "bob");
    const mine = await session(h, alice);
    await as(
      h,
      alice,
      `/api/contents/${mine}/secret.txt`,
      body("PUT", { type: "file", format: "text", content: "s3cret" }),
    );
    const missing = "w-0000000000000000000a";
    expect(missing.length).toBe(mine.length);
    for (const [suffix, init] of [
      ["", {}],
      ["/secret.txt", {}],
      ["/secret.txt", { method: "DELETE" }],
      ["/x.txt", body("PUT", { type: "file", format: "text", content: "planted" })],
      ["/secret.txt", body("PATCH", { path: `${mine}/stolen.txt` })],
      ["/secret.txt/checkpoints", {}],
    ] as const) {
      const foreign = await as(h, bob, `/api/contents/${mine}${suffix}`, init);
      const absent = await as(h, bob, `/api/contents/${missing}${suffix}`, init);
      expect(foreign.status).toBe(404);
      expect([absent.status, absent.headers.get("content-type")]).toEqual([
        404,
        foreign.headers.get("content-type"),
      ]);
      expect((await foreign.text()).replaceAll(mine, "ID")).toBe(
        (await absent.text()).replaceAll(missing, "ID"),
      );
    }
    expect(readFileSync(join(workspace(h, mine), "secret.txt"), "utf8")).toBe("s3cret");
    expect(existsSync(join(workspace(h, mine), "x.txt"))).toBe(false);
    // Bob cannot bind a session to Alice's kernel by its id, nor by her notebook's path.
    const byPath = await as(
      h,
      bob,
      "/api/sessions",
      body("POST", { path: `${mine}/nb.ipynb`, type: "notebook", kernel: { id: mine } }),
    );
    expect(byPath.status).toBe(404);
  });
});

describe("contents: hostile paths", () => {
  test("no path reaches outside the workspace", async () => {
    const h = make();
    const alice = await principal(h, "alice");
    const mine = await session(h, alice);
    const outside = makeTempDir("o4s-outside-");
    dirs.push(outside);
    writeFileSync(join(outside, "passwd"), "root:x:0:0\n");
    await as(
      h,
      alice,
      `/api/contents/${mine}/ok.txt`,
      body("PUT", { type: "file", format: "text", content: "ok" }),
    );
    // What the session's own code can plant: links out of its workspace.
    symlinkSync(outside, join(workspace(h, mine), "data"));
    symlinkSync(join(outside, "passwd"), join(workspace(h, mine), "pw"));

    const refused = async (path: string, init: RequestInit = {}) => {
      const res = await as(h, alice, path, init);
      expect({ path, refused: [400, 404].includes(res.status) }).toEqual({ path, refused: true });
      expect(await res.text()).not.toContain("root:x");
    };
    await refused(`/api/contents/${mine}/..%2F..%2F..%2Fetc%2Fpasswd`);
    await refused(`/api/contents/${mine}/%2E%2E/%2E%2E/etc/passwd`);
    await refused(`/api/contents/${mine}%2F..%2F..%2Fetc%2Fpasswd`);
    await refused(`/api/contents/${mine}/data%2Fpasswd`);
    await refused(`/api/contents//etc/passwd`);
    await refused(`/api/contents/${mine}/data/passwd`);
    await refused(`/api/contents/${mine}/pw`);
    await refused(
      `/api/contents/${mine}/data/new.txt`,
      body("PUT", { type: "file", format: "text", content: "x" }),
    );
    await refused(
      `/api/contents/${mine}/pw`,
      body("PUT", { type: "file", format: "text", content: "x" }),
    );
    await refused(`/api/contents/${mine}/ok.txt`, body("PATCH", { path: `${mine}/data/ok.txt` }));
    await refused(`/api/contents/${mine}/ok.txt`, body("PATCH", { path: "/tmp/ok.txt" }));
    await refused(`/api/contents/${mine}/data`, body("POST", { type: "notebook" }));
    await refused(`/api/contents/${mine}`, body("POST", { copy_from: `${mine}/pw` }));
    await refused(`/api/contents/${mine}/pw/checkpoints`, { method: "POST" });
    expect(readFileSync(join(outside, "passwd"), "utf8")).toBe("root:x:0:0\n");
    expect(existsSync(join(outside, "new.txt"))).toBe(false);
    expect(existsSync(join(outside, "ok.txt"))).toBe(false);

    // Links are not listed (a client would be invited to open them); deleting one removes
    // the link itself, never what it names.
    const listing = await model(await as(h, alice, `/api/contents/${mine}`));
    expect((listing.content as Model[]).map((m) => m.name)).toEqual(["ok.txt"]);
    expect((await as(h, alice, `/api/contents/${mine}/pw`, { method: "DELETE" })).status).toBe(204);
    expect(readFileSync(join(outside, "passwd"), "utf8")).toBe("root:x:0:0\n");
  });
});
