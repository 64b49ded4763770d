/**
 * The pages an executable serves besides the admin panel (the request
 * inspector's, the portal's), bundled at build time. From source each takes
 * its page from an HTML import (its folder's page-files.ts, through
 * src/http/html-bundle.ts); in an executable that would be more HTML imports
 * beside the admin panel's, and Bun lays several out in an order that
 * changes from one build to the next, so the same checkout would not give
 * the same bytes. This plugin replaces each page-files.ts with a module
 * holding its page and assets, bundled here once by Bun.build (minified,
 * with absolute asset paths, as they are served).
 */
import type { BunPlugin } from "bun";
import { join } from "node:path";
import { ROOT } from "./paths.ts";

export interface BundledFile {
  path: string;
  type: string;
  base64: string;
}

/** The folders whose page-files.ts is replaced, each with its page's HTML. */
const PAGES = [
  { name: "inspector", dir: join(ROOT, "src", "agent", "inspector") },
  { name: "portal", dir: join(ROOT, "src", "portal") },
];

/** A page's files: "/" for the HTML, "/<name>" for each asset it names. */
async function bundlePage(dir: string, name: string, minify: boolean): Promise<BundledFile[]> {
  const result = await Bun.build({ entrypoints: [join(dir, "web", "index.html")], minify, publicPath: "/" });
  if (!result.success) {
    for (const message of result.logs) console.error(message);
    throw new Error(`the ${name}'s page did not bundle`);
  }
  const files = await Promise.all(
    result.outputs.map(async (o) => ({
      path: o.path.endsWith(".html") ? "/" : `/${o.path.replace(/^\.\//, "")}`,
      type: o.type,
      base64: Buffer.from(await o.arrayBuffer()).toString("base64"),
    })),
  );
  // a fixed order, whatever order Bun returns them in
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Every page's files, made before the executable's own Bun.build (a build cannot run inside another's plugin). */
export async function bundlePages(minify: boolean): Promise<Map<string, BundledFile[]>> {
  const out = new Map<string, BundledFile[]>();
  for (const p of PAGES) out.set(p.name, await bundlePage(p.dir, p.name, minify));
  return out;
}

export function pagesPlugin(bundles: Map<string, BundledFile[]>): BunPlugin {
  const module = (files: BundledFile[]) =>
    [
      `const FILES = ${JSON.stringify(files)};`,
      "export async function loadPageFiles() {",
      "  return new Map(FILES.map((f) => [f.path, { body: new Uint8Array(Buffer.from(f.base64, \"base64\")), type: f.type }]));",
      "}",
    ].join("\n");
  return {
    name: "page-bundles",
    setup(build) {
      build.onResolve({ filter: /page-files\.ts$/ }, (args) => {
        const page = PAGES.find((p) => args.importer.startsWith(p.dir + "/") && !args.importer.slice(p.dir.length + 1).includes("/"));
        return page ? { path: page.name, namespace: "page-bundle" } : undefined;
      });
      build.onLoad({ filter: /.*/, namespace: "page-bundle" }, (args) => ({ contents: module(bundles.get(args.path) ?? []), loader: "js" }));
    },
  };
}
