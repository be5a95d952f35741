/**
 * The entrypoints of the program's worker threads, as URLs that resolve both when the source
 * runs under `bun` and inside the compiled binary.
 *
 * Why here: in the binary every module is bundled into one file whose `import.meta.url` is
 * the executable itself (`/$bunfs/root/openai4s`), and each extra entrypoint build.ts lists is
 * laid out relative to the common root of the entrypoints, `src/`. This file sits in `src/`,
 * so the same relative URL points at the source file from here and at the bundled entrypoint
 * there. (A URL next to the worker's own module would be right from source only; a bare
 * relative path would be looked up in the working directory, where anyone could plant one.)
 * test/store/binary-migrate.test.ts proves the compiled daemon starts the checkpointer.
 */
export const WAL_CHECKPOINTER_ENTRYPOINT = new URL(
  "./adapters/store-sqlite/wal-checkpointer-worker.ts",
  import.meta.url,
);
