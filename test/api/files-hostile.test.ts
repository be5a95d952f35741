/**
 * Issue 33: entries a job plants in its workspace and modes a client asks for. A unix socket
 * made GET/HEAD a 500 with an error log line (a FIFO was already 409); an upload took 0777,
 * and its temporary file sat in the workspace, listed as the user's own while the upload ran
 * (and for good when the daemon was killed mid-upload).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { stateLayout } from "../../src/core/layout.ts";
import {
  sweepUploadStaging,
  UPLOAD_STAGING,
} from "../../src/servers/http/workloads/workspace-files.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

function make(): Harness {
  const h = harness();
  mkdirSync(join(stateLayout(h.dir).spool, "workloads"), { recursive: true });
  open.push(h);
  return h;
}

async function submitted(h: Harness): Promise<string> {
  const res = await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["x"] });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

const put = (h: Harness, url: string, body: string | ReadableStream<Uint8Array>) =>
  h.request(url, { method: "PUT", body });

/** A listening unix socket bound at `path` (the way a job's server would leave one). */
function plantSocket(path: string): void {
  execFileSync("python3", [
    "-c",
    "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])",
    path,
  ]);
}

describe("hostile workspace entries", () => {
  test("a unix socket is 409 on GET and HEAD, like a FIFO, with no error logged", async () => {
    const h = make();
    const id = await submitted(h);
    expect((await put(h, `/v1/workloads/${id}/files/ok`, "x")).status).toBe(201);
    const workspace = stateLayout(h.dir).workspaceDir(id);
    plantSocket(join(workspace, "sock"));
    execFileSync("mkfifo", [join(workspace, "fifo")]);
    for (const name of ["sock", "fifo"]) {
      for (const method of ["GET", "HEAD"]) {
        const res = await h.request(`/v1/workloads/${id}/files/${name}`, { method });
        expect(res.status).toBe(409);
      }
    }
    expect(h.log.lines.filter((l) => l.includes('"level":"error"'))).toEqual([]);
  });
});

describe("upload modes: honoured or refused by name", () => {
  test("setuid, setgid, sticky and world-writable are refused with a 400 naming them", async () => {
    const h = make();
    const id = await submitted(h);
    const cases: [string, string][] = [
      ["0777", "world-writable"],
      ["666", "world-writable"],
      ["4755", "setuid"],
      ["02750", "setgid"],
      ["1644", "sticky"],
    ];
    for (const [mode, named] of cases) {
      const res = await put(h, `/v1/workloads/${id}/files/m-${mode}?mode=${mode}`, "x");
      expect(res.status).toBe(400);
      const problem = await problemOf(res);
      expect(JSON.stringify(problem)).toContain(named);
      expect(JSON.stringify(problem)).toContain("mode");
    }
    const workspace = stateLayout(h.dir).workspaceDir(id);
    expect(existsSync(workspace) ? readdirSync(workspace) : []).toEqual([]);
  });

  test("a mode asked is the mode on disk, the umask notwithstanding", async () => {
    const h = make();
    const id = await submitted(h);
    for (const mode of ["0640", "755", "0470", "0600"]) {
      const res = await put(h, `/v1/workloads/${id}/files/f${mode}?mode=${mode}`, "x");
      expect(res.status).toBe(201);
      const bits = Number.parseInt(mode, 8);
      expect(((await res.json()) as { mode: string }).mode).toBe(
        `0${bits.toString(8).padStart(3, "0")}`,
      );
      const onDisk = statSync(join(stateLayout(h.dir).workspaceDir(id), `f${mode}`));
      expect(onDisk.mode & 0o7777).toBe(bits);
    }
  });
});

describe("an upload's temporary file is never the user's", () => {
  test("while an upload runs, the listing shows no temporary entry and the workspace holds none", async () => {
    const h = make();
    const id = await submitted(h);
    expect((await put(h, `/v1/workloads/${id}/files/keep`, "x")).status).toBe(201);
    let release = () => {};
    const stalled = new Promise<void>((r) => {
      release = r;
    });
    let sent = false;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (!sent) {
          sent = true;
          controller.enqueue(new Uint8Array(1024));
          return;
        }
        await stalled;
        controller.close();
      },
    });
    const uploading = put(h, `/v1/workloads/${id}/files/big.bin`, body);
    const staging = join(stateLayout(h.dir).spool, UPLOAD_STAGING);
    // The upload is under way once its temporary file exists.
    for (let i = 0; i < 200 && !(existsSync(staging) && readdirSync(staging).length > 0); i++) {
      await Bun.sleep(5);
    }
    expect(readdirSync(staging).length).toBe(1);
    const listed = (await (await h.request(`/v1/workloads/${id}/files`)).json()) as {
      items: { path: string }[];
    };
    expect(listed.items.map((e) => e.path)).toEqual(["keep"]);
    expect(readdirSync(stateLayout(h.dir).workspaceDir(id))).toEqual(["keep"]);
    expect(statSync(staging).mode & 0o777).toBe(0o700);
    release();
    expect((await uploading).status).toBe(201);
    expect(readdirSync(staging)).toEqual([]);
  });

  test("what a killed upload left in the staging directory is swept", async () => {
    const h = make();
    const id = await submitted(h);
    expect((await put(h, `/v1/workloads/${id}/files/keep`, "x")).status).toBe(201);
    const staging = join(stateLayout(h.dir).spool, UPLOAD_STAGING);
    Bun.write(join(staging, "upload-left-by-a-kill"), "half");
    mkdirSync(join(staging, "a-dir-is-not-ours"));
    expect(sweepUploadStaging(stateLayout(h.dir).spool)).toEqual(["upload-left-by-a-kill"]);
    expect(readdirSync(staging)).toEqual(["a-dir-is-not-ours"]);
    // A spool where no upload ever ran has no staging directory: nothing to sweep, and no
    // error (a throw here stopped every fresh daemon's start).
    const fresh = join(h.dir, "fresh-spool");
    mkdirSync(fresh, { mode: 0o711 });
    expect(sweepUploadStaging(fresh)).toEqual([]);
    expect(readdirSync(stateLayout(h.dir).workspaceDir(id))).toEqual(["keep"]);
  });
});
