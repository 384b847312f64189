package gatewaylite

import "time"

// SetApprovalPoll sets how often a waiting call rereads its approval
// without a commit signal, for a test that must see the signal alone.
func SetApprovalPoll(d time.Duration) (restore func()) {
	old := approvalPoll
	approvalPoll = d
	return func() { approvalPoll = old }
}

// SetAfterAccept runs f once each call's acceptance is durable, before
// the call goes on: a test opens the window between the two.
func SetAfterAccept(f func()) (restore func()) {
	old := afterAccept
	afterAccept = f
	return func() { afterAccept = old }
}

// SetOutcomeWriteFault fails outcome writes while f returns an error.
func SetOutcomeWriteFault(f func() error) (restore func()) {
	old := failOutcomeWrite
	failOutcomeWrite = f
	return func() { failOutcomeWrite = old }
}

// SetRenewalFault fails a replica's lease renewals while f returns an
// error for it.
func SetRenewalFault(f func(replica string) error) (restore func()) {
	old := failRenewal
	failRenewal = f
	return func() { failRenewal = old }
}

// SetCloseGrace sets how long Close waits for outcomes to be written.
func SetCloseGrace(d time.Duration) (restore func()) {
	old := closeGrace
	closeGrace = d
	return func() { closeGrace = old }
}
