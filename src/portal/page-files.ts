/**
 * Where the portal's page comes from when burrow runs from source: its HTML
 * import, bundled by Bun (http/html-bundle.ts). `npm run build` replaces
 * this module with the page bundled at build time (build/page-bundles.ts).
 */
import { loadHtmlBundle, type PageFile } from "../http/html-bundle.ts";
import page from "./web/index.html";

export type { PageFile };

/** The page ("/") and every asset it names, by path. */
export const loadPageFiles = (): Promise<Map<string, PageFile>> => loadHtmlBundle(page, "the portal page");
