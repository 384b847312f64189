package gatewaylite

import "time"

// SetApprovalPoll sets how often a waiting call rereads its approval
// without a commit signal, for a test that must see the signal alone.
func SetApprovalPoll(d time.Duration) (restore func()) {
	old := approvalPoll
	approvalPoll = d
	return func() { approvalPoll = old }
}
