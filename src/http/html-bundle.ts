/**
 * A page's files from its HTML import, bundled by Bun. Bun serves an HTML
 * import only as a Bun.serve route of its own, which would answer before a
 * server's own checks (Host, headers); so the page and its assets are
 * fetched once, from a private server on a loopback port that lives for
 * that moment, and served from memory after.
 */
import type { HTMLBundle } from "bun";

export interface PageFile {
  body: Uint8Array;
  type: string;
}

/** The page ("/") and every asset it names, by path. */
export async function loadHtmlBundle(page: HTMLBundle, what: string): Promise<Map<string, PageFile>> {
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
      if (!res.ok) throw new Error(`${what}'s ${path} did not bundle (${res.status})`);
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
