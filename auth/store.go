package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/token"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Lifetimes of the tokens the API issues.
const (
	// DefaultTokenTTL is a token's lifetime when the issuer does not say.
	DefaultTokenTTL = 30 * 24 * time.Hour
	// MinTokenTTL and MaxTokenTTL bound the lifetime an issuer may ask for.
	MinTokenTTL = time.Minute
	MaxTokenTTL = 366 * 24 * time.Hour
)

// DefaultRefreshInterval is how often a Store reloads the revoked ids: a revocation takes effect on every
// process within about this long.
const DefaultRefreshInterval = 2 * time.Second

// StoreConfig configures a Store.
type StoreConfig struct {
	Auth   *Authenticator
	Client *ent.Client
	// Interval between reloads of the revoked ids; default DefaultRefreshInterval.
	Interval time.Duration
	Logger   *slog.Logger
	Now      func() time.Time
}

// Store mints tokens that have a row in the tokens table (the row id is the token's "jti"), revokes them, and
// keeps its Authenticator's revocation set fresh from the database, so every process sharing the database
// refuses a revoked token within one Interval without a query per request.
type Store struct {
	startstop.BaseStartStop
	cfg StoreConfig
}

// NewStore returns a store; it refreshes nothing until Start.
func NewStore(cfg StoreConfig) (*Store, error) {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultRefreshInterval)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = storage.Now
	}
	if cfg.Auth == nil || cfg.Client == nil {
		return nil, errors.New("auth store: Auth and Client are required")
	}
	return &Store{cfg: cfg}, nil
}

// Mint stores and signs a token for want that expires after ttl, issued by the viewer in ctx. A token minted
// by a tenant's viewer never outlives the token it was minted with: its expiry is capped at that token's.
// Operators and the system are not capped (an operator's short sign-in may hand out a long-lived token).
// client is the mutation's transaction, so the row and the rest of the mutation commit together.
func (s *Store) Mint(ctx context.Context, client *ent.Client, want viewer.Viewer, ttl time.Duration) (string, *ent.Token, error) {
	return s.mint(ctx, client, want, ttl, "")
}

// mint is Mint recording issuedBy as the token's issuer; "" names the minter.
func (s *Store) mint(ctx context.Context, client *ent.Client, want viewer.Viewer, ttl time.Duration, issuedBy string) (string, *ent.Token, error) {
	const op = "issueToken"
	minter, ok := viewer.FromContext(ctx)
	if !ok {
		return "", nil, fault.E(op, fault.Unauthenticated, "a valid token is required")
	}
	if ttl <= 0 {
		return "", nil, fault.E(op, fault.InvalidInput, "token lifetime must be positive")
	}
	if err := checkViewer(want); err != nil {
		return "", nil, fault.E(op, fault.InvalidInput, "%v", err)
	}
	now := s.cfg.Now().UTC()
	exp := now.Add(ttl).Truncate(time.Second) // a JWT's exp has whole seconds
	if !minter.Global() {
		parent, ok := FromContext(ctx)
		if !ok {
			return "", nil, fault.E(op, fault.Forbidden, "only a token holder can mint tokens")
		}
		if parent.ExpiresAt.Before(exp) {
			exp = parent.ExpiresAt.UTC()
		}
		if !exp.After(now) {
			return "", nil, fault.E(op, fault.Unauthenticated, "the minting token has expired")
		}
	}
	if issuedBy == "" {
		issuedBy = minter.Subject
		if minter.Role == viewer.System {
			issuedBy = "server token"
		}
	}
	create := client.Token.Create().
		SetRole(string(want.Role)).SetSubject(want.Subject).SetIssuedBy(issuedBy).
		SetCreatedAt(now).SetExpiresAt(exp)
	if want.Role != viewer.Admin {
		create.SetTenantID(want.TenantID)
	}
	row, err := create.Save(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("%s: store token: %w", op, err)
	}
	signed, err := s.cfg.Auth.sign(want, strconv.Itoa(row.ID), exp)
	if err != nil {
		return "", nil, fault.E(op, fault.InvalidInput, "%v", err)
	}
	return signed, row, nil
}

// Revoke revokes the token with row id id, as the viewer in ctx: the privacy policy keeps other tenants'
// tokens out of reach (not found). Once committed, the revocation is immediate in this process and reaches
// the others at their next refresh. Revoking a revoked token changes nothing.
func (s *Store) Revoke(ctx context.Context, client *ent.Client, id int) (*ent.Token, error) {
	t, err := client.Token.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.RevokedAt == nil {
		if t, err = client.Token.UpdateOne(t).SetRevokedAt(s.cfg.Now().UTC()).Save(ctx); err != nil {
			return nil, err
		}
	}
	storage.AfterCommit(ctx, func() { s.cfg.Auth.revoke(strconv.Itoa(id)) })
	return t, nil
}

// Refresh reloads the revoked, not yet expired token ids into the Authenticator, which also ends the
// sessions of tokens that died since the last refresh.
func (s *Store) Refresh(ctx context.Context) error {
	ctx = viewer.SystemContext(ctx)
	// Leeway: Verify still accepts a token that long after its exp, so it must stay in the set as long.
	ids, err := s.cfg.Client.Token.Query().
		Where(token.RevokedAtNotNil(), token.ExpiresAtGT(s.cfg.Now().Add(-Leeway))).
		IDs(ctx)
	if err != nil {
		return fmt.Errorf("auth: load revoked tokens: %w", err)
	}
	set := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		set[strconv.Itoa(id)] = struct{}{}
	}
	s.cfg.Auth.SetRevoked(set)
	return nil
}

// Start loads the revoked ids once (so no revoked token is accepted after Start returns), then reloads them
// every Interval until Stop or ctx ends.
func (s *Store) Start(ctx context.Context) error {
	return s.Run(ctx, s.Refresh, func(ctx context.Context) {
		startstop.Every(ctx, s.cfg.Logger, "refresh revoked tokens", s.cfg.Interval, func(ctx context.Context) {
			if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
				// The previous set stays in force; expiry of sessions is still checked.
				s.cfg.Logger.Warn("refresh revoked tokens", "err", err)
				s.cfg.Auth.sweep()
			}
		})
	})
}
