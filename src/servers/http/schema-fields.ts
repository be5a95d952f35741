/**
 * The small field builders every response schema is written with: a described string,
 * timestamp, integer (each also nullable), the phase and a reason code.
 */
import * as v from "valibot";
import { PHASES } from "../../core/models.ts";

export const d = v.description;
export const text = (what: string) => v.pipe(v.string(), d(what));
export const nullableText = (what: string) => v.pipe(v.nullable(v.string()), d(what));
export const time = (what: string) => v.pipe(v.string(), v.isoTimestamp(), d(what));
export const nullableTime = (what: string) =>
  v.pipe(v.nullable(v.pipe(v.string(), v.isoTimestamp())), d(what));
export const integer = (what: string) => v.pipe(v.number(), v.integer(), d(what));
export const nullableInteger = (what: string) =>
  v.pipe(v.nullable(v.pipe(v.number(), v.integer())), d(what));
export const phase = v.pipe(
  v.picklist(PHASES),
  d("Where the workload (or attempt) is in its life."),
);
export const reasonCode = (what: string) =>
  v.pipe(v.nullable(v.string()), d(`${what} An UPPER_SNAKE code, see components.schemas.Reason.`));
