/** All users: search and filter, each user's limits at a glance, and "New user". */
import { useState } from "preact/hooks";
import { api, type User } from "../api.ts";
import { Modal } from "../../../../ui/components/dialog.tsx";
import { UserForm } from "../components/user-form.tsx";
import { Badge, Card, ErrorBox, Link, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { formatBytes, formatLimit, formatQuota, longDay } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";
import { notify } from "../../../../ui/notices.ts";
import { navigate } from "../router.ts";

export function UsersPage() {
  useTitle("Users");
  const users = useApi(api.users, []);
  const usage = useApi(() => api.perUser(30), []);
  const [query, setQuery] = useState("");
  const [status, setStatus] = useState("any");
  const [role, setRole] = useState("any");
  const [creating, setCreating] = useState(false);

  const used = new Map(usage.data?.map((u) => [u.user_id, u.total]));
  const q = query.trim().toLowerCase();
  const shown = (users.data ?? []).filter(
    (u) =>
      (q === "" || u.username.toLowerCase().includes(q)) &&
      (status === "any" || (status === "enabled") === u.enabled) &&
      (role === "any" || u.role === role),
  );

  const created = (user: User) => {
    setCreating(false);
    notify("ok", `User ${user.username} created.`);
    navigate(`/users/${user.id}`);
  };

  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Users</h1>
        <button type="button" class="btn primary" onClick={() => setCreating(true)}>
          + New user
        </button>
      </div>
      <Card>
        <div class="filters" role="search">
          <div class="field grow">
            <label for="user-search">Search by name</label>
            <input id="user-search" type="search" placeholder="Part of a username" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
          </div>
          <div class="field">
            <label for="user-status">Status</label>
            <select id="user-status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
              <option value="any">Any</option>
              <option value="enabled">Enabled</option>
              <option value="disabled">Disabled</option>
            </select>
          </div>
          <div class="field">
            <label for="user-role">Role</label>
            <select id="user-role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
              <option value="any">Any</option>
              <option value="admin">Admin</option>
              <option value="user">User</option>
            </select>
          </div>
        </div>
        {users.error && !users.data && <ErrorBox title="Could not load users" message={users.error} retry={users.reload} />}
        <StaleWarning error={users.data ? users.error : undefined} what="users" />
        {usage.error && <p class="stale" role="alert">Could not load 30-day traffic: {usage.error}</p>}
        {!users.data && !users.error && <Loading what="users" />}
        {users.data && (
          <>
            <p class="muted small" role="status">
              {shown.length === users.data.length ? `${users.data.length} users` : `${shown.length} of ${users.data.length} users match`}
            </p>
            {shown.length === 0 ? (
              <p class="empty">No user matches these filters.</p>
            ) : (
              <div class="table-wrap">
                <table class="cards-on-phone users">
                  <thead>
                    <tr>
                      <th scope="col">User</th>
                      <th scope="col">Protocols</th>
                      <th scope="col" class="num">Tunnels</th>
                      <th scope="col" class="num">Devices</th>
                      <th scope="col">Traffic quota</th>
                      <th scope="col" class="num">30 days</th>
                      <th scope="col">Created</th>
                    </tr>
                  </thead>
                  <tbody>
                    {shown.map((u) => (
                      <tr key={u.id} data-user={u.username}>
                        <td data-label="User" class="user-cell">
                          <Link href={`/users/${u.id}`} class="strong">
                            {u.username}
                          </Link>{" "}
                          {u.role === "admin" && <Badge tone="info">admin</Badge>} {!u.enabled && <Badge tone="bad">disabled</Badge>}
                        </td>
                        <td data-label="Protocols">{u.allowed_protocols.split(",").join(", ")}</td>
                        <td data-label="Tunnels" class="num">
                          {formatLimit(u.max_tunnels)}
                        </td>
                        <td data-label="Devices" class="num">
                          {formatLimit(u.max_devices)}
                        </td>
                        <td data-label="Quota">{formatQuota(u.traffic_limit, u.traffic_period)}</td>
                        <td data-label="30 days" class="num">
                          {usage.data ? formatBytes(used.get(u.id) ?? 0) : "…"}
                        </td>
                        <td data-label="Created">{u.created_at ? longDay(u.created_at.slice(0, 10)) : "–"}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </>
        )}
      </Card>
      {creating && (
        <Modal title="New user" onClose={() => setCreating(false)} wide>
          <UserForm onSaved={created} onCancel={() => setCreating(false)} />
        </Modal>
      )}
    </>
  );
}
