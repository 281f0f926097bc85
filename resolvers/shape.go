package resolvers

import (
	"github.com/adal-relay/adal/destauth"
	"github.com/adal-relay/adal/graph/model"
)

// authConfig is a RecipientAuthInput as the domain takes it; nil when none was given.
func authConfig(in *model.RecipientAuthInput) *destauth.Config {
	if in == nil {
		return nil
	}
	c := &destauth.Config{}
	if len(in.Headers) > 0 {
		c.Headers = make(map[string]string, len(in.Headers))
		for _, h := range in.Headers {
			c.Headers[h.Name] = h.Value
		}
	}
	if in.Basic != nil {
		c.Basic = &destauth.Basic{Username: in.Basic.Username, Password: in.Basic.Password}
	}
	if in.Bearer != nil {
		c.Bearer = *in.Bearer
	}
	if o := in.Oauth2; o != nil {
		c.OAuth2 = &destauth.OAuth2{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
			Scopes: o.Scopes, Audience: deref(o.Audience, "")}
	}
	if cc := in.ClientCertificate; cc != nil {
		c.ClientCertificate = &destauth.ClientCertificate{CertificatePEM: cc.CertificatePem, KeyPEM: cc.KeyPem}
	}
	return c
}
