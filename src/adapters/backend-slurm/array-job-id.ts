/**
 * Job ids of array elements as squeue (JobArrayID) and sacct (JobID) print them: "517_3" for
 * an element the controller has split off, "517_[4-999%10]" (or "517_[1,3,5-7]") for the
 * elements still pending as one record. A plain "517" is a job that is no array, read exactly
 * as before arrays existed.
 *
 * Strict like every parser here: a form not listed makes the row, and so the answer,
 * malformed (unavailable), never "no such element". A pending range is expanded only up to
 * Slurm's own MaxArraySize ceiling, so a corrupt line cannot make the daemon allocate an
 * unbounded list.
 */

export type ArrayTask =
  | { readonly kind: "Element"; readonly index: number }
  | { readonly kind: "Pending"; readonly indices: readonly number[] };

export type ArrayJobId =
  | { readonly kind: "Job"; readonly jobId: string }
  | { readonly kind: "Array"; readonly jobId: string; readonly task: ArrayTask }
  | { readonly kind: "Malformed"; readonly message: string };

const MAX_INDEX = 4_000_000;
const JOB = /^[1-9][0-9]{0,18}$/;
const INDEX = /^(0|[1-9][0-9]{0,6})$/;
const ELEMENT = /^([1-9][0-9]{0,18})_(0|[1-9][0-9]{0,6})$/;
const PENDING = /^([1-9][0-9]{0,18})_\[([0-9,:-]+)(?:%[0-9]{1,7})?\]$/;

function readIndex(raw: string): number | null {
  if (!INDEX.test(raw)) return null;
  const n = Number(raw);
  return n <= MAX_INDEX ? n : null;
}

/** "1,3,5-7" or "0-999:2" into indices; null when any part is not of those forms. */
export function expandIndexList(list: string): number[] | null {
  const out: number[] = [];
  for (const part of list.split(",")) {
    const match = /^([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?$/.exec(part);
    if (!match) return null;
    const start = readIndex(match[1] ?? "");
    const end = match[2] === undefined ? start : readIndex(match[2]);
    const step = match[3] === undefined ? 1 : readIndex(match[3]);
    if (start === null || end === null || step === null || step < 1 || end < start) return null;
    if (out.length + (end - start) / step > MAX_INDEX) return null;
    for (let i = start; i <= end; i += step) out.push(i);
  }
  return out;
}

export function parseArrayJobId(raw: string): ArrayJobId {
  if (JOB.test(raw)) return { kind: "Job", jobId: raw };
  const element = ELEMENT.exec(raw);
  if (element) {
    const index = readIndex(element[2] ?? "");
    if (index !== null) {
      return { kind: "Array", jobId: element[1] ?? "", task: { kind: "Element", index } };
    }
  }
  const pending = PENDING.exec(raw);
  if (pending) {
    const indices = expandIndexList(pending[2] ?? "");
    if (indices !== null) {
      return { kind: "Array", jobId: pending[1] ?? "", task: { kind: "Pending", indices } };
    }
  }
  const shown = raw.length > 60 ? `${raw.slice(0, 60)}...` : raw;
  return { kind: "Malformed", message: `job id ${JSON.stringify(shown)} is not a job or array id` };
}
