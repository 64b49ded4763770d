/** A copy-to-clipboard button that says whether it worked. */
import { useState } from "preact/hooks";

async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // plain http on another host than localhost has no async clipboard: the old way
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

export function CopyButton(props: { text: string; label: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  const copy = async () => {
    const ok = await copyText(props.text);
    setState(ok ? "copied" : "failed");
    setTimeout(() => setState("idle"), 2500);
  };
  return (
    <>
      <button type="button" class="btn small" onClick={copy} aria-label={props.label}>
        {state === "copied" ? "Copied ✓" : "Copy"}
      </button>
      <span class="copy-status" role="status">
        {state === "copied" ? "Copied to the clipboard" : state === "failed" ? "Copy failed: select the text and press Ctrl+C" : ""}
      </span>
    </>
  );
}
