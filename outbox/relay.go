package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/jmoiron/sqlx"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Broker response codes of a message that no resend can deliver.
const (
	codeMessageIllegal = 13 // MESSAGE_ILLEGAL: too large, bad properties
	codeTopicNotExist  = 17 // TOPIC_NOT_EXIST
)

const (
	minBackoff = 100 * time.Millisecond
	stopGrace  = 5 * time.Second // how long a stopped relay may take to record its round's results
	// roundRows is the most rows one round claims. Each statement of a round has a cost of its own (a
	// claim, a lock, an update and a commit per round): on the project's 2-core machine MariaDB spent
	// about 40 % less CPU per row relayed in rounds of 256 than in rounds of 64, and no less in larger ones.
	roundRows = 256
	// linger is the pause before the next round after a round that did not fill up while commits kept
	// coming (at least lingerWakes during the round): the rows committed meanwhile then go in one round,
	// not in many small ones, each with its statements. After an idle spell, or when no commits came
	// during the round, the next round starts at once.
	linger      = 20 * time.Millisecond
	lingerWakes = 16
)

// sender is the part of the client's producer the relay uses.
type sender interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}

// Run relays committed rows until ctx ends: messages (when Config.NameServers are given) with SendSync,
// marked sent on SEND_OK, and the effects of Config.Effects. It wakes when a Send or Do commits, and
// every PollInterval. It returns nil when ctx ends, or the error of starting the producer.
// Several Runs, in one process or many, may share a table (see the package doc).
func (o *Outbox) Run(ctx context.Context) error {
	if len(o.cfg.NameServers) > 0 {
		opts := []producer.Option{
			producer.WithNsResolver(primitive.NewPassthroughResolver(o.cfg.NameServers)),
			producer.WithGroupName("rmqguard-outbox"),
			producer.WithInstanceName(o.inst),
			producer.WithQueueSelector(newQueueSelector()),
			producer.WithRetry(2),
		}
		if !rmq.Credentials(o.cfg.Credentials).IsZero() {
			opts = append(opts, producer.WithCredentials(rmq.Credentials(o.cfg.Credentials).Client()))
		}
		if o.cfg.Namespace != "" {
			opts = append(opts, producer.WithNamespace(o.cfg.Namespace))
		}
		p, err := rocketmq.NewProducer(opts...)
		if err != nil {
			return fmt.Errorf("outbox: relay: new producer: %w", err)
		}
		if err := p.Start(); err != nil {
			return fmt.Errorf("outbox: relay: start producer: %w", err)
		}
		defer func() { _ = p.Shutdown() }()
		return o.run(ctx, p, newRoutes(o.cfg.NameServers, o.cfg.Namespace))
	}
	return o.run(ctx, nil, nil)
}

// run is Run's loop with its sender (nil: no messages) and the router that groups a round's messages by
// queue (nil: each message alone, its queue chosen by the sender).
func (o *Outbox) run(ctx context.Context, s sender, rt router) error {
	claim, cargs := o.q.claimHeads(s != nil, effectNames(o.cfg.Effects))
	if claim == nil {
		<-ctx.Done()
		return nil
	}
	backoff := time.Duration(0)
	var reported, retryAt time.Time // retryAt: when the earliest row that failed here is due again
	// from is the lowest id the next round looks at: the lowest it claimed in a round without failures,
	// so that a busy relay does not walk again, every round, over the index entries of the rows it just
	// sent (InnoDB purges them late). Rows it passed over below (due again after a back-off, locked by
	// another relay then, retried from the CLI) are found by a scan from 0 every PollInterval.
	from, scanned := int64(0), time.Now()
	for {
		if o.cfg.Observer != nil && time.Since(reported) >= o.cfg.PollInterval {
			o.reportBacklog(ctx)
			reported = time.Now()
		}
		if time.Since(scanned) >= o.cfg.PollInterval {
			from, scanned = 0, time.Now()
		}
		if !retryAt.IsZero() && !time.Now().Before(retryAt) {
			from, retryAt = 0, time.Time{} // this round tries it
		}
		wakes := o.wakes.Load()
		done, brokerDown, retryIn, first, err := o.relayOnce(ctx, s, rt, claim, cargs, from)
		from = first
		if at := time.Now().Add(retryIn); retryIn > 0 && (retryAt.IsZero() || at.Before(retryAt)) {
			retryAt = at
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil || brokerDown:
			if err != nil {
				o.cfg.Logger.Warn("outbox relay: round failed; backing off", zap.Error(err), zap.Duration("backoff", backoff))
			}
			backoff = min(max(2*backoff, minBackoff), o.cfg.MaxBackoff)
		case done > 0:
			backoff = 0
			if done < roundRows && o.wakes.Load()-wakes >= lingerWakes {
				if err := sleep(ctx, linger); err != nil {
					return nil
				}
			}
			continue // more may be due
		default:
			backoff = 0
		}
		wait := o.cfg.PollInterval
		if backoff > 0 {
			wait = backoff
		} else if !retryAt.IsZero() {
			wait = min(wait, time.Until(retryAt)) // a failed effect's row is due again then
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-o.wake:
			t.Stop()
			if backoff > 0 { // a commit does not cut a back-off short: the broker (or the database) is still down
				if err := sleep(ctx, backoff); err != nil {
					return nil
				}
			}
		case <-t.C:
		}
	}
}

