/**
 * The portal's pages: one document (the browser routes between its pages)
 * and its assets, from memory (page-files.ts), behind the portal's Host
 * check and with its headers.
 */
import { loadPageFiles, type PageFile } from "./page-files.ts";

/** The paths the page answers on; keep in step with web/router.ts. */
export const PAGE_PATHS = new Set(["/", "/devices", "/account", "/webhooks", "/device", "/invite"]);

let files: Promise<Map<string, PageFile>> | undefined;

/** The file served at `path` (a page path is the document), or undefined. */
export async function pageFile(path: string): Promise<PageFile | undefined> {
  files ??= loadPageFiles().catch((err) => {
    files = undefined; // try again on the next ask
    throw err;
  });
  const all = await files;
  return PAGE_PATHS.has(path) ? all.get("/") : path === "/" ? undefined : all.get(path);
}
