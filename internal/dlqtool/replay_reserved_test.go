package dlqtool_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// brokerSystemProperties are the broker's own message properties (RocketMQ 5.x MessageConst: its
// system-property set plus the routing, trace, transient and DLQ-origin properties), without KEYS and
// TAGS, which a replay keeps, and RETRY_TOPIC, which it sets anew.
var brokerSystemProperties = []string{
	"TRACE_ON", "MSG_REGION", "WAIT", "DELAY", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET",
	"MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME",
	"UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
	"TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT",
	"TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "INNER_MULTI_DISPATCH",
	"TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS",
	"TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "INNER_NUM", "INNER_BASE",
	"CHECK_IMMUNITY_TIME_IN_SECONDS", "__transactionId__", "TRANSACTION_CHECK_TIMES", "PROPERTY_FORWARD_QUEUE_ID",
	"REDIRECT", "TRACE_CONTEXT", "__RMQ.TRANSIENT.TOPIC_SYS_FLAG", "__RMQ.TRANSIENT.GROUP_SYS_FLAG",
	"__STARTDELIVERTIME", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
}

func TestReservedProperty_FidelityDropsEveryBrokerSystemProperty(t *testing.T) {
	for _, p := range brokerSystemProperties {
		assert.True(t, dlqtool.ReservedProperty(p), "%s is the broker's, not the event's", p)
	}
	for _, p := range []string{"KEYS", "TAGS", "EVENT_ID", "traceparent", "tenant", "客户", "__SHARDINGKEY"} {
		assert.False(t, dlqtool.ReservedProperty(p), "%s is the event's and is kept", p)
	}
}
