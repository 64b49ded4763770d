/** The generated reference pages: path (from the checkout's top) -> text. */
import { cliReference } from "./cli.ts";

export async function referencePages(): Promise<Record<string, string>> {
  return {
    "docs/reference/cli.md": cliReference(),
  };
}
