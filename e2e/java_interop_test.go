package e2e

import (
	"encoding/json"
	"hash/crc32"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/body"
)

// sysFlagTransactionMask selects a message's transaction type in its SysFlag (bits 2–3); a committed
// transactional message is stored with type 2 (0x8), any other message with 0.
const sysFlagTransactionMask, sysFlagTransactionCommit int32 = 0x3 << 2, 0x2 << 2

// TestE2E_JavaProducerEveryWayOfSendingIsAppliedOnceByTheExampleConsumer runs the official Java
// client (rocketmq-client 5.3.3, interop/java-producer) against the real broker: OrderCreated events sent
// normally, as one batch, transactionally (the local transaction commits), with non-ASCII order number, SKU,
// account and event ID, compressed with zlib, LZ4 and ZSTD, and with JSON fields the consumer does not
// declare; every event twice, as new messages. The example consumer (cmd/example-consumer run, a process)
// must apply each event exactly once — one dedup row, one order, one reservation, the stock reduced once —
// count the second copies as duplicates and dead-letter nothing. A plain client consumer of its own group
// checks on the wire that the compressed bodies really were stored compressed, each with its codec's bits.
func TestE2E_JavaProducerEveryWayOfSendingIsAppliedOnceByTheExampleConsumer(t *testing.T) {
	classPath := javaProducerClassPath(t)
	w := newWorld(t, 4)
	db := shoptest.MySQL(t)
	bin := buildExample(t)
	wire := w.observeWire()
	example := w.startExample(bin)

	const copies = 2
	sent := w.runJavaProducer(classPath, copies)
	caseOf := map[string]string{} // event ID → case
	sends := map[string]int{}     // event ID → messages sent
	for _, s := range sent {
		caseOf[s.eventID] = s.kase
		sends[s.eventID]++
	}
	var cases []string
	for _, k := range caseOf {
		cases = append(cases, k)
	}
	// The cases of interop/java-producer: how a Java service sends with the official client.
	javaCases := []string{"normal", "batch", "transactional", "non-ascii", "extra-field", "zlib", "lz4", "zstd"}
	assert.ElementsMatch(t, javaCases, unique(cases), "the producer sent every case")
	for id, n := range sends {
		assert.Equal(t, copies, n, "%s sent %d times", id, copies)
	}
	events := len(caseOf)

	// Wait until every message has its final decision (a dead letter too, so that one fails below, not here).
	final := func() (decided map[string]float64, sum float64, err error) {
		decided = map[string]float64{}
		for _, outcome := range []string{"processed", "duplicate", "stale", "dead_letter", "dead_lettered"} {
			n, err := example.counter(w.ctx, w.group, w.topic, outcome)
			if err != nil {
				return nil, 0, err
			}
			decided[outcome] = n
			sum += n
		}
		return decided, sum, nil
	}
	ok := assert.Eventually(t, func() bool {
		_, sum, err := final()
		return err == nil && sum >= float64(len(sent)) && wire.count() >= len(sent)
	}, 90*time.Second, 100*time.Millisecond)
	decided, _, err := final()
	require.NoError(t, err)
	require.True(t, ok, "not every message decided: %v of %d; %d on the wire", decided, len(sent), wire.count())

	// On the wire: what the Java client stored.
	for id, kase := range caseOf {
		msgs := wire.of(id)
		require.Len(t, msgs, copies, "%s (%s) observed", id, kase)
		for _, m := range msgs {
			codec := body.CompressionName(m.SysFlag)
			switch kase {
			case "zlib":
				assert.Equal(t, "zlib", codec, "%s: SysFlag %#x", id, m.SysFlag)
				assert.NotEqual(t, int32(crc32.ChecksumIEEE(m.Body)&0x7FFFFFFF), m.BodyCRC,
					"%s: the stored body differs from the JSON the client inflated", id)
			case "lz4", "zstd":
				assert.Equal(t, kase, codec, "%s: SysFlag %#x", id, m.SysFlag)
				assert.False(t, json.Valid(m.Body), "%s: the Go client passes the %s body on as stored", id, kase)
				plain, decoded, err := body.Decode(m)
				require.NoError(t, err, id)
				assert.True(t, decoded, id)
				assert.Contains(t, string(plain), `"eventId":"`+id+`"`, "%s: the %s frame decodes to the JSON sent", id, kase)
			default:
				assert.Empty(t, codec, "%s (%s): a body under the 4 KiB default threshold is not compressed", id, kase)
			}
			if kase != "lz4" && kase != "zstd" {
				assert.Contains(t, string(m.Body), `"eventId":"`+id+`"`, "%s: the body arrives as UTF-8 JSON", id)
			}
			wantTx := int32(0)
			if kase == "transactional" {
				wantTx = sysFlagTransactionCommit
			}
			assert.Equal(t, wantTx, m.SysFlag&sysFlagTransactionMask, "%s (%s): transaction type of SysFlag %#x", id, kase, m.SysFlag)
		}
	}

	// In the database: each event once.
	var rows []struct {
		EventID string `db:"event_id"`
		N       int    `db:"n"`
	}
	require.NoError(t, db.SelectContext(w.ctx, &rows,
		`SELECT event_id, COUNT(*) AS n FROM processed_event WHERE consumer_group = ? GROUP BY event_id`, w.group))
	deduped := map[string]int{}
	for _, r := range rows {
		deduped[r.EventID] = r.N
	}
	wantOnce := map[string]int{}
	var wantOrders []string
	for id := range caseOf {
		wantOnce[id] = 1
		wantOrders = append(wantOrders, w.run+"-o-"+strings.TrimPrefix(id, w.run+"-"))
	}
	assert.Equal(t, wantOnce, deduped, "one dedup row per event, non-ASCII event IDs intact")
	var orders []string
	require.NoError(t, db.SelectContext(w.ctx, &orders, `SELECT order_no FROM orders WHERE order_no LIKE ?`, w.run+"-o-%"))
	assert.ElementsMatch(t, wantOrders, orders, "one order per event, non-ASCII order numbers intact")
	nOrders, reservations, err := shop.Effects(w.ctx, db, w.run+"-o-")
	require.NoError(t, err)
	assert.Equal(t, events, nOrders)
	assert.Equal(t, events, reservations, "one stock reservation per order")
	var stock []struct {
		Sku      string `db:"sku_id"`
		OnHand   int64  `db:"on_hand"`
		Reserved int64  `db:"reserved"`
	}
	require.NoError(t, db.SelectContext(w.ctx, &stock, `SELECT i.sku_id, i.on_hand,
		(SELECT COALESCE(SUM(o.quantity), 0) FROM orders o WHERE o.sku_id = i.sku_id) AS reserved
		FROM inventory i WHERE i.sku_id LIKE ?`, w.run+"-%"))
	require.NotEmpty(t, stock)
	for _, s := range stock {
		assert.Equal(t, -s.Reserved, s.OnHand, "stock of %s reduced once per order", s.Sku)
	}

	// The consumer's decisions: each event processed once, the second copies duplicates, no dead letter.
	assert.Equal(t, float64(events), decided["processed"], "processed once per event")
	assert.GreaterOrEqual(t, decided["duplicate"], float64(len(sent)-events), "every re-sent copy is a duplicate")
	assert.Zero(t, decided["stale"]+decided["dead_letter"]+decided["dead_lettered"], "no stale event, no dead letter: %v", decided)
	w.requireNoDeadLetters()
}

// unique returns the distinct elements of s, sorted.
func unique(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}
