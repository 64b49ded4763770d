/** The generated reference pages: path (from the checkout's top) -> how to make its text. */
import { apiReference } from "./api.ts";
import { cliReference } from "./cli.ts";
import { codesReference } from "./codes.ts";
import { eventsReference } from "./events.ts";
import { portalApiReference } from "./portal-api.ts";

export const REFERENCE_PAGES: Readonly<Record<string, () => string | Promise<string>>> = {
  "docs/reference/cli.md": cliReference,
  "docs/reference/api.md": apiReference,
  "docs/reference/codes.md": codesReference,
  "docs/reference/portal-api.md": portalApiReference,
  "docs/reference/events.md": eventsReference,
};
