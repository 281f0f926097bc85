package eventtype

import "github.com/santhosh-tekuri/jsonschema/v6"

// MaxSubschemas bounds a schema with its references expanded. The library follows a $ref each time it is
// met, so a short schema whose definitions each refer twice to the next one costs time exponential in its
// length on every body; the bound keeps a tenant's schema from stalling validation for everyone.
const MaxSubschemas = 1 << 15

// expansion counts the subschemas of s with every reference followed, up to past MaxSubschemas. A reference
// back into the subschemas being counted counts once: it either goes deeper into the body, which bounds
// it, or loops in place, which the library reports as an error.
func expansion(s *jsonschema.Schema) int {
	e := expander{done: map[*jsonschema.Schema]int{}, busy: map[*jsonschema.Schema]bool{}}
	return e.count(s)
}

type expander struct {
	done map[*jsonschema.Schema]int
	busy map[*jsonschema.Schema]bool
}

func (e *expander) count(s *jsonschema.Schema) int {
	if s == nil {
		return 0
	}
	if n, ok := e.done[s]; ok {
		return n
	}
	if e.busy[s] {
		return 1
	}
	e.busy[s] = true
	n := 1
	add := func(c *jsonschema.Schema) {
		if n <= MaxSubschemas {
			n += e.count(c)
		}
	}
	addAny := func(v any) {
		switch v := v.(type) {
		case *jsonschema.Schema:
			add(v)
		case []*jsonschema.Schema:
			for _, c := range v {
				add(c)
			}
		}
	}
	add(s.Ref)
	add(s.RecursiveRef)
	if s.DynamicRef != nil {
		add(s.DynamicRef.Ref)
	}
	add(s.Not)
	add(s.If)
	add(s.Then)
	add(s.Else)
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		for _, c := range list {
			add(c)
		}
	}
	for _, c := range s.Properties {
		add(c)
	}
	for _, c := range s.PatternProperties {
		add(c)
	}
	for _, c := range s.DependentSchemas {
		add(c)
	}
	for _, c := range s.Dependencies {
		addAny(c)
	}
	addAny(s.AdditionalProperties)
	addAny(s.Items)
	addAny(s.AdditionalItems)
	add(s.PropertyNames)
	add(s.UnevaluatedProperties)
	add(s.Contains)
	add(s.Items2020)
	add(s.UnevaluatedItems)
	add(s.ContentSchema)
	delete(e.busy, s)
	e.done[s] = n
	return n
}
