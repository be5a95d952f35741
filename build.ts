/**
 * Builds the single executable `dist/openai4s` and the symlink `dist/openai4s-worker`, then
 * smoke-runs both names. Autoloading of .env and bunfig.toml is off in the binary: an admin's
 * working directory must not change how the daemon behaves.
 */
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";

const outDir = join(import.meta.dir, "dist");
const outfile = join(outDir, "openai4s");
const workerLink = join(outDir, "openai4s-worker");
mkdirSync(outDir, { recursive: true });
// The source maps of an earlier build: chunk names carry a content hash, so each build left
// its own beside the last (over a thousand files after a day's work).
for (const name of readdirSync(outDir)) {
  if (name.endsWith(".map")) rmSync(join(outDir, name));
}

const result = await Bun.build({
  // The WAL checkpointer runs as a Worker (src/adapters/store-sqlite/wal-checkpointer.ts): a worker's
  // entrypoint must be bundled into the executable as an entrypoint of its own.
  entrypoints: [
    join(import.meta.dir, "src/main.ts"),
    join(import.meta.dir, "src/adapters/store-sqlite/wal-checkpointer-worker.ts"),
  ],
  compile: {
    target: "bun-linux-x64",
    outfile,
    autoloadDotenv: false,
    autoloadBunfig: false,
  },
  minify: true,
  // Each command's code in its own chunk, loaded when that command runs (cli/registry.ts):
  // a short command does not load the daemon's bytecode at all.
  splitting: true,
  bytecode: true,
  format: "esm",
  sourcemap: "linked",
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
if (existsSync(workerLink)) rmSync(workerLink);
symlinkSync("openai4s", workerLink);

for (const argv of [
  [outfile, "--version"],
  [workerLink, "--help"],
]) {
  const smoke = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe" });
  if (smoke.exitCode !== 0) {
    console.error(`smoke test failed: ${argv.join(" ")}\n${smoke.stderr.toString()}`);
    process.exit(1);
  }
}
console.log(
  [
    `built ${outfile}`,
    `  and ${workerLink} -> openai4s (the worker role)`,
    "Copy the binary to the login and compute nodes (see docs/operations.md). In this checkout,",
    "`npm link` puts launchers on PATH that run the source; the binary is for the nodes.",
  ].join("\n"),
);
