/** Sign-in: the server's refusal in words (wrong password, not an admin, too many attempts). */
import { SignInForm } from "../../../../ui/components/signin.tsx";
import { api, type Me } from "../api.ts";

const TITLES: Record<number, string> = {
  401: "Cannot sign in",
  403: "Not an administrator",
  429: "Too many attempts",
};

export function SignInPage(props: { message?: string; onSignedIn(me: Me): void }) {
  return (
    <SignInForm
      title="Sign in to the admin panel"
      message={props.message}
      hint="Only administrators can sign in. Users connect with their device tokens."
      titles={TITLES}
      signIn={async (username, password) => props.onSignedIn((await api.login(username, password)).user)}
    />
  );
}
