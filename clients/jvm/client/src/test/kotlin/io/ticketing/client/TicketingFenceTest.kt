package io.ticketing.client

import io.ticketing.client.jdbc.StaleTokenException
import io.ticketing.client.jdbc.TicketingFence
import io.ticketing.client.support.Postgres
import io.ticketing.client.support.RealServer
import io.ticketing.client.support.secs
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.MethodSource
import java.nio.file.Files
import java.sql.Connection
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/** TicketingFence against a real, throw-away PostgreSQL: both flavours, the same rules. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(60)
class TicketingFenceTest {
    private lateinit var pg: Postgres
    private val tables = AtomicInteger()

    @BeforeAll
    fun startPostgres() {
        pg = Postgres.start()
    }

    @AfterAll
    fun stopPostgres() {
        if (::pg.isInitialized) pg.close()
    }

    fun flavours(): List<String> = listOf("postgres", "portable")

    /** A fresh fence on its own table, migrated. */
    private fun fence(flavour: String): TicketingFence {
        val base = if (flavour == "postgres") TicketingFence.postgres() else TicketingFence.portable()
        val f = base.withTable("fence_${flavour}_${tables.incrementAndGet()}")
        pg.connect().use { c ->
            f.migrate(c)
            f.migrate(c) // idempotent
        }
        return f
    }

    private fun <T> tx(body: (Connection) -> T): T = pg.connect().use { c ->
        c.autoCommit = false
        try {
            body(c).also { c.commit() }
        } catch (t: Throwable) {
            c.rollback()
            throw t
        }
    }

    @ParameterizedTest
    @MethodSource("flavours")
    fun `a higher token advances the mark, an equal or lower one is refused`(flavour: String) {
        val f = fence(flavour)
        tx { f.check(it, "k", 5) }
        tx { f.check(it, "k", 7) }
        val stale = assertThrows<StaleTokenException> { tx { f.check(it, "k", 7) } }
        assertEquals(7L, stale.highWater)
        assertEquals("STALE_TOKEN", stale.code)
        val lower = assertThrows<StaleTokenException> { tx { f.check(it, "k", 6) } }
        assertEquals(6L, lower.token)
        assertEquals(7L, lower.highWater)
        // Keys are independent.
        tx { f.check(it, "other", 1) }
    }

    @ParameterizedTest
    @MethodSource("flavours")
    fun `tokens are unsigned 64-bit, compared numerically, kept exact`(flavour: String) {
        val f = fence(flavour)
        tx { f.check(it, "u", 9) }
        tx { f.check(it, "u", 10) } // 10 > 9 numerically (not as text)
        tx { f.check(it, "u", Long.MAX_VALUE) }
        tx { f.check(it, "u", Long.MIN_VALUE) } // 2^63: above Long.MAX_VALUE unsigned
        tx { f.check(it, "u", -1L) } // 2^64 - 1
        val e = assertThrows<StaleTokenException> { tx { f.check(it, "u", -2L) } }
        assertEquals(-1L, e.highWater)
        assertTrue(e.message!!.contains("18446744073709551614 is not above 18446744073709551615"), e.message)
    }

    @ParameterizedTest
    @MethodSource("flavours")
    fun `a rolled-back transaction leaves the mark where it was`(flavour: String) {
        val f = fence(flavour)
        tx { f.check(it, "r", 3) }
        assertThrows<IllegalStateException> {
            tx {
                f.check(it, "r", 8)
                throw IllegalStateException("the business write failed")
            }
        }
        tx { f.check(it, "r", 4) } // 8 never committed
    }

    @ParameterizedTest
    @MethodSource("flavours")
    fun `allowingSameToken lets one grant write in several transactions`(flavour: String) {
        val f = fence(flavour).allowingSameToken()
        tx { f.check(it, "s", 11) }
        tx { f.check(it, "s", 11) }
        assertThrows<StaleTokenException> { tx { f.check(it, "s", 10) } }
    }

    @ParameterizedTest
    @MethodSource("flavours")
    fun `concurrent transactions on one key queue on its row - the stale one is refused after the newer commits`(flavour: String) {
        val f = fence(flavour)
        tx { f.check(it, "c", 1) }
        pg.connect().use { newer ->
            newer.autoCommit = false
            f.check(newer, "c", 10) // holds the row lock, not committed yet
            val older = CompletableFuture.supplyAsync { runCatching { tx { f.check(it, "c", 9) } }.exceptionOrNull() }
            Thread.sleep(300)
            assertFalse(older.isDone, "the second transaction waits for the row lock")
            newer.commit()
            val e = older.get(10, TimeUnit.SECONDS)
            assertTrue(e is StaleTokenException && e.highWater == 10L, "got $e")
        }
    }

    @ParameterizedTest
    @MethodSource("flavours")
    fun `outside a transaction, with a bad key or token 0, nothing is checked`(flavour: String) {
        val f = fence(flavour)
        pg.connect().use { c ->
            assertThrows<IllegalStateException> { f.check(c, "k", 1) }
        }
        assertThrows<IllegalArgumentException> { tx { f.check(it, "k", 0) } }
        assertThrows<IllegalArgumentException> { tx { f.check(it, "a b", 1) } }
        assertThrows<IllegalArgumentException> { f.withTable("x; DROP TABLE y") }
    }

    @org.junit.jupiter.api.Test
    fun `the PostgreSQL flavour uses the table of @ticketing-fence, so both languages fence one resource`() {
        val ts = Files.readString(Postgres.repoRoot().resolve("packages/fence/sql/postgres.sql"))
        val normalise = { s: String -> s.lines().map { it.trim() }.filter { it.isNotEmpty() && !it.startsWith("--") }.joinToString(" ").trimEnd(';') }
        assertEquals(normalise(ts), normalise(TicketingFence.postgres().migrationSql()))
        assertEquals("ticketing_fence", TicketingFence.postgres().table)
    }

    @org.junit.jupiter.api.Test
    fun `with the real server - the holder whose lease ran out cannot overwrite its successor`() {
        RealServer.assumeAvailable()
        val f = fence("postgres")
        RealServer.start().use { server ->
            TicketBroker.connect(server.address).use { broker ->
                broker.waitReadyBlocking(secs(10))
                val first = broker.acquireBlocking("fenced", Duration.ZERO, secs(1))
                Thread.sleep(1_200) // paused past the lease (a GC, a slow disk)
                val second = broker.acquireBlocking("fenced", secs(5), secs(30))
                tx { f.check(it, second) } // the successor writes first
                assertThrows<StaleTokenException> { tx { f.check(it, first) } } // the old holder wakes up: refused
                second.releaseBlocking()
            }
        }
    }
}
