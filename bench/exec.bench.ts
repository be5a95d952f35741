/**
 * Exec round trip below the API: gateway → worker → Python kernel → back, for a trivial cell
 * (`1+1`). A real gateway on loopback with a real store, a real worker process started from
 * source, a real interpreter. The API's own cost is measured by session.bench.ts; this is the
 * part of that budget the worker path spends. Target: median < 10 ms.
 *
 * With `tls` the channel is TLS with the certificate pinned, as the daemon runs it by default.
 *
 * Run: `node_modules/.bin/bun bench/exec.bench.ts [calls] [plain|tls]`.
 */
import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import { systemClock } from "../src/lib/clock.ts";
import { mintCredentials } from "../src/wire/credential.ts";
import {
  certificateFingerprint,
  generateSelfSignedCertificate,
  writeGatewayFingerprint,
} from "../src/wire/gateway-tls.ts";
import { realPython, startHarness } from "../test/support/gateway-harness.ts";

export interface ExecBenchResult {
  readonly calls: number;
  readonly roundTripMs: {
    readonly median: number;
    readonly p95: number;
    readonly min: number;
    readonly max: number;
  };
}

const ROOT = resolve(import.meta.dir, "..");

export async function benchExec(calls = 200, tls = false): Promise<ExecBenchResult> {
  const pair = tls ? generateSelfSignedCertificate(new Date()) : null;
  const h = startHarness(systemClock, pair ? { tls: pair } : {});
  const worker = (() => {
    h.expectations.set("bench", { epoch: 1, ranks: 1, fenced: false });
    const credentialDir = join(h.dir, "credentials");
    mintCredentials({
      key: h.key,
      allocationId: "bench",
      epoch: 1,
      ranks: 1,
      ttlMs: 60_000,
      clock: systemClock,
      random: randomBytes,
      gatewayAddress: h.gateway.address,
      credentialDir,
    });
    if (pair) writeGatewayFingerprint(credentialDir, certificateFingerprint(pair.certPem));
    return Bun.spawn(
      [
        join(ROOT, "node_modules/.bin/bun"),
        join(ROOT, "src/main.ts"),
        "worker",
        "--credential-dir",
        credentialDir,
        "--rank-env",
        "BENCH_RANK",
        "--python",
        realPython(),
      ],
      { env: { ...process.env, BENCH_RANK: "0" }, stdout: "ignore", stderr: "ignore" },
    );
  })();
  try {
    const ready = await Promise.race([
      h.gateway.waitForRanks("bench", 1, 1),
      Bun.sleep(30_000).then(() => ({ kind: "TimedOut" }) as const),
    ]);
    if (ready.kind !== "Connected") throw new Error(`worker did not connect: ${ready.kind}`);
    const exec = async () => {
      const outcome = await h.gateway.request("bench", 1, 0, { kind: "exec", code: "1+1" }, 10_000);
      if (outcome.kind !== "Answered" || outcome.response.result?.["text/plain"] !== "2") {
        throw new Error(`unexpected answer: ${JSON.stringify(outcome)}`);
      }
    };
    for (let i = 0; i < 20; i++) await exec(); // the interpreter's start-up is not the point
    const samples: number[] = [];
    for (let i = 0; i < calls; i++) {
      const started = performance.now();
      await exec();
      samples.push(performance.now() - started);
    }
    samples.sort((a, b) => a - b);
    const at = (q: number) =>
      samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
    return {
      calls,
      roundTripMs: { median: at(0.5), p95: at(0.95), min: samples[0]!, max: samples.at(-1)! },
    };
  } finally {
    h.gateway.stop("bench", 1, "bench over");
    await worker.exited;
    await h.close();
  }
}

if (import.meta.main) {
  const calls = Number(process.argv[2] ?? (process.env["O4S_BENCH_QUICK"] === "1" ? 50 : 200));
  const tls = process.argv[3] === "tls";
  const result = await benchExec(calls, tls);
  const r = result.roundTripMs;
  const f = (n: number) => n.toFixed(2);
  console.log(
    `exec bench (${calls} calls of 1+1: gateway → worker → kernel → back, ${tls ? "TLS" : "plain TCP"})`,
  );
  console.log(
    `  median ${f(r.median)} ms, p95 ${f(r.p95)} ms, min ${f(r.min)} ms, max ${f(r.max)} ms (target median < 10 ms)`,
  );
  console.log(JSON.stringify({ bench: "exec", tls, ...result }));
}
