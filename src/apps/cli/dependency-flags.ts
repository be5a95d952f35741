import { UsageError } from "../../lib/command/command.ts";

/** The API's dependency fields from `--after-ok`, `--after` and a batch scheduler's `--dependency`. */
export interface DependencyFields {
  readonly afterOk: string[];
  readonly afterAny: string[];
}

/**
 * `--dependency` as batch schedulers spell it: `afterok:ID[:ID...]` and `afterany:ID[:ID...]`, joined
 * by commas (all must hold). Their other types (after, afternotok, singleton, `?` for any)
 * are refused by name rather than read as something they are not.
 */
export function parseDependencyFlags(
  afterOk: readonly string[] | undefined,
  afterAny: readonly string[] | undefined,
  dependency: readonly string[] | undefined,
): DependencyFields {
  const fields: DependencyFields = {
    afterOk: [...(afterOk ?? [])],
    afterAny: [...(afterAny ?? [])],
  };
  for (const spec of dependency ?? []) {
    if (spec.includes("?")) {
      throw new UsageError(`submit: --dependency "${spec}": only all-must-hold (",") is supported`);
    }
    for (const part of spec.split(",")) {
      const [kind, ...ids] = part.split(":");
      if (ids.length === 0 || ids.some((id) => id === "")) {
        throw new UsageError(`submit: --dependency "${part}" is not TYPE:ID[:ID...]`);
      }
      if (kind === "afterok") fields.afterOk.push(...ids);
      else if (kind === "afterany") fields.afterAny.push(...ids);
      else {
        throw new UsageError(
          `submit: --dependency type "${kind}" is not supported (afterok, afterany)`,
        );
      }
    }
  }
  return fields;
}
