/**
 * The shell: checks the session, shows sign-in or the signed-in layout
 * (header with the current user, navigation, notices) and the page for the
 * address bar's path.
 */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, messageOf, whenSessionLost, type Me, type ServerInfo } from "./api.ts";
import { Link } from "../../../ui/components/ui.tsx";
import { clearNotices, notify } from "../../../ui/notices.ts";
import { Shell } from "../../../ui/components/shell.tsx";
import { AuditPage } from "./pages/audit.tsx";
import { CertificatesPage } from "./pages/certificates.tsx";
import { DashboardPage } from "./pages/dashboard.tsx";
import { DomainsPage } from "./pages/domains.tsx";
import { KeysPage } from "./pages/keys.tsx";
import { PoliciesPage } from "./pages/policies.tsx";
import { WebhooksPage } from "./pages/webhooks.tsx";
import { InvitationsPage } from "./pages/invitations.tsx";
import { SignInPage } from "./pages/signin.tsx";
import { TunnelsPage } from "./pages/tunnels.tsx";
import { AgentsPage } from "./pages/agents.tsx";
import { UserPage } from "./pages/user.tsx";
import { UsersPage } from "./pages/users.tsx";
import { matchPath, usePath, type Page } from "./router.ts";
import { SessionContext } from "./session.ts";

type State =
  | { phase: "checking" }
  | { phase: "unreachable"; error: string }
  | { phase: "signed-out"; message?: string }
  | { phase: "signed-in"; me: Me; server?: ServerInfo };

export function App() {
  const [state, setState] = useState<State>({ phase: "checking" });

  const enter = (me: Me) => {
    setState({ phase: "signed-in", me });
    api
      .server()
      .then((server) => setState((s) => (s.phase === "signed-in" ? { ...s, server } : s)))
      .catch((err) => notify("error", `Could not read the server's public address: ${messageOf(err)}`));
  };

  const check = async () => {
    setState({ phase: "checking" });
    try {
      enter(await api.me());
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) setState({ phase: "signed-out" });
      else setState({ phase: "unreachable", error: messageOf(err) });
    }
  };

  useEffect(() => {
    whenSessionLost((why) =>
      setState((s) => (s.phase === "signed-in" ? { phase: "signed-out", message: `Your session has ended (${why}). Sign in again to continue.` } : s)),
    );
    void check();
  }, []);

  const signOut = async () => {
    try {
      await api.logout();
      clearNotices();
      setState({ phase: "signed-out", message: "You are signed out." });
    } catch (err) {
      notify("error", `Could not sign out: ${messageOf(err)}`);
    }
  };

  if (state.phase === "checking") return <p class="boot">Loading the burrow admin panel…</p>;
  if (state.phase === "unreachable") {
    return (
      <div class="boot" role="alert">
        <p>The panel cannot talk to the burrow server: {state.error}</p>
        <button type="button" class="btn" onClick={check}>
          Try again
        </button>
      </div>
    );
  }
  if (state.phase === "signed-out") return <SignInPage message={state.message} onSignedIn={enter} />;
  return (
    <SessionContext.Provider value={{ me: state.me, server: state.server }}>
      <PanelShell me={state.me} onSignOut={signOut} />
    </SessionContext.Provider>
  );
}

const NAV: { href: string; label: string; pages: Page["name"][] }[] = [
  { href: "/", label: "Dashboard", pages: ["dashboard"] },
  { href: "/users", label: "Users", pages: ["users", "user"] },
  { href: "/invitations", label: "Invitations", pages: ["invitations"] },
  { href: "/tunnels", label: "Tunnels", pages: ["tunnels"] },
  { href: "/agents", label: "Agents", pages: ["agents"] },
  { href: "/domains", label: "Subdomains", pages: ["domains"] },
  { href: "/certificates", label: "HTTPS", pages: ["certificates"] },
  { href: "/policies", label: "Policies", pages: ["policies"] },
  { href: "/audit", label: "Audit", pages: ["audit"] },
  { href: "/keys", label: "API keys", pages: ["keys"] },
  { href: "/webhooks", label: "Webhooks", pages: ["webhooks"] },
];

function PanelShell(props: { me: Me; onSignOut(): void }) {
  const page = matchPath(usePath());
  return (
    <Shell
      brand={{ label: "burrow admin, dashboard", sub: "admin" }}
      nav={NAV.map((item) => ({ href: item.href, label: item.label, current: item.pages.includes(page.name) }))}
      username={props.me.username}
      onSignOut={props.onSignOut}
      footer="burrow admin · all dates and times are UTC · 1 KB = 1024 bytes"
    >
      <PageView page={page} />
    </Shell>
  );
}

function PageView({ page }: { page: Page }) {
  switch (page.name) {
    case "dashboard":
      return <DashboardPage />;
    case "users":
      return <UsersPage />;
    case "user":
      return <UserPage id={page.id} />;
    case "domains":
      return <DomainsPage />;
    case "tunnels":
      return <TunnelsPage />;
    case "agents":
      return <AgentsPage />;
    case "certificates":
      return <CertificatesPage />;
    case "audit":
      return <AuditPage />;
    case "keys":
      return <KeysPage />;
    case "webhooks":
      return <WebhooksPage />;
    case "invitations":
      return <InvitationsPage />;
    case "policies":
      return <PoliciesPage />;
    case "missing":
      return (
        <>
          <h1 tabIndex={-1}>Page not found</h1>
          <p>
            There is no panel page at <code>{location.pathname}</code>. <Link href="/">Go to the dashboard</Link>.
          </p>
        </>
      );
  }
}
