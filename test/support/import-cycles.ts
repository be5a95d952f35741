/**
 * Import circles over a source tree: every way a module names another counts, type-only
 * imports and re-exports included (each is an arrow between rooms, as the layer guard says).
 * Two files that import each other are tolerated (a port and its capability record); a circle
 * through three or more files is not: it is how the composition once tied the flag parser,
 * the backend registry and the parsed config into one knot of ten files, where no file could
 * be read or changed alone.
 *
 * A strongly connected group of files holds a circle of more than two files exactly when one
 * of its arrows has no arrow back (the way back is then a path of two or more), or when its
 * two-way arrows close a loop. Each is reported with one such circle.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { specifiersOf } from "./leak-guard.ts";

function walk(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...walk(path));
    else if (/\.(ts|tsx)$/.test(entry)) out.push(path);
  }
  return out;
}

/** Module (relative to srcRoot) to the modules of the tree it names. */
export function importGraph(srcRoot: string): ReadonlyMap<string, ReadonlySet<string>> {
  const files = walk(srcRoot);
  const names = new Set(files.map((f) => relative(srcRoot, f).split(sep).join("/")));
  const graph = new Map<string, Set<string>>();
  for (const file of files) {
    const name = relative(srcRoot, file).split(sep).join("/");
    const targets = new Set<string>();
    for (const { specifier } of specifiersOf(readFileSync(file, "utf8"))) {
      if (!specifier.startsWith(".")) continue;
      const target = relative(srcRoot, resolve(dirname(file), specifier))
        .split(sep)
        .join("/");
      if (names.has(target) && target !== name) targets.add(target);
    }
    graph.set(name, targets);
  }
  return graph;
}

/** Tarjan's strongly connected components of more than one module. */
function components(graph: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter);
    counter += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
      }
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) found.push(group.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** The shortest path from `from` to `to` inside `within`, along `step`; null when none. */
function shortestPath(
  from: string,
  to: string,
  within: ReadonlySet<string>,
  step: (v: string) => Iterable<string>,
): string[] | null {
  const previous = new Map<string, string | null>([[from, null]]);
  const queue = [from];
  while (queue.length > 0) {
    const v = queue.shift() as string;
    if (v === to) {
      const path: string[] = [];
      for (let at: string | null = v; at !== null; at = previous.get(at) ?? null) path.unshift(at);
      return path;
    }
    for (const w of step(v)) {
      if (within.has(w) && !previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return null;
}

/** One circle of more than two files per knot that holds one, each as its files in order. */
export function longCycles(graph: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const arrow = (a: string, b: string) => graph.get(a)?.has(b) === true;
  const cycles: string[][] = [];
  for (const group of components(graph)) {
    const members = new Set(group);
    let cycle: string[] | null = null;
    // An arrow with no arrow back: the way back is two arrows or more.
    for (const u of group) {
      for (const v of graph.get(u) ?? []) {
        if (cycle !== null || !members.has(v) || arrow(v, u)) continue;
        const back = shortestPath(v, u, members, (x) => graph.get(x) ?? []);
        if (back !== null) cycle = [u, ...back.slice(0, -1)];
      }
    }
    // Only two-way arrows: a loop of them is a circle of three or more.
    if (cycle === null) {
      const joined = new Map<string, Set<string>>();
      for (const u of group) {
        for (const v of graph.get(u) ?? []) {
          if (cycle !== null || !members.has(v) || u >= v) continue;
          const path = shortestPath(u, v, members, (x) => joined.get(x) ?? []);
          if (path !== null) cycle = path;
          else {
            joined.set(u, (joined.get(u) ?? new Set()).add(v));
            joined.set(v, (joined.get(v) ?? new Set()).add(u));
          }
        }
      }
    }
    if (cycle !== null) cycles.push(cycle);
  }
  return cycles;
}
