package dlqtool

import (
	"context"
	"fmt"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// decide returns the letter's result when it must not be sent (Outcome set), else a result with only
// Letter and Topic set, and the audit row found for it (nil if none) for the claim. The order: a letter
// that cannot be keyed or routed; one met twice in this run; the audit (already replayed, uncertain;
// a "failed" row is retried); the dedup scope (already processed).
func (r *replayer) decide(ctx context.Context, l Letter) (LetterResult, *AuditRecord) {
	res := LetterResult{Letter: l}
	switch {
	case l.Group != "" && rmq.WithoutNamespace(r.opts.Namespace, l.Group) != r.opts.Group:
		return failed(res, fmt.Errorf("%w: %q, not %q", errOtherGroup, l.Group, r.opts.Group)), nil
	case l.StoreID == "":
		return failed(res, fmt.Errorf("%w (message %s)", errNoStoreID, l.MsgID)), nil
	}
	res.Topic = r.opts.TargetTopic
	if res.Topic == "" {
		if !routableTopic(l.OriginTopic) {
			res.Outcome, res.Detail = ReplaySkippedNoOrigin, "no origin topic (RETRY_TOPIC); pass --target-topic"
			return res, nil
		}
		res.Topic = rmq.WithoutNamespace(r.opts.Namespace, l.OriginTopic)
	}
	if r.seen[l.StoreID] {
		res.Outcome, res.Detail = ReplaySkippedReplayed, "listed twice in this run's input"
		return res, nil
	}
	r.seen[l.StoreID] = true
	prev, found, err := r.opts.Audit.Lookup(ctx, r.auditGroup(), l.StoreID)
	if err != nil {
		return failed(res, fmt.Errorf("dlq: replay %s: audit lookup: %w", l.StoreID, err)), nil
	}
	if found {
		if skipped, ok := r.skipForAudit(res, prev); ok {
			return skipped, nil
		}
	}
	if l.EventID == "" {
		res.Detail = "no event ID, so the already-processed check was not done"
	} else {
		done, err := r.opts.Processed.Processed(ctx, r.opts.Scope, l.EventID)
		if err != nil {
			return failed(res, fmt.Errorf("dlq: replay %s: processed check: %w", l.StoreID, err)), nil
		}
		if done {
			res.Outcome = ReplaySkippedProcessed
			res.Detail = fmt.Sprintf("event %s already processed by dedup scope %s", l.EventID, r.opts.Scope)
			return res, nil
		}
	}
	if !found {
		return res, nil
	}
	return res, &prev
}

// skipForAudit returns the skip a found audit row calls for; ok is false for a "failed" row, which is
// retried, and for any row with Force, except that an edited row is never replayed as it is, and edited
// again only after its send failed, or with Force while uncertain ("sending").
func (r *replayer) skipForAudit(res LetterResult, prev AuditRecord) (LetterResult, bool) {
	if prev.Superseded() {
		if r.edited != nil && (prev.Status == AuditFailed || prev.Status == AuditSending && r.opts.Force) {
			return res, false
		}
		res.Outcome, res.Detail = ReplaySkippedSuperseded, supersededDetail(prev, r.edited != nil)
		return res, true
	}
	if r.opts.Force {
		return res, false
	}
	switch prev.Status {
	case AuditSent:
		res.Outcome = ReplaySkippedReplayed
		res.Detail = fmt.Sprintf("sent by replay %s at %s as %s (--force sends again)", prev.ReplayID, formatAt(prev.ReplayedAt), prev.SentMsgID)
		return res, true
	case AuditSending:
		res.Outcome = ReplaySkippedUncertain
		res.Detail = fmt.Sprintf("replay %s claimed it at %s and has not recorded the send (it is running, or stopped): it may have been sent; check, then --force", prev.ReplayID, formatAt(prev.ReplayedAt))
		return res, true
	case AuditFailed:
		return res, false
	}
	res.Outcome, res.Err = ReplayFailed, fmt.Errorf("dlq: replay %s: audit row has unknown status %q", prev.StoreID, prev.Status)
	return res, true
}
