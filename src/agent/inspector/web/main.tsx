/** The burrow inspector: a Preact app on the inspector's own JSON API. */
import { render } from "preact";
import { App } from "./app.tsx";

const root = document.getElementById("app")!;
if (window.top !== window.self) {
  // framed by another page: clicks could be steered, so show nothing
  root.textContent = "The burrow inspector does not work inside a frame. Open it in its own tab.";
} else {
  render(<App />, root);
}
