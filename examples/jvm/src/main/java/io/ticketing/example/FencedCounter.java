package io.ticketing.example;

import io.ticketing.client.ReleaseResult;
import io.ticketing.client.Ticket;
import io.ticketing.client.TicketBroker;
import io.ticketing.client.TicketingException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Four workers increment one shared counter under the lock "example/counter".
 * The "database" keeps the highest fencing token it has seen and refuses any
 * write with a token that is not higher: the protected write is fenced, as it
 * must be.
 *
 * Usage: FencedCounter [host:port]   (default 127.0.0.1:5225)
 */
public final class FencedCounter {
    /** Stands in for a database row plus its token high-water mark, updated in one transaction. */
    static final class FencedStore {
        private long highWater = 0; // unsigned
        private long counter = 0;

        synchronized boolean incrementIfFresh(long token) {
            if (Long.compareUnsigned(token, highWater) <= 0) {
                return false; // a stale holder: refuse the write
            }
            highWater = token;
            counter++;
            return true;
        }

        synchronized long counter() {
            return counter;
        }
    }

    public static void main(String[] args) throws Exception {
        String addr = args.length > 0 ? args[0] : "127.0.0.1:5225";
        FencedStore store = new FencedStore();
        try (TicketBroker broker = TicketBroker.connect(addr)) {
            broker.waitReadyBlocking(Duration.ofSeconds(5));
            ExecutorService workers = Executors.newFixedThreadPool(4);
            List<Future<Integer>> results = new ArrayList<>();
            for (int w = 0; w < 4; w++) {
                results.add(workers.submit(() -> {
                    int done = 0;
                    for (int i = 0; i < 5; i++) {
                        try (Ticket ticket = broker.acquireBlocking(
                                "example/counter", Duration.ofSeconds(10), Duration.ofSeconds(5), Duration.ofSeconds(1))) {
                            if (store.incrementIfFresh(ticket.getToken())) {
                                done++;
                            }
                            ReleaseResult r = ticket.releaseBlocking();
                            if (r != ReleaseResult.RELEASED) {
                                System.out.println("release said " + r + " for token " + ticket.getTokenString());
                            }
                        } catch (TicketingException e) {
                            System.out.println("not this time: " + e.getCode() + " " + e.getMessage());
                        }
                    }
                    return done;
                }));
            }
            int total = 0;
            for (Future<Integer> f : results) {
                total += f.get();
            }
            workers.shutdown();
            System.out.println("increments: " + total + ", counter: " + store.counter());
        }
    }

    private FencedCounter() {}
}
