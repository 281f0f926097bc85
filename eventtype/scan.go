package eventtype

import (
	"bytes"
	"encoding/binary"
	"github.com/adal-relay/adal/internal/jsontext"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds the nesting the scanner follows. The library's decoder goes deeper (10000 levels), so a
// deeper body is not refused here but left to it.
const maxDepth = 1000

// scanner reads JSON text in place, without decoding it. It accepts exactly the text that the library's
// decoder (encoding/json) accepts, as far as maxDepth: one value, with nothing but whitespace around it.
type scanner struct {
	data  []byte
	pos   int
	depth int
	buf   []byte // scratch for a decoded string
	keys  []span // distinct keys of the objects being checked for minProperties
}

// span is the bounds of a text in data.
type span struct{ start, end int }

// peek is the byte at pos, or 0 at the end, which no JSON value starts or goes on with.
func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.pos++
	return true
}

// enter steps into the object or array at pos.
func (s *scanner) enter() bool {
	s.depth++
	s.pos++
	return s.depth <= maxDepth
}

// more moves to the next member of the object or array entered, before its key or value: it reports
// whether there is one, and ok false if the text is malformed. At the closing byte, it leaves the
// container.
func (s *scanner) more(closing byte, first bool) (more, ok bool) {
	s.space()
	if s.consume(closing) {
		s.depth--
		return false, true
	}
	if !first {
		if !s.consume(',') {
			return false, false
		}
		s.space()
	}
	return true, true
}

// key scans an object's key and the colon after it, up to its value.
func (s *scanner) key() (content span, plain, ok bool) {
	if content, plain, ok = s.str(); !ok {
		return
	}
	s.space()
	if !s.consume(':') {
		return content, plain, false
	}
	s.space()
	return content, plain, true
}

// skip scans one value of any kind.
func (s *scanner) skip() bool {
	switch c := s.peek(); c {
	case '{':
		if !s.enter() {
			return false
		}
		for first := true; ; first = false {
			more, ok := s.more('}', first)
			if !more {
				return ok
			}
			if _, _, ok := s.key(); !ok || !s.skip() {
				return false
			}
		}
	case '[':
		if !s.enter() {
			return false
		}
		for first := true; ; first = false {
			more, ok := s.more(']', first)
			if !more {
				return ok
			}
			if !s.skip() {
				return false
			}
		}
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	_, ok := s.number()
	return ok
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return false
	}
	s.pos += len(lit)
	return true
}

// str scans a string, returning the bounds of its content between the quotes, and plain if the content is
// the string itself: no escape, nothing but ASCII. Other bytes are taken as they come, invalid UTF-8
// included, as the decoder takes them.
func (s *scanner) str() (content span, plain, ok bool) {
	if !s.consume('"') {
		return span{}, false, false
	}
	d := s.data
	plain = true
	for i := s.pos; ; {
		for i+8 <= len(d) && !special(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
		}
		if i == len(d) {
			return span{}, false, false
		}
		switch c := d[i]; {
		case c == '"':
			content = span{s.pos, i}
			s.pos = i + 1
			return content, plain, true
		case c < 0x20:
			return span{}, false, false
		case c == '\\':
			plain = false
			if i+1 == len(d) {
				return span{}, false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || jsontext.Hex4(d[i+2:i+6]) < 0 {
					return span{}, false, false
				}
				i += 6
			default:
				return span{}, false, false
			}
		case c >= utf8.RuneSelf:
			plain = false
			i++
		default:
			i++
		}
	}
}

// special reports whether any of the 8 bytes in x may need a look in a string: a quote, a backslash, a
// control character or a byte outside ASCII. It may report others too, never miss one.
func special(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)|(quote-ones)|(backslash-ones)|x)&highs != 0
}

// number scans a number, reporting integer if it is written without a fraction or an exponent.
func (s *scanner) number() (integer, ok bool) {
	end, integer, ok := jsontext.NumberEnd(s.data, s.pos)
	if ok {
		s.pos = end
	}
	return integer, ok
}

// text is a scanned string's value: its content as is when plain, else decoded into the scratch buffer,
// valid until the next call.
func (s *scanner) text(content span, plain bool) []byte {
	q := s.data[content.start:content.end]
	if plain {
		return q
	}
	s.buf = jsontext.AppendUnquoted(s.buf[:0], q)
	return s.buf
}

// lookup is the value at the path segs in data, read as typeAt reads the decoded body: a string decoded, a
// number as written, anything else "". It scans all of data, as the decoder would, and ok is false if the
// scanner cannot read it.
func lookup(data []byte, segs []string) (value string, ok bool) {
	s := scanner{data: data}
	s.space()
	f, ok := s.find(segs)
	if !ok {
		return "", false
	}
	s.space()
	if s.pos != len(data) {
		return "", false
	}
	switch f.kind {
	case '"':
		return string(s.text(f.span, f.plain)), true
	case '0':
		return string(data[f.start:f.end]), true
	}
	return "", true
}

// found is a value at a path: the content of a string (kind '"'), the text of a number (kind '0'), or none.
type found struct {
	span
	kind  byte
	plain bool
}

// find scans a value, returning what is at segs within it. A key that repeats counts for its last value,
// as in the decoded body.
func (s *scanner) find(segs []string) (f found, ok bool) {
	if len(segs) == 0 {
		start := s.pos
		switch c := s.peek(); {
		case c == '"':
			content, plain, ok := s.str()
			return found{content, '"', plain}, ok
		case c == '-' || '0' <= c && c <= '9':
			_, ok := s.number()
			return found{span{start, s.pos}, '0', true}, ok
		}
		return found{}, s.skip()
	}
	switch s.peek() {
	case '{':
		if !s.enter() {
			return found{}, false
		}
		for first := true; ; first = false {
			more, ok := s.more('}', first)
			if !more {
				return f, ok
			}
			content, plain, ok := s.key()
			if !ok {
				return found{}, false
			}
			if string(s.text(content, plain)) == segs[0] {
				f, ok = s.find(segs[1:])
			} else {
				ok = s.skip()
			}
			if !ok {
				return found{}, false
			}
		}
	case '[':
		i, err := strconv.Atoi(segs[0])
		if err != nil || i < 0 || segs[0] != strconv.Itoa(i) {
			i = -1 // no item
		}
		if !s.enter() {
			return found{}, false
		}
		for n, first := 0, true; ; n, first = n+1, false {
			more, ok := s.more(']', first)
			if !more {
				return f, ok
			}
			if n == i {
				f, ok = s.find(segs[1:])
			} else {
				ok = s.skip()
			}
			if !ok {
				return found{}, false
			}
		}
	}
	return found{}, s.skip()
}
