// Package tomlfile decodes the TOML files mcpdup reads (the gateway's
// configuration, import mappings) strictly: an unknown key is an error,
// and errors say where.
package tomlfile

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/pelletier/go-toml/v2"
)

// Decode decodes b into v, refusing keys v has no field for.
func Decode(b []byte, v any) error {
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		return fmt.Errorf("unknown field: %s", strict.String())
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("line %d column %d: %s", row, col, de.Error())
	}
	return err
}
