/**
 * The inspector's page, served from memory behind the inspector's guard:
 * the files come once, on first ask, from page-files.ts (the HTML import
 * when run from source; the page bundled at build time in an executable).
 */
import { loadPageFiles, type PageFile } from "./page-files.ts";

export type { PageFile };

export class InspectorPage {
  private files: Promise<Map<string, PageFile>> | undefined;

  /** The file at `path` ("/" is the page), or undefined when the page has none there. */
  async file(path: string): Promise<PageFile | undefined> {
    this.files ??= loadPageFiles().catch((err) => {
      this.files = undefined; // try again on the next ask
      throw err;
    });
    return (await this.files).get(path);
  }
}
