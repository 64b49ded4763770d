/**
 * One user: quota used (with a bar), limits, 30 days of traffic, live
 * tunnels, tokens, reserved subdomains, settings, password, deletion.
 */
import { useState } from "preact/hooks";
import { api, messageOf, type DayTraffic, type User, type UserDetails } from "../api.ts";
import { TrafficChart } from "../../../../ui/components/chart.tsx";
import { Confirm } from "../../../../ui/components/dialog.tsx";
import { DomainList, ReserveForm } from "../components/domains.tsx";
import { HostnameForm, HostnameList } from "../components/hostnames.tsx";
import { SshKeysPanel } from "../components/ssh-keys.tsx";
import { TokenLoadError, TokensPanel } from "../components/tokens.tsx";
import { TunnelTable } from "../components/tunnels.tsx";
import { UserForm } from "../components/user-form.tsx";
import { Badge, Card, ErrorBox, Field, Link, Loading, Progress, StaleWarning } from "../../../../ui/components/ui.tsx";
import { formatBytes, formatLimit, longDay, PERIOD_WORDS, periodEnd, periodStart, shortDay } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";
import { notify } from "../../../../ui/notices.ts";
import { navigate } from "../router.ts";
import { check, rules } from "../validate.ts";
import { LIVE_REFRESH_MS } from "./tunnels.tsx";

const DETAILS_REFRESH_MS = 10_000;
const CHART_REFRESH_MS = 60_000;

