/**
 * Start-up of short CLI commands, side by side with a one-line script under the same Bun:
 *  - `openai4s --version` against a compiled `console.log` one-liner;
 *  - `openai4s list` against a live daemon, against a compiled one-liner that makes the same
 *    request over the same socket (so the daemon's answer is in both, and the difference is
 *    what the CLI costs to start and print), and against `curl` on the same route (issue 34:
 *    what an admin's script would run instead; curl is C, so this ratio carries the runtime's
 *    own start-up, which the one-liner's does not);
 *  - and, for scale, the runtime's floor against the same curl: a compiled one-liner that
 *    makes the same request with nothing but `Bun.connect` and prints the answer. No program
 *    on this runtime does the request for less; on the machines measured it alone was
 *    1.3-1.4x curl, so `list` against curl is read against this row (issue 34).
 * Both one-liners are compiled with the options build.ts uses (bytecode, minified), so the
 * runtime is the same. Target: each ratio ≤ 1.3 (issue 20), in wall time and in CPU time
 * (the steadier figure on a busy machine): every `exec` from an agent and every `wait` in a
 * script's loop pays this.
 *
 * With `hyperfine` on PATH (Debian: `apt install hyperfine`) it measures; otherwise a loop
 * here does, alternating the two commands so both see the same machine. Medians are reported.
 *
 * Run: `node_modules/.bin/bun bench/startup.bench.ts [runs]`.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, ensureBuilt, startDaemon } from "../test/support/binary-daemon.ts";
import { makeTempDir, removeDir } from "../test/support/temp-dir.ts";

const TARGET_RATIO = 1.3;

/** A command line and the environment it runs with. */
interface Cmd {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

interface Pair {
  readonly metric: string;
  /** No target of its own: shown for scale (the runtime's floor). */
  readonly forScale?: boolean;
  readonly ours: Cmd;
  readonly baseline: Cmd;
}

/** Compiles `source` as build.ts compiles the binary; returns the executable's path. */
async function compileOneLiner(dir: string, name: string, source: string): Promise<string> {
  const entry = join(dir, `${name}.ts`);
  writeFileSync(entry, source);
  const outfile = join(dir, name);
  const built = await Bun.build({
    entrypoints: [entry],
    compile: { outfile, autoloadDotenv: false, autoloadBunfig: false },
    minify: true,
    bytecode: true,
    format: "esm",
  });
  if (!built.success) throw new Error(`cannot compile ${name}: ${built.logs.join("\n")}`);
  return outfile;
}

/** The least a Bun program can do for the request: a socket, the bytes, the answer printed. */
const RAW_LIST_SOURCE = `const parts: Uint8Array[] = [];
await new Promise<void>((resolve, reject) => {
  Bun.connect({ unix: process.env.O4S_SOCK!, socket: {
    open(s) { s.write("GET /v1/workloads?limit=50 HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n"); },
    data(_s, d) { parts.push(d); },
    close() { resolve(); },
    error(_s, e) { reject(e); },
  } }).catch(reject);
});
const text = Buffer.concat(parts).toString();
console.log(text.slice(text.indexOf("\\r\\n\\r\\n") + 4));
`;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/**
 * One command's start-up: the median wall time, and the median CPU time (user + system),
 * which a machine shared with other work disturbs far less than the wall clock.
 */
interface Measured {
  readonly wallMs: number;
  readonly cpuMs: number;
}

/** One run; a failing command fails the bench (it measured nothing). */
function runOnce(cmd: Cmd): { readonly wallMs: number; readonly cpuMs: number } {
  const started = performance.now();
  const ran = Bun.spawnSync([...cmd.argv], { env: cmd.env, stdout: "ignore", stderr: "pipe" });
  const wallMs = performance.now() - started;
  if (ran.exitCode !== 0) {
    throw new Error(`${cmd.argv.join(" ")} exited ${ran.exitCode}: ${ran.stderr.toString()}`);
  }
  const cpu = ran.resourceUsage?.cpuTime;
  const cpuMs = cpu === undefined ? Number.NaN : Number(cpu.user + cpu.system) / 1000;
  return { wallMs, cpuMs };
}

function measureByLoop(pair: Pair, runs: number): [Measured, Measured] {
  for (let i = 0; i < 3; i++) {
    runOnce(pair.ours);
    runOnce(pair.baseline);
  }
  const ours: { wallMs: number; cpuMs: number }[] = [];
  const baseline: { wallMs: number; cpuMs: number }[] = [];
  for (let i = 0; i < runs; i++) {
    ours.push(runOnce(pair.ours));
    baseline.push(runOnce(pair.baseline));
  }
  const summary = (xs: readonly { wallMs: number; cpuMs: number }[]): Measured => ({
    wallMs: median(xs.map((x) => x.wallMs)),
    cpuMs: median(xs.map((x) => x.cpuMs)),
  });
  return [summary(ours), summary(baseline)];
}

function measureByHyperfine(
  hyperfine: string,
  pair: Pair,
  runs: number,
  dir: string,
): [Measured, Measured] {
  const out = join(dir, "hyperfine.json");
  // hyperfine runs each command through no shell (-N), with one environment: the commands
  // carry theirs through `env -i` (the same small exec in both, so the ratio is fair).
  const line = (c: Cmd) =>
    ["env", "-i", ...Object.entries(c.env).map(([k, v]) => `${k}=${v}`), ...c.argv]
      .map((a) => `'${a.replaceAll("'", "'\\''")}'`)
      .join(" ");
  const ran = Bun.spawnSync(
    [hyperfine, "-N", "--warmup", "3", "--runs", String(runs), "--export-json", out].concat([
      line(pair.ours),
      line(pair.baseline),
    ]),
    { stdout: "ignore", stderr: "pipe" },
  );
  if (ran.exitCode !== 0) throw new Error(`hyperfine failed: ${ran.stderr.toString()}`);
  type Result = { median: number; user: number; system: number };
  const results = JSON.parse(readFileSync(out, "utf8")).results as Result[];
  const measured = (r: Result | undefined): Measured =>
    r === undefined
      ? { wallMs: Number.NaN, cpuMs: Number.NaN }
      : { wallMs: r.median * 1000, cpuMs: (r.user + r.system) * 1000 };
  return [measured(results[0]), measured(results[1])];
}

export interface StartupRow {
  readonly metric: string;
  readonly forScale: boolean;
  readonly ours: Measured;
  readonly baseline: Measured;
  /** Wall-time ratio, ours over the one-liner's. */
  readonly ratio: number;
  /** CPU-time ratio. */
  readonly cpuRatio: number;
}

export async function benchStartup(runs: number): Promise<{
  readonly tool: string;
  readonly rows: readonly StartupRow[];
}> {
  ensureBuilt();
  const dir = makeTempDir("o4s-bench-startup-");
  const daemon = await startDaemon({ gateway: false });
  try {
    const env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: dir };
    const print = await compileOneLiner(dir, "print", 'console.log("openai4s 0.0.0");\n');
    const fetchList = await compileOneLiner(
      dir,
      "fetch-list",
      'const r = await fetch("http://localhost/v1/workloads?limit=50", { unix: process.env.O4S_SOCK });\n' +
        "console.log(await r.text());\n",
    );
    const rawList = await compileOneLiner(dir, "raw-list", RAW_LIST_SOURCE);
    const pairs: Pair[] = [
      {
        metric: "openai4s --version vs console.log one-liner",
        ours: { argv: [BINARY, "--version"], env },
        baseline: { argv: [print], env },
      },
      {
        metric: "openai4s list (live daemon) vs fetch one-liner",
        ours: { argv: [BINARY, "list"], env: { ...env, OPENAI4S_SERVER: `unix:${daemon.socket}` } },
        baseline: { argv: [fetchList], env: { ...env, O4S_SOCK: daemon.socket } },
      },
    ];
    // Issue 34 names curl on the same route: what an admin's script would use instead.
    const curl = Bun.which("curl");
    if (curl !== null) {
      const curlList: Cmd = {
        argv: [
          curl,
          "-s",
          "--unix-socket",
          daemon.socket,
          "http://localhost/v1/workloads?limit=50",
        ],
        env,
      };
      pairs.push(
        {
          metric: "openai4s list (live daemon) vs curl on the same route",
          ours: {
            argv: [BINARY, "list"],
            env: { ...env, OPENAI4S_SERVER: `unix:${daemon.socket}` },
          },
          baseline: curlList,
        },
        {
          metric: "runtime floor: a Bun.connect one-liner vs curl on the same route",
          forScale: true,
          ours: { argv: [rawList], env: { ...env, O4S_SOCK: daemon.socket } },
          baseline: curlList,
        },
      );
    }
    const hyperfine = Bun.which("hyperfine");
    const rows = pairs.map((pair) => {
      const [ours, baseline] =
        hyperfine === null
          ? measureByLoop(pair, runs)
          : measureByHyperfine(hyperfine, pair, runs, dir);
      return {
        metric: pair.metric,
        forScale: pair.forScale === true,
        ours,
        baseline,
        ratio: ours.wallMs / baseline.wallMs,
        cpuRatio: ours.cpuMs / baseline.cpuMs,
      };
    });
    return { tool: hyperfine === null ? "loop" : "hyperfine", rows };
  } finally {
    await daemon.stop();
    removeDir(dir);
  }
}

