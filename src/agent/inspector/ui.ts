/**
 * The inspector's page: one HTML import (web/index.html), bundled by Bun
 * with its script and stylesheet and embedded by `bun build --compile`, as
 * the admin panel is. Bun serves an HTML import only as a Bun.serve route
 * of its own, which would answer before the inspector's Host check and
 * without its headers; so the page and its assets are fetched once, on
 * first ask, from a private server on a loopback port that lives for that
 * moment, and served from memory behind the guard like everything else.
 */
import page from "./web/index.html";

export interface PageFile {
  body: Uint8Array;
  type: string;
}

export class InspectorPage {
  private files: Promise<Map<string, PageFile>> | undefined;

  /** The file at `path` ("/" is the page), or undefined when the page has none there. */
  async file(path: string): Promise<PageFile | undefined> {
    this.files ??= bundle().catch((err) => {
      this.files = undefined; // try again on the next ask
      throw err;
    });
    return (await this.files).get(path);
  }
}

async function bundle(): Promise<Map<string, PageFile>> {
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
