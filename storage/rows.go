package storage

import "database/sql"

// ScanColumn reads the rows of a query of one column — ids, mostly — into a slice, and closes them.
func ScanColumn[T any](rows *sql.Rows) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
