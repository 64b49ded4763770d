/**
 * Where the inspector's page comes from when burrow runs from source (and
 * from an executable compiled without build/compile.ts): its HTML import,
 * bundled by Bun (http/html-bundle.ts).
 *
 * `npm run build` and `npm run release` replace this module with the page
 * bundled at build time (build/page-bundles.ts): an executable then holds
 * one HTML import only, the admin panel's, because Bun orders two of them
 * differently from one build to the next, and the same checkout must give
 * the same bytes.
 */
import { loadHtmlBundle, type PageFile } from "../../http/html-bundle.ts";
import page from "./web/index.html";

export type { PageFile };

/** The page ("/") and every asset it names, by path. */
export const loadPageFiles = (): Promise<Map<string, PageFile>> => loadHtmlBundle(page, "the inspector page");
