import type { Database } from "bun:sqlite";
import { EMBEDDED_MIGRATIONS, type EmbeddedMigration } from "./embedded-migrations.ts";

export interface MigrationReport {
  readonly applied: readonly string[];
  readonly alreadyApplied: readonly string[];
}

/**
 * Applies every embedded migration not yet recorded, each in its own IMMEDIATE transaction,
 * so two daemons starting on one database cannot both apply the same step (the second waits
 * on the write lock, then sees the row and skips).
 */
export function migrate(
  sqlite: Database,
  migrations: readonly EmbeddedMigration[] = EMBEDDED_MIGRATIONS,
): MigrationReport {
  sqlite.run(
    "CREATE TABLE IF NOT EXISTS openai4s_migrations (tag TEXT PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)",
  );
  const applied: string[] = [];
  const alreadyApplied: string[] = [];
  const isApplied = sqlite.query<{ tag: string }, [string]>(
    "SELECT tag FROM openai4s_migrations WHERE tag = ?",
  );
  const record = (tag: string) =>
    sqlite.run("INSERT INTO openai4s_migrations (tag, applied_at) VALUES (?, ?)", [
      tag,
      Date.now(),
    ]);
  for (const migration of migrations) {
    const step = sqlite.transaction(() => {
      if (isApplied.get(migration.tag)) return false;
      if (migration.formerTags?.some((former) => isApplied.get(former))) {
        // Applied under its old name: recorded under the new one too, the old row kept, so a
        // later release may drop the alias and a rollback to the old binary still sees it.
        record(migration.tag);
        return false;
      }
      for (const statement of migration.sql.split("--> statement-breakpoint")) {
        if (statement.trim().length > 0) sqlite.run(statement);
      }
      record(migration.tag);
      return true;
    });
    if (step.immediate()) applied.push(migration.tag);
    else alreadyApplied.push(migration.tag);
  }
  return { applied, alreadyApplied };
}
