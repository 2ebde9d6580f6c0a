package io.memstream.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.springframework.kafka.requestreply.ReplyingKafkaTemplate;
import org.springframework.kafka.requestreply.RequestReplyFuture;

/**
 * The recipe for hedged memstream queries with a plain {@link ReplyingKafkaTemplate}
 * (docs/events.md, "Deadlines and hedged queries").
 *
 * <p>The request goes out with {@code sendAndReceive}. If no reply has come after
 * {@code hedgeAfter}, the same record — the same key, value, timestamp and headers,
 * so the same {@code kafka_correlationId} and reply address, which the template set
 * on it — is sent once more with the template's plain {@code send}, to a partition
 * held by another member of memstream's query group. The one reply future completes
 * with whichever reply arrives first; a second reply is a late arrival the template
 * drops ({@code setSharedReplyTopic(true)} keeps that at debug level). The copy keeps
 * the first one's timestamp, so memstream drops both once the caller has given up.
 */
public final class HedgedQueries<V, R> {

    private final ReplyingKafkaTemplate<String, V, R> template;
    private final AdminClient admin;
    private final String queryGroup;
    private final Duration hedgeAfter;
    private int hedgesSent;

    public HedgedQueries(ReplyingKafkaTemplate<String, V, R> template, String servers,
                         String queryGroup, Duration hedgeAfter) {
        this.template = template;
        this.admin = AdminClient.create(Map.of("bootstrap.servers", servers));
        this.queryGroup = queryGroup;
        this.hedgeAfter = hedgeAfter;
    }

    public int hedgesSent() {
        return hedgesSent;
    }

    /** Ask; the first reply within {@code deadline}, or a TimeoutException. */
    public ConsumerRecord<String, R> ask(ProducerRecord<String, V> record, Duration deadline)
            throws InterruptedException, ExecutionException, TimeoutException {
        long start = System.nanoTime();
        RequestReplyFuture<String, V, R> reply = template.sendAndReceive(record, deadline);
        RecordMetadata sent = reply.getSendFuture().get(deadline.toMillis(), TimeUnit.MILLISECONDS)
                .getRecordMetadata();
        try {
            return reply.get(hedgeAfter.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException notYet) {
            int partitions = template.partitionsFor(record.topic()).size();
            Integer other = otherMembersPartition(record.topic(), sent.partition(), partitions);
            if (other != null) {
                template.send(new ProducerRecord<>(record.topic(), other, sent.timestamp(),
                        record.key(), record.value(), new RecordHeaders(record.headers().toArray())));
                hedgesSent++;
            }
            long left = deadline.toNanos() - (System.nanoTime() - start);
            return reply.get(Math.max(left, 0), TimeUnit.NANOSECONDS);
        }
    }

    /**
     * A partition of {@code topic} held by another member of the query group than the
     * one holding {@code first}; the next partition when the group cannot be described
     * (the query group's round-robin assignment gives it to another member).
     */
    Integer otherMembersPartition(String topic, int first, int partitions) {
        if (partitions < 2) {
            return null;
        }
        try {
            ConsumerGroupDescription group = admin.describeConsumerGroups(List.of(queryGroup))
                    .all().get(500, TimeUnit.MILLISECONDS).get(queryGroup);
            String holder = null;
            for (MemberDescription m : group.members()) {
                if (m.assignment().topicPartitions().contains(new TopicPartition(topic, first))) {
                    holder = m.consumerId();
                }
            }
            List<Integer> others = new ArrayList<>();
            for (MemberDescription m : group.members()) {
                if (!m.consumerId().equals(holder)) {
                    for (TopicPartition tp : m.assignment().topicPartitions()) {
                        if (tp.topic().equals(topic)) {
                            others.add(tp.partition());
                        }
                    }
                }
            }
            if (holder != null) {
                return others.isEmpty() ? null
                        : others.get(ThreadLocalRandom.current().nextInt(others.size()));
            }
        } catch (ExecutionException | TimeoutException e) {
            // the broker's answer is a hint: fall back to the next partition
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return (first + 1) % partitions;
    }

    public void close() {
        admin.close();
    }
}
