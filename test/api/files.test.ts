/**
 * Files in and out of a workspace through the API: round trip with mode and ranges, a paged
 * listing, delete, the size cap, and the path tricks a client or a job can play, each with
 * nothing written outside the workspace.
 */
import { afterEach, describe, expect, test } from "bun:test";
import {
  chownSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { stateLayout } from "../../src/core/layout.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const open: Harness[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
  for (const d of dirs.splice(0)) removeDir(d);
});

function make(options: Parameters<typeof harness>[0] = {}): Harness {
  const h = harness(options);
  // The daemon makes the spool at start; the harness has none.
  mkdirSync(join(stateLayout(h.dir).spool, "workloads"), { recursive: true });
  open.push(h);
  return h;
}

async function submitted(h: Harness): Promise<string> {
  const res = await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["x"] });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

function workspace(h: Harness, id: string): string {
  return stateLayout(h.dir).workspaceDir(id);
}

interface Page {
  readonly items: readonly { readonly path: string }[];
  readonly nextCursor: string | null;
}

async function page(res: Response): Promise<Page> {
  return (await res.json()) as Page;
}

function outside(): string {
  const d = makeTempDir("o4s-outside-");
  dirs.push(d);
  return d;
}

const put = (h: Harness, url: string, body: string | ReadableStream<Uint8Array>) =>
  h.request(url, { method: "PUT", body });

describe("files round trip", () => {
  test("upload with a mode, download whole and by range, list, delete", async () => {
    const h = make();
    const id = await submitted(h);
    const res = await put(h, `/v1/workloads/${id}/files/data/in.csv?mode=0600`, "a,b\n1,2\n");
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ path: "data/in.csv", sizeBytes: 8, mode: "0600" });
    const onDisk = join(workspace(h, id), "data", "in.csv");
    expect(statSync(onDisk).mode & 0o777).toBe(0o600);
    expect(readFileSync(onDisk, "utf8")).toBe("a,b\n1,2\n");

    const whole = await h.request(`/v1/workloads/${id}/files/data/in.csv`);
    expect(whole.status).toBe(200);
    expect(await whole.text()).toBe("a,b\n1,2\n");
    const part = await h.request(`/v1/workloads/${id}/files/data/in.csv`, {
      headers: { Range: "bytes=2-4" },
    });
    expect(part.status).toBe(206);
    expect(part.headers.get("content-range")).toBe("bytes 2-4/8");
    expect(await part.text()).toBe("b\n1");
    const suffix = await h.request(`/v1/workloads/${id}/files/data/in.csv`, {
      headers: { Range: "bytes=-2" },
    });
    expect(await suffix.text()).toBe("2\n");
    const beyond = await h.request(`/v1/workloads/${id}/files/data/in.csv`, {
      headers: { Range: "bytes=100-" },
    });
    expect(beyond.status).toBe(416);
    expect(beyond.headers.get("content-range")).toBe("bytes */8");
    // The problem body names the same status as the response (RFC 9457).
    expect(((await beyond.json()) as { status: number }).status).toBe(416);

    const listed = await page(await h.request(`/v1/workloads/${id}/files`));
    expect(listed.items.map((e) => e.path)).toEqual(["data", "data/in.csv"]);
    expect(listed.nextCursor).toBeNull();

    expect((await h.request(`/v1/workloads/${id}/files/data`, { method: "DELETE" })).status).toBe(
      409,
    );
    const gone = await h.request(`/v1/workloads/${id}/files/data/in.csv`, { method: "DELETE" });
    expect(gone.status).toBe(204);
    expect((await h.request(`/v1/workloads/${id}/files/data/in.csv`)).status).toBe(404);
  });

  test("a listing pages in walk order and filters by prefix", async () => {
    const h = make();
    const id = await submitted(h);
    for (const p of ["a", "a-b", "a/x", "a/y", "b/z"]) {
      if (p === "a") continue;
      expect((await put(h, `/v1/workloads/${id}/files/${p}`, p)).status).toBe(201);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 10; i++) {
      const q: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
      const got = await page(await h.request(`/v1/workloads/${id}/files?limit=2${q}`));
      seen.push(...got.items.map((e) => e.path));
      cursor = got.nextCursor;
      if (cursor === null) break;
    }
    expect(seen).toEqual(["a", "a/x", "a/y", "a-b", "b", "b/z"]);
    const under = await page(await h.request(`/v1/workloads/${id}/files?prefix=a/`));
    expect(under.items.map((e) => e.path)).toEqual(["a/x", "a/y"]);
  });

  test("an upload over the cap is 413 and leaves nothing behind", async () => {
    const h = make({ maxUploadBytes: 1000 });
    const id = await submitted(h);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 4; i++) controller.enqueue(new Uint8Array(400));
        controller.close();
      },
    });
    const res = await put(h, `/v1/workloads/${id}/files/big.bin`, stream);
    expect(res.status).toBe(413);
    expect(readdirSync(workspace(h, id))).toEqual([]);
  });

  test("an upload of exactly the cap is taken; one byte more is 413 by its Content-Length", async () => {
    // Guards the declared-length check's boundary: the cap is the largest upload allowed.
    const h = make({ maxUploadBytes: 1000 });
    const id = await submitted(h);
    const sized = (path: string, bytes: number) =>
      h.request(`/v1/workloads/${id}/files/${path}`, {
        method: "PUT",
        body: "x".repeat(bytes),
        headers: { "content-length": String(bytes) },
      });
    const exact = await sized("exact.bin", 1000);
    expect(exact.status).toBe(201);
    expect(statSync(join(workspace(h, id), "exact.bin")).size).toBe(1000);
    const over = await sized("over.bin", 1001);
    expect(over.status).toBe(413);
    expect(existsSync(join(workspace(h, id), "over.bin"))).toBe(false);
  });
});

