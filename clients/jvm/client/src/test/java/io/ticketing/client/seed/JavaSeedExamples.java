package io.ticketing.client.seed;

import io.ticketing.client.ReleaseResult;
import io.ticketing.client.Ticket;
import io.ticketing.client.TicketBroker;
import io.ticketing.client.TlsMode;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The Java examples of the library documentation (seed 003, docs/client-jvm.md),
 * verbatim inside methods with no throws clause: if one stops compiling, the
 * build fails. SeedExamplesTest runs them against the real server on a free
 * port: the documentation's "127.0.0.1:5225" is the parameter {@code addr} here.
 */
public final class JavaSeedExamples {
    private JavaSeedExamples() {}

    /** Java (blocking), as written in the documentation; returns the token. */
    public static long javaBlockingExample(String addr) {
        TicketBroker broker = TicketBroker.connect(addr);
        broker.waitReadyBlocking(Duration.ofSeconds(5));

        long seen;
        try (Ticket ticket = broker.acquireBlocking(
                "key", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))) {
            long token = ticket.getToken();
            // In the same DB transaction: verify/update token high-water and perform the business write.
            seen = token;
        }
        broker.close();
        return seen;
    }

    /** Java (async), as written in docs/client-jvm.md. */
    public static ReleaseResult javaAsyncExample(TicketBroker broker) throws Exception {
        CompletableFuture<ReleaseResult> done = broker
            .acquireAsync("key", Duration.ofSeconds(5), Duration.ofSeconds(30))
            .thenCompose(ticket -> {
                long token = ticket.getToken();
                // In the same DB transaction: verify/update token high-water and perform the business write.
                return ticket.releaseAsync();
            });
        return done.get(10, TimeUnit.SECONDS);
    }

    /** The Java static factories of the TLS modes. */
    public static List<TlsMode> javaTlsFactories() {
        return List.of(TlsMode.systemRoots(), TlsMode.ca("ca.crt"), TlsMode.insecureSkipVerify(), TlsMode.off());
    }
}
