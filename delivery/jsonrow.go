package delivery

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// The set-based statements of intake and of attempt recording take their rows as JSON arrays
// (json_to_recordset). jsonRow writes them by hand: encoding/json reflected over every field of every row, and
// was 2% of the process's time in dispatch.

// jsonRow appends one JSON object to b, an array opened with '[' and not yet closed. Field names are the
// statement's own (plain ASCII).
type jsonRow struct {
	b     []byte
	field bool // a field was written: a comma before the next
}

// open starts the object, after a comma unless it is the array's first.
func (w *jsonRow) open() {
	if len(w.b) > 0 && w.b[len(w.b)-1] != '[' {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '{')
}

func (w *jsonRow) close() []byte { return append(w.b, '}') }

func (w *jsonRow) name(n string) {
	if w.field {
		w.b = append(w.b, ',')
	}
	w.field = true
	w.b = append(w.b, '"')
	w.b = append(w.b, n...)
	w.b = append(w.b, '"', ':')
}

func (w *jsonRow) int(n string, v int) {
	w.name(n)
	w.b = strconv.AppendInt(w.b, int64(v), 10)
}

func (w *jsonRow) null(n string) {
	w.name(n)
	w.b = append(w.b, "null"...)
}

func (w *jsonRow) intp(n string, v *int) {
	if v == nil {
		w.null(n)
		return
	}
	w.int(n, *v)
}

// ints writes vs as a JSON array, or null when there are none.
func (w *jsonRow) ints(n string, vs []int) {
	if len(vs) == 0 {
		w.null(n)
		return
	}
	w.name(n)
	w.b = append(w.b, '[')
	for i, v := range vs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = strconv.AppendInt(w.b, int64(v), 10)
	}
	w.b = append(w.b, ']')
}

func (w *jsonRow) bool(n string, v bool) {
	w.name(n)
	w.b = strconv.AppendBool(w.b, v)
}

// time writes t with its zone offset and all its digits: PostgreSQL keeps the microseconds, as it does of a
// time sent as a parameter.
func (w *jsonRow) time(n string, t *time.Time) {
	if t == nil {
		w.null(n)
		return
	}
	w.name(n)
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
}

func (w *jsonRow) int64(n string, v int64) {
	w.name(n)
	w.b = strconv.AppendInt(w.b, v, 10)
}

// str writes s as a JSON string: quotes, backslashes and control characters escaped, a byte that is not
// valid UTF-8 replaced by U+FFFD (as encoding/json does: PostgreSQL would refuse the whole document), the
// rest as is.
func (w *jsonRow) str(n, s string) {
	const hex = "0123456789abcdef"
	w.name(n)
	w.b = append(w.b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				w.b = append(w.b, `\ufffd`...)
			} else {
				w.b = append(w.b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			w.b = append(w.b, '\\', c)
		case c < 0x20:
			w.b = append(w.b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			w.b = append(w.b, c)
		}
		i++
	}
	w.b = append(w.b, '"')
}
