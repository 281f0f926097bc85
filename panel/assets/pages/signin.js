// Signing in: a one-time code from a sign-in link is exchanged for an operator token at once; otherwise a
// token is pasted.

import * as Q from '../queries.js';
import { auth, gql, live } from '../gql.js';
import { h, mount, icon, errorAlert, loading } from '../ui.js';
import { navigate } from '../router.js';
import { session, setViewer } from '../session.js';
import { forgetLimits } from '../limits.js';
import { setTitle } from '../page.js';

// signedIn keeps the token and goes where the person was headed.
async function signedIn(token, next, home) {
  const data = await gql(Q.VIEWER, {}, { token });
  auth.set(token);
  live.reset();
  forgetLimits();
  setViewer(data.viewer);
  session.notice = null;
  const to = next && next !== '#/signin' && !next.startsWith('#/signin?') ? next : home();
  // Replace: the sign-in address (and a used code) stays out of the history.
  history.replaceState(null, '', to);
  navigate(to);
}

export function viewSignIn(ctx, main, { code, next, home }) {
  setTitle('Sign in');
  if (code) {
    redeem(ctx, main, code, next, home);
    return;
  }
  tokenForm(ctx, main, next, home, session.notice ? h('div.alert.alert-warning', icon('alert'), h('div.alert-body', session.notice)) : null);
}

async function redeem(ctx, main, code, next, home) {
  mount(main, h('div.signin', h('div.signin-card.card', loading('Signing you in with your sign-in link…'))));
  try {
    const data = await gql(Q.REDEEM_SIGN_IN_CODE, { code }, { token: '' });
    if (!ctx.alive) return;
    await signedIn(data.redeemSignInCode.token, next, home);
  } catch (err) {
    if (!ctx.alive) return;
    history.replaceState(null, '', '#/signin');
    tokenForm(ctx, main, next, home, h('div', { dataset: { role: 'link-error' } }, errorAlert(err)));
  }
}

function tokenForm(ctx, main, next, home, notice) {
  const errorSlot = h('div.form-error');
  const input = h('textarea.input.token-input', {
    id: 'token', name: 'token', rows: 4, required: true, spellcheck: 'false', autocomplete: 'off',
    placeholder: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9…', 'aria-describedby': 'token-hint',
  });
  const submit = h('button.btn.btn-primary.btn-block', { type: 'submit' }, 'Sign in');
  const form = h('form.signin-card.card',
    h('div.signin-brand', h('img', { src: '/assets/favicon.svg', alt: '', width: 40, height: 40 })),
    h('h1', 'Sign in to Adal'),
    h('p.muted', 'Operators: open the sign-in link the server logged when it first started, or print a new one with ',
      h('code', 'go run ./cmd/server signin-link'), '. Tenant owners and members paste the token an operator or owner issued them.'),
    notice,
    h('label.field-label', { for: 'token' }, 'API token'),
    input,
    h('p.field-hint', { id: 'token-hint' }, 'Or print an operator token with ', h('code', 'go run ./cmd/server token --admin'), '.'),
    errorSlot,
    submit,
    h('p.fineprint', icon('key'), 'The token stays in this browser\u2019s local storage until you sign out.'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const token = input.value.trim().replace(/^Bearer\s+/i, '');
    if (!token) return;
    submit.disabled = true;
    submit.classList.add('busy');
    errorSlot.replaceChildren();
    try {
      await signedIn(token, next, home);
    } catch (err) {
      if (!ctx.alive) return;
      errorSlot.replaceChildren(errorAlert(err));
      submit.disabled = false;
      submit.classList.remove('busy');
    }
  });
  mount(main, h('div.signin', form));
  input.focus();
}
