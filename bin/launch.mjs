// The `openai4s` and `openai4s-worker` commands of a checkout (`npm ci && npm link`).
//
// Plain Node on purpose: after `npm ci` a machine may have Node and nothing else, and Bun is a
// pinned devDependency in this package's own node_modules. The launcher runs the source with
// that Bun (never a `bun` found on PATH, whose version nobody pinned); a package without its
// source or its Bun (a copied tree holding only `dist/`) falls back to the compiled binary.
// The source wins over `dist/` so that a `git pull` without a rebuild never runs stale code.
import { spawn } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** argv (program first) that runs `role` ("openai4s" or "openai4s-worker") with `args`. */
export function launchArgv(root, role, args) {
  const bun = join(root, "node_modules", "bun", "bin", "bun.exe");
  const entry = join(root, "src", "main.ts");
  if (existsSync(bun) && existsSync(entry)) {
    // From source the worker is the `worker` subcommand: Bun's argv0 is always "bun".
    return role === "openai4s-worker" ? [bun, entry, "worker", ...args] : [bun, entry, ...args];
  }
  const binary = join(root, "dist", role);
  if (existsSync(binary)) return [binary, ...args];
  return null;
}

export function launch(role, moduleUrl) {
  // npm links bin entries as symlinks; the package root is found from the real file.
  const root = dirname(dirname(realpathSync(fileURLToPath(moduleUrl))));
  const argv = launchArgv(root, role, process.argv.slice(2));
  if (argv === null) {
    process.stderr.write(
      `${role}: neither the pinned Bun (run \`npm ci\` in ${root}) nor a built binary (\`npm run build\`) was found\n`,
    );
    process.exit(2);
  }
  const [program, ...rest] = argv;
  const child = spawn(program, rest, { stdio: "inherit" });
  // The child is the program; the launcher only relays. A supervisor's SIGTERM must reach the
  // daemon (graceful stop), and the launcher must not exit before the child did.
  const relay = (signal) => {
    child.kill(signal);
  };
  const signals = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];
  for (const signal of signals) process.on(signal, relay);
  child.on("error", (error) => {
    process.stderr.write(`${role}: cannot start ${program}: ${error.message}\n`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    for (const s of signals) process.off(s, relay);
    if (signal !== null) {
      // Die of the same signal, so a shell sees 128+N exactly as without the launcher.
      process.kill(process.pid, signal);
      return;
    }
    process.exit(code ?? 1);
  });
}
