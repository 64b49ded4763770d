/** The burrow admin panel: a Preact app on the admin REST API. */
import { render } from "preact";
import { App } from "./app.tsx";

const root = document.getElementById("app")!;
if (window.top !== window.self) {
  // framed by another page (a tunnel on a sibling subdomain, say): clicks could be steered, so show nothing
  root.textContent = "The burrow admin panel does not work inside a frame. Open it in its own tab.";
} else {
  render(<App />, root);
}
