/**
 * The alerting rules shipped in deploy/prometheus are what Prometheus loads: `promtool check
 * rules` passes, and every openai4s metric they name is one /metrics really exposes (a rule
 * on a renamed metric never fires and nobody notices).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../support/binary.ts";
import { checkRules, PROMTOOL, skipLine } from "../support/promtool.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const RULES = join(ROOT, "deploy", "prometheus", "openai4s-rules.yml");
/** The renderer's files: every metric name is written out in one of them. */
const RENDERERS = ["metrics.ts", "metrics-workloads.ts"].map((f) =>
  join(ROOT, "src", "servers", "http", "system", f),
);

describe("deploy/prometheus/openai4s-rules.yml", () => {
  test("promtool check rules passes (and fails on a broken copy)", async () => {
    if (PROMTOOL === null) return skipLine("promtool check rules");
    const checked = await checkRules(RULES);
    expect(checked.output).toContain("SUCCESS");
    expect(checked.code).toBe(0);
    // The check can fail: an expression that does not parse is refused.
    const dir = makeTempDir("o4s-rules-");
    try {
      const broken = join(dir, "broken.yml");
      writeFileSync(broken, readFileSync(RULES, "utf8").replace("== 1", "== == 1"));
      expect((await checkRules(broken)).code).not.toBe(0);
    } finally {
      removeDir(dir);
    }
  });

  test("promtool test rules: degraded fires after 5 minutes, not before; orphans; queue wait p95", async () => {
    if (PROMTOOL === null) return skipLine("promtool test rules");
    const checked = await checkRules(
      join(ROOT, "deploy", "prometheus", "openai4s-rules.test.yml"),
      "test",
    );
    expect(checked.output).toContain("SUCCESS");
    expect(checked.code).toBe(0);
  });

  test("every openai4s metric a rule names is one the daemon renders", () => {
    const rules = readFileSync(RULES, "utf8");
    const renderer = RENDERERS.map((f) => readFileSync(f, "utf8")).join("\n");
    const named = new Set(
      [...rules.matchAll(/\b(openai4s_[a-z0-9_]+|process_[a-z_]+)/g)].map((m) =>
        (m[1] ?? "").replace(/_(bucket|sum|count)$/, ""),
      ),
    );
    expect(named.size).toBeGreaterThan(5);
    for (const name of named) expect(renderer).toContain(`"${name}"`);
  });
});
