package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/signincode"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/viewer"
)

// Sign-in links let an operator into the console without pasting a token: the link carries a one-time code
// the console exchanges for an operator token. A code is short-lived because it travels through logs and
// terminals; the token it buys lives as long as a browser session reasonably should.
const (
	// SignInCodeTTL is how long a code may be redeemed after it was made.
	SignInCodeTTL = 15 * time.Minute
	// SignInTokenTTL is the lifetime of the operator token a code is exchanged for.
	SignInTokenTTL = 7 * 24 * time.Hour
	// SignInSubject and signInIssuer name that token in the tokens list.
	SignInSubject = "operator"
	signInIssuer  = "sign-in link"
)

// SignInPath is the console route that redeems a code, relative to the public URL; the code follows it.
const SignInPath = "/#/signin?code="

// hashCode is what is stored of a code. The code carries 130 random bits, so a plain hash is as good as a
// slow one: there is nothing to guess.
func hashCode(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// NewSignInCode makes a one-time operator sign-in code, valid SignInCodeTTL, and returns it with its expiry.
// Codes that expired or were used are deleted on the way, so the table only ever holds a handful.
func (s *Store) NewSignInCode(ctx context.Context, client *ent.Client) (string, time.Time, error) {
	ctx = viewer.SystemContext(ctx)
	now := s.cfg.Now().UTC()
	if _, err := client.SignInCode.Delete().
		Where(signincode.Or(signincode.ExpiresAtLTE(now), signincode.UsedAtNotNil())).
		Exec(ctx); err != nil {
		return "", time.Time{}, fmt.Errorf("auth: delete stale sign-in codes: %w", err)
	}
	code := rand.Text()
	exp := now.Add(SignInCodeTTL)
	if err := client.SignInCode.Create().
		SetCodeHash(hashCode(code)).SetCreatedAt(now).SetExpiresAt(exp).
		Exec(ctx); err != nil {
		return "", time.Time{}, fmt.Errorf("auth: store sign-in code: %w", err)
	}
	return code, exp, nil
}

// RedeemSignInCode exchanges code for an operator token valid SignInTokenTTL, once, before the code expires.
// The code is spent by a conditional update, so of two redemptions at once exactly one wins. client is the
// mutation's transaction: the code is spent only if the token is stored.
func (s *Store) RedeemSignInCode(ctx context.Context, client *ent.Client, code string) (string, *ent.Token, error) {
	const op = "redeemSignInCode"
	code = strings.TrimSpace(code)
	// Sign-in codes are read by people from logs: whoever is asking, the check runs as the system, narrowly.
	sys := viewer.SystemContext(ctx)
	now := s.cfg.Now().UTC()
	n, err := client.SignInCode.Update().
		Where(signincode.CodeHash(hashCode(code)), signincode.UsedAtIsNil(), signincode.ExpiresAtGT(now)).
		SetUsedAt(now).
		Save(sys)
	if err != nil {
		return "", nil, fault.Wrap(op, fault.Internal, err)
	}
	if n != 1 {
		return "", nil, fault.E(op, fault.Unauthenticated,
			"this sign-in link has expired or was already used; print a new one with `server signin-link`")
	}
	return s.mint(sys, client, viewer.Viewer{Role: viewer.Admin, Subject: SignInSubject}, SignInTokenTTL, signInIssuer)
}
