//go:build !unix

package gatewaylite

import "errors"

// lockDatabase is not built for this OS yet: refusing to start is the
// honest choice, since a second gateway would misread the first one's
// in-flight executions as abandoned.
func lockDatabase(db string) (func() error, error) {
	return nil, errors.New("the gateway's database lock is only implemented on Unix")
}
