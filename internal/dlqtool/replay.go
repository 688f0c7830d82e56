package dlqtool

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/google/uuid"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// ReplayOutcome is what a replay did with one letter.
type ReplayOutcome string

// The outcomes of a letter. Only ReplaySent sent a message; ReplayWouldSend is the dry run's "would send".
const (
	// ReplaySent: the broker stored the replay (SEND_OK, or a stored-but-late-flush status, named in Detail)
	// and the audit row says "sent".
	ReplaySent ReplayOutcome = "sent"
	// ReplayWouldSend: a dry run found nothing against sending it.
	ReplayWouldSend ReplayOutcome = "would-send"
	// ReplaySkippedReplayed: the audit says an earlier (or a concurrent) replay sent it; --force sends again.
	ReplaySkippedReplayed ReplayOutcome = "skipped-already-replayed"
	// ReplaySkippedUncertain: an earlier replay claimed it but never recorded the send's result (it stopped
	// between claim and send, or its send outcome was lost): it may have been sent. --force sends again.
	ReplaySkippedUncertain ReplayOutcome = "skipped-uncertain"
	// ReplaySkippedProcessed: the group's dedup scope already processed its event ID; the consumer would
	// treat a replay as a duplicate (S5). --force does not change this: a send could have no effect.
	ReplaySkippedProcessed ReplayOutcome = "skipped-already-processed"
	// ReplaySkippedNoOrigin: the letter names no usable origin topic (RETRY_TOPIC) and no TargetTopic was given.
	ReplaySkippedNoOrigin ReplayOutcome = "skipped-no-origin"
	// ReplaySkippedSuperseded: an edited copy replaced the letter (ReplayEdited), so it is never replayed as
	// it is, also with --force; nor edited again unless that edit's send failed (Detail says what to do).
	ReplaySkippedSuperseded ReplayOutcome = "skipped-superseded"
	// ReplayFailed: a check, the claim or the send failed (Err says which). A later run retries it, except
	// after a send that may have reached the broker (a timeout): its row stays "sending" (uncertain).
	ReplayFailed ReplayOutcome = "failed"
)

// Errors of single letters (in LetterResult.Err, wrapped).
var (
	// errOtherGroup: the letter belongs to another consumer group's DLQ than ReplayOptions.Group.
	errOtherGroup = errors.New("dlq: replay: letter of another consumer group")
	// errNoStoreID: the letter has no StoreID, so the audit cannot key it.
	errNoStoreID = errors.New("dlq: replay: letter has no store ID")
	// errReplayNotStored: the send returned no result, or a status that does not mean the broker stored it.
	errReplayNotStored = errors.New("dlq: replay: not stored by the broker")
)

// LetterResult is the outcome of one letter.
type LetterResult struct {
	// Letter is the letter as selected.
	Letter Letter
	// Outcome is what was done.
	Outcome ReplayOutcome
	// Topic is the topic the handler sees (the origin topic, or TargetTopic); "" when there is none.
	Topic string
	// SentMsgID is the replay's message ID when it was sent.
	SentMsgID string
	// Detail explains a skip in words, e.g. "sent by replay <id> at <time> as <msg id>".
	Detail string
	// Err is the error of a failed letter; for a sent one, an audit update that failed (Summary.Unrecorded).
	Err error
}

// ReplaySummary counts the outcomes. Selected = Sent + WouldSend + Skipped* + Failed.
type ReplaySummary struct {
	// Selected is the number of input letters.
	Selected int
	// Sent counts ReplaySent, WouldSend ReplayWouldSend (dry run).
	Sent, WouldSend int
	// SkippedReplayed, SkippedUncertain, SkippedProcessed, SkippedNoOrigin and SkippedSuperseded count the
	// ReplaySkipped* outcomes.
	SkippedReplayed, SkippedUncertain, SkippedProcessed, SkippedNoOrigin, SkippedSuperseded int
	// Failed counts ReplayFailed.
	Failed int
	// Unrecorded counts sent letters whose audit row could not be set to "sent" (it stays "sending").
	Unrecorded int
}

