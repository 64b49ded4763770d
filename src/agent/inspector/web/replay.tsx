/** Edit and replay: the captured request's method, path, headers and body, changed and sent again. */
import { useState } from "preact/hooks";
import type { Detail, HeaderList, ReplayEdits } from "./api.ts";
import { asText, fromBase64, toBase64 } from "./format.ts";

interface Props {
  detail: Detail;
  busy: boolean;
  onSend(edits: ReplayEdits): void;
}

/** "name: value" lines -> pairs; lines without a colon are ignored. */
export function parseHeaderLines(text: string): HeaderList {
  const out: HeaderList = [];
  for (const line of text.split("\n")) {
    const at = line.indexOf(":", 1);
    if (at < 0) continue;
    const name = line.slice(0, at).trim();
    if (name) out.push([name, line.slice(at + 1).trim()]);
  }
  return out;
}

export function ReplayForm({ detail, busy, onSend }: Props) {
  const original = fromBase64(detail.request.body.base64);
  const originalText = asText(original);
  const [method, setMethod] = useState(detail.request.method);
  const [path, setPath] = useState(detail.request.path);
  const [headers, setHeaders] = useState(detail.request.headers.map(([n, v]) => `${n}: ${v}`).join("\n"));
  const [body, setBody] = useState(originalText ?? "");

  const submit = (e: Event) => {
    e.preventDefault();
    const edits: ReplayEdits = { method: method.trim(), path: path.trim(), headers: parseHeaderLines(headers) };
    // a binary body cannot be edited as text: it goes as it was
    if (originalText !== undefined) edits.body = toBase64(new TextEncoder().encode(body));
    onSend(edits);
  };

  return (
    <form class="replay-form" onSubmit={submit}>
      <div class="row">
        <label>
          Method <input name="method" class="mono" value={method} onInput={(e) => setMethod(e.currentTarget.value)} size={8} />
        </label>
        <label class="grow">
          Path <input name="path" class="mono" value={path} onInput={(e) => setPath(e.currentTarget.value)} />
        </label>
      </div>
      <label>
        Headers, one "name: value" a line
        <textarea name="headers" class="mono" rows={8} value={headers} onInput={(e) => setHeaders(e.currentTarget.value)} />
      </label>
      {originalText !== undefined ? (
        <label>
          Body
          <textarea name="body" class="mono" rows={6} value={body} onInput={(e) => setBody(e.currentTarget.value)} />
        </label>
      ) : (
        <p class="empty">The binary body ({original.length} bytes) is sent as captured.</p>
      )}
      <button type="submit" class="primary send-replay" disabled={busy}>
        Send
      </button>
    </form>
  );
}
