/** One capture in full: its heads, its bodies in the best view, its WebSocket messages, and replay. */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, type Body, type Detail, type HeaderList, type LogFields, type PolicyView, type Summary, type Tunnel } from "./api.ts";
import { bytes, curlCommand, duration, fromBase64, hexDump, viewBody, clock, asText } from "./format.ts";
import { ReplayForm } from "./replay.tsx";

interface Props {
  id: number;
  summary: Summary | undefined;
  tunnels: Tunnel[];
  onSelect(id: number): void;
}

export function DetailView({ id, summary, tunnels, onSelect }: Props) {
  const [detail, setDetail] = useState<Detail | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [editing, setEditing] = useState(false);
  const [busy, setBusy] = useState(false);
  const [curl, setCurl] = useState<string | undefined>(undefined);

  // again whenever the list's summary changes: a pending request gets its response, the server's policy note comes
  const version = summary ? `${summary.state}/${summary.status}/${summary.response_size}/${summary.websocket?.messages_from_service}/${summary.websocket?.messages_from_visitor}/${summary.policy_noted}` : "";
  useEffect(() => {
    api.detail(id).then(
      (d) => {
        setDetail(d);
        setError(undefined);
      },
      (err) => setError(err instanceof ApiError ? err.message : String(err)),
    );
  }, [id, version]);

  if (error) return <p class="error" role="alert">{error}</p>;
  if (!detail) return <p class="empty">Loading…</p>;

  const replay = async (edits?: Parameters<typeof api.replay>[1]) => {
    setBusy(true);
    try {
      const made = await api.replay(id, edits);
      setEditing(false);
      onSelect(made.id);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  const copyCurl = async () => {
    const tunnel = tunnels.find((t) => t.name === detail.tunnel);
    const command = curlCommand(tunnel?.public_url ?? "http://localhost", detail.request.method, detail.request.path, detail.request.headers, fromBase64(detail.request.body.base64));
    setCurl(command);
    try {
      await navigator.clipboard.writeText(command);
    } catch {
      // no clipboard (an insecure context, a denied permission): the command is shown to copy by hand
    }
  };

  return (
    <div class="capture">
      <h2 class="mono">
        {detail.request.method} {detail.request.path}
      </h2>
      <p class="facts">
        <span>#{detail.id}</span>
        <span>{detail.tunnel}</span>
        <span>{clock(detail.started_at)}</span>
        <span>{detail.status ?? detail.state}</span>
        <span>{duration(detail.duration_ms)}</span>
        <span>from {detail.remote}</span>
        {detail.replay_of !== null && (
          <button type="button" class="link replay-of" onClick={() => onSelect(detail.replay_of!)}>
            replay of #{detail.replay_of}
          </button>
        )}
      </p>
      {detail.error && <p class="error">{detail.error}</p>}
      {detail.policy && <PolicyPanel policy={detail.policy} />}
      {detail.kind === "http" && detail.answered_by === "service" && (
        <div class="actions">
          <button type="button" class="replay" disabled={busy || detail.request.body.truncated} onClick={() => replay()}>
            Replay
          </button>
          <button type="button" class="edit-replay" disabled={busy} onClick={() => setEditing(!editing)}>
            {editing ? "Cancel edit" : "Edit and replay"}
          </button>
          <button type="button" class="copy-curl" onClick={copyCurl}>
            Copy as curl
          </button>
        </div>
      )}
      {curl && <textarea class="curl mono" readOnly rows={3} value={curl} />}
      {editing && <ReplayForm detail={detail} busy={busy} onSend={replay} />}
      <h3>Request</h3>
      {detail.answered_by === "edge" ? (
        <p class="empty">Answered by the server's traffic policy: the request never reached this agent, so its headers and body are not known here.</p>
      ) : (
        <>
          <Headers list={detail.request.headers} />
          <BodyPanel body={detail.request.body} />
        </>
      )}
      <h3>Response</h3>
      {detail.response ? (
        <>
          <p class="mono status-line">{detail.response.status}</p>
          <Headers list={detail.response.headers} />
          {detail.kind === "http" && <BodyPanel body={detail.response.body} />}
        </>
      ) : (
        <p class="empty">{detail.state === "pending" ? "Waiting for the local service…" : "No response."}</p>
      )}
      {detail.websocket && <Messages ws={detail.websocket} />}
    </div>
  );
}

/** What the tunnel's traffic policies did: the rules that matched in each phase, the action that ended it and whose it was, the log action's fields. */
function PolicyPanel({ policy }: { policy: PolicyView }) {
  const ended = policy.ended;
  const response = policy.response;
  const events = policy.events;
  return (
    <section class="policy" aria-label="Traffic policy">
      <h3>Traffic policy</h3>
      <p class="facts">
        <span class="request-rules">{policy.rules.length === 0 ? "none of the tunnel's request rules matched" : `request rules matched: ${policy.rules.join(", ")}`}</span>
        {response && response.rules.length > 0 && (
          <span class="response-rules">response rules matched: {response.rules.map((r) => `${r.rule} (${r.actions.join(", ")})`).join(", ")}</span>
        )}
        {events && events.rules.length > 0 && (
          <span class="event-rules">event stream rules matched: {events.rules.map((r) => `${r.rule} (${r.actions.join(", ")})`).join(", ")}</span>
        )}
        <span class="ended">
          {ended === null
            ? "the service's answer went to the visitor"
            : `${ended.phase === "response" ? "response replaced" : "ended"} by ${ended.by === "server" ? "the server's policy" : ended.rule !== undefined ? `rule ${ended.rule}` : "the tunnel's flags"}: ${ended.action}${ended.status !== null ? ` (${ended.status})` : ""}`}
        </span>
        {policy.skipped_before > 0 && <span>{policy.skipped_before} refused just before, not shown</span>}
      </p>
      <LogTable label="request" logs={policy.logs} />
      {response && <LogTable label="response" logs={response.logs} />}
    </section>
  );
}

/** A phase's log fields, one row a field. */
function LogTable({ label, logs }: { label: string; logs: LogFields[] }) {
  if (logs.length === 0) return null;
  return (
    <table class="headers policy-logs" aria-label={`${label} log fields`}>
      <tbody>
        {logs.flatMap((fields, i) =>
          Object.entries(fields).map(([n, v]) => (
            <tr key={`${i}-${n}`}>
              <th class="mono">{n}</th>
              <td class="mono">{v !== null && typeof v === "object" ? JSON.stringify(v) : String(v)}</td>
            </tr>
          )),
        )}
      </tbody>
    </table>
  );
}

function Headers({ list }: { list: HeaderList }) {
  if (list.length === 0) return <p class="empty">No headers.</p>;
  return (
    <table class="headers">
      <tbody>
        {list.map(([n, v], i) => (
          <tr key={i}>
            <th class="mono">{n}</th>
            <td class="mono">{v}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function BodyPanel({ body }: { body: Body }) {
  const [raw, setRaw] = useState(false);
  const [hex, setHex] = useState(false);
  const decoded = body.decoded?.base64 !== undefined && !raw;
  const data = fromBase64(decoded ? body.decoded!.base64! : body.base64);
  const view = hex ? { kind: "hex" as const, text: hexDump(data) } : viewBody(data, body.content_type);
  return (
    <div class="body">
      <p class="body-facts">
        <span>{bytes(body.size)}</span>
        {body.content_type && <span class="mono">{body.content_type}</span>}
        {body.truncated && <span class="truncated">truncated: the first {bytes(body.captured)} were kept</span>}
        {body.decoded && (
          <span>
            {body.decoded.error ? (
              `${body.decoded.encoding}: ${body.decoded.error}`
            ) : (
              <label>
                <input type="checkbox" class="show-raw" checked={raw} onChange={(e) => setRaw(e.currentTarget.checked)} /> raw {body.decoded.encoding} bytes
              </label>
            )}
          </span>
        )}
        {data.length > 0 && (
          <label>
            <input type="checkbox" class="show-hex" checked={hex} onChange={(e) => setHex(e.currentTarget.checked)} /> hex
          </label>
        )}
      </p>
      {view.kind === "empty" && <p class="empty">No body.</p>}
      {view.kind === "json" && <pre class="json-view">{view.text}</pre>}
      {view.kind === "text" && <pre class="text-view">{view.text}</pre>}
      {view.kind === "hex" && <pre class="hex-view">{view.text}</pre>}
      {view.kind === "image" && <img class="image-view" src={view.src} alt="the body as an image" />}
      {view.kind === "form" && (
        <table class="form-view">
          <tbody>
            {view.fields.map(([n, v], i) => (
              <tr key={i}>
                <th class="mono">{n}</th>
                <td class="mono">{v}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

function Messages({ ws }: { ws: NonNullable<Detail["websocket"]> }) {
  return (
    <>
      <h3>WebSocket messages</h3>
      <p class="facts ws-counts">
        <span>
          {ws.messages_from_visitor} from the visitor ({bytes(ws.bytes_from_visitor)})
        </span>
        <span>
          {ws.messages_from_service} from the service ({bytes(ws.bytes_from_service)})
        </span>
      </p>
      <ol class="messages">
        {ws.last_messages.map((m, i) => (
          <li key={i} class={m.from}>
            <span class="mono">{clock(m.at)}</span> <b>{m.from === "visitor" ? "→" : "←"}</b>{" "}
            <code>{m.text ?? asText(fromBase64(m.base64 ?? "")) ?? `${m.size} binary bytes`}</code>
            {m.truncated && <span class="truncated"> (the start of {bytes(m.size)})</span>}
          </li>
        ))}
      </ol>
    </>
  );
}