// ReplayReport is the result of Replay: one LetterResult per input letter, in input order.
type ReplayReport struct {
	// ReplayID identifies this run (RMQGUARD_REPLAY_ID on every message it sent, replay_id in the audit).
	ReplayID string
	// Results has one entry per input letter, in input order.
	Results []LetterResult
	// Summary counts Results by outcome.
	Summary ReplaySummary
}

// add records r and counts it.
func (rep *ReplayReport) add(r LetterResult) {
	rep.Results = append(rep.Results, r)
	s := &rep.Summary
	s.Selected++
	switch r.Outcome {
	case ReplaySent:
		s.Sent++
		if r.Err != nil {
			s.Unrecorded++
		}
	case ReplayWouldSend:
		s.WouldSend++
	case ReplaySkippedReplayed:
		s.SkippedReplayed++
	case ReplaySkippedUncertain:
		s.SkippedUncertain++
	case ReplaySkippedProcessed:
		s.SkippedProcessed++
	case ReplaySkippedNoOrigin:
		s.SkippedNoOrigin++
	case ReplaySkippedSuperseded:
		s.SkippedSuperseded++
	default:
		s.Failed++
	}
}

// Replay replays letters (from Scan or ReadExportFile) of opts.Group's DLQ, one at a time in order: for each it
// decides (replayDecide), and unless DryRun claims an audit row, sends ReplayMessage through opts.Sender
// and records the result. It returns an error only for invalid options; a letter's own failure is in its
// LetterResult. When ctx ends, the letters not yet handled are reported as failed with ctx's error.
func Replay(ctx context.Context, letters []Letter, opts ReplayOptions) (ReplayReport, error) {
	if err := opts.validate(); err != nil {
		return ReplayReport{}, err
	}
	r := replayer{opts: opts.withDefaults(), seen: map[string]bool{}}
	rep := ReplayReport{ReplayID: r.opts.ReplayID}
	for i, l := range letters {
		var res LetterResult
		if err := ctx.Err(); err != nil {
			res = LetterResult{Letter: l, Outcome: ReplayFailed, Err: fmt.Errorf("dlq: replay: not attempted: %w", err)}
		} else {
			res = r.one(ctx, l)
		}
		rep.add(res)
		if r.opts.Progress != nil {
			r.opts.Progress(i+1, len(letters), res)
		}
	}
	return rep, nil
}

// replayer carries one run's options and the store IDs it has met; edited is the body of an edited
// replay (ReplayEdited), nil for Replay.
type replayer struct {
	opts   ReplayOptions
	seen   map[string]bool
	edited []byte
}

// auditGroup is the group as the audit keys it: the broker's name, so that one group name in two
// namespaces has two histories.
func (r *replayer) auditGroup() string { return rmq.InNamespace(r.opts.Namespace, r.opts.Group) }

// one decides, sends and records one letter.
func (r *replayer) one(ctx context.Context, l Letter) LetterResult {
	res, prev := r.decide(ctx, l)
	if res.Outcome != "" || r.opts.DryRun {
		if res.Outcome == "" {
			res.Outcome = ReplayWouldSend
		}
		return res
	}
	return r.send(ctx, res, prev)
}

