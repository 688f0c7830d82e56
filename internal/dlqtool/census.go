package dlqtool

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/topics"
)

// Census is what one count of a group's DLQ found, over every master broker the name servers list.
type Census struct {
	// Letters counts the letters on the DLQ; ByBroker splits them by broker name, with a 0 for each broker
	// read that holds none (ScanResult.Brokers).
	Letters  int
	ByBroker map[string]int
	// Waiting counts the letters that wait for an operator (LetterStatus.waiting): not sent by a replay,
	// event not processed; WaitingByBroker splits them as ByBroker does.
	Waiting         int
	WaitingByBroker map[string]int
}

// TakeCensus reads group's whole DLQ on cluster (Scan, every master broker; scan's event ID options) and
// counts its letters by status (Statuses with status). A DLQ that does not exist has no letter. Errors: an
// invalid cluster or options; the scan failing or incomplete (its problems); a status lookup failing.
func TakeCensus(ctx context.Context, cluster topics.Cluster, scan ScanOptions, status StatusOptions) (Census, error) {
	if err := status.validate(); err != nil {
		return Census{}, err
	}
	scan.Filter, scan.Limit = Filter{}, 0 // a census counts every letter
	res, err := Scan(ctx, cluster, status.Group, scan)
	if errors.Is(err, ErrNoDLQ) {
		return Census{ByBroker: map[string]int{}, WaitingByBroker: map[string]int{}}, nil
	}
	if err != nil {
		return Census{}, err
	}
	if !res.Complete {
		return Census{}, fmt.Errorf("dlq: census of %s: incomplete scan: %s", res.Topic, strings.Join(res.Problems, "; "))
	}
	statuses, err := Statuses(ctx, res.Letters, status)
	if err != nil {
		return Census{}, err
	}
	c := Census{Letters: len(res.Letters), ByBroker: map[string]int{}, WaitingByBroker: map[string]int{}}
	for _, b := range res.Brokers {
		c.ByBroker[b], c.WaitingByBroker[b] = 0, 0
	}
	for i, l := range res.Letters {
		c.ByBroker[l.Broker]++
		if statuses[i].waiting() {
			c.Waiting++
			c.WaitingByBroker[l.Broker]++
		}
	}
	return c, nil
}
