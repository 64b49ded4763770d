/**
 * Create or edit a user: every limit and flag the API has. Checked with the
 * server's own rules before sending; the server's field error lands beside
 * its field after. Editing sends only what changed.
 */
import { useRef, useState } from "preact/hooks";
import { api, messageOf, type TrafficPeriod, type User } from "../api.ts";
import { formatBytes, PERIOD_WORDS, splitBytes, unitBytes, UNITS, type Unit } from "../../../../ui/format.ts";
import { check, fieldOfServerError, parseLimit, PROTOCOLS, rules, TRAFFIC_PERIODS, type Errors } from "../validate.ts";
import { Checkbox, ErrorBox, Field } from "../../../../ui/components/ui.tsx";

const PICKER_UNITS: Unit[] = ["KB", "MB", "GB", "TB"];
const FIELDS = [
  "username",
  "password",
  "role",
  "enabled",
  "max_tunnels",
  "allowed_protocols",
  "traffic_limit",
  "traffic_period",
  "max_devices",
  "skip_warning",
  "can_use_proxy",
  "can_share",
  "require_auth",
  "allow_cidrs",
] as const;

/** Moves focus to the first field with an error, so keyboard and screen reader users land on it. */
function focusFirstError(form: HTMLFormElement | null) {
  form?.querySelector<HTMLElement>("[aria-invalid='true']")?.focus();
}

interface Draft {
  username: string;
  password: string;
  role: string;
  enabled: boolean;
  protocols: Record<string, boolean>;
  maxTunnels: string;
  maxDevices: string;
  trafficValue: string;
  trafficUnit: Unit;
  trafficPeriod: TrafficPeriod;
  skipWarning: boolean;
  canUseProxy: boolean;
  canShare: boolean;
  requireAuth: boolean;
  /** As typed: CIDRs one per line, or separated by commas or spaces. */
  allowCidrs: string;
}

/** The typed allow list as the API's list. */
const cidrsOf = (text: string) => text.split(/[\s,]+/).filter((c) => c !== "");

function draftOf(u?: User): Draft {
  const traffic = splitBytes(u?.traffic_limit ?? 0);
  const allowed = (u?.allowed_protocols ?? "http,tcp").split(",");
  return {
    username: u?.username ?? "",
    password: "",
    role: u?.role ?? "user",
    enabled: u?.enabled ?? true,
    protocols: Object.fromEntries(PROTOCOLS.map((p) => [p, allowed.includes(p)])),
    maxTunnels: String(u?.max_tunnels ?? 0),
    maxDevices: String(u?.max_devices ?? 0),
    trafficValue: String(traffic.value),
    trafficUnit: PICKER_UNITS.includes(traffic.unit) ? traffic.unit : "GB",
    trafficPeriod: u?.traffic_period ?? "monthly",
    skipWarning: u?.skip_warning ?? false,
    canUseProxy: u?.can_use_proxy ?? true,
    canShare: u?.can_share ?? true,
    requireAuth: u?.require_auth ?? false,
    allowCidrs: (u?.allow_cidrs ?? []).join("\n"),
  };
}

/** The API body for a draft, or the errors that keep it from being sent. */
function bodyOf(d: Draft, creating: boolean): { body: Record<string, unknown>; errors: Errors } {
  const errors: Errors = {};
  const body: Record<string, unknown> = {};

  body.username = d.username.trim();
  const nameProblem = check(rules.username, body.username);
  if (nameProblem) errors.username = `Username ${nameProblem}`;
  if (creating) {
    body.password = d.password;
    const problem = check(rules.password, d.password);
    if (problem) errors.password = `Password ${problem}`;
  }
  body.role = d.role;
  body.enabled = d.enabled;

  const protocols = PROTOCOLS.filter((p) => d.protocols[p]);
  if (protocols.length === 0) errors.allowed_protocols = "Choose at least one protocol";
  body.allowed_protocols = protocols.join(",");

  const tunnels = parseLimit(d.maxTunnels);
  if (tunnels === undefined) errors.max_tunnels = "Enter a whole number, 0 or more (0 means no limit)";
  body.max_tunnels = tunnels;
  const devices = parseLimit(d.maxDevices);
  if (devices === undefined) errors.max_devices = "Enter a whole number, 0 or more (0 means no limit)";
  body.max_devices = devices;

  const amount = d.trafficValue.trim() === "" ? 0 : Number(d.trafficValue.trim());
  const bytes = Math.round(amount * unitBytes(d.trafficUnit));
  if (!/^\s*([0-9]+([.][0-9]*)?|[.][0-9]+)?\s*$/.test(d.trafficValue) || !Number.isSafeInteger(bytes)) {
    errors.traffic_limit = "Enter an amount, 0 or more (0 means no limit), such as 10 or 1.5";
  }
  body.traffic_limit = bytes;
  body.traffic_period = d.trafficPeriod;
  body.skip_warning = d.skipWarning;
  body.can_use_proxy = d.canUseProxy;
  body.can_share = d.canShare;
  body.require_auth = d.requireAuth;
  const cidrs = cidrsOf(d.allowCidrs);
  const cidrProblem = check(rules.cidrs, cidrs);
  if (cidrProblem) errors.allow_cidrs = `Allowed addresses: ${cidrs.find((c) => check(rules.cidrs, [c])) ?? "the list"} ${cidrProblem}`;
  body.allow_cidrs = cidrs;
  return { body, errors };
}

