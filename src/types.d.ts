// Text imports (`with { type: "text" }`) are how the compiled binary embeds its migrations.
// The module shape is fixed by the bundler, hence the one default export in the tree.
declare module "*.sql" {
  const text: string;
  // biome-ignore lint/style/noDefaultExport: a text import's shape is the bundler's, not ours
  export default text;
}

// The worker's Python kernel is embedded the same way (src/apps/worker/kernel.py).
declare module "*.py" {
  const text: string;
  // biome-ignore lint/style/noDefaultExport: a text import's shape is the bundler's, not ours
  export default text;
}