export function UserPage(props: { id: number }) {
  const details = useApi(() => api.user(props.id), [props.id], DETAILS_REFRESH_MS);
  const tokens = useApi(() => api.tokens(props.id), [props.id]);
  const sshKeys = useApi(() => api.sshKeys(props.id), [props.id]);
  const domains = useApi(api.domains, [props.id]);
  const hostnames = useApi(() => api.hostnames(props.id), [props.id]);
  const days = useApi(() => api.userDays(props.id, 30), [props.id], CHART_REFRESH_MS);
  const live = useApi(api.activeTunnels, [props.id], LIVE_REFRESH_MS);
  const [deleting, setDeleting] = useState(false);
  const user = details.data?.user;
  useTitle(user ? user.username : "User");

  if (!details.data) {
    return (
      <>
        <Link href="/users" class="back">
          ← Users
        </Link>
        <h1 tabIndex={-1}>User #{props.id}</h1>
        {details.error ? <ErrorBox title="Could not load this user" message={details.error} retry={details.reload} /> : <Loading what="the user" />}
      </>
    );
  }
  const u = user!;
  const mine = live.data?.filter((t) => t.user_id === u.id);
  const theirDomains = domains.data?.filter((d) => d.user_id === u.id);

  return (
    <>
      <Link href="/users" class="back">
        ← Users
      </Link>
      <div class="page-head">
        <h1 tabIndex={-1}>
          {u.username} {u.role === "admin" && <Badge tone="info">admin</Badge>} {u.enabled ? <Badge tone="ok">enabled</Badge> : <Badge tone="bad">disabled</Badge>}
        </h1>
        <p class="muted">
          User #{u.id}
          {u.created_at && <> · since {longDay(u.created_at.slice(0, 10))}</>} · {details.data.active_tokens} active token
          {details.data.active_tokens === 1 ? "" : "s"}
        </p>
      </div>
      <StaleWarning error={details.error} what="this user" />

      <div class="grid two">
        <QuotaCard details={details.data} days={days.data} liveCount={mine?.length} />
        <Card title="Limits" id="limits">
          <dl class="facts">
            <dt>Tunnels at once</dt>
            <dd>{formatLimit(u.max_tunnels)}</dd>
            <dt>Devices at once</dt>
            <dd>{formatLimit(u.max_devices)}</dd>
            <dt>Protocols</dt>
            <dd>{u.allowed_protocols.split(",").join(", ").toUpperCase()}</dd>
            <dt>Through a proxy</dt>
            <dd>{u.can_use_proxy ? "allowed" : "not allowed"}</dd>
            <dt>Sharing private tunnels</dt>
            <dd>{u.can_share === false ? "not allowed" : "allowed"}</dd>
            <dt>Skip warning page</dt>
            <dd>{u.skip_warning ? "allowed" : "not allowed"}</dd>
            <dt>Sign-in on tunnels</dt>
            <dd>{u.require_auth ? "required" : "not required"}</dd>
            <dt>Visitors from</dt>
            <dd>{u.allow_cidrs?.length ? u.allow_cidrs.join(", ") : "anywhere"}</dd>
          </dl>
          <p class="hint">
            <a href="#settings">Change settings ↓</a>
          </p>
        </Card>
      </div>

      <Card title="Traffic, last 30 days" id="user-chart">
        {days.error && !days.data && <ErrorBox title="Could not load traffic" message={days.error} retry={days.reload} />}
        <StaleWarning error={days.data ? days.error : undefined} what="the chart" />
        {days.data ? <TrafficChart days={days.data} caption={`${u.username}, per UTC day`} height={200} /> : !days.error && <Loading what="traffic" />}
      </Card>

      <Card title={`Live tunnels${mine ? ` (${mine.length})` : ""}`} id="user-live">
        {live.error && !live.data && <ErrorBox title="Could not load live tunnels" message={live.error} retry={live.reload} />}
        <StaleWarning error={live.data ? live.error : undefined} what="live tunnels" />
        {mine ? <TunnelTable tunnels={mine} sampledAt={live.at} empty={`${u.username} has no tunnel open right now.`} /> : !live.error && <Loading what="live tunnels" />}
      </Card>

      <div class="grid two">
        <Card title="Device tokens" id="tokens">
          {tokens.error && !tokens.data && <TokenLoadError message={tokens.error} retry={tokens.reload} />}
          <StaleWarning error={tokens.data ? tokens.error : undefined} what="tokens" />
          {tokens.data ? (
            <TokensPanel
              userId={u.id}
              username={u.username}
              tokens={tokens.data}
              onChanged={() => {
                void tokens.reload();
                void details.reload();
                void live.reload();
              }}
            />
          ) : (
            !tokens.error && <Loading what="tokens" />
          )}
        </Card>
        <Card title="SSH keys" id="ssh-keys">
          {sshKeys.error && !sshKeys.data && <ErrorBox title="Could not load SSH keys" message={sshKeys.error} retry={sshKeys.reload} />}
          {sshKeys.data ? (
            <SshKeysPanel
              userId={u.id}
              username={u.username}
              keys={sshKeys.data}
              onChanged={() => {
                void sshKeys.reload();
                void live.reload();
              }}
            />
          ) : (
            !sshKeys.error && <Loading what="SSH keys" />
          )}
        </Card>
        <Card title="Reserved subdomains" id="user-domains">
          <ReserveForm userId={u.id} onReserved={() => domains.reload()} />
          {domains.error && !domains.data && <ErrorBox title="Could not load reserved subdomains" message={domains.error} retry={domains.reload} />}
          {theirDomains && <DomainList domains={theirDomains} onReleased={() => domains.reload()} empty={`No subdomain is reserved for ${u.username}.`} />}
        </Card>
        <Card title="Own hostnames" id="user-hostnames">
          <HostnameForm userId={u.id} onAdded={() => hostnames.reload()} />
          {hostnames.error && !hostnames.data && <ErrorBox title="Could not load hostnames" message={hostnames.error} retry={hostnames.reload} />}
          {hostnames.data && <HostnameList hostnames={hostnames.data} onChanged={() => hostnames.reload()} empty={`${u.username} has no hostname of their own.`} />}
        </Card>
      </div>

      <Card title="Settings" id="settings">
        <UserForm
          key={`${u.id}:${u.updated_at}`}
          user={u}
          onSaved={(saved: User) => {
            notify("ok", `Saved ${saved.username}'s settings.`);
            void details.reload();
          }}
        />
      </Card>

      <div class="grid two">
        <Card title="Password" id="password">
          <PasswordForm user={u} />
        </Card>
        <Card title="Delete user" id="danger" class="danger-zone">
          <p>Deletes {u.username} with all their tokens, reserved subdomains and traffic history, and closes their live tunnels.</p>
          <button type="button" class="btn danger" onClick={() => setDeleting(true)}>
            Delete {u.username}…
          </button>
        </Card>
      </div>

      {deleting && (
        <Confirm
          title={`Delete ${u.username}?`}
          confirmLabel={`Delete ${u.username}`}
          onClose={() => setDeleting(false)}
          onConfirm={async () => {
            await api.deleteUser(u.id);
            notify("ok", `User ${u.username} deleted.`);
            navigate("/users");
          }}
        >
          <p>
            This deletes <strong>{u.username}</strong>, their {tokens.data?.length ?? "device"} token(s), {theirDomains?.length ?? "their"} reserved subdomain(s) and
            their traffic history, and closes their live tunnels. It cannot be undone.
          </p>
        </Confirm>
      )}
    </>
  );
}

