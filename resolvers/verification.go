package resolvers

import (
	"github.com/adal-relay/adal/graph/model"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/verify"
)

// verificationInput is the API's verification input as package verify takes it.
func verificationInput(in *model.VerificationInput) *verify.Input {
	if in == nil {
		return nil
	}
	out := &verify.Input{
		Kind: verify.Kind(in.Kind), Enforce: in.Enforce, Secrets: in.Secrets, Header: in.Header,
		QueryParameter: in.QueryParameter, Prefix: in.Prefix, ToleranceSeconds: in.ToleranceSeconds,
		Username: in.Username,
	}
	if in.Algorithm != nil {
		a := verify.Algorithm(*in.Algorithm)
		out.Algorithm = &a
	}
	if in.Encoding != nil {
		e := verify.Encoding(*in.Encoding)
		out.Encoding = &e
	}
	return out
}

// responseInput is the API's answer input as package routing takes it.
func responseInput(in *model.ServerResponseInput) *routing.ResponseInput {
	if in == nil {
		return nil
	}
	return &routing.ResponseInput{Status: in.Status, ContentType: in.ContentType, Body: in.Body}
}

// verificationOf is what the API shows of a stored verification: everything but the secrets.
func verificationOf(c *verify.Config) *model.Verification {
	if c == nil || !c.Active() {
		return &model.Verification{Kind: model.VerificationKindNone, Enforce: true, Headers: []string{}}
	}
	out := &model.Verification{
		Kind: model.VerificationKind(c.Kind), Enforce: c.Enforce, Headers: c.Headers(),
		Header: nonEmpty(c.Header), QueryParameter: nonEmpty(c.QueryParameter), Prefix: nonEmpty(c.Prefix),
		Username: nonEmpty(c.Username), SecretCount: len(c.Secrets),
	}
	if c.Algorithm != "" {
		a := model.HmacAlgorithm(c.Algorithm)
		out.Algorithm = &a
	}
	if c.Encoding != "" {
		e := model.SignatureEncoding(c.Encoding)
		out.Encoding = &e
	}
	if c.ToleranceSeconds != 0 {
		out.ToleranceSeconds = &c.ToleranceSeconds
	}
	return out
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
