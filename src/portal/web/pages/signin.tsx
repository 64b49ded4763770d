/** Sign-in: with a password (the refusal in words), or with the company's account when the server has one. */
import { useEffect, useState } from "preact/hooks";
import { SignInForm } from "../../../ui/components/signin.tsx";
import { ErrorBox } from "../../../ui/components/ui.tsx";
import { api, messageOf } from "../api.ts";

const TITLES: Record<number, string> = { 401: "Cannot sign in", 403: "Refused", 429: "Too many attempts" };

export function SignInPage(props: { message?: string; onSignedIn(): void }) {
  const [company, setCompany] = useState(false);
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string>();

  useEffect(() => {
    api.signInOptions().then((o) => setCompany(o.company), () => setCompany(false));
  }, []);

  const companySignIn = async () => {
    setBusy(true);
    setFailure(undefined);
    try {
      const { url } = await api.companySignIn({ to: location.pathname + location.search });
      location.assign(url);
    } catch (err) {
      setFailure(messageOf(err));
      setBusy(false);
    }
  };

  return (
    <SignInForm
      title={`Sign in to ${location.hostname}`}
      message={props.message}
      hint="See your tunnels and traffic, add devices, and approve `burrow login`."
      titles={TITLES}
      signIn={async (username, password) => {
        await api.login(username, password);
        props.onSignedIn();
      }}
    >
      {failure && <ErrorBox title="Company sign-in failed" message={failure} />}
      {company && (
        <button type="button" class="btn wide" disabled={busy} onClick={companySignIn}>
          Sign in with your company account
        </button>
      )}
    </SignInForm>
  );
}
