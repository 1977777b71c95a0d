package io.ticketing.client.seed;

import io.ticketing.client.BrokerState;
import io.ticketing.client.ConnectionEvent;
import io.ticketing.client.ReleaseResult;
import io.ticketing.client.Ticket;
import io.ticketing.client.TicketBroker;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The issue 15 parity calls as a Java caller writes them (so their Java
 * ergonomics are compiled), run by JavaApiTest against the real server.
 */
public final class JavaApiUsage {
    private JavaApiUsage() {}

    /** Returns what each call gave, for the test to check. */
    public static List<Object> run(String addr) throws Exception {
        List<Object> seen = new CopyOnWriteArrayList<>();
        TicketBroker broker = TicketBroker.builder()
            .addrs(addr)
            .onConnectionEvent(e -> {
                if (e instanceof ConnectionEvent.Connected) {
                    seen.add("connected");
                }
            })
            .connect();
        try {
            broker.waitReadyBlocking(Duration.ofSeconds(5));
            BrokerState state = broker.getState();
            seen.add(state.getUsable());

            // withLock, blocking: the ticket is released when the function returns.
            String token = broker.withLockBlocking("java-api", Duration.ofSeconds(5), Duration.ofSeconds(30), ticket -> ticket.getTokenString());
            seen.add(token);

            // withLock, async: released when the stage completes.
            Long asyncToken = broker.withLockAsync("java-api", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ZERO,
                    ticket -> CompletableFuture.supplyAsync(ticket::getToken))
                .get(10, TimeUnit.SECONDS);
            seen.add(asyncToken);

            // The lease-end signal, and a release by key and token.
            Ticket ticket = broker.acquireBlocking("java-api", Duration.ofSeconds(5), Duration.ofSeconds(1));
            CompletableFuture<Void> ended = ticket.leaseEnd();
            ended.get(3, TimeUnit.SECONDS);
            seen.add("lease ended");
            // The client's lease end is conservative (counted from the send); the server's comes a
            // little later (from the request's arrival, on its timer tick): release after both.
            Thread.sleep(300);
            ReleaseResult late = broker.releaseBlocking("java-api", ticket.getToken());
            seen.add(late);

            // Refused: completing an acquire's future from outside.
            CompletableFuture<Ticket> pending = broker.acquireAsync("java-api", Duration.ofSeconds(5), Duration.ofSeconds(30));
            try {
                pending.complete(null);
                seen.add("complete accepted");
            } catch (UnsupportedOperationException expected) {
                seen.add("complete refused");
            }
            pending.get(5, TimeUnit.SECONDS).releaseBlocking();
        } finally {
            broker.closeAsync().get(10, TimeUnit.SECONDS);
        }
        return seen;
    }
}
