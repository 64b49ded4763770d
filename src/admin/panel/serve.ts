/**
 * The web panel as Bun.serve routes: one HTML import, bundled by Bun (scripts,
 * styles, fonts and all) and embedded by `bun build --compile`. The panel
 * routes in the browser, so every page path serves the same document.
 */
import type { HTMLBundle } from "bun";
import panel from "./index.html";

/** Page paths of the panel; keep in step with matchPath in web/router.ts. */
export const PANEL_PATHS = ["/", "/users", "/users/:id", "/domains", "/tunnels", "/agents", "/certificates", "/audit", "/keys", "/invitations", "/webhooks", "/policies"] as const;

export const panelRoutes: Record<string, HTMLBundle> = Object.fromEntries(PANEL_PATHS.map((p) => [p, panel]));