// relayOnce claims the due head rows (the oldest pending row of each sharding key), sends or runs each,
// and records the results, in one transaction holding the rows' locks (FOR UPDATE SKIP LOCKED). It
// returns how many rows it finished (sent, done or parked), whether a message could not be sent (the
// broker's trouble: the relay backs off as a whole; a failed effect waits on its own row), the shortest
// wait of a row that failed, and the lowest id it claimed when no message failed (else 0). It looks at
// rows from id from on. When ctx ends mid-round, the results obtained so far are still recorded (within
// stopGrace): a row with SEND_OK is not sent again by the next start.
func (o *Outbox) relayOnce(ctx context.Context, s sender, rt router, claim func(int64, int) string, cargs []any, from int64) (done int, brokerDown bool, retryIn time.Duration, first int64, err error) {
	done, brokerDown, err = o.relayRound(ctx, s, rt, claim, cargs, from, &first, &retryIn)
	if brokerDown || err != nil {
		first = 0
	}
	return done, brokerDown, retryIn, first, err
}

// relayRound is relayOnce's round; it sets *first to the lowest id it claimed, *retryIn to the shortest
// wait of a row that failed.
func (o *Outbox) relayRound(ctx context.Context, s sender, rt router, claim func(int64, int) string, cargs []any, from int64, first *int64, retryIn *time.Duration) (done int, failed bool, err error) {
	var ids []int64
	if err := o.db.SelectContext(ctx, &ids, claim(from, roundRows), cargs...); err != nil {
		return 0, false, fmt.Errorf("outbox: find due rows: %w", err)
	}
	if len(ids) == 0 {
		return 0, false, nil
	}
	*first = ids[0] // the claim orders by id
	// READ COMMITTED: the claim and the updates lock the claimed rows only, never a gap of an index, which
	// would hold back the handlers' INSERTs of new rows until this round commits.
	// The transaction outlives ctx by stopGrace at most: database/sql would roll it back at once.
	tctx, tcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer tcancel()
	stopAfter := context.AfterFunc(ctx, func() { time.AfterFunc(stopGrace, tcancel) })
	defer stopAfter()
	tx, err := o.db.BeginTxx(tctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, false, fmt.Errorf("outbox: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var lock strings.Builder
	lock.WriteString(o.q.lock)
	appendIDs(&lock, ids)
	lock.WriteString(lockTail)
	var rows []row
	if err := tx.SelectContext(tctx, &rows, lock.String()); err != nil {
		return 0, false, fmt.Errorf("outbox: claim rows: %w", err)
	}
	shutdown := false
	var sent []attempted
	for a := range o.attemptAll(ctx, s, rt, rows, plan(ctx, rt, rows)) {
		r := rows[a.i]
		if shutdown || a.skipped || a.res.err != nil && ctx.Err() != nil {
			continue // skipped: left as it is; cut by the stop (not the row's failure): stays pending, no attempt spent
		}
		res := a.res
		o.observe(r, res)
		switch {
		case res.err == nil:
			sent = append(sent, a)
			done++
		case res.park:
			_, err = tx.ExecContext(tctx, o.q.markParked, cut(res.err.Error(), 1024), r.ID)
			o.cfg.Logger.Error("outbox: row parked; `rmqguard outbox retry` sends it again after the fix",
				zap.Int64("id", r.ID), zap.String("kind", r.Kind), zap.String("name", r.Name),
				zap.String("event_id", r.EventID), zap.Error(res.err))
			done++
		default:
			failed = failed || r.Kind == outboxsql.KindMessage
			wait := o.rowBackoff(r.Attempts + 1)
			if *retryIn == 0 || wait < *retryIn {
				*retryIn = wait
			}
			_, err = tx.ExecContext(tctx, o.q.markFailed, cut(res.err.Error(), 1024), wait.Microseconds(), r.ID)
			o.cfg.Logger.Warn("outbox: attempt failed; will try again", zap.Int64("id", r.ID), zap.String("kind", r.Kind),
				zap.String("name", r.Name), zap.Int("attempt", r.Attempts+1), zap.Duration("wait", wait), zap.Error(res.err))
		}
		if err != nil {
			shutdown = true // drain the attempts still running, record nothing more
			err = fmt.Errorf("outbox: record result of row %d: %w", r.ID, err)
		}
	}
	if err != nil {
		return 0, failed, err
	}
	if err := o.markSent(tctx, tx, rows, sent); err != nil {
		return 0, failed, err
	}
	if err := tx.Commit(); err != nil {
		return 0, failed, fmt.Errorf("outbox: commit results: %w", err)
	}
	return done, failed, nil
}

// observe tells the Observer the result of one attempt on r.
func (o *Outbox) observe(r row, res result) {
	if o.cfg.Observer == nil {
		return
	}
	if r.Kind == outboxsql.KindEffect {
		o.cfg.Observer.EffectRan(r.Name, res.err == nil)
	} else {
		o.cfg.Observer.MessageSent(r.Topic, res.err == nil)
	}
	if res.park {
		o.cfg.Observer.RowParked(r.Kind)
	}
}

// reportBacklog reads the table's backlog for the Observer; a failed read is logged and skipped.
func (o *Outbox) reportBacklog(ctx context.Context) {
	var b struct {
		Pending int   `db:"pending"`
		Parked  int   `db:"parked"`
		Oldest  int64 `db:"oldest"`
	}
	if err := o.db.GetContext(ctx, &b, o.q.backlog); err != nil {
		if ctx.Err() == nil {
			o.cfg.Logger.Warn("outbox: backlog read failed", zap.Error(err))
		}
		return
	}
	o.cfg.Observer.Backlog(b.Pending, b.Parked, time.Duration(b.Oldest)*time.Microsecond)
}

// parallel is how many claimed rows one round sends or runs at once. The rows of a round are heads of
// distinct sharding keys, so they need no order among them; a key's next row is claimed only after this
// round has committed.
const parallel = 16

// attempted is the outcome of rows[i], known at at; skipped: not tried, because a message failed on the
// broker first.
type attempted struct {
	i       int
	res     result
	at      time.Time
	skipped bool
}

// markSent marks the rows of sent as sent in one statement, each with its own sent_at: the database's
// clock now minus how long ago (this process's monotonic clock) its SEND_OK came (one SEND_OK for the
// rows of a batch).
func (o *Outbox) markSent(ctx context.Context, tx *sqlx.Tx, rows []row, sent []attempted) error {
	if len(sent) == 0 {
		return nil
	}
	byAt := map[time.Time][]int64{}
	var ats []time.Time
	all := make([]int64, 0, len(sent))
	for _, a := range sent {
		if _, ok := byAt[a.at]; !ok {
			ats = append(ats, a.at)
		}
		byAt[a.at] = append(byAt[a.at], rows[a.i].ID)
		all = append(all, rows[a.i].ID)
	}
	var b strings.Builder
	b.WriteString(o.q.markSentHead)
	now := time.Now()
	for _, at := range ats {
		b.WriteString(" WHEN id IN (")
		appendIDs(&b, byAt[at])
		b.WriteString(") THEN ")
		b.WriteString(strconv.FormatInt(now.Sub(at).Microseconds(), 10))
	}
	b.WriteString(" ELSE 0 END MICROSECOND WHERE id IN (")
	appendIDs(&b, all)
	b.WriteString(")")
	if _, err := tx.ExecContext(ctx, b.String()); err != nil {
		return fmt.Errorf("outbox: mark %d rows sent: %w", len(sent), err)
	}
	return nil
}

// attemptAll tries every unit of rows (plan), up to parallel at once (the first message unit alone,
// before the others), and yields each row's outcome as it comes, on the caller's goroutine (which
// records it in the round's transaction); after a message fails on the broker, the messages not yet
// started are skipped (the next round backs off). It returns after every attempt has returned, so no
// goroutine outlives it.
func (o *Outbox) attemptAll(ctx context.Context, s sender, rt router, rows []row, units []unit) func(yield func(attempted) bool) {
	return func(yield func(attempted) bool) {
		out := make(chan attempted, len(rows))
		var brokerDown atomic.Bool
		go func() {
			sem := make(chan struct{}, parallel)
			probed := false
			for _, u := range units {
				sem <- struct{}{}
				message := rows[u.rows[0]].Kind == outboxsql.KindMessage
				// The round's first message unit goes alone: when the broker is down, one send fails per round.
				var probe chan struct{}
				if message && !probed {
					probed, probe = true, make(chan struct{})
				}
				go func() {
					defer func() { <-sem }()
					if probe != nil {
						defer close(probe)
					}
					if !message {
						res := o.attempt(ctx, s, rows[u.rows[0]], nil)
						out <- attempted{i: u.rows[0], res: res, at: time.Now()}
						return
					}
					o.sendUnit(ctx, s, rt, rows, u, &brokerDown, out)
				}()
				if probe != nil {
					<-probe
				}
			}
		}()
		stopped := false
		for range rows {
			a := <-out
			if !stopped && !yield(a) {
				stopped = true // keep receiving: every attempt must have returned
			}
		}
	}
}

// sendUnit sends the message rows of u and puts one outcome per row on out. Several rows go in one
// SendSync (a batch to u.queue): SEND_OK sends them all. A batch that fails (the broker refused it, or did
// not answer) is tried again row by row, so that a row the broker refuses is parked alone and the others
// go out; a row's own failure to send marks the broker down, and the rows after it are skipped.
func (o *Outbox) sendUnit(ctx context.Context, s sender, rt router, rows []row, u unit, brokerDown *atomic.Bool, out chan<- attempted) {
	one := u.rows
	if len(u.rows) > 1 && !brokerDown.Load() {
		var msgs []*primitive.Message
		var in []int
		for _, i := range u.rows {
			m, err := rows[i].message()
			if err != nil {
				out <- attempted{i: i, res: result{err: err, park: true}, at: time.Now()}
				continue
			}
			m.Queue = u.queue
			m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, primitive.CreateUniqID())
			msgs, in = append(msgs, m), append(in, i)
		}
		if len(msgs) == 0 {
			return
		}
		res, err := s.SendSync(ctx, msgs...)
		if err == nil && res.Status == primitive.SendOK {
			at := time.Now()
			for _, i := range in {
				out <- attempted{i: i, at: at}
			}
			return
		}
		if ctx.Err() != nil { // cut by the stop: every row stays pending
			for _, i := range in {
				out <- attempted{i: i, res: result{err: ctx.Err()}, at: time.Now()}
			}
			return
		}
		rt.forget(u.queue.Topic)
		one = in
	}
	for _, i := range one {
		if brokerDown.Load() {
			out <- attempted{i: i, skipped: true}
			continue
		}
		res := o.attempt(ctx, s, rows[i], u.queue)
		if res.err != nil && !res.park {
			brokerDown.Store(true)
		}
		out <- attempted{i: i, res: res, at: time.Now()}
	}
}

// result is the outcome of one attempt: nil err is success; park: never to be tried again by itself.
type result struct {
	err  error
	park bool
}

// attempt sends message r (to queue q when not nil) or runs effect r once.
func (o *Outbox) attempt(ctx context.Context, s sender, r row, q *primitive.MessageQueue) result {
	if r.Kind == outboxsql.KindEffect {
		fn := o.cfg.Effects[r.Name]
		ectx, cancel := context.WithTimeout(ctx, o.cfg.EffectTimeout)
		defer cancel()
		err := runEffect(ectx, fn, Effect{Name: r.Name, IdempotencyKey: r.EventID, Payload: r.Body, Attempt: r.Attempts + 1})
		if err != nil && r.Attempts+1 >= o.cfg.MaxEffectAttempts {
			return result{err: fmt.Errorf("effect %s: %d attempts failed, the last: %w", r.Name, r.Attempts+1, err), park: true}
		}
		return result{err: err}
	}
	msg, err := r.message()
	if err != nil {
		return result{err: err, park: true}
	}
	msg.Queue = q
	res, err := s.SendSync(ctx, msg)
	if err == nil && res.Status == primitive.SendOK {
		return result{}
	}
	if err == nil {
		return result{err: fmt.Errorf("send to %s: status %d", r.Topic, res.Status)}
	}
	return result{err: fmt.Errorf("send to %s: %w", r.Topic, err), park: o.unsendable(ctx, r.Topic, err)}
}

// unsendable tells whether no resend can deliver: the broker refused the message itself, or the name
// servers answer that the topic does not exist while they list a master broker. Anything else (no
// answer) is the broker's trouble: a stopped broker unregisters, and its topics' routes go with it, so a
// missing route with no master registered is a broker down, not a topic missing.
func (o *Outbox) unsendable(ctx context.Context, topic string, err error) bool {
	var be primitive.MQBrokerErr
	var bp *primitive.MQBrokerErr
	if errors.As(err, &be) && (be.ResponseCode == codeMessageIllegal || be.ResponseCode == codeTopicNotExist) ||
		errors.As(err, &bp) && (bp.ResponseCode == codeMessageIllegal || bp.ResponseCode == codeTopicNotExist) {
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, rerr := rmq.TopicRoute(rctx, o.cfg.NameServers, rmq.InNamespace(o.cfg.Namespace, topic)); !errors.Is(rerr, rmq.ErrTopicNotExist) {
		return false
	}
	masters, merr := rmq.Masters(rctx, o.cfg.NameServers)
	return merr == nil && len(masters) > 0
}

// runEffect calls fn, turning a panic into an error. It returns when ctx ends (EffectTimeout or the
// relay's stop) even if fn ignores ctx: the row is tried again later, and the abandoned call may still
// finish (the receiver dedups by IdempotencyKey).
func runEffect(ctx context.Context, fn EffectFunc, e Effect) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("effect %s panicked: %v", e.Name, r)
			}
		}()
		done <- fn(ctx, e)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("effect %s: abandoned, still running when its context ended: %w", e.Name, ctx.Err())
	}
}

