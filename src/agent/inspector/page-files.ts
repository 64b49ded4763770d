/**
 * Where the inspector's page comes from when burrow runs from source (and
 * from an executable compiled without build/compile.ts): its HTML import,
 * bundled by Bun. Bun serves an HTML import only as a Bun.serve route of its
 * own, which would answer before the inspector's Host check and without its
 * headers; so the page and its assets are fetched once, from a private
 * server on a loopback port that lives for that moment.
 *
 * `npm run build` and `npm run release` replace this module with the page
 * bundled at build time (build/inspector-page.ts): an executable then holds
 * one HTML import only, the admin panel's, because Bun orders two of them
 * differently from one build to the next, and the same checkout must give
 * the same bytes.
 */
import page from "./web/index.html";

export interface PageFile {
  body: Uint8Array;
  type: string;
}

/** The page ("/") and every asset it names, by path. */
export async function loadPageFiles(): Promise<Map<string, PageFile>> {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    reusePort: false,
    development: false,
    routes: { "/": page },
    fetch: () => new Response(null, { status: 404 }),
  });
  try {
    const base = `http://127.0.0.1:${server.port}`;
    const files = new Map<string, PageFile>();
    const take = async (path: string) => {
      const res = await fetch(base + path);
      if (!res.ok) throw new Error(`the inspector page's ${path} did not bundle (${res.status})`);
      const file = { body: new Uint8Array(await res.arrayBuffer()), type: res.headers.get("content-type") ?? "application/octet-stream" };
      files.set(path, file);
      return file;
    };
    const html = new TextDecoder().decode((await take("/")).body);
    const assets = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1]!);
    await Promise.all(assets.map(take));
    return files;
  } finally {
    server.stop(true);
  }
}
