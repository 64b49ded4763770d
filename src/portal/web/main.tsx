/** The burrow portal: a Preact app on the portal's API, for users to see and manage their own things. */
import { render } from "preact";
import { App } from "./app.tsx";

const root = document.getElementById("app")!;
if (window.top !== window.self) {
  // framed by another page (a tunnel on a subdomain, say): clicks could be steered, so show nothing
  root.textContent = "This page does not work inside a frame. Open it in its own tab.";
} else {
  render(<App />, root);
}
