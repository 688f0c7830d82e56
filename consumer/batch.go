package consumer

// The path of a message, stage 5 of 9: a batch member's Batch, which its handler's middlewares share
// with the other members, is finished after the pass's last member (finishBatch). Next: orderly.go.

import (
	"fmt"

	"github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// finishBatch finishes every resource attached to b once (batch.Batch.Finish), and turns each member of
// ms that depended on one that failed into a retry carrying the error (its outcome is decided here, once,
// before dead letters, reports and metrics see it); the others get the outcomes resources set
// (SetOutcome), then the duplicates the causes resources set (SetDuplicateCause). An outcome a resource
// set is the chain's too: the member's handler ran in Finish. It returns the first failure (lost) and
// the first failure that wraps batch.ErrStoreUnavailable (outage); both nil when every resource finished.
func finishBatch(b *batch.Batch[Outcome, string], ms []message) (lost, outage error) {
	failed := map[int]bool{}
	lost, outage = b.Finish(func(i int, err error) {
		failed[i] = true
		ms[i].outcome = Retry(0, "the batch's shared transaction did not commit: "+err.Error())
		ms[i].err = fmt.Errorf("consumer: batch resource: %w", err)
	})
	decided := b.Outcomes()
	for i, o := range decided {
		if i < len(ms) && !failed[i] {
			ms[i].outcome = o
		}
	}
	for i, c := range b.Causes() {
		if i < len(ms) && ms[i].outcome.Kind == KindDuplicate && ms[i].outcome.Cause == "" && knownDuplicateCause(c) {
			ms[i].outcome.Cause = c
		}
	}
	for i := range decided {
		if i < len(ms) && !failed[i] {
			ms[i].chain = ms[i].outcome
		}
	}
	return lost, outage
}

// panicked returns the first member whose outcome a resource of b set with Cause "panic" (SetOutcome).
func panicked(b *batch.Batch[Outcome, string]) (member int, ok bool) {
	member = -1
	for i, o := range b.Outcomes() {
		if o.Cause == causelabel.Panic && (member < 0 || i < member) {
			member = i
		}
	}
	return member, member >= 0
}
