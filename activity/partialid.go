package activity

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// PartialID is what an operator typed for an id: the whole id, a unique
// prefix, a unique suffix (the tail a narrow screen shows), or the short
// form screens print ("act_…9VF4KC": its prefix and its tail).
type PartialID struct {
	Text           string
	prefix, suffix string
}

// ParsePartialID reads an id as typed.
func ParsePartialID(s string) PartialID {
	s = strings.TrimSpace(s)
	p := PartialID{Text: s}
	if before, after, ok := strings.Cut(s, "…"); ok {
		p.prefix, p.suffix = before, after
		return p
	}
	if before, after, ok := strings.Cut(s, "..."); ok {
		p.prefix, p.suffix = before, after
		return p
	}
	p.prefix = s // also tried as a suffix, see Match
	return p
}

// Match reports whether id is the one typed: equal, or it has the
// typed prefix and suffix. A bare fragment matches as a prefix or as a
// suffix. Matching is case-insensitive: ids are Crockford base32.
func (p PartialID) Match(id string) bool {
	up := strings.ToUpper(id)
	pre, suf := strings.ToUpper(p.prefix), strings.ToUpper(p.suffix)
	if pre == "" && suf == "" {
		return false
	}
	if strings.ContainsAny(p.Text, "….") {
		return strings.HasPrefix(up, pre) && strings.HasSuffix(up, suf) && len(up) >= len(pre)+len(suf)
	}
	return strings.HasPrefix(up, pre) || strings.HasSuffix(up, pre)
}

// Exact reports whether the text is a whole id of the given prefix
// ("act_") rather than a fragment.
func (p PartialID) Exact(kind string) bool {
	rest, ok := strings.CutPrefix(p.Text, kind)
	return ok && len(rest) == 26 && strings.Trim(rest, crockford) == ""
}

// crockford is the alphabet of an id's ULID (upper case, as ids are written).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ErrAmbiguous: a fragment matches more than one id.
var ErrAmbiguous = errors.New("matches more than one id")

// Pick returns the one id in ids that p matches, or ErrNotFound, or
// ErrAmbiguous naming two of them.
func (p PartialID) Pick(what string, ids []string) (string, error) {
	var found []string
	for _, id := range ids {
		if p.Match(id) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no %s matches %q: %w", what, p.Text, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%q %w (%s, %s…): give more of it", p.Text, ErrAmbiguous, found[0], found[1])
}

// FindExecutionID resolves a typed execution id.
func (s *Store) FindExecutionID(ctx context.Context, typed string) (ExecutionID, error) {
	id, err := s.findID(ctx, "executions", "execution", "act_", typed)
	return ExecutionID(id), err
}

// FindApprovalID resolves a typed approval id.
func (s *Store) FindApprovalID(ctx context.Context, typed string) (string, error) {
	return s.findID(ctx, "approvals", "approval", "apv_", typed)
}

// findID reads the candidates with SQL (a prefix seeks the primary key; a
// suffix scans it, which is what a typed tail costs) and picks one.
func (s *Store) findID(ctx context.Context, table, what, kind, typed string) (string, error) {
	p := ParsePartialID(typed)
	if p.Exact(kind) {
		return p.Text, nil
	}
	esc := func(v string) string { return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(v) }
	var q string
	var args []any
	if p.suffix != "" || strings.ContainsAny(p.Text, "…") {
		q = `SELECT id FROM ` + table + ` WHERE upper(id) LIKE upper(?) ESCAPE '\' AND upper(id) LIKE upper(?) ESCAPE '\' LIMIT 3`
		args = []any{esc(p.prefix) + "%", "%" + esc(p.suffix)}
	} else {
		q = `SELECT id FROM ` + table + ` WHERE upper(id) LIKE upper(?) ESCAPE '\' OR upper(id) LIKE upper(?) ESCAPE '\' LIMIT 3`
		args = []any{esc(p.prefix) + "%", "%" + esc(p.prefix)}
	}
	ids, err := queryAll(ctx, s, what+" ids", func(r rowScanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, q, args...)
	if err != nil {
		return "", err
	}
	return p.Pick(what, ids)
}
