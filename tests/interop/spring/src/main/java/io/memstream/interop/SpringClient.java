package io.memstream.interop;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.datatype.jsr310.JavaTimeModule;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.requestreply.ReplyingKafkaTemplate;
import org.springframework.kafka.requestreply.RequestReplyFuture;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.kafka.support.serializer.JsonDeserializer;

/**
 * A Spring Kafka client of memstream, as a Spring developer writes one: Java
 * records serialised by Jackson with its defaults (nulls written, an Instant as
 * epoch seconds with nanos), a plain ReplyingKafkaTemplate, and a reply error
 * checker that turns {@code error} into an exception.
 *
 * <p>Arguments: bootstrap servers, chat topic, queries topic, reply topic, tenant.
 * Prints one line per check and exits 1 at the first one that fails.
 */
public final class SpringClient {

    record ChatEvent(String eventId, String type, String tenantId, String userId, String agentId,
                     String conversationId, String role, String content, String name,
                     Instant createdAt) {}

    record Options(Integer topK, Boolean includeShortTerm, Integer lastN, Integer timeoutMs) {}

    record MemoryQuery(String requestId, String tenantId, String userId, String agentId,
                       String conversationId, String message, String context, Options options) {}

    record ReplyError(String code, String message) {}

    /** The reply fields this client reads; the rest are ignored. */
    record MemoryReply(String requestId, ReplyError error, JsonNode shortTerm) {}

    static final class MemoryQueryException extends RuntimeException {
        MemoryQueryException(String code, String message) {
            super(code + ": " + message);
        }
    }

    static final ObjectMapper JSON = new ObjectMapper()
            .registerModule(new JavaTimeModule())
            .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
            .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

    private SpringClient() {}

    static void check(boolean ok, String what) {
        System.out.println((ok ? "ok   " : "FAIL ") + what);
        if (!ok) {
            System.exit(1);
        }
    }

    static String header(ConsumerRecord<?, ?> r, String name) {
        Header h = r.headers().lastHeader(name);
        return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
    }

