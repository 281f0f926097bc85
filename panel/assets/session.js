// Who is signed in: the viewer from the token, refreshed on each navigation (the balance moves with every
// accepted webhook), and what the role may do.

import * as Q from './queries.js';
import { gql } from './gql.js';
import { fmtNumber } from './ui.js';

export const session = {
  viewer: null,
  // notice explains why the sign-in page is shown (token expired, link used, …).
  notice: null,
};

const listeners = new Set();

// onViewer calls fn whenever the viewer is read again (the header's balance follows it).
export function onViewer(fn) { listeners.add(fn); }

export async function refreshViewer() {
  const data = await gql(Q.VIEWER);
  setViewer(data.viewer);
  return session.viewer;
}

export function setViewer(v) {
  session.viewer = v;
  for (const fn of listeners) fn(v);
}

// setBalance records a balance read by a page, so the header shows the same figure.
export function setBalance(b) {
  const v = session.viewer;
  if (v && v.tenant && b != null && v.tenant.creditBalance !== b) setViewer({ ...v, tenant: { ...v.tenant, creditBalance: b } });
}

export const balance = () => (session.viewer && session.viewer.tenant ? session.viewer.tenant.creditBalance : null);
export const role = () => (session.viewer ? session.viewer.role : '');
export const isOperator = () => role() === 'ADMIN';
export const isOwner = () => role() === 'OWNER';
// canManage: operators and owners change servers, recipients and plans; members read and act on deliveries.
export const canManage = () => isOperator() || isOwner();

// balanceAfter reads the balance again after a mutation that spent or granted credits, for its result line.
export async function balanceAfter() {
  try {
    const v = await refreshViewer();
    return v.tenant ? ` New balance: ${fmtNumber(v.tenant.creditBalance)} ${v.tenant.creditBalance === 1 ? 'credit' : 'credits'}.` : '';
  } catch {
    return '';
  }
}
