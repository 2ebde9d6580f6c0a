package io.memstream.interop;

import io.memstream.interop.SpringClient.MemoryQuery;
import io.memstream.interop.SpringClient.MemoryReply;
import io.memstream.interop.SpringClient.Options;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.springframework.kafka.KafkaException;
import org.springframework.kafka.requestreply.ReplyingKafkaTemplate;

/**
 * Queries with a 1 s deadline sent to a partition whose worker was just SIGKILLed
 * (it holds the partition until the query group's session timeout): asked as the
 * {@link HedgedQueries} recipe says, each is answered in time by another member;
 * asked plainly, one is not.
 *
 * <p>Arguments: bootstrap servers, queries topic, reply topic, query group, tenant,
 * the dead worker's partition. Prints one line per check and exits 1 at the first
 * one that fails.
 */
public final class HedgedSpringClient {

    private HedgedSpringClient() {}

    public static void main(String[] args) throws Exception {
        String servers = args[0], queries = args[1], replies = args[2], group = args[3];
        String tenant = args[4];
        int dead = Integer.parseInt(args[5]);
        Duration deadline = Duration.ofSeconds(1);
        SpringClient.createTopic(servers, replies);
        var pf = SpringClient.producers(servers);
        ReplyingKafkaTemplate<String, String, MemoryReply> template =
                SpringClient.replyingTemplate(pf, servers, replies, "spring-hedged-" + tenant);
        SpringClient.check(template.waitForAssignment(Duration.ofSeconds(30)),
                           "reply container assigned");
        var hedged = new HedgedQueries<>(template, servers, group, Duration.ofMillis(250));
        // warm up the template, the producer and the group lookup on a live partition
        int live = hedged.otherMembersPartition(queries, dead, template.partitionsFor(queries).size());
        var warm = new MemoryQuery("warm", tenant, "ana", "travel", "c1", "Seats?", null,
                                   new Options(3, false, null, 10000));
        template.sendAndReceive(new ProducerRecord<>(queries, live, tenant + "/ana",
                SpringClient.JSON.writeValueAsString(warm))).get(10, TimeUnit.SECONDS);
        int rounds = 5;
        for (int i = 0; i < rounds; i++) {
            var q = new MemoryQuery("hedged-" + i, tenant, "ana", "travel", "c1", "Seats?", null,
                                    new Options(3, false, null, 1000));
            long start = System.nanoTime();
            ConsumerRecord<String, MemoryReply> reply = hedged.ask(new ProducerRecord<>(
                    queries, dead, tenant + "/ana", SpringClient.JSON.writeValueAsString(q)),
                    deadline);
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            SpringClient.check(("hedged-" + i).equals(reply.value().requestId()) && ms < 1000,
                               "hedged query " + i + " on the dead worker's partition answered in "
                               + ms + " ms");
        }
        SpringClient.check(hedged.hedgesSent() == rounds, hedged.hedgesSent() + " hedges sent");

        var plain = new MemoryQuery("plain", tenant, "ana", "travel", "c1", "Seats?", null,
                                    new Options(3, false, null, 1000));
        try {
            template.sendAndReceive(new ProducerRecord<>(queries, dead, tenant + "/ana",
                    SpringClient.JSON.writeValueAsString(plain)), deadline)
                    .get(2, TimeUnit.SECONDS);
            SpringClient.check(false, "a plain query on the dead worker's partition timed out");
        } catch (java.util.concurrent.ExecutionException e) {
            SpringClient.check(e.getCause() instanceof KafkaException,
                               "a plain query on the dead worker's partition timed out: "
                               + e.getCause());
        } catch (TimeoutException e) {
            SpringClient.check(true, "a plain query on the dead worker's partition timed out");
        }
        hedged.close();
        template.stop();
        pf.destroy();
        System.out.println("hedged spring client: all checks passed");
        System.exit(0);
    }
}
