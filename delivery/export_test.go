package delivery

import "github.com/adal-relay/adal/ent"

// ApplyHealth is the health rule in memory, the spec the database paths are held to.
func (s *Service) ApplyHealth(r *ent.Recipient, o Outcome) { s.applyHealth(r, o) }
