package analyze

// SetMaxListed sets how many calls and executions a suspect lists, for a
// test; restore puts the default back.
func SetMaxListed(n int) (restore func()) {
	old := maxListed
	maxListed = n
	return func() { maxListed = old }
}