function QuotaCard({ details, days, liveCount }: { details: UserDetails; days?: DayTraffic[]; liveCount?: number }) {
  const u = details.user;
  const used = details.traffic_used;
  const words = PERIOD_WORDS[u.traffic_period];
  const start = periodStart(u.traffic_period);
  const end = periodEnd(u.traffic_period);
  const limited = u.traffic_limit > 0;
  const over = limited && used >= u.traffic_limit;
  return (
    <Card title={`Traffic ${words.noun}`} id="quota">
      <p class="quota-figure">
        <span class="big">{formatBytes(used)}</span>
        <span class="muted"> {limited ? `of ${formatBytes(u.traffic_limit)}` : "used · no limit"}</span>
      </p>
      {limited && <Progress value={used} max={u.traffic_limit} label={`Traffic used ${words.noun} against the quota`} />}
      <p class="muted small">
        {limited && (
          <>
            {Math.min(100, Math.round((used / u.traffic_limit) * 1000) / 10)}% used · {over ? "quota reached" : `${formatBytes(u.traffic_limit - used)} left`} ·{" "}
          </>
        )}
        counting since {shortDay(start)}, resets {shortDay(end)} 00:00 UTC
      </p>
      <dl class="mini-facts">
        <div>
          <dt>Today (UTC)</dt>
          <dd>{days ? formatBytes(days[days.length - 1]?.total ?? 0) : "…"}</dd>
        </div>
        <div>
          <dt>Last 30 days</dt>
          <dd>{days ? formatBytes(days.reduce((sum, d) => sum + d.total, 0)) : "…"}</dd>
        </div>
        <div>
          <dt>Live tunnels</dt>
          <dd>{liveCount ?? "…"}</dd>
        </div>
      </dl>
      {over && (
        <p class="warn-box">
          {u.username} is past the quota: new tunnels are refused (TRAFFIC_EXCEEDED) until {longDay(end)}, unless you raise the limit.
        </p>
      )}
    </Card>
  );
}

function PasswordForm({ user }: { user: User }) {
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const problem = check(rules.password, password);
    if (problem) return setError(`Password ${problem}`);
    setError(undefined);
    setBusy(true);
    try {
      await api.updateUser(user.id, { password });
      setPassword("");
      notify("ok", `New password set for ${user.username}.`);
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="inline-form" onSubmit={submit} noValidate>
      <Field label="New password" error={error} hint="8 characters or more" class="grow">
        {({ id, describedBy, invalid }) => (
          <input id={id} name="new_password" type="password" autocomplete="new-password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
        )}
      </Field>
      <button type="submit" class="btn" disabled={busy}>
        {busy ? "Setting…" : "Set password"}
      </button>
    </form>
  );
}
