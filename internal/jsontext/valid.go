package jsontext

import (
	"encoding/binary"
	"unicode/utf8"
)

// maxNesting is the deepest nesting of arrays and objects that encoding/json accepts.
const maxNesting = 10000

// Valid reports whether b is JSON text in valid UTF-8: exactly what utf8.Valid and encoding/json.Valid
// both accept, in one pass and a few times faster.
func Valid(b []byte) bool {
	var buf [64]byte
	open := buf[:0] // the containers entered: '{' or '['
	i := Space(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		var ok bool
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(open) == maxNesting {
				return false
			}
			closing := byte('}')
			if c == '[' {
				closing = ']'
			}
			if i = Space(b, i+1); i < len(b) && b[i] == closing {
				i++
				break
			}
			open = append(open, c)
			if c == '{' {
				if i, ok = member(b, i); !ok {
					return false
				}
			}
			continue
		case c == '"':
			if i, ok = StringEnd(b, i); !ok {
				return false
			}
		case c == 't':
			if i, ok = literal(b, i, "true"); !ok {
				return false
			}
		case c == 'f':
			if i, ok = literal(b, i, "false"); !ok {
				return false
			}
		case c == 'n':
			if i, ok = literal(b, i, "null"); !ok {
				return false
			}
		default:
			if i, _, ok = NumberEnd(b, i); !ok {
				return false
			}
		}
		// A value ended at i: close what it ends, then go on to the next one.
		for i = Space(b, i); ; i = Space(b, i+1) {
			if len(open) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := open[len(open)-1]
			if b[i] == ',' {
				i = Space(b, i+1)
				if top == '{' {
					if i, ok = member(b, i); !ok {
						return false
					}
				}
				break
			}
			if b[i] != top+2 { // '{'+2 is '}', '['+2 is ']'
				return false
			}
			open = open[:len(open)-1]
		}
	}
}

// member reads an object's key and its colon, to where its value starts.
func member(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := StringEnd(b, i)
	if !ok {
		return i, false
	}
	if i = Space(b, i); i >= len(b) || b[i] != ':' {
		return i, false
	}
	return Space(b, i+1), true
}

// Space is the end of the whitespace from i.
func Space(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// StringEnd is the end of the string that starts at i, just past its closing quote; ok is false if it is
// malformed or not valid UTF-8.
func StringEnd(b []byte, i int) (int, bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i++; ; {
		// Eight bytes at a time while none is a quote, a backslash, a control character or outside ASCII.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if ((x-ones*0x20)|(x^(ones*'"')-ones)|(x^(ones*'\\')-ones)|x)&highs != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			return i, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || Hex4(b[i+2:i+6]) < 0 {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, false
			}
			i += size
		default:
			i++
		}
	}
}

// NumberEnd is the end of the number that starts at i; integer reports one written without a fraction or
// an exponent.
func NumberEnd(b []byte, i int) (end int, integer, ok bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digitsFrom(b, i)
	default:
		return i, false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		j := digitsFrom(b, i+1)
		if j == i+1 {
			return i, false, false
		}
		i, integer = j, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsFrom(b, i)
		if j == i {
			return i, false, false
		}
		i, integer = j, false
	}
	return i, integer, true
}

func digitsFrom(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