export function UserForm(props: { user?: User; onSaved(user: User): void; onCancel?(): void; submitLabel?: string }) {
  const creating = !props.user;
  const [draft, setDraft] = useState(() => draftOf(props.user));
  const [errors, setErrors] = useState<Errors>({});
  const [formError, setFormError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const form = useRef<HTMLFormElement>(null);
  const set = <K extends keyof Draft>(key: K, value: Draft[K]) => setDraft((d) => ({ ...d, [key]: value }));

  const submit = async (e: Event) => {
    e.preventDefault();
    setFormError(undefined);
    const { body, errors: found } = bodyOf(draft, creating);
    setErrors(found);
    if (Object.values(found).some(Boolean)) {
      setTimeout(() => focusFirstError(form.current));
      return;
    }
    let send = body;
    if (props.user) {
      const before = bodyOf(draftOf(props.user), false).body;
      const original = props.user as unknown as Record<string, unknown>;
      // unchanged, and the traffic limit as stored (a re-typed 1.5 GB must not drift by a byte)
      send = Object.fromEntries(
        // a list (allow_cidrs) is unchanged when it reads the same
        Object.entries(body).filter(([k, v]) => JSON.stringify(v) !== JSON.stringify(before[k]) && !(k === "traffic_limit" && v === original.traffic_limit)),
      );
      if (Object.keys(send).length === 0) {
        setFormError("Nothing changed: there is nothing to save.");
        return;
      }
    }
    setBusy(true);
    try {
      const saved = props.user ? await api.updateUser(props.user.id, send) : await api.createUser(send);
      setBusy(false);
      props.onSaved(saved);
    } catch (err) {
      setBusy(false);
      const message = messageOf(err);
      const field = fieldOfServerError(message, FIELDS);
      if (field && field !== "enabled" && field !== "role" && field !== "traffic_period") {
        setErrors({ [field]: message });
        setTimeout(() => focusFirstError(form.current));
      } else {
        setFormError(message);
      }
    }
  };

  const trafficBytes = bodyOf(draft, false).body.traffic_limit as number;

  return (
    <form ref={form} class="user-form" onSubmit={submit} noValidate>
      {formError && <ErrorBox title={formError.startsWith("Nothing changed") ? "Not saved" : "The server refused"} message={formError} />}
      <fieldset>
        <legend>Account</legend>
        <div class="row">
          <Field label="Username" error={errors.username} hint="Letters, digits and _ . - @ (up to 64)">
            {({ id, describedBy, invalid }) => (
              <input id={id} name="username" autocomplete="off" value={draft.username} onInput={(e) => set("username", e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
            )}
          </Field>
          {creating && (
            <Field label="Password" error={errors.password} hint="8 characters or more">
              {({ id, describedBy, invalid }) => (
                <input id={id} name="password" type="password" autocomplete="new-password" value={draft.password} onInput={(e) => set("password", e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
              )}
            </Field>
          )}
          <Field label="Role" error={errors.role} hint="Admins can sign in to this panel">
            {({ id, describedBy }) => (
              <select id={id} name="role" value={draft.role} onChange={(e) => set("role", e.currentTarget.value)} aria-describedby={describedBy}>
                <option value="user">User</option>
                <option value="admin">Admin</option>
              </select>
            )}
          </Field>
        </div>
        <Checkbox label="Enabled" hint="A disabled user cannot connect; their live tunnels close at once." checked={draft.enabled} onChange={(v) => set("enabled", v)} name="enabled" />
      </fieldset>

      <fieldset>
        <legend>Limits</legend>
        <div class="row">
          <Field label="Max tunnels" error={errors.max_tunnels} hint="Open at once · 0 = no limit">
            {({ id, describedBy, invalid }) => (
              <input id={id} name="max_tunnels" inputMode="numeric" value={draft.maxTunnels} onInput={(e) => set("maxTunnels", e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
            )}
          </Field>
          <Field label="Max devices" error={errors.max_devices} hint="Tokens connected at once · 0 = no limit">
            {({ id, describedBy, invalid }) => (
              <input id={id} name="max_devices" inputMode="numeric" value={draft.maxDevices} onInput={(e) => set("maxDevices", e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
            )}
          </Field>
        </div>
        <div class="row">
          <Field
            label="Traffic limit"
            error={errors.traffic_limit}
            hint={trafficBytes > 0 ? `${formatBytes(trafficBytes)} = ${trafficBytes.toLocaleString("en")} bytes, in + out` : "0 = no limit · counts in + out"}
            class="grow"
          >
            {({ id, describedBy, invalid }) => (
              <div class="with-unit">
                <input id={id} name="traffic_limit" inputMode="decimal" value={draft.trafficValue} onInput={(e) => set("trafficValue", e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
                <select aria-label="Traffic limit unit" name="traffic_unit" value={draft.trafficUnit} onChange={(e) => set("trafficUnit", e.currentTarget.value as Unit)}>
                  {PICKER_UNITS.map((u) => (
                    <option key={u} value={u}>
                      {u}
                    </option>
                  ))}
                </select>
              </div>
            )}
          </Field>
          <Field label="Per" error={errors.traffic_period} hint="Periods start at 00:00 UTC">
            {({ id, describedBy }) => (
              <select id={id} name="traffic_period" value={draft.trafficPeriod} onChange={(e) => set("trafficPeriod", e.currentTarget.value as TrafficPeriod)} aria-describedby={describedBy}>
                {TRAFFIC_PERIODS.map((p) => (
                  <option key={p} value={p}>
                    {PERIOD_WORDS[p].per.replace("per ", "")} ({p})
                  </option>
                ))}
              </select>
            )}
          </Field>
        </div>
      </fieldset>

      <fieldset aria-describedby={errors.allowed_protocols ? "protocols-error" : undefined}>
        <legend>Permissions</legend>
        <div class="protocols" role="group" aria-label="Allowed protocols">
          <span class="group-label">Allowed protocols</span>
          {PROTOCOLS.map((p, i) => (
            <Checkbox key={p} invalid={i === 0 && Boolean(errors.allowed_protocols)} name={`protocol_${p}`} label={p === "http" ? "HTTP tunnels" : p === "tcp" ? "TCP tunnels" : "TLS tunnels (passed through)"} checked={draft.protocols[p] ?? false} onChange={(v) => set("protocols", { ...draft.protocols, [p]: v })} />
          ))}
          {errors.allowed_protocols && (
            <p class="field-error" id="protocols-error">
              {errors.allowed_protocols}
            </p>
          )}
        </div>
        <Checkbox label="May connect through a proxy" hint="HTTP or SOCKS proxy between the agent and this server (can_use_proxy)" checked={draft.canUseProxy} onChange={(v) => set("canUseProxy", v)} name="can_use_proxy" />
        <Checkbox label="May share private tunnels" hint="Private tunnels others reach with burrow connect: --private --share (can_share)" checked={draft.canShare} onChange={(v) => set("canShare", v)} name="can_share" />
        <Checkbox label="May skip the browser warning page" hint="Honoured when the agent asks with --skip-warning (skip_warning)" checked={draft.skipWarning} onChange={(v) => set("skipWarning", v)} name="skip_warning" />
      </fieldset>

      <fieldset>
        <legend>Who may reach their tunnels</legend>
        <Checkbox
          label="Require sign-in on every tunnel"
          hint="Each tunnel must carry --basic-auth or --oidc-issuer, or is refused (AUTH_REQUIRED); no tcp tunnel can (require_auth)"
          checked={draft.requireAuth}
          onChange={(v) => set("requireAuth", v)}
          name="require_auth"
        />
        <Field label="Allowed visitor addresses" error={errors.allow_cidrs} hint="IPv4 or IPv6 CIDRs, one per line; every tunnel of the user, besides its own rules · empty = anywhere (allow_cidrs)">
          {({ id, describedBy, invalid }) => (
            <textarea id={id} name="allow_cidrs" rows={3} spellcheck={false} placeholder={"10.0.0.0/8\n2001:db8::/32"} value={draft.allowCidrs} onInput={(e) => set("allowCidrs", e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
          )}
        </Field>
      </fieldset>

      <div class="form-actions">
        {props.onCancel && (
          <button type="button" class="btn" onClick={props.onCancel}>
            Cancel
          </button>
        )}
        <button type="submit" class="btn primary" disabled={busy}>
          {busy ? "Saving…" : (props.submitLabel ?? (creating ? "Create user" : "Save changes"))}
        </button>
      </div>
    </form>
  );
}
