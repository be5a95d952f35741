/**
 * The variable each element of a job array reads its index from (0..N-1), on every backend:
 * the one name a script can rely on whether it runs on the cluster or on this machine.
 */
export const ARRAY_INDEX_ENV = "OPENAI4S_ARRAY_INDEX";
