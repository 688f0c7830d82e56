package dlqtool_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// fakeSender records the messages it is given; fail, when set, decides a send's error.
type fakeSender struct {
	mu   sync.Mutex
	sent []*primitive.Message
	fail func(*primitive.Message) error
}

func (s *fakeSender) SendSync(_ context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(msgs[0]); err != nil {
			return nil, err
		}
	}
	s.sent = append(s.sent, msgs...)
	return &primitive.SendResult{Status: primitive.SendOK, MsgID: fmt.Sprintf("SENT-%d", len(s.sent))}, nil
}

func (s *fakeSender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// fakeAudit is an in-memory Audit with the claim rules of MySQLAudit.
type fakeAudit struct {
	mu   sync.Mutex
	rows map[string]dlqtool.AuditRecord
}

func newFakeAudit() *fakeAudit { return &fakeAudit{rows: map[string]dlqtool.AuditRecord{}} }

func (a *fakeAudit) Lookup(_ context.Context, group, storeID string) (dlqtool.AuditRecord, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.rows[group+"/"+storeID]
	return r, ok, nil
}

func (a *fakeAudit) Claim(_ context.Context, rec dlqtool.AuditRecord, prev *dlqtool.AuditRecord) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := rec.Group + "/" + rec.StoreID
	cur, ok := a.rows[key]
	if prev == nil && ok || prev != nil && (!ok || cur.ReplayID != prev.ReplayID || cur.Status != prev.Status ||
		cur.Superseded() && !rec.Superseded()) {
		return false, nil
	}
	rec.ReplayedAt = time.Now().UTC()
	a.rows[key] = rec
	return true, nil
}

func (a *fakeAudit) Finish(_ context.Context, rec dlqtool.AuditRecord) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := rec.Group + "/" + rec.StoreID
	cur, ok := a.rows[key]
	if !ok || cur.ReplayID != rec.ReplayID {
		return fmt.Errorf("row %s not claimed by %s", key, rec.ReplayID)
	}
	cur.Status, cur.SentMsgID, cur.Error = rec.Status, rec.SentMsgID, rec.Error
	a.rows[key] = cur
	return nil
}

func (a *fakeAudit) put(rec dlqtool.AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rows[rec.Group+"/"+rec.StoreID] = rec
}

func (a *fakeAudit) get(group, storeID string) dlqtool.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rows[group+"/"+storeID]
}

// fakeProcessed holds processed "scope/event" pairs.
type fakeProcessed map[string]bool

func (p fakeProcessed) Processed(_ context.Context, scope, eventID string) (bool, error) {
	return p[scope+"/"+eventID], nil
}

// countingLimiter counts waits.
type countingLimiter struct{ waits int }

func (l *countingLimiter) Wait(context.Context) error { l.waits++; return nil }
