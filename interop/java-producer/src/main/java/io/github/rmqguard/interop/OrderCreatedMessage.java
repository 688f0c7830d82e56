package io.github.rmqguard.interop;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.common.message.Message;

/**
 * One OrderCreated event as the Go demo sender (examples/shop) writes it: tag and EVENT_TYPE "OrderCreated",
 * KEYS the order number, the properties EVENT_ID, AGGREGATE_ID (the order number) and AGGREGATE_VERSION 1,
 * and a JSON body {eventId, orderNo, accountId, skuId, quantity, amountCents} in UTF-8, plus any extra fields.
 */
final class OrderCreatedMessage {
    static final String EVENT_TYPE = "OrderCreated";

    final String eventId;
    final String orderNo;
    private final Map<String, Object> body = new LinkedHashMap<>();

    /**
     * @param eventId the business event ID (the idempotency key)
     * @param orderNo the order number, the aggregate ID
     * @param skuId the stock-keeping unit reserved
     * @param quantity units reserved, > 0
     * @param amountCents the order total in cents, >= 0
     */
    OrderCreatedMessage(String eventId, String orderNo, String accountId, String skuId, int quantity, long amountCents) {
        this.eventId = eventId;
        this.orderNo = orderNo;
        body.put("eventId", eventId);
        body.put("orderNo", orderNo);
        body.put("accountId", accountId);
        body.put("skuId", skuId);
        body.put("quantity", quantity);
        body.put("amountCents", amountCents);
    }

    /** Adds a field the consumer's type does not declare (a producer that evolved first). */
    OrderCreatedMessage with(String field, String value) {
        body.put(field, value);
        return this;
    }

    /** A new Message of this event on topic: each call is a new message (a new message ID when sent). */
    Message toMessage(String topic) {
        Message msg = new Message(topic, EVENT_TYPE, orderNo, json().getBytes(StandardCharsets.UTF_8));
        msg.putUserProperty("EVENT_ID", eventId);
        msg.putUserProperty("EVENT_TYPE", EVENT_TYPE);
        msg.putUserProperty("AGGREGATE_ID", orderNo);
        msg.putUserProperty("AGGREGATE_VERSION", "1");
        return msg;
    }

    /** The body as a JSON object; strings are written as UTF-8 text with the escapes RFC 8259 requires. */
    String json() {
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<String, Object> e : body.entrySet()) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            quote(sb, e.getKey());
            sb.append(':');
            if (e.getValue() instanceof String s) {
                quote(sb, s);
            } else {
                sb.append(e.getValue());
            }
        }
        return sb.append('}').toString();
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        sb.append('"');
    }
}
