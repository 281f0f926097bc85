// Package jsontext reads JSON text in place: whether it is valid, where its strings and numbers end, and
// strings decoded as encoding/json decodes them; and it writes strings as JavaScript's JSON.stringify does.
package jsontext

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Hex4 is the value of four hex digits, or -1.
func Hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// AppendUnquoted appends the string whose content (well formed, between its quotes) is q, decoded as
// encoding/json decodes it: escapes resolved, and U+FFFD for a lone surrogate and for each byte of
// invalid UTF-8.
func AppendUnquoted(dst, q []byte) []byte {
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\\' && q[i+1] == 'u':
			r := Hex4(q[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				next := rune(-1)
				if i+6 <= len(q) && q[i] == '\\' && q[i+1] == 'u' {
					next = Hex4(q[i+2:])
				}
				if r = utf16.DecodeRune(r, next); r != utf8.RuneError {
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r)
		case c == '\\':
			dst = append(dst, unescape(q[i+1]))
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(q[i:])
			dst = utf8.AppendRune(dst, r)
			i += size
		}
	}
	return dst
}

// unescape is the byte a one-letter escape stands for.
func unescape(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // " \ /
}

const lowerHex = "0123456789abcdef"

// AppendQuoted appends a valid UTF-8 string as JSON.stringify does: only quotes, backslashes and control
// characters are escaped.
func AppendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