if (import.meta.main) {
  const quick = process.env["O4S_BENCH_QUICK"] === "1";
  const runs = Number(process.argv[2] ?? (quick ? 10 : 60));
  const result = await benchStartup(runs);
  const ms = (m: Measured) => `${m.wallMs.toFixed(1)} ms wall, ${m.cpuMs.toFixed(1)} ms CPU`;
  console.log(`start-up bench (${runs} runs each, medians, measured by ${result.tool})`);
  const targetOf = (r: StartupRow) => (r.forScale ? "" : `≤ ${TARGET_RATIO}`);
  for (const r of result.rows) {
    console.log(`  ${r.metric}: ${ms(r.ours)} vs ${ms(r.baseline)}`);
    const target = r.forScale
      ? "no target: the least any program on this runtime costs"
      : `target ≤ ${TARGET_RATIO}×`;
    console.log(`    = ${r.ratio.toFixed(2)}× wall, ${r.cpuRatio.toFixed(2)}× CPU (${target})`);
  }
  const table = result.rows.flatMap((r) => [
    { metric: `${r.metric}: wall ratio`, value: r.ratio.toFixed(2), target: targetOf(r) },
    { metric: `${r.metric}: CPU ratio`, value: r.cpuRatio.toFixed(2), target: targetOf(r) },
    {
      metric: `${r.metric}: wall ms`,
      value: `${r.ours.wallMs.toFixed(1)} vs ${r.baseline.wallMs.toFixed(1)}`,
      target: "",
    },
  ]);
  console.log(JSON.stringify({ bench: "startup", table }));
}
