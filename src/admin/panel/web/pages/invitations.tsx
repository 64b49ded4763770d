/**
 * Invitations: make a link that makes one user with these limits when
 * opened on the portal (shown once, to copy and send), list them by how
 * they stand, withdraw one with confirmation.
 */
import { useState } from "preact/hooks";
import { CopyButton } from "../../../../ui/components/copy.tsx";
import { Confirm, Modal } from "../../../../ui/components/dialog.tsx";
import { Badge, Card, Checkbox, Empty, ErrorBox, Field, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { formatLimit, formatQuota, unitBytes, utcDateTime, type Unit } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";
import { notify } from "../../../../ui/notices.ts";
import { api, messageOf, type Invitation, type NewInvitation, type TrafficPeriod } from "../api.ts";
import { parseLimit, PROTOCOLS, TRAFFIC_PERIODS } from "../validate.ts";

const STATUS_TONE = { pending: "info", used: "ok", expired: "muted" } as const;
const EXPIRY_CHOICES = [
  { hours: 24, label: "In a day" },
  { hours: 72, label: "In 3 days" },
  { hours: 168, label: "In a week" },
  { hours: 720, label: "In 30 days" },
];
const UNITS: Unit[] = ["MB", "GB", "TB"];

export function InvitationsPage() {
  useTitle("Invitations");
  const list = useApi(api.invitations, []);
  const [made, setMade] = useState<NewInvitation>();
  const [withdrawing, setWithdrawing] = useState<Invitation>();
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Invitations</h1>
        <p class="muted">
          An invitation is a link to send to a teammate: opened on this server's own address, it lets them choose a username and password and become a user with
          the limits set here. Each link works once.
        </p>
      </div>
      <Card title="Make an invitation" id="make-invitation">
        <InvitationForm
          onMade={(i) => {
            setMade(i);
            void list.reload();
          }}
        />
      </Card>
      <Card title={`Invitations${list.data ? ` (${list.data.length})` : ""}`} id="invitations">
        {list.error && !list.data && <ErrorBox title="Could not load invitations" message={list.error} retry={list.reload} />}
        <StaleWarning error={list.data ? list.error : undefined} what="invitations" />
        {!list.data && !list.error && <Loading what="invitations" />}
        {list.data && list.data.length === 0 && <Empty>No invitation yet.</Empty>}
        {list.data && list.data.length > 0 && (
          <ul class="list invitations">
            {list.data.map((i) => (
              <li key={i.id} class={i.status === "pending" ? "" : "revoked"} data-invitation={i.id}>
                <div class="list-main">
                  <span class="strong">{i.note || `Invitation #${i.id}`}</span> <Badge tone={STATUS_TONE[i.status]}>{i.status}</Badge>
                  <span class="muted small block">
                    #{i.id} · {i.role} · tunnels {formatLimit(i.max_tunnels)} · devices {formatLimit(i.max_devices)} ·{" "}
                    {i.traffic_limit > 0 ? formatQuota(i.traffic_limit, i.traffic_period) : "no traffic limit"} · made {utcDateTime(i.created_at)} ·{" "}
                    {i.status === "used" ? `used by ${i.used_username ?? "?"} ${utcDateTime(i.used_at!)}` : `${i.status === "expired" ? "expired" : "expires"} ${utcDateTime(i.expires_at)}`}
                  </span>
                </div>
                <button type="button" class="btn small danger-ghost" onClick={() => setWithdrawing(i)} aria-label={`Delete invitation ${i.id}`}>
                  {i.status === "pending" ? "Withdraw" : "Delete"}
                </button>
              </li>
            ))}
          </ul>
        )}
      </Card>
      {made && (
        <Modal title="Invitation link" onClose={() => setMade(undefined)} wide>
          <p class="warn-box">
            <strong>Copy it now.</strong> {made.message}
          </p>
          <div class="secret">
            <label for="invitation-url">The link</label>
            <div class="copy-row">
              <textarea id="invitation-url" class="mono" readOnly rows={2} value={made.url} onFocus={(e) => e.currentTarget.select()} data-testid="invitation-url" />
              <CopyButton text={made.url} label="Copy the link" />
            </div>
            <p class="hint">It works until {utcDateTime(made.expires_at)} UTC.</p>
          </div>
          <div class="form-actions">
            <button type="button" class="btn primary" onClick={() => setMade(undefined)}>
              I have copied it
            </button>
          </div>
        </Modal>
      )}
      {withdrawing && (
        <Confirm
          title={withdrawing.status === "pending" ? `Withdraw invitation #${withdrawing.id}?` : `Delete invitation #${withdrawing.id}?`}
          confirmLabel={withdrawing.status === "pending" ? "Withdraw" : "Delete"}
          onClose={() => setWithdrawing(undefined)}
          onConfirm={async () => {
            await api.deleteInvitation(withdrawing.id);
            notify("ok", withdrawing.status === "pending" ? `Invitation #${withdrawing.id} withdrawn: its link no longer works.` : `Invitation #${withdrawing.id} deleted.`);
            await list.reload();
          }}
        >
          <p>{withdrawing.status === "pending" ? "Its link stops working now." : "Its record goes; the user it made stays."}</p>
        </Confirm>
      )}
    </>
  );
}

