package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// outFile is the output-file flag every command that writes a file shares:
// -f FILE (or standard output), refused if FILE exists unless --force,
// written beside FILE and renamed into place, so a failed write never
// leaves a plausible partial file. -o is always the format.
type outFile struct {
	File  string `short:"f" placeholder:"FILE" help:"Write to FILE instead of standard output (- is standard output); an existing FILE needs --force."`
	Force bool   `help:"Overwrite FILE if it exists."`
}

// open returns where to write and commit, which puts the file in place;
// discard removes what commit did not (call it deferred).
func (o *outFile) open(stdout io.Writer) (w io.Writer, commit func() error, discard func(), err error) {
	if o.File == "" || o.File == "-" {
		return stdout, func() error { return nil }, func() {}, nil
	}
	if fi, err := os.Stat(o.File); err == nil && fi.IsDir() {
		// --force would not replace a directory either.
		return nil, nil, nil, &exitError{code: 2, err: fmt.Errorf("-f %s is a directory: give a file name (%s)", o.File, filepath.Join(o.File, "report.md"))}
	} else if err == nil && !o.Force {
		return nil, nil, nil, &exitError{code: 2, err: fmt.Errorf("%s exists (use --force to overwrite)", o.File)}
	}
	if fi, err := os.Stat(filepath.Dir(o.File)); err != nil || !fi.IsDir() {
		return nil, nil, nil, &exitError{code: 2, err: fmt.Errorf("-f %s: its directory %s does not exist", o.File, filepath.Dir(o.File))}
	}
	tmp, err := os.CreateTemp(filepath.Dir(o.File), ".mcpdup-*")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("write %s: %w", o.File, err)
	}
	// A report or an export is for others to read: not CreateTemp's 0600.
	tmp.Chmod(0o644)
	commit = func() error {
		if err := tmp.Sync(); err != nil {
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if o.Force {
			return os.Rename(tmp.Name(), o.File)
		}
		// Without --force the file must still not exist: a link fails if
		// something took the name since the check above.
		err := os.Link(tmp.Name(), o.File)
		switch {
		case errors.Is(err, fs.ErrExist):
			return &exitError{code: 2, err: fmt.Errorf("%s exists (use --force to overwrite)", o.File)}
		case err != nil:
			// A filesystem without hard links: check again, then rename.
			if _, serr := os.Lstat(o.File); serr == nil {
				return &exitError{code: 2, err: fmt.Errorf("%s exists (use --force to overwrite)", o.File)}
			}
			return os.Rename(tmp.Name(), o.File)
		}
		return os.Remove(tmp.Name())
	}
	discard = func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	return tmp, commit, discard, nil
}

// toFile reports whether output goes to a file.
func (o *outFile) toFile() bool { return o.File != "" && o.File != "-" }
