/** Reserved subdomains across all users. */
import { useState } from "preact/hooks";
import { api } from "../api.ts";
import { DomainList, ReserveForm } from "../components/domains.tsx";
import { Card, ErrorBox, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { useApi, useTitle } from "../../../../ui/hooks.ts";

export function DomainsPage() {
  useTitle("Subdomains");
  const domains = useApi(api.domains, []);
  const users = useApi(api.users, []);
  const [query, setQuery] = useState("");
  const q = query.trim().toLowerCase();
  const shown = domains.data?.filter((d) => q === "" || d.subdomain.includes(q) || d.username.toLowerCase().includes(q));
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Reserved subdomains</h1>
        <p class="muted">A reserved name can be used only by its user; others are refused with SUBDOMAIN_RESERVED.</p>
      </div>
      <Card title="Reserve a subdomain" id="reserve">
        {users.error && <ErrorBox title="Could not load users" message={users.error} retry={users.reload} />}
        <ReserveForm users={users.data} onReserved={() => domains.reload()} />
      </Card>
      <Card
        title={`Reserved${domains.data ? ` (${domains.data.length})` : ""}`}
        id="reserved"
        actions={
          <input type="search" class="compact" aria-label="Filter by subdomain or user" placeholder="Filter…" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        }
      >
        {domains.error && !domains.data && <ErrorBox title="Could not load reserved subdomains" message={domains.error} retry={domains.reload} />}
        <StaleWarning error={domains.data ? domains.error : undefined} what="reserved subdomains" />
        {shown ? (
          <DomainList domains={shown} showUser onReleased={() => domains.reload()} empty={q ? "Nothing matches this filter." : "No subdomain is reserved yet."} />
        ) : (
          !domains.error && <Loading what="reserved subdomains" />
        )}
      </Card>
    </>
  );
}
