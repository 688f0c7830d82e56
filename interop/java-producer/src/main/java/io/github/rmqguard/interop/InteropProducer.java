package io.github.rmqguard.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Sends OrderCreated events to a topic with the official Java client, one case per way a Java service sends:
 * normal (one send per message), batch (send(Collection)), transactional (a TransactionMQProducer whose local
 * transaction commits), non-ASCII text (order number, SKU and event ID), zlib, LZ4 and ZSTD compressed bodies
 * (a 5.x producer with that compress type and a 16-byte threshold, so every body is compressed), and a body with
 * fields the consumer does not declare. Every event is sent {@code copies} times, each time as a new message (a new
 * message ID, the same EVENT_ID), as a producer's re-send would.
 *
 * <p>System properties: {@code namesrv} (host:port, required), {@code topic} (required), {@code run} (prefix of
 * every event ID, order number and producer group, required), {@code copies} (default 2).
 *
 * <p>Prints one line per message sent with SEND_OK: {@code SENT<TAB>case<TAB>eventId<TAB>msgId}, and
 * {@code DONE<TAB>n} at the end. Any other send result, or an error, ends the program with status 1.
 */
public final class InteropProducer {
    /** Every body longer than this is compressed by the compressing producers. */
    private static final int COMPRESS_OVER_BYTES = 16;

    private final String namesrv;
    private final String topic;
    private final String run;
    private final int copies;
    private int sent;

    private InteropProducer(String namesrv, String topic, String run, int copies) {
        this.namesrv = namesrv;
        this.topic = topic;
        this.run = run;
        this.copies = copies;
    }

    public static void main(String[] args) {
        try {
            InteropProducer p = new InteropProducer(required("namesrv"), required("topic"), required("run"),
                    Integer.parseInt(System.getProperty("copies", "2")));
            p.sendAll();
            System.out.println("DONE\t" + p.sent);
            System.exit(0);
        } catch (Exception e) {
            System.err.println("java-producer: " + e);
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static String required(String name) {
        String v = System.getProperty(name, "");
        if (v.isBlank()) {
            throw new IllegalArgumentException("system property -D" + name + " is required");
        }
        return v;
    }

    private void sendAll() throws Exception {
        withProducer("plain", p -> {}, p -> {
            sendEach(p, "normal", List.of(event("normal-1", "sku-a"), event("normal-2", "sku-b")));
            sendBatch(p, "batch", List.of(event("batch-1", "sku-a"), event("batch-2", "sku-b"), event("batch-3", "sku-c")));
            String text = "Zoë 张三 🚀";
            sendEach(p, "non-ascii", List.of(new OrderCreatedMessage(run + "-non-ascii-" + text, run + "-o-non-ascii-" + text,
                    run + "-acct-" + text, run + "-sku-" + text, 2, 1999)));
            sendEach(p, "extra-field", List.of(event("extra-field", "sku-a")
                    .with("customerName", text).with("channel", "web")));
        });
        for (CompressionType type : new CompressionType[] {CompressionType.ZLIB, CompressionType.LZ4, CompressionType.ZSTD}) {
            String name = type.name().toLowerCase();
            withProducer(name, p -> {
                p.setCompressType(type);
                p.setCompressMsgBodyOverHowmuch(COMPRESS_OVER_BYTES);
            }, p -> sendEach(p, name, List.of(event(name, "sku-a"))));
        }
        sendTransactional("transactional", List.of(event("transactional-1", "sku-a"), event("transactional-2", "sku-b")));
    }

    /** Event {@code <run>-<name>} of order {@code <run>-o-<name>} reserving one unit of {@code <run>-<sku>}. */
    private OrderCreatedMessage event(String name, String sku) {
        return new OrderCreatedMessage(run + "-" + name, run + "-o-" + name, run + "-acct", run + "-" + sku, 1, 100);
    }

    private interface Use {
        void accept(DefaultMQProducer p) throws Exception;
    }

    /** Starts a producer of group {@code <run>-java-<name>}, configured by setup, runs use and shuts it down. */
    private void withProducer(String name, Consumer<DefaultMQProducer> setup, Use use) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(run + "-java-" + name);
        configure(p, name);
        setup.accept(p);
        p.start();
        try {
            use.accept(p);
        } finally {
            p.shutdown();
        }
    }

    private void configure(DefaultMQProducer p, String name) {
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(run + "-" + name + "-" + ProcessHandle.current().pid());
        p.setSendMsgTimeout(10_000);
    }

    private void sendEach(DefaultMQProducer p, String kase, List<OrderCreatedMessage> events) throws Exception {
        for (OrderCreatedMessage e : events) {
            for (int i = 0; i < copies; i++) {
                SendResult r = p.send(e.toMessage(topic));
                record(kase, e, r.getSendStatus(), r.getMsgId());
            }
        }
    }

    /** Sends the events as one batch, copies times; a batch's result lists the message IDs joined by commas. */
    private void sendBatch(DefaultMQProducer p, String kase, List<OrderCreatedMessage> events) throws Exception {
        for (int i = 0; i < copies; i++) {
            List<Message> batch = new ArrayList<>();
            for (OrderCreatedMessage e : events) {
                batch.add(e.toMessage(topic));
            }
            SendResult r = p.send(batch);
            String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
            for (int k = 0; k < events.size(); k++) {
                record(kase, events.get(k), r.getSendStatus(), k < ids.length ? ids[k] : "?");
            }
        }
    }

    /** Sends each event copies times as a transactional message whose local transaction commits. */
    private void sendTransactional(String kase, List<OrderCreatedMessage> events) throws Exception {
        TransactionMQProducer p = new TransactionMQProducer(run + "-java-" + kase);
        configure(p, kase);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        try {
            for (OrderCreatedMessage e : events) {
                for (int i = 0; i < copies; i++) {
                    TransactionSendResult r = p.sendMessageInTransaction(e.toMessage(topic), null);
                    if (r.getLocalTransactionState() != LocalTransactionState.COMMIT_MESSAGE) {
                        throw new IllegalStateException(kase + " " + e.eventId + ": local transaction " + r.getLocalTransactionState());
                    }
                    record(kase, e, r.getSendStatus(), r.getMsgId());
                }
            }
        } finally {
            p.shutdown();
        }
    }

    private void record(String kase, OrderCreatedMessage e, SendStatus status, String msgId) {
        if (status != SendStatus.SEND_OK) {
            throw new IllegalStateException(kase + " " + e.eventId + ": " + status);
        }
        sent++;
        System.out.println("SENT\t" + kase + "\t" + e.eventId + "\t" + msgId);
    }
}
