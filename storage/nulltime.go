package storage

import (
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// NullTime scans a nullable time that SQLite may hand back as text (for expressions such as MIN() or
// RETURNING, the driver does not know the column is a time).
type NullTime struct {
	Time  time.Time
	Valid bool
}

// sqliteTimeFormats are the layouts the SQLite driver writes times in.
var sqliteTimeFormats = []string{
	"2006-01-02 15:04:05.999999999 -0700 MST", // time.Time.String(), the driver's default
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	time.RFC3339Nano,
}

// Scan implements sql.Scanner.
func (v *NullTime) Scan(src any) error {
	switch x := src.(type) {
	case nil:
		*v = NullTime{}
		return nil
	case time.Time:
		*v = NullTime{Time: x, Valid: true}
		return nil
	case string:
		return v.parse(x)
	case []byte:
		return v.parse(string(x))
	}
	return fmt.Errorf("cannot scan %T into a time", src)
}

func (v *NullTime) parse(s string) error {
	if i := strings.Index(s, " m="); i > 0 {
		s = s[:i] // the monotonic clock reading String() appends
	}
	for _, layout := range sqliteTimeFormats {
		if t, err := time.Parse(layout, s); err == nil {
			*v = NullTime{Time: t, Valid: true}
			return nil
		}
	}
	return fmt.Errorf("cannot parse time %q", s)
}

var _ sql.Scanner = (*NullTime)(nil)
