/**
 * The audit log: newest first, filtered by user and action, a page of
 * PAGE_SIZE at a time ("Older entries" asks for those before the last one
 * shown). Refusals and failed sign-ins that repeat show once with a count.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, messageOf, type AuditEntry } from "../api.ts";
import { ACTION_WORDS, actionWords, actorWords, detailsLine } from "../audit.ts";
import { Badge, Card, Empty, ErrorBox, Loading } from "../../../../ui/components/ui.tsx";
import { utcDateTime } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";

const PAGE_SIZE = 100;

const OUTCOME_TONE = { ok: "ok", failed: "bad", refused: "warn" } as const;

export function AuditPage() {
  useTitle("Audit log");
  const users = useApi(api.users, []);
  const [userId, setUserId] = useState("");
  const [action, setAction] = useState("");
  const [entries, setEntries] = useState<AuditEntry[]>();
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [generation, setGeneration] = useState(0);
  // Changing a filter while a page is on its way asks again; only the newest
  // request may fill the table, or a slow answer for the old filter would land
  // last and show entries the filters no longer match.
  const latest = useRef(0);

  const filter = { user_id: userId === "" ? undefined : Number(userId), action: action === "" ? undefined : action, limit: PAGE_SIZE };

  const load = async (older: boolean) => {
    const request = ++latest.current;
    setBusy(true);
    setError(undefined);
    try {
      const page = await api.audit({ ...filter, before_id: older ? entries?.at(-1)?.id : undefined });
      if (request !== latest.current) return;
      setEntries(older ? [...(entries ?? []), ...page] : page);
      setMore(page.length === PAGE_SIZE);
    } catch (err) {
      if (request === latest.current) setError(messageOf(err));
    } finally {
      if (request === latest.current) setBusy(false);
    }
  };

  useEffect(() => {
    setEntries(undefined);
    void load(false);
  }, [userId, action, generation]);

  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Audit log</h1>
        <p class="muted">What admins did and which agents were refused, newest first. Times are UTC.</p>
      </div>
      <Card>
        <div class="filters" role="search">
          <div class="field">
            <label for="audit-user">User</label>
            <select id="audit-user" value={userId} onChange={(e) => setUserId(e.currentTarget.value)}>
              <option value="">Anyone</option>
              {users.data?.map((u) => (
                <option key={u.id} value={String(u.id)}>
                  {u.username}
                </option>
              ))}
            </select>
          </div>
          <div class="field">
            <label for="audit-action">Action</label>
            <select id="audit-action" value={action} onChange={(e) => setAction(e.currentTarget.value)}>
              <option value="">Any</option>
              {Object.entries(ACTION_WORDS).map(([value, words]) => (
                <option key={value} value={value}>
                  {words}
                </option>
              ))}
            </select>
          </div>
          <div class="field">
            <button type="button" class="btn" onClick={() => setGeneration((g) => g + 1)} disabled={busy}>
              Refresh
            </button>
          </div>
        </div>
        {users.error && <p class="stale" role="alert">Could not load users for the filter: {users.error}</p>}
        {error && <ErrorBox title="Could not load the audit log" message={error} retry={() => void load(false)} />}
        {!entries && !error && <Loading what="the audit log" />}
        {entries && entries.length === 0 && <Empty>{userId || action ? "No entry matches these filters." : "Nothing recorded yet."}</Empty>}
        {entries && entries.length > 0 && (
          <div class="table-wrap">
            <table class="cards-on-phone audit">
              <thead>
                <tr>
                  <th scope="col">When (UTC)</th>
                  <th scope="col">Who</th>
                  <th scope="col">From</th>
                  <th scope="col">What</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Details</th>
                </tr>
              </thead>
              <tbody>
                {entries.map((e) => (
                  <tr key={e.id} data-audit={e.id} data-action={e.action}>
                    <td data-label="When">{utcDateTime(e.at)}</td>
                    <td data-label="Who">{actorWords(e)}</td>
                    <td data-label="From" class="mono">
                      {e.address}
                    </td>
                    <td data-label="What">
                      {actionWords(e.action)}
                      {e.target && <span class="muted small block mono">{e.target}</span>}
                    </td>
                    <td data-label="Outcome">
                      <Badge tone={OUTCOME_TONE[e.outcome]}>{e.outcome}</Badge>
                      {e.code && <code class="small"> {e.code}</code>}
                      {e.count > 1 && <span class="muted small"> ×{e.count} in that minute</span>}
                    </td>
                    <td data-label="Details" class="small">
                      {detailsLine(e) || "–"}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {entries && more && (
          <div class="form-actions">
            <button type="button" class="btn" onClick={() => void load(true)} disabled={busy}>
              {busy ? "Loading…" : "Older entries"}
            </button>
          </div>
        )}
      </Card>
    </>
  );
}
