package activity

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Opt holds a value that a source may not record. The zero Opt means "not
// recorded": the source is silent, which is different from a recorded empty
// value. In JSON a not-recorded Opt is omitted (tag fields `omitzero`); in
// SQLite it is NULL.
type Opt[T any] struct {
	V  T
	OK bool
}

// Some returns a recorded value.
func Some[T any](v T) Opt[T] { return Opt[T]{V: v, OK: true} }

// IsZero reports whether the value is not recorded; encoding/json uses it
// for `omitzero`.
func (o Opt[T]) IsZero() bool { return !o.OK }

// Get returns the value and whether it was recorded.
func (o Opt[T]) Get() (T, bool) { return o.V, o.OK }

// String renders a not-recorded value as "not recorded".
func (o Opt[T]) String() string {
	if !o.OK {
		return NotRecorded
	}
	return fmt.Sprint(o.V)
}

// NotRecorded is how the model spells a fact the source does not record.
const NotRecorded = "not recorded"

// MarshalJSON encodes a recorded value as the value itself and a
// not-recorded one as null (omitted entirely under `omitzero`).
func (o Opt[T]) MarshalJSON() ([]byte, error) {
	if !o.OK {
		return []byte("null"), nil
	}
	return json.Marshal(o.V)
}

// UnmarshalJSON treats null as not recorded.
func (o *Opt[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = Opt[T]{}
		return nil
	}
	if !o.decodeFast(b) {
		if err := json.Unmarshal(b, &o.V); err != nil {
			return err
		}
	}
	o.OK = true
	return nil
}

// decodeFast decodes the common shapes without a second JSON decoder (a
// replay of a million records spent a fifth of its time there): a time,
// a string with nothing to unescape, a plain integer. Anything else, and
// anything these would read differently from encoding/json, is left to it.
func (o *Opt[T]) decodeFast(b []byte) bool {
	switch v := any(&o.V).(type) {
	case *time.Time:
		return v.UnmarshalJSON(b) == nil
	case *string:
		if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
			return false
		}
		body := b[1 : len(b)-1]
		for _, c := range body {
			if c < 0x20 || c == '"' || c == '\\' {
				return false
			}
		}
		if !utf8.Valid(body) {
			return false
		}
		*v = string(body)
		return true
	case *int:
		if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
			return false
		}
		for i, c := range b {
			if (c < '0' || c > '9') && !(i == 0 && c == '-' && len(b) > 1) {
				return false
			}
		}
		n, err := strconv.Atoi(string(b))
		*v = n
		return err == nil
	}
	return false
}