function InvitationForm(props: { onMade(i: NewInvitation): void }) {
  const [note, setNote] = useState("");
  const [role, setRole] = useState<"user" | "admin">("user");
  const [maxTunnels, setMaxTunnels] = useState("");
  const [maxDevices, setMaxDevices] = useState("");
  const [traffic, setTraffic] = useState("");
  const [unit, setUnit] = useState<Unit>("GB");
  const [period, setPeriod] = useState<TrafficPeriod>("monthly");
  const [protocols, setProtocols] = useState<Record<string, boolean>>({ http: true, tcp: true });
  const [skipWarning, setSkipWarning] = useState(false);
  const [canUseProxy, setCanUseProxy] = useState(true);
  const [hours, setHours] = useState(168);
  const [errors, setErrors] = useState<Record<string, string | undefined>>({});
  const [failure, setFailure] = useState<string>();
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    const tunnels = parseLimit(maxTunnels);
    const devices = parseLimit(maxDevices);
    const amount = traffic.trim() === "" ? 0 : Number(traffic);
    const chosen = PROTOCOLS.filter((p) => protocols[p]);
    const found = {
      max_tunnels: tunnels === undefined ? "A whole number, or empty for no limit" : undefined,
      max_devices: devices === undefined ? "A whole number, or empty for no limit" : undefined,
      traffic: !Number.isFinite(amount) || amount < 0 ? "A number, or empty for no limit" : undefined,
      protocols: chosen.length === 0 ? "Allow at least one" : undefined,
    };
    setErrors(found);
    if (Object.values(found).some(Boolean)) return;
    setBusy(true);
    setFailure(undefined);
    try {
      props.onMade(
        await api.createInvitation({
          role,
          max_tunnels: tunnels,
          max_devices: devices,
          traffic_limit: Math.round(amount * unitBytes(unit)),
          traffic_period: period,
          allowed_protocols: chosen.join(","),
          skip_warning: skipWarning,
          can_use_proxy: canUseProxy,
          expires_in_hours: hours,
          ...(note.trim() ? { note: note.trim() } : {}),
        }),
      );
      setNote("");
    } catch (err) {
      setFailure(messageOf(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form onSubmit={submit} noValidate>
      {failure && <ErrorBox title="Not made" message={failure} />}
      <Field label="Note" hint="For you: who it is for (shown to them too)">
        {({ id, describedBy }) => <input id={id} name="note" maxLength={200} value={note} onInput={(e) => setNote(e.currentTarget.value)} aria-describedby={describedBy} autocomplete="off" />}
      </Field>
      <div class="grid two">
        <Field label="Tunnels at once" error={errors.max_tunnels} hint="Empty: no limit">
          {({ id, describedBy, invalid }) => <input id={id} name="max_tunnels" inputMode="numeric" value={maxTunnels} onInput={(e) => setMaxTunnels(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />}
        </Field>
        <Field label="Devices" error={errors.max_devices} hint="Empty: no limit">
          {({ id, describedBy, invalid }) => <input id={id} name="max_devices" inputMode="numeric" value={maxDevices} onInput={(e) => setMaxDevices(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />}
        </Field>
        <Field label="Traffic" error={errors.traffic} hint="Empty: no limit">
          {({ id, describedBy, invalid }) => (
            <div class="copy-row">
              <input id={id} name="traffic_limit" inputMode="decimal" value={traffic} onInput={(e) => setTraffic(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
              <select aria-label="Traffic unit" value={unit} onChange={(e) => setUnit(e.currentTarget.value as Unit)}>
                {UNITS.map((u) => (
                  <option key={u}>{u}</option>
                ))}
              </select>
              <select aria-label="Traffic period" value={period} onChange={(e) => setPeriod(e.currentTarget.value as TrafficPeriod)}>
                {TRAFFIC_PERIODS.map((p) => (
                  <option key={p}>{p}</option>
                ))}
              </select>
            </div>
          )}
        </Field>
        <div class="field">
          <label for="invitation-expiry">The link expires</label>
          <select id="invitation-expiry" value={String(hours)} onChange={(e) => setHours(Number(e.currentTarget.value))}>
            {EXPIRY_CHOICES.map((c) => (
              <option key={c.hours} value={String(c.hours)}>
                {c.label}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="invitation-role">Role</label>
          <select id="invitation-role" value={role} onChange={(e) => setRole(e.currentTarget.value as "user" | "admin")}>
            <option value="user">user</option>
            <option value="admin">admin</option>
          </select>
        </div>
        <fieldset class="field">
          <legend>Protocols</legend>
          {PROTOCOLS.map((p) => (
            <Checkbox key={p} label={p} checked={protocols[p] === true} onChange={(on) => setProtocols({ ...protocols, [p]: on })} invalid={errors.protocols !== undefined} />
          ))}
          {errors.protocols && <p class="field-error">{errors.protocols}</p>}
        </fieldset>
      </div>
      <Checkbox label="Skip the warning page on their tunnels" checked={skipWarning} onChange={setSkipWarning} />
      <Checkbox label="May connect through a proxy" checked={canUseProxy} onChange={setCanUseProxy} />
      <div class="form-actions">
        <button type="submit" class="btn primary" disabled={busy}>
          {busy ? "Making…" : "Make invitation"}
        </button>
      </div>
    </form>
  );
}