// rowBackoff is the wait before attempt n+1 of a row: 100 ms doubled per attempt, capped at MaxBackoff.
func (o *Outbox) rowBackoff(n int) time.Duration {
	d := minBackoff
	for i := 1; i < n && d < o.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, o.cfg.MaxBackoff)
}

// message builds the RocketMQ message of r: EVENT_ID property and first key = r.EventID, the sharding key.
// A body above maxMessageSize is an error: no broker with the default limit takes it.
func (r row) message() (*primitive.Message, error) {
	if len(r.Body) > maxMessageSize {
		return nil, fmt.Errorf("row %d: body of %d bytes is above the broker's default maxMessageSize (%d bytes)", r.ID, len(r.Body), maxMessageSize)
	}
	msg := primitive.NewMessage(r.Topic, r.Body)
	if r.Properties.Valid && r.Properties.String != "" {
		var props map[string]string
		if err := json.Unmarshal([]byte(r.Properties.String), &props); err != nil {
			return nil, fmt.Errorf("properties of row %d: %w", r.ID, err)
		}
		msg.WithProperties(props)
	}
	if r.Tag != "" {
		msg.WithTag(r.Tag)
	}
	keys := []string{r.EventID}
	if r.Keys != "" {
		keys = append(keys, strings.Fields(r.Keys)...)
	}
	msg.WithKeys(keys)
	msg.WithProperty("EVENT_ID", r.EventID)
	msg.WithShardingKey(r.ShardingKey)
	return msg, nil
}

func effectNames(m map[string]EffectFunc) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	return names
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