// send claims the audit row (prev is the row found, nil if none), sends the replay and records the result.
func (r *replayer) send(ctx context.Context, res LetterResult, prev *AuditRecord) LetterResult {
	l := res.Letter
	if r.opts.Limiter != nil {
		if err := r.opts.Limiter.Wait(ctx); err != nil {
			return failed(res, fmt.Errorf("dlq: replay %s: rate limit: %w", l.StoreID, err))
		}
	}
	at := r.opts.Now()
	claim := AuditRecord{Group: r.auditGroup(), StoreID: l.StoreID, ReplayID: r.opts.ReplayID, DLQMsgID: l.MsgID,
		EventID: l.EventID, OriginTopic: l.OriginTopic, TargetTopic: res.Topic, Status: AuditSending, ReplayedBy: r.opts.Operator}
	if r.edited != nil {
		claim.EditedBy, claim.OriginalBody, claim.EditedBody = r.opts.Operator, l.Body, r.edited
	}
	won, err := r.opts.Audit.Claim(ctx, claim, prev)
	if err != nil {
		return failed(res, fmt.Errorf("dlq: replay %s: claim audit row: %w", l.StoreID, err))
	}
	if !won {
		return r.lostClaim(ctx, res)
	}
	msg := ReplayMessage(r.toSend(l), r.opts.Namespace, r.opts.Group, res.Topic, Provenance{ReplayID: r.opts.ReplayID, Operator: r.opts.Operator, At: at})
	sent, sendErr := r.opts.Sender.SendSync(ctx, msg)
	if sendErr == nil && (sent == nil || !storedStatus(sent.Status)) {
		sendErr = fmt.Errorf("%w: status %v", errReplayNotStored, sendStatus(sent))
	}
	// The audit is written even when ctx ended during the send: a row left "sending" for a letter whose
	// outcome is known would make the next run skip it as uncertain.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if sendErr != nil {
		sendErr = fmt.Errorf("dlq: replay %s: send to %s: %w", l.StoreID, msg.Topic, sendErr)
		claim.Status, claim.Error = AuditFailed, sendErr.Error()
		if mayHaveBeenStored(sendErr) {
			// The request may have reached the broker: the row stays "sending" (uncertain), so that a later
			// run does not send it again unless --force.
			claim.Status = AuditSending
		}
		if err := r.opts.Audit.Finish(fctx, claim); err != nil {
			sendErr = errors.Join(sendErr, fmt.Errorf("dlq: replay %s: record failure: %w", l.StoreID, err))
		}
		return failed(res, sendErr)
	}
	res.Outcome, res.SentMsgID = ReplaySent, sent.MsgID
	if sent.Status != primitive.SendOK {
		res.Detail = joinDetail(res.Detail, fmt.Sprintf("stored, but the broker answered status %v (flush or replication late)", sendStatus(sent)))
	}
	claim.Status, claim.SentMsgID = AuditSent, sent.MsgID
	if err := r.opts.Audit.Finish(fctx, claim); err != nil {
		res.Err = fmt.Errorf("dlq: replay %s: sent as %s, but the audit row stays %q: %w", l.StoreID, sent.MsgID, AuditSending, err)
	}
	return res
}

// lostClaim is the result of a claim lost to a concurrent run, which claimed the row between this run's
// lookup and claim: superseded when that run is an edit's, else uncertain (its send may still fail).
func (r *replayer) lostClaim(ctx context.Context, res LetterResult) LetterResult {
	if cur, found, err := r.opts.Audit.Lookup(ctx, r.auditGroup(), res.Letter.StoreID); err == nil && found && cur.Superseded() {
		res.Outcome = ReplaySkippedSuperseded
		res.Detail = fmt.Sprintf("superseded: edited at the same time by %s (replay %s), whose claim came first and who sends it (dlq show tells how it went)", cur.EditedBy, cur.ReplayID)
		return res
	}
	res.Outcome, res.Detail = ReplaySkippedUncertain, "claimed by a concurrent replay, which may still fail to send it: check, then --force"
	return res
}

// joinDetail joins two Detail texts with "; ", either of which may be empty.
func joinDetail(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// finishTimeout bounds the audit update after a send, which runs even when the run's context has ended.
const finishTimeout = 10 * time.Second

// storedStatus reports whether a send status means the broker stored the message: SEND_OK, and the
// statuses of a master that stored it but whose disk flush or replication to a slave is late.
func storedStatus(st primitive.SendStatus) bool {
	switch st {
	case primitive.SendOK, primitive.SendFlushDiskTimeout, primitive.SendFlushSlaveTimeout, primitive.SendSlaveNotAvailable:
		return true
	}
	return false
}

// mayHaveBeenStored reports whether a send error leaves open that the broker stored the message: the
// request was written but no answer came (the client's send timeout, errors.ErrRequestTimeout, which is
// also what a cancelled context gives), or the context ended.
func mayHaveBeenStored(err error) bool {
	return errors.Is(err, rmqerrors.ErrRequestTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled)
}

func failed(res LetterResult, err error) LetterResult {
	res.Outcome, res.Err = ReplayFailed, err
	return res
}

func sendStatus(sent *primitive.SendResult) string {
	if sent == nil {
		return "no result"
	}
	return strconv.Itoa(int(sent.Status))
}

// formatAt formats an audit time for a Detail.
func formatAt(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// newReplayID returns a new replay run ID.
func newReplayID() string { return uuid.NewString() }
