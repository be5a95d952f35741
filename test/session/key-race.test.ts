/**
 * Several daemons starting at once on a fresh state dir must end with ONE signing key: if two
 * each minted their own, credentials signed by one would be refused by the other. Real
 * processes, released together at a shared instant to maximise the overlap.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-key-race-");

const BUN = resolve(import.meta.dir, "../../node_modules/.bin/bun");
const BOOTSTRAP = resolve(import.meta.dir, "../../src/wire/credential.ts");
const PROCESSES = 8;

test("processes racing at first start publish exactly one 0600 key and all load it", async () => {
  for (let round = 0; round < 3; round++) {
    const dir = tempDir();
    const keyPath = join(dir, "signing-key");
    const script = join(dir, "race.ts");
    writeFileSync(
      script,
      `import { loadOrCreateSigningKey } from ${JSON.stringify(BOOTSTRAP)};
const startAt = Number(process.argv[2]);
while (Date.now() < startAt) {} // spin: release every process at the same instant
console.log(loadOrCreateSigningKey(${JSON.stringify(keyPath)}).fingerprint);
`,
    );
    // Far enough ahead that every process has started and is spinning when it arrives.
    const startAt = Date.now() + 1500;
    const procs = Array.from({ length: PROCESSES }, () =>
      Bun.spawn([BUN, script, String(startAt)], { stdout: "pipe", stderr: "pipe" }),
    );
    const results = await Promise.all(
      procs.map(async (p) => ({
        code: await p.exited,
        out: (await new Response(p.stdout).text()).trim(),
        err: await new Response(p.stderr).text(),
      })),
    );
    for (const r of results) expect(r).toMatchObject({ code: 0, err: "" });
    const fingerprints = new Set(results.map((r) => r.out));
    expect(fingerprints.size).toBe(1);
    expect([...fingerprints][0]).toMatch(/^[0-9a-f]{16}$/);
    // One key and no leftover temporaries; mode 0600; 32 bytes.
    expect(readdirSync(dir).sort()).toEqual(["race.ts", "signing-key"]);
    expect(statSync(keyPath).mode & 0o777).toBe(0o600);
    expect(readFileSync(keyPath).length).toBe(32);
  }
}, 30_000);
