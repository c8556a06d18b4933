package ibcm

import "fmt"

// FormatError is a MAD that is not what the CM class allows: it says which
// field, and what it held.
type FormatError struct {
	Field string
	What  string
}

func (e *FormatError) Error() string { return fmt.Sprintf("ibcm: %s: %s", e.Field, e.What) }

func formatErr(field, format string, args ...any) error {
	return &FormatError{Field: field, What: fmt.Sprintf(format, args...)}
}