    static DefaultKafkaProducerFactory<String, String> producers(String servers) {
        return new DefaultKafkaProducerFactory<>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, servers,
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class));
    }

    /**
     * The reply container, in a group of its own, as the Spring reference shows;
     * replies carry no type headers: JsonDeserializer with the reply type and a
     * snake_case ObjectMapper (docs/events.md). Started.
     */
    static ReplyingKafkaTemplate<String, String, MemoryReply> replyingTemplate(
            DefaultKafkaProducerFactory<String, String> pf, String servers, String replies,
            String groupId) {
        var replyReader = new JsonDeserializer<>(MemoryReply.class, JSON, false);
        var cf = new DefaultKafkaConsumerFactory<String, MemoryReply>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, servers,
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest"),
                new StringDeserializer(), replyReader);
        var props = new ContainerProperties(replies);
        props.setGroupId(groupId);
        var container = new KafkaMessageListenerContainer<>(cf, props);
        ReplyingKafkaTemplate<String, String, MemoryReply> template =
                new ReplyingKafkaTemplate<>(pf, container);
        template.setDefaultReplyTimeout(Duration.ofSeconds(30));
        template.setSharedReplyTopic(true);
        template.setReplyErrorChecker(record -> {
            ReplyError error = ((MemoryReply) record.value()).error();
            return error == null ? null : new MemoryQueryException(error.code(), error.message());
        });
        template.start();
        return template;
    }

    static void createTopic(String servers, String topic) throws Exception {
        try (AdminClient admin = AdminClient.create(Map.of("bootstrap.servers", servers))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
    }

    public static void main(String[] args) throws Exception {
        String servers = args[0], chat = args[1], queries = args[2], replies = args[3];
        String tenant = args[4];
        createTopic(servers, replies);
        var pf = producers(servers);

        // a conversation, and its end
        var events = new KafkaTemplate<>(pf);
        Instant t0 = Instant.now().minusSeconds(60);
        String conv = "spring-conv";
        String[][] lines = {{"user", "I am flying to Lisbon in June."},
                            {"assistant", "Lisbon in June, noted."},
                            {"user", "I prefer window seats."}};
        for (int i = 0; i < lines.length; i++) {
            var ev = new ChatEvent("spring-" + i, "message", tenant, "ana", "travel", conv,
                                   lines[i][0], lines[i][1], null, t0.plusSeconds(i));
            events.send(chat, conv, JSON.writeValueAsString(ev)).get(30, TimeUnit.SECONDS);
        }
        var end = new ChatEvent("spring-end", "session_end", tenant, "ana", "travel", conv,
                                null, null, null, t0.plusSeconds(5));
        events.send(chat, conv, JSON.writeValueAsString(end)).get(30, TimeUnit.SECONDS);
        System.out.println("sent   " + JSON.writeValueAsString(end));

        ReplyingKafkaTemplate<String, String, MemoryReply> template =
                replyingTemplate(pf, servers, replies, "spring-replies-" + tenant);
        check(template.waitForAssignment(Duration.ofSeconds(30)), "reply container assigned");

        // the Session window of the conversation, all stored
        JsonNode window = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        ConsumerRecord<String, MemoryReply> reply = null;
        while (System.nanoTime() < deadline) {
            var q = new MemoryQuery("spring-window", tenant, "ana", "travel", conv,
                                    "Where am I going?", null, null);  // "options": null
            var record = new ProducerRecord<String, String>(queries, tenant + "/ana",
                                                            JSON.writeValueAsString(q));
            RequestReplyFuture<String, String, MemoryReply> f = template.sendAndReceive(record);
            reply = f.get(30, TimeUnit.SECONDS);
            byte[] sent = record.headers().lastHeader(KafkaHeaders.CORRELATION_ID).value();
            byte[] got = reply.headers().lastHeader(KafkaHeaders.CORRELATION_ID).value();
            check(Arrays.equals(sent, got), "reply matched by kafka_correlationId");
            window = reply.value().shortTerm();
            if (window != null && window.get("messages").size() == lines.length) {
                break;
            }
            Thread.sleep(500);
        }
        check(window != null && window.get("messages").size() == lines.length,
              "the Session window holds the conversation: " + window);
        check("application/json".equals(header(reply, "contentType")),
              "reply content type " + header(reply, "contentType"));

        // many at once, every one matched
        List<RequestReplyFuture<String, String, MemoryReply>> many = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            var q = new MemoryQuery("spring-" + i, tenant, "ana", "travel", conv, "Seats?", null,
                                    new Options(3, null, null, 10000));
            many.add(template.sendAndReceive(
                    new ProducerRecord<>(queries, tenant + "/ana", JSON.writeValueAsString(q))));
        }
        int matched = 0;
        for (int i = 0; i < many.size(); i++) {
            MemoryReply doc = many.get(i).get(30, TimeUnit.SECONDS).value();
            if (("spring-" + i).equals(doc.requestId())) {
                matched++;
            }
        }
        check(matched == many.size(), matched + " of " + many.size() + " concurrent replies matched");

        // a malformed query: the error checker turns it into an exception
        var bad = new MemoryQuery("spring-bad", tenant, "ana", "travel", conv, "", null, null);
        try {
            template.sendAndReceive(new ProducerRecord<>(queries, tenant + "/ana",
                                                         JSON.writeValueAsString(bad)))
                    .get(30, TimeUnit.SECONDS);
            check(false, "a malformed query failed");
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            check(cause instanceof MemoryQueryException
                  && cause.getMessage().startsWith("bad_request"),
                  "a malformed query failed: " + cause);
        }
        template.stop();
        pf.destroy();
        System.out.println("spring client: all checks passed");
        System.exit(0);
    }
}