describe("path tricks", () => {
  test("dot-dot, absolute, NUL and over-long names are refused before anything is made", async () => {
    const h = make();
    const id = await submitted(h);
    for (const path of [
      // Encoded slashes: a URL parser would fold a literal `/../` before the route saw it.
      "%2E%2E%2Fescape",
      "a%2F%2E%2E%2F%2E%2E%2Fescape",
      "%2Fetc%2Fescape",
      "a%00b",
      "x".repeat(4096),
      "a//b",
    ]) {
      const res = await put(h, `/v1/workloads/${id}/files/${path}`, "no");
      expect([400, 404]).toContain(res.status);
      if (res.status === 400)
        expect(((await res.json()) as { reason: string }).reason).toBe("PATH_REFUSED");
    }
    expect(existsSync(workspace(h, id))).toBe(false);
    expect(existsSync(join(stateLayout(h.dir).spool, "workloads", "escape"))).toBe(false);
  });

  test("a link a job planted in its workspace is never followed", async () => {
    const h = make();
    const id = await submitted(h);
    const out = outside();
    writeFileSync(join(out, "secret"), "host secret");
    expect((await put(h, `/v1/workloads/${id}/files/keep`, "k")).status).toBe(201);
    symlinkSync(out, join(workspace(h, id), "link"));
    symlinkSync(join(out, "secret"), join(workspace(h, id), "file-link"));

    const through = await put(h, `/v1/workloads/${id}/files/link/planted`, "x");
    expect(through.status).toBe(400);
    const over = await put(h, `/v1/workloads/${id}/files/file-link`, "x");
    expect(over.status).toBe(400);
    expect((await h.request(`/v1/workloads/${id}/files/link/secret`)).status).toBe(400);
    expect((await h.request(`/v1/workloads/${id}/files/file-link`)).status).toBe(400);
    const listed = await page(await h.request(`/v1/workloads/${id}/files?prefix=link/`));
    expect(listed.items).toEqual([]);
    // Deleting the link removes the link, not its target.
    expect(
      (await h.request(`/v1/workloads/${id}/files/file-link`, { method: "DELETE" })).status,
    ).toBe(204);
    expect(readdirSync(out)).toEqual(["secret"]);
    expect(readFileSync(join(out, "secret"), "utf8")).toBe("host secret");
  });

  test("a directory swapped for a link mid-upload: the file lands where the upload began", async () => {
    const h = make();
    const id = await submitted(h);
    const out = outside();
    expect((await put(h, `/v1/workloads/${id}/files/data/first`, "1")).status).toBe(201);
    const ws = workspace(h, id);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        sent += 1;
        if (sent === 2) {
          // The job's move: its directory elsewhere, a link to the host in its place.
          renameSync(join(ws, "data"), join(ws, "moved"));
          symlinkSync(out, join(ws, "data"));
        }
        if (sent > 3) controller.close();
        else controller.enqueue(new TextEncoder().encode(`chunk${sent};`));
      },
    });
    const res = await put(h, `/v1/workloads/${id}/files/data/second`, body);
    expect(res.status).toBe(201);
    expect(readdirSync(out)).toEqual([]);
    expect(readFileSync(join(ws, "moved", "second"), "utf8")).toBe("chunk1;chunk2;chunk3;");
  });

  test("an upload onto a directory is a conflict", async () => {
    const h = make();
    const id = await submitted(h);
    mkdirSync(join(workspace(h, id), "dir"), { recursive: true });
    expect((await put(h, `/v1/workloads/${id}/files/dir`, "x")).status).toBe(409);
  });

  test("files of an unknown workload are 404", async () => {
    const h = make();
    expect((await put(h, "/v1/workloads/w-none/files/x", "x")).status).toBe(404);
    expect((await h.request("/v1/workloads/w-none/files")).status).toBe(404);
  });
});

describe("uploads that must leave nothing", () => {
  test("a body that stalls is cut (408) and its temporary file removed", async () => {
    const h = make();
    const id = await submitted(h);
    let sent = false;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        // One chunk, then silence: the client never finishes.
        if (!sent) controller.enqueue(new Uint8Array(10));
        sent = true;
        return new Promise<void>(() => {});
      },
    });
    const res = await h.app.request(
      `/v1/workloads/${id}/files/slow.bin`,
      { method: "PUT", body },
      { access: { kind: "LocalSocket" }, bodyTimeoutMs: 100 },
    );
    expect(res.status).toBe(408);
    expect(readdirSync(workspace(h, id))).toEqual([]);
  });

  test("an upload's owner is claimed for the workload's profile and owner (run as the owner)", async () => {
    const asked: unknown[] = [];
    const h = make({
      claimIdentity: (_workspace, subject) => {
        asked.push(subject);
        return null;
      },
    });
    const id = await submitted(h);
    const res = await h.request(`/v1/workloads/${id}/files/in.txt`, { method: "PUT", body: "x" });
    expect(res.status).toBe(201);
    expect(asked).toEqual([{ profile: "default", owner: null }]);
  });

  test("a hard link to a file that is not the workspace owner's is not served", async () => {
    const h = make();
    const id = await submitted(h);
    const out = outside();
    writeFileSync(join(out, "shadow"), "root only");
    expect((await put(h, `/v1/workloads/${id}/files/mine`, "ok")).status).toBe(201);
    // The workspace belongs to the job's uid; a second name for a file owned by someone else.
    chownSync(workspace(h, id), 54321, 54321);
    linkSync(join(out, "shadow"), join(workspace(h, id), "linked"));
    const res = await h.request(`/v1/workloads/${id}/files/linked`);
    expect(res.status).toBe(409);
    expect(await res.text()).not.toContain("root only");
  });
});
