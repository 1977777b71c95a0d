package io.ticketing.example;

import io.ticketing.client.ReleaseResult;
import io.ticketing.client.Ticket;
import io.ticketing.client.TicketBroker;
import io.ticketing.client.TicketingException;
import io.ticketing.client.jdbc.StaleTokenException;
import io.ticketing.client.jdbc.TicketingFence;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Four workers increment one shared counter row in PostgreSQL under the lock
 * "example/counter". Every increment is fenced: in the same transaction,
 * {@link TicketingFence} checks the ticket's token against the highest token
 * the database has seen for the key and advances it, so a worker whose lease
 * ran out while it was paused cannot overwrite the work of the next holder.
 *
 * Usage: FencedCounter [host:port] [jdbc-url]
 * (defaults 127.0.0.1:5225 and jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres)
 */
public final class FencedCounter {
    static final String KEY = "example/counter";

    public static void main(String[] args) throws Exception {
        String addr = args.length > 0 ? args[0] : "127.0.0.1:5225";
        String jdbcUrl = args.length > 1 ? args[1] : "jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres";
        long[] result = run(addr, jdbcUrl);
        System.out.println("increments: " + result[0] + ", counter: " + result[1]);
    }

    /** Runs the workers; returns {increments that committed, the counter's value}. */
    public static long[] run(String addr, String jdbcUrl) throws Exception {
        TicketingFence fence = TicketingFence.postgres();
        try (Connection db = DriverManager.getConnection(jdbcUrl)) {
            fence.migrate(db);
            try (Statement st = db.createStatement()) {
                st.execute("CREATE TABLE IF NOT EXISTS example_counter (name TEXT PRIMARY KEY, value BIGINT NOT NULL)");
                st.execute("INSERT INTO example_counter VALUES ('" + KEY + "', 0) ON CONFLICT (name) DO UPDATE SET value = 0");
            }
        }
        try (TicketBroker broker = TicketBroker.connect(addr)) {
            broker.waitReadyBlocking(Duration.ofSeconds(5));
            ExecutorService workers = Executors.newFixedThreadPool(4);
            List<Future<Integer>> results = new ArrayList<>();
            for (int w = 0; w < 4; w++) {
                results.add(workers.submit(() -> worker(broker, fence, jdbcUrl)));
            }
            long total = 0;
            for (Future<Integer> f : results) {
                total += f.get();
            }
            workers.shutdown();
            return new long[] {total, counter(jdbcUrl)};
        }
    }

    /** Five increments, each under the lock and fenced in its own transaction. */
    static int worker(TicketBroker broker, TicketingFence fence, String jdbcUrl) throws SQLException {
        int done = 0;
        try (Connection db = DriverManager.getConnection(jdbcUrl)) {
            for (int i = 0; i < 5; i++) {
                try (Ticket ticket = broker.acquireBlocking(KEY, Duration.ofSeconds(10), Duration.ofSeconds(5), Duration.ofSeconds(1))) {
                    if (increment(db, fence, ticket)) {
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
        }
        return done;
    }

    /** One fenced transaction: check-and-advance the token, then the protected write. */
    static boolean increment(Connection db, TicketingFence fence, Ticket ticket) throws SQLException {
        db.setAutoCommit(false);
        try {
            fence.check(db, ticket); // a newer holder has written: StaleTokenException, roll back
            try (PreparedStatement st = db.prepareStatement("UPDATE example_counter SET value = value + 1 WHERE name = ?")) {
                st.setString(1, KEY);
                st.executeUpdate();
            }
            db.commit();
            return true;
        } catch (StaleTokenException e) {
            db.rollback();
            System.out.println("refused a stale write: " + e.getMessage());
            return false;
        } catch (SQLException | RuntimeException e) {
            db.rollback();
            throw e;
        } finally {
            db.setAutoCommit(true);
        }
    }

    static long counter(String jdbcUrl) throws SQLException {
        try (Connection db = DriverManager.getConnection(jdbcUrl);
             PreparedStatement st = db.prepareStatement("SELECT value FROM example_counter WHERE name = ?")) {
            st.setString(1, KEY);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    private FencedCounter() {}
}
