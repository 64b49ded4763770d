/**
 * The agents connected now, on every node, refreshed every few seconds: who,
 * what they run and on what, their tunnels by their own names, the config
 * they run, their last error; and the server's asks to one of them
 * (connect again, run `burrow update`), whose answer is the agent's own.
 */
import { useState } from "preact/hooks";
import { api, messageOf, type Agent } from "../api.ts";
import { Confirm } from "../../../../ui/components/dialog.tsx";
import { Badge, Card, Empty, ErrorBox, Link, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { ago, utcDateTime } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";
import { notify } from "../../../../ui/notices.ts";
import { LIVE_REFRESH_MS } from "./tunnels.tsx";

type Ask = { agent: Agent; action: "restart" | "update" };

/** The session's device: its token, or the SSH key of an `ssh -R` forward. */
const deviceOf = (a: Agent) => (a.token_id !== null ? `token #${a.token_id}` : `SSH key #${a.ssh_key_id}`);

export function AgentsPage() {
  useTitle("Agents");
  const list = useApi(api.agents, [], LIVE_REFRESH_MS);
  const [asking, setAsking] = useState<Ask>();
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Agents</h1>
        <p class="muted">{list.data ? `${list.data.length} connected · updates every ${LIVE_REFRESH_MS / 1000} s` : "Updates every few seconds."}</p>
      </div>
      <Card>
        {list.error && !list.data && <ErrorBox title="Could not load the agents" message={list.error} retry={list.reload} />}
        <StaleWarning error={list.data ? list.error : undefined} what="agents" />
        {!list.data && !list.error && <Loading what="the agents" />}
        {list.data && list.data.length === 0 && <Empty>No agent is connected right now.</Empty>}
        {list.data && list.data.length > 0 && (
          <div class="table-wrap">
            <table class="agents">
              <thead>
                <tr>
                  <th scope="col">User and device</th>
                  <th scope="col">Agent</th>
                  <th scope="col">Tunnels</th>
                  <th scope="col">Config</th>
                  <th scope="col">Last error</th>
                  <th scope="col">
                    <span class="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.data.map((a) => (
                  <tr key={a.id} data-agent={a.id} data-token={a.token_id ?? undefined} data-ssh-key={a.ssh_key_id}>
                    <td>
                      <Link href={`/users/${a.user_id}`}>{a.username}</Link>
                      <span class="muted small block">
                        {deviceOf(a)} · {a.remote}
                        {a.node ? ` · node ${a.node}` : ""}
                      </span>
                    </td>
                    <td>
                      {a.agent ?? <span class="muted">unknown</span>}
                      <span class="muted small block">
                        {a.os ? `${a.os}/${a.arch}` : "older agent"} · connected <span title={utcDateTime(a.connected_at)}>{ago(a.connected_at)}</span>
                        {a.started_at ? <> · started <span title={utcDateTime(a.started_at)}>{ago(a.started_at)}</span></> : null}
                      </span>
                    </td>
                    <td>
                      {a.connects ? <span>connects to {a.connects}</span> : a.tunnels.length === 0 ? <span class="muted">none</span> : null}
                      {a.tunnels.map((t) => (
                        <span key={t.id} class="block small">
                          <strong>{t.name ?? t.protocol}</strong> {t.url}
                          {t.source === "remote" ? <Badge tone="info">server</Badge> : t.source === "api" ? <Badge tone="muted">agent API</Badge> : null}
                        </span>
                      ))}
                    </td>
                    <td>
                      {a.config.remote ? <Badge tone="info">remote{a.config.version !== null ? ` v${a.config.version}` : ""}</Badge> : <span class="muted">local</span>}
                      {a.config.error && <span class="small block"><Badge tone="bad">not taken</Badge> {a.config.error}</span>}
                    </td>
                    <td>{a.last_error ? <span class="small" title={utcDateTime(a.last_error.at)}>{a.last_error.message}</span> : <span class="muted">—</span>}</td>
                    <td class="actions">
                      {a.transport === "ssh" ? (
                        // OpenSSH's client at the other end: nothing of burrow's to reconnect or update
                        <span class="muted small">SSH session</span>
                      ) : (
                        <>
                          <button type="button" class="btn small" onClick={() => setAsking({ agent: a, action: "restart" })} aria-label={`Reconnect the agent of ${a.username}, token ${a.token_id}`}>
                            Reconnect
                          </button>
                          <button type="button" class="btn small" onClick={() => setAsking({ agent: a, action: "update" })} aria-label={`Update the agent of ${a.username}, token ${a.token_id}`}>
                            Update
                          </button>
                        </>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Card>
      {asking && (
        <Confirm
          title={asking.action === "restart" ? "Ask the agent to connect again?" : "Ask the agent to run burrow update?"}
          confirmLabel={asking.action === "restart" ? "Ask to reconnect" : "Ask to update"}
          onClose={() => setAsking(undefined)}
          onConfirm={async () => {
            try {
              const answer = await api.askAgent(asking.agent.id, asking.action);
              notify("ok", `The agent of ${asking.agent.username} answered: ${answer.message}.`);
              list.reload();
            } catch (err) {
              // the agent's no, in its words, stays in the dialog
              throw new Error(messageOf(err));
            }
          }}
        >
          <p>
            {asking.action === "restart"
              ? "Its connection ends and a new one starts at once; its tunnels keep their names, but requests in flight on them are cut."
              : "It runs burrow update beside itself; the new version runs once the agent is restarted."}{" "}
            The agent decides by its own flags (<code>{asking.action === "restart" ? "--remote-restart" : "--remote-update"}</code>
            {asking.agent.manage ? `, ${asking.agent.manage[asking.action] ? "on" : "off"} on this one` : ", which this one does not say"}).
          </p>
        </Confirm>
      )}
    </>
  );
}
