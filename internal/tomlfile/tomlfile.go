// Package tomlfile decodes the TOML files mcpdup reads (the gateway's
// configuration, import mappings) strictly: an unknown key is an error,
// and errors say where.
package tomlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

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

// MaxSize bounds a configuration or mapping file: a real one is a few
// KiB; a path pointing at a log or a device must not be read whole.
const MaxSize = 1 << 20

// ReadFile reads a TOML file of at most MaxSize bytes.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a configuration file", path, MaxSize)
	}
	return b, nil
}
